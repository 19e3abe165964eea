#include "hpcml/spank/audit.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <ctime>
#include <optional>

#include <fmt/format.h>
#include <nettle/sha2.h>
#include <nlohmann/json.hpp>

#include "hpcml/common/unique_fd.hpp"

namespace hpcml::guard {
namespace {

const std::string kZeroHash(64, '0');

// UTC with milliseconds, from the calendar arithmetic of <chrono>: gmtime_r
// would load /etc/localtime first (tzset), seven system calls per decision.
std::string NowUtc() {
  using namespace std::chrono;
  const auto now = floor<milliseconds>(system_clock::now());
  const auto day = floor<days>(now);
  const year_month_day ymd(day);
  const hh_mm_ss<milliseconds> t(now - day);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:03d}Z",
                     static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                     static_cast<unsigned>(ymd.day()), t.hours().count(), t.minutes().count(),
                     t.seconds().count(), t.subseconds().count());
}

// The last line of the open file (without its newline), read backwards in
// growing chunks; "" for an empty file.
Result<std::string> ReadLastLine(int fd, off_t size, const std::string& path) {
  if (size == 0) return std::string();
  std::size_t chunk = 4096;
  for (;;) {
    off_t start = size > static_cast<off_t>(chunk) ? size - static_cast<off_t>(chunk) : 0;
    std::string buf(static_cast<std::size_t>(size - start), '\0');
    std::size_t got = 0;
    while (got < buf.size()) {
      ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got, start + static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return ErrnoError("read " + path, n < 0 ? errno : EIO);
      got += static_cast<std::size_t>(n);
    }
    std::string_view view(buf);
    if (!view.empty() && view.back() == '\n') view.remove_suffix(1);
    std::size_t nl = view.rfind('\n');
    if (nl != std::string_view::npos) return std::string(view.substr(nl + 1));
    if (start == 0) return std::string(view);
    chunk *= 4;
  }
}

// The sequence number of a line as FormatAuditLine writes it ({"seq":N,...),
// without a JSON parse; nullopt for any other shape.
std::optional<std::uint64_t> LeadingSeq(std::string_view line) {
  constexpr std::string_view kPrefix = "{\"seq\":";
  if (!line.starts_with(kPrefix)) return std::nullopt;
  const char* end = line.data() + line.size();
  std::uint64_t seq = 0;
  auto [next, ec] = std::from_chars(line.data() + kPrefix.size(), end, seq);
  if (ec != std::errc() || next == end || *next != ',') return std::nullopt;
  return seq;
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write " + path, errno);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

// nettle rather than OpenSSL: the plugin links this into every srun and
// slurmstepd, where libcrypto took about 0.8 ms longer to load than nettle.
std::string Sha256Hex(std::string_view data) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, data.size(), reinterpret_cast<const std::uint8_t*>(data.data()));
  std::uint8_t md[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx, sizeof md, md);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * sizeof md, '\0');
  for (std::size_t i = 0; i < sizeof md; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 0xf];
  }
  return out;
}

std::string FormatAuditLine(const AuditRecord& rec, std::uint64_t seq,
                            const std::string& prev_hash) {
  nlohmann::ordered_json j;
  j["seq"] = seq;
  j["time"] = NowUtc();
  j["context"] = rec.context;
  j["enforce"] = rec.enforce;
  j["cluster"] = rec.cluster;
  j["node"] = rec.node;
  j["job_id"] = rec.job_id;
  j["step_id"] = rec.step_id;
  j["uid"] = rec.uid;
  j["user"] = rec.user;
  j["role"] = rec.role;
  j["zone"] = rec.zone;
  j["datasets"] = rec.datasets;
  j["decision"] = rec.allow ? "allow" : "deny";
  j["reason"] = rec.reason;
  j["prev"] = prev_hash;
  // Invalid UTF-8 (a hostile path) is replaced rather than thrown on.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::string> AppendAudit(const std::string& path, const AuditRecord& record, bool sync) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW, 0640));
  // Exclusive for the read of the last line and the write: the next writer
  // sees this line complete.
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return ErrnoError("flock " + path, errno);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("fstat " + path, errno);
  if (!S_ISREG(st.st_mode)) return IoError("audit log {}: not a regular file", path);
  HPCML_ASSIGN_OR_RETURN(std::string last, ReadLastLine(fd.get(), st.st_size, path));
  std::uint64_t seq = 0;
  std::string prev = kZeroHash;
  if (!last.empty()) {
    prev = Sha256Hex(last);
    // An unreadable last line still chains (verify reports it); numbering
    // goes on from the line count in that case.
    if (auto last_seq = LeadingSeq(last)) {
      seq = *last_seq + 1;
    } else {
      auto j = nlohmann::json::parse(last, nullptr, false);
      if (j.is_object() && j.contains("seq") && j["seq"].is_number_unsigned())
        seq = j["seq"].get<std::uint64_t>() + 1;
    }
  }
  std::string line = FormatAuditLine(record, seq, prev);
  std::string out = line + "\n";
  // A torn last line (crash mid-write) must not swallow this one.
  if (st.st_size > 0) {
    char tail = 0;
    if (::pread(fd.get(), &tail, 1, st.st_size - 1) == 1 && tail != '\n') out = "\n" + out;
  }
  HPCML_RETURN_IF_ERROR(WriteAll(fd.get(), out, path));
  if (sync && ::fdatasync(fd.get()) != 0) return ErrnoError("fdatasync " + path, errno);
  HPCML_RETURN_IF_ERROR(fd.Close());  // releases the lock
  return line;
}

VerifyReport VerifyAuditText(std::string_view text) {
  VerifyReport rep;
  auto bad = [&](std::size_t line, std::string reason) {
    rep.intact = false;
    rep.bad_line = line;
    rep.reason = std::move(reason);
    return rep;
  };
  std::string prev_hash = kZeroHash;
  std::uint64_t expected_seq = 0;
  std::size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    ++line_no;
    rep.lines = line_no;
    if (nl == std::string_view::npos) return bad(line_no, "no newline at the end: a torn write");
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) return bad(line_no, "not a JSON object");
    if (!j.contains("seq") || !j["seq"].is_number_unsigned() || !j.contains("prev") ||
        !j["prev"].is_string())
      return bad(line_no, "missing 'seq' or 'prev'");
    auto seq = j["seq"].get<std::uint64_t>();
    if (seq != expected_seq)
      return bad(line_no, fmt::format("sequence number {}, expected {}: a line was removed or "
                                      "lines were reordered",
                                      seq, expected_seq));
    if (j["prev"].get<std::string>() != prev_hash) {
      if (line_no == 1) return bad(1, "the first line does not start the chain");
      return bad(line_no - 1, fmt::format("its SHA-256 does not match the one recorded in line {}: "
                                          "line {} was edited",
                                          line_no, line_no - 1));
    }
    prev_hash = Sha256Hex(line);
    ++expected_seq;
  }
  rep.intact = true;
  rep.head = prev_hash;
  return rep;
}

Result<VerifyReport> VerifyAuditLog(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY));
  // Shared lock: a verify during appends sees whole lines only.
  while (::flock(fd.get(), LOCK_SH) != 0) {
    if (errno != EINTR) return ErrnoError("flock " + path, errno);
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("read " + path, errno);
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return VerifyAuditText(text);
}

}  // namespace hpcml::guard
