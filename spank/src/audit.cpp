#include "hpcml/guard/audit.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hpcml/common/json.hpp"
#include "hpcml/common/sha256.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/common/time.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::guard {
namespace {

const std::string kZeroHash(64, '0');

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

namespace {

std::string Bounded(const std::string& s, std::size_t max = kMaxAuditField) {
  if (s.size() <= max) return s;
  return fmt::format("{}...[{} bytes]", std::string_view(s).substr(0, max), s.size());
}

// The datasets as logged. An allow keeps up to kMaxAuditDatasets of them
// (what was read matters to an auditor); a denial, whose list the user
// chose, keeps what fits in kMaxDeniedDatasetsBytes and then the count and
// the SHA-256 of the whole list (newline-joined), so any claimed list can be
// checked against it and a flood of long lists costs about 1 KB a line.
nlohmann::ordered_json LoggedDatasets(const AuditRecord& rec) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  const std::size_t max_count = kMaxAuditDatasets;
  std::size_t used = 0, kept = 0;
  for (; kept < rec.datasets.size() && kept < max_count; ++kept) {
    std::string d =
        rec.allow ? Bounded(rec.datasets[kept]) : Bounded(rec.datasets[kept], kMaxDeniedField);
    if (!rec.allow && used + d.size() > kMaxDeniedDatasetsBytes && kept > 0) break;
    used += d.size();
    out.push_back(std::move(d));
  }
  if (kept == rec.datasets.size()) return out;
  std::string all;
  for (const std::string& d : rec.datasets) all += d + "\n";
  out.push_back(rec.allow ? fmt::format("...and {} more", rec.datasets.size() - kept)
                          : fmt::format("...and {} more; sha256 of all {}: {}",
                                        rec.datasets.size() - kept, rec.datasets.size(),
                                        Sha256::Hex(all)));
  return out;
}

// A line as FormatAuditLine writes it: seq and time first, prev last.
std::string Finish(nlohmann::ordered_json& j, const std::string& prev_hash) {
  j["prev"] = prev_hash;
  // Invalid UTF-8 (a hostile path) is replaced rather than thrown on.
  return JsonText(j);
}

// What makes two denials the same for summarising: all but job, step, time.
std::string RepeatKey(const AuditRecord& r) {
  nlohmann::json j = {r.context, r.enforce, r.guard_version, r.policy_sha256, r.cluster,  r.node,
                      r.uid,     r.user,    r.role,          r.zone,          r.datasets, r.reason};
  return Sha256::Hex(JsonText(j));
}

struct Repeat {
  std::string key;           // RepeatKey of the last full line, a denial
  std::uint64_t seq = 0;     // that line's seq
  std::int64_t time_ms = 0;  // when it was written
  std::uint64_t count = 0;   // identical denials since, not yet written
  std::string last_job;      // the last of them: "<job>.<step>"
};

// A flood: more than kAuditFloodLines denials of one user on one node for
// one reason code within kAuditRepeatWindowSeconds of the first, however
// they vary (each names other paths). The lines past the limit are counted
// here, in "<log>.flood", one run per key, and written as one "flood" line
// once the window has passed.
struct FloodRun {
  std::string key;               // FloodKey
  std::int64_t start_ms = 0;     // the window's start: the run's first denial
  std::uint64_t lines = 0;       // full lines written in the window
  std::uint64_t suppressed = 0;  // denials counted, not written
  std::string user, code, last_job;
};

std::string FloodKey(const AuditRecord& r) {
  return Sha256::Hex(JsonText(nlohmann::json{r.node, r.uid, r.reason_code})).substr(0, 32);
}

// "<key> <start_ms> <lines> <suppressed> <user> <code> <last_job>" lines;
// malformed ones are dropped (the side file is a counter, not the record).
std::vector<FloodRun> ParseFlood(const std::string& text) {
  std::vector<FloodRun> runs;
  for (std::string_view line : SplitFields(text, '\n')) {
    std::vector<std::string_view> f = SplitFields(line, ' ');
    if (f.size() != 7) continue;
    FloodRun r;
    r.key = f[0];
    if (std::from_chars(f[1].data(), f[1].data() + f[1].size(), r.start_ms).ec != std::errc() ||
        std::from_chars(f[2].data(), f[2].data() + f[2].size(), r.lines).ec != std::errc() ||
        std::from_chars(f[3].data(), f[3].data() + f[3].size(), r.suppressed).ec != std::errc())
      continue;
    r.user = f[4];
    r.code = f[5];
    r.last_job = f[6];
    runs.push_back(std::move(r));
  }
  return runs;
}

std::string FormatFlood(const std::vector<FloodRun>& runs) {
  std::string out;
  // Names and codes are logged bounded; in the side file a blank would
  // split the fields, so it becomes '_'.
  auto field = [](std::string s) {
    if (s.empty()) s = "-";
    for (char& c : s)
      if (c == ' ' || c == '\n' || c == '\t') c = '_';
    return s.substr(0, 128);
  };
  for (const FloodRun& r : runs)
    out += fmt::format("{} {} {} {} {} {} {}\n", r.key, r.start_ms, r.lines, r.suppressed,
                       field(r.user), field(r.code), field(r.last_job));
  return out;
}

std::int64_t NowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// A small state file beside the log, read and replaced in place under the
// log's lock (root's, 0600, never followed through a symlink).
// At most `max` bytes of a side file ("" when there is none).
Result<std::string> ReadSide(const std::string& path, std::size_t max = 512) {
  auto fd = OpenFd(path, O_RDONLY | O_NOFOLLOW);
  if (!fd.ok()) {
    if (fd.status().code() == StatusCode::kNotFound) return std::string();
    return fd.status();
  }
  std::string buf(max, '\0');
  ssize_t n = ::pread(fd->get(), buf.data(), buf.size(), 0);
  if (n < 0) return ErrnoError("read " + path, errno);
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}
Status WriteSide(const std::string& path, std::string_view text) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_WRONLY | O_CREAT | O_NOFOLLOW, 0600));
  if (::pwrite(fd.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      ::ftruncate(fd.get(), static_cast<off_t>(text.size())) != 0)
    return ErrnoError("write " + path, errno);
  return fd.Close();
}

std::optional<Repeat> ParseRepeat(const std::string& text) {
  Repeat r;
  char key[65] = {}, job[128] = {};
  long long t = 0;
  unsigned long long seq = 0, count = 0;
  if (std::sscanf(text.c_str(), "%64s %llu %lld %llu %127s", key, &seq, &t, &count, job) < 4)
    return std::nullopt;
  r.key = key;
  r.seq = seq;
  r.time_ms = t;
  r.count = count;
  r.last_job = job;
  return r;
}

// "<seq> <hash>" of the head file.
std::optional<std::pair<std::uint64_t, std::string>> ParseHead(const std::string& text) {
  unsigned long long seq = 0;
  char hash[65] = {};
  if (std::sscanf(text.c_str(), "%llu %64s", &seq, hash) != 2 || std::strlen(hash) != 64)
    return std::nullopt;
  return std::pair<std::uint64_t, std::string>(seq, hash);
}

// The head file's third field: which file the chain's last line is in,
// "<dev>:<ino>" ("" in a head written by an older guard).
std::string HeadFileId(const std::string& text) {
  unsigned long long seq = 0;
  char hash[65] = {}, file[64] = {};
  if (std::sscanf(text.c_str(), "%llu %64s %63s", &seq, hash, file) != 3) return "";
  return file;
}

std::string FileId(const struct stat& st) {
  return fmt::format("{}:{}", static_cast<unsigned long long>(st.st_dev),
                     static_cast<unsigned long long>(st.st_ino));
}

// Whether a file of the directory `dir` is `file_id` and still ends with the
// line whose hash is `last_hash` (the log rotated by a rename in its
// directory, as logrotate's create mode does). The hash tells the rotated
// log from a file that got the deleted log's inode number.
bool FileInDirectory(const std::string& dir, const std::string& file_id,
                     const std::string& last_hash) {
  UniqueDir d(::opendir(dir.c_str()));
  if (!d) return false;
  while (const dirent* e = ::readdir(d.get())) {
    struct stat st {};
    if (::fstatat(::dirfd(d.get()), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode) || FileId(st) != file_id)
      continue;
    UniqueFd fd(::openat(::dirfd(d.get()), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return false;
    auto last = ReadLastLine(fd.get(), st.st_size, e->d_name);
    return last.ok() && Sha256::Hex(*last) == last_hash;
  }
  return false;
}

}  // namespace

std::string FormatAuditLine(const AuditRecord& rec, std::uint64_t seq,
                            const std::string& prev_hash) {
  nlohmann::ordered_json j;
  j["seq"] = seq;
  j["time"] = FormatUtcMillis(std::chrono::system_clock::now());
  j["context"] = Bounded(rec.context);
  j["enforce"] = Bounded(rec.enforce);
  j["guard_version"] = Bounded(rec.guard_version);
  j["policy_sha256"] = Bounded(rec.policy_sha256);
  j["cluster"] = Bounded(rec.cluster);
  j["node"] = Bounded(rec.node);
  j["job_id"] = Bounded(rec.job_id);
  j["step_id"] = Bounded(rec.step_id);
  j["uid"] = rec.uid;
  j["user"] = Bounded(rec.user);
  j["role"] = Bounded(rec.role);
  j["zone"] = Bounded(rec.zone);
  j["datasets"] = LoggedDatasets(rec);
  j["decision"] = rec.allow ? "allow" : "deny";
  j["reason"] = rec.allow ? Bounded(rec.reason) : Bounded(rec.reason, kMaxDeniedField);
  if (!rec.allow) j["reason_code"] = Bounded(rec.reason_code, 64);
  return Finish(j, prev_hash);
}

namespace {

// Where the next line goes: its sequence number and the hash it chains to.
struct ChainEnd {
  std::uint64_t seq = 0;
  std::string prev = kZeroHash;
  std::string gap;  // why the lines before this end are not in the log's directory
};

// The chain's end from the log's last line, or for a new file from the head
// file. A new file is a rotation when the file the head names is still in
// the log's directory (renamed); otherwise the log was deleted, emptied or
// moved away, and the chain goes on with a gap, which verify reports for
// ever (never healed by the next line).
Result<ChainEnd> FindChainEnd(int fd, const struct stat& st, const std::string& path,
                              const std::string& head_path) {
  ChainEnd end;
  const off_t size = st.st_size;
  HPCML_ASSIGN_OR_RETURN(std::string last, ReadLastLine(fd, size, path));
  if (!last.empty()) {
    end.prev = Sha256::Hex(last);
    // An unreadable last line still chains (verify reports it); numbering
    // goes on from the line count in that case.
    if (auto last_seq = LeadingSeq(last)) {
      end.seq = *last_seq + 1;
    } else {
      auto j = nlohmann::json::parse(last, nullptr, false);
      if (j.is_object() && j.contains("seq") && j["seq"].is_number_unsigned())
        end.seq = j["seq"].get<std::uint64_t>() + 1;
    }
  } else {
    // A new file (rotation): the chain goes on from the head file.
    HPCML_ASSIGN_OR_RETURN(std::string head_text, ReadSide(head_path));
    if (auto head = ParseHead(head_text)) {
      end.seq = head->first + 1;
      end.prev = head->second;
      const std::string was = HeadFileId(head_text);
      std::size_t slash = path.rfind('/');
      std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
      if (!was.empty() && (was == FileId(st) || !FileInDirectory(dir, was, head->second)))
        end.gap = fmt::format(
            "the log that ended at seq {} is gone from {} (deleted, emptied or moved away): the "
            "lines up to it are not in this chain",
            head->first, dir);
    }
  }
  return end;
}

// The line that records a gap (ChainEnd::gap), chained at `end`, which moves
// past it.
std::string GapLine(ChainEnd* end) {
  nlohmann::ordered_json j;
  j["seq"] = end->seq;
  j["time"] = FormatUtcMillis(std::chrono::system_clock::now());
  j["context"] = "gap";
  j["reason"] = Bounded(end->gap);
  std::string line = Finish(j, end->prev);
  end->prev = Sha256::Hex(line);
  ++end->seq;
  return line;
}

// The line that closes a flood run (FloodRun) whose window has passed,
// chained at `end`, which moves past it.
std::string FloodSummary(const FloodRun& run, ChainEnd* end) {
  nlohmann::ordered_json j;
  j["seq"] = end->seq;
  j["time"] = FormatUtcMillis(std::chrono::system_clock::now());
  j["context"] = "flood";
  j["user"] = Bounded(run.user, 64);
  j["reason_code"] = Bounded(run.code, 64);
  j["since"] = FormatUtcMillis(
      std::chrono::system_clock::time_point(std::chrono::milliseconds(run.start_ms)));
  j["count"] = run.suppressed;
  j["last"] = Bounded(run.last_job, 128);
  std::string line = Finish(j, end->prev);
  end->prev = Sha256::Hex(line);
  ++end->seq;
  return line;
}

// The line that closes a run of repeated denials, chained at `end`, which
// moves past it.
std::string RepeatSummary(const Repeat& repeat, ChainEnd* end) {
  nlohmann::ordered_json j;
  j["seq"] = end->seq;
  j["time"] = FormatUtcMillis(std::chrono::system_clock::now());
  j["context"] = "repeat";
  j["of"] = repeat.seq;
  j["count"] = repeat.count;
  j["last"] = Bounded(repeat.last_job);
  std::string summary = Finish(j, end->prev);
  end->prev = Sha256::Hex(summary);
  ++end->seq;
  return summary;
}

// Appends `out` to the log of `size` bytes: after a newline if its last line
// is torn, and all of it or nothing.
Status AppendLines(int fd, off_t size, std::string out, const std::string& path, bool sync) {
  // A torn last line (crash mid-write) must not swallow this one.
  if (size > 0) {
    char tail = 0;
    if (::pread(fd, &tail, 1, size - 1) == 1 && tail != '\n') out = "\n" + out;
  }
  if (Status w = WriteAll(fd, out, path); !w.ok()) {
    // A full disk: cut the partial write off, so what was there stays intact.
    if (::ftruncate(fd, size) != 0) return w.WithContext("and cutting it back failed");
    return w;
  }
  if (sync && ::fdatasync(fd) != 0) return ErrnoError("fdatasync " + path, errno);
  return Status::Ok();
}

}  // namespace

Result<std::string> AppendAudit(const std::string& path, const AuditRecord& record, bool sync) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW, 0640));
  // Exclusive for the read of the last line, the write and the side files:
  // the next writer sees this line complete.
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return ErrnoError("flock " + path, errno);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("fstat " + path, errno);
  if (!S_ISREG(st.st_mode)) return IoError("audit log {}: not a regular file", path);
  const std::string head_path = path + ".head", repeat_path = path + ".repeat",
                    flood_path = path + ".flood";
  HPCML_ASSIGN_OR_RETURN(ChainEnd end, FindChainEnd(fd.get(), st, path, head_path));

  HPCML_ASSIGN_OR_RETURN(std::string repeat_text, ReadSide(repeat_path));
  std::optional<Repeat> repeat = ParseRepeat(repeat_text);
  if (repeat && repeat->seq + 1 != end.seq) repeat.reset();  // the log moved on without us
  const std::int64_t now = NowMs();
  const std::string key = record.allow ? std::string() : RepeatKey(record);
  if (repeat && end.gap.empty() && !record.allow && repeat->key == key &&
      now - repeat->time_ms < std::int64_t{kAuditRepeatWindowSeconds} * 1000) {
    ++repeat->count;
    repeat->last_job = record.job_id + "." + record.step_id;
    HPCML_RETURN_IF_ERROR(
        WriteSide(repeat_path, fmt::format("{} {} {} {} {}\n", repeat->key, repeat->seq,
                                           repeat->time_ms, repeat->count, repeat->last_job)));
    return fmt::format("repeat {} of the denial at seq {}", repeat->count, repeat->seq);
  }

  // Floods: runs whose window has passed are summarised now; a denial past
  // its run's limit is counted instead of written.
  // One run per user and reason code active in the window: 64 KB holds
  // hundreds; past that, runs are dropped and their denials written again.
  HPCML_ASSIGN_OR_RETURN(std::string flood_text, ReadSide(flood_path, 64 * 1024));
  std::vector<FloodRun> runs = ParseFlood(flood_text), due;
  std::erase_if(runs, [&](const FloodRun& r) {
    if (now - r.start_ms < std::int64_t{kAuditRepeatWindowSeconds} * 1000 && r.start_ms <= now)
      return false;
    if (r.suppressed > 0) due.push_back(r);
    return true;
  });
  bool write_record = true;
  if (!record.allow && end.gap.empty()) {
    const std::string fkey = FloodKey(record);
    auto run =
        std::find_if(runs.begin(), runs.end(), [&](const FloodRun& r) { return r.key == fkey; });
    if (run == runs.end()) {
      runs.push_back(FloodRun{fkey, now, 1, 0, record.user, record.reason_code, "-"});
    } else if (run->lines < kAuditFloodLines) {
      ++run->lines;
    } else {
      ++run->suppressed;
      run->last_job = record.job_id + "." + record.step_id;
      write_record = false;
    }
  }

  std::string out, line;
  std::uint64_t last_seq = 0;
  auto add = [&](std::string l) {
    last_seq = end.seq - 1;  // each helper moved `end` past its line
    line = std::move(l);
    out += line + "\n";
  };
  if (!end.gap.empty()) add(GapLine(&end));
  if (repeat && repeat->count > 0) add(RepeatSummary(*repeat, &end));
  for (const FloodRun& r : due) add(FloodSummary(r, &end));
  if (write_record) {
    last_seq = end.seq;
    line = FormatAuditLine(record, end.seq, end.prev);
    out += line + "\n";
  }
  if (!out.empty()) {
    HPCML_RETURN_IF_ERROR(AppendLines(fd.get(), st.st_size, std::move(out), path, sync));
    HPCML_RETURN_IF_ERROR(
        WriteSide(head_path, fmt::format("{} {} {}\n", last_seq, Sha256::Hex(line), FileId(st))));
    // The repeat run follows the last line: this denial's, or none.
    const std::string next_repeat = write_record && !record.allow
                                        ? fmt::format("{} {} {} 0 -\n", key, last_seq, now)
                                        : std::string();
    if (next_repeat != repeat_text) HPCML_RETURN_IF_ERROR(WriteSide(repeat_path, next_repeat));
  }
  // Side files are written only when they change: a run of allowed steps
  // touches neither.
  if (std::string next_flood = FormatFlood(runs); next_flood != flood_text)
    HPCML_RETURN_IF_ERROR(WriteSide(flood_path, next_flood));
  HPCML_RETURN_IF_ERROR(fd.Close());  // releases the lock
  if (!write_record)
    return fmt::format("flood: denial counted for user {} ({}), not written", record.user,
                       record.reason_code);
  return line;
}

namespace {

// Walks a chain line by line, across files.
class ChainChecker {
 public:
  explicit ChainChecker(bool strict_start, const std::vector<WitnessEntry>& witnessed = {})
      : strict_start_(strict_start) {
    for (const WitnessEntry& w : witnessed) witnessed_.emplace(w.seq, &w);
    rep_.witnessed = witnessed.size();
  }

  void File(const std::string& name, std::string_view text) {
    std::size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
      std::size_t nl = text.find('\n', pos);
      ++line_no;
      ++rep_.lines;
      if (nl == std::string_view::npos) {
        Bad(name, line_no, "no newline at the end: a torn write");
        return;
      }
      Line(name, line_no, text.substr(pos, nl - pos));
      pos = nl + 1;
    }
  }

  // The end of the chain against a head file's "<seq> <hash>".
  void Head(const std::string& name, const std::string& head_text) {
    auto head = ParseHead(head_text);
    if (!head) return Bad(name + ".head", 0, "not '<seq> <sha256>'");
    if (!started_) {
      return Bad(name, 0,
                 fmt::format("empty or missing, but its head file records seq {}: the log was "
                             "deleted or emptied",
                             head->first));
    }
    std::uint64_t last = expected_seq_ - 1;
    if (head->first > last)
      return Bad(name, 0,
                 fmt::format("ends at seq {}, but its head file records seq {}: lines were "
                             "removed from the end",
                             last, head->first));
    if (head->first < last)
      return Bad(name + ".head", 0,
                 fmt::format("records seq {}, behind the log's last seq {}", head->first, last));
    if (head->second != prev_hash_)
      return Bad(name, last_line_,
                 "its SHA-256 does not match the head file's: the last line was edited");
  }

  // Every witnessed head must be a line of the chain given: one missing
  // because the log is empty, the chain starts after it (cut, restarted, or
  // its rotated file not given) or ends before it is a problem.
  VerifyReport Done() {
    for (const auto& [seq, w] : witnessed_) {
      if (seen_.count(seq)) continue;
      if (!started_)
        Bad(last_file_, 0,
            fmt::format("the log is empty or missing, but the witness recorded its head at seq "
                        "{} at {}",
                        seq, w->time));
      else if (seq < rep_.first_seq)
        Bad(last_file_, 0,
            fmt::format("the witness recorded the head at seq {} at {}, before this chain's first "
                        "line (seq {}): the chain was cut or restarted, or give the rotated files "
                        "that hold it",
                        seq, w->time, rep_.first_seq));
      else
        Bad(last_file_, 0,
            fmt::format("the head seq {} recorded by the witness at {} is not in the log: it was "
                        "cut or rewritten after that",
                        seq, w->time));
    }
    rep_.intact = rep_.problems.empty();
    rep_.head = started_ ? prev_hash_ : "";
    return rep_;
  }

 private:
  void Bad(const std::string& file, std::size_t line, std::string reason) {
    rep_.problems.push_back(AuditProblem{file, line, std::move(reason)});
  }

  void Line(const std::string& file, std::size_t line_no, std::string_view line) {
    const std::string hash = Sha256::Hex(line);
    auto j = nlohmann::json::parse(line, nullptr, false);
    bool ok_shape = j.is_object() && j.contains("seq") && j["seq"].is_number_unsigned() &&
                    j.contains("prev") && j["prev"].is_string();
    if (!ok_shape) {
      Bad(file, line_no, j.is_object() ? "missing 'seq' or 'prev'" : "not a JSON object");
    } else {
      auto seq = j["seq"].get<std::uint64_t>();
      auto prev = j["prev"].get<std::string>();
      if (!started_) {
        rep_.first_seq = seq;
        if (seq == 0 && prev != kZeroHash)
          Bad(file, line_no, "the first line does not start the chain");
        else if (seq != 0 && strict_start_)
          Bad(file, line_no, fmt::format("the chain starts at seq {}, not 0", seq));
      } else if (seq != expected_seq_) {
        Bad(file, line_no,
            fmt::format("sequence number {}, expected {}: a line was removed or lines were "
                        "reordered",
                        seq, expected_seq_));
      } else if (prev != prev_hash_) {
        Bad(last_file_, last_line_,
            fmt::format("its SHA-256 does not match the one recorded in {}:{}: it was edited", file,
                        line_no));
      }
      expected_seq_ = seq + 1;
      if (j.contains("context") && j["context"] == "gap")
        Bad(file, line_no,
            fmt::format("a gap in the trail: {}", j.contains("reason") && j["reason"].is_string()
                                                      ? j["reason"].get<std::string>()
                                                      : "(no reason)"));
      auto [from, to] = witnessed_.equal_range(seq);
      if (from != to) seen_.insert(seq);
      for (auto w = from; w != to; ++w) {
        ++rep_.witnessed_checked;
        if (w->second->hash != hash)
          Bad(file, line_no,
              fmt::format("differs from the line the witness recorded at {}: the log was "
                          "rewritten",
                          w->second->time));
      }
    }
    // Checking goes on from this line, whatever it was.
    started_ = true;
    prev_hash_ = hash;
    last_file_ = file;
    last_line_ = line_no;
    if (!ok_shape) ++expected_seq_;
  }

  bool strict_start_;
  bool started_ = false;
  std::string prev_hash_ = kZeroHash;
  std::uint64_t expected_seq_ = 0;
  std::string last_file_;
  std::size_t last_line_ = 0;
  std::multimap<std::uint64_t, const WitnessEntry*> witnessed_;
  std::set<std::uint64_t> seen_;
  VerifyReport rep_;
};

// The whole file, under a shared lock: a verify during appends sees whole
// lines only.
Result<std::string> ReadLocked(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY));
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
  return text;
}

}  // namespace

VerifyReport VerifyAuditText(std::string_view text) {
  ChainChecker checker(/*strict_start=*/true);
  checker.File("<text>", text);
  return checker.Done();
}

Result<VerifyReport> VerifyAuditFiles(const std::vector<std::string>& paths,
                                      const std::vector<WitnessEntry>& witnessed) {
  if (paths.empty()) return InvalidArgument("no audit log given");
  ChainChecker checker(/*strict_start=*/false, witnessed);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    auto text = ReadLocked(paths[i]);
    // The current log may be gone (deleted): its head file still speaks.
    if (!text.ok() && !(i + 1 == paths.size() && text.status().code() == StatusCode::kNotFound))
      return text.status();
    if (text.ok()) checker.File(paths[i], *text);
  }
  const std::string& last = paths.back();
  HPCML_ASSIGN_OR_RETURN(std::string head, ReadSide(last + ".head"));
  if (!head.empty()) {
    checker.Head(last, head);
  } else if (::access(last.c_str(), F_OK) != 0) {
    return NotFound("{}: no such log and no head file", last);
  }
  return checker.Done();
}

namespace {

Result<std::vector<WitnessEntry>> ParseWitness(const std::string& text, const std::string& witness,
                                               const std::string& node) {
  std::vector<WitnessEntry> out;
  std::size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    ++line_no;
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    char n[256] = {}, hash[65] = {}, when[64] = {};
    unsigned long long seq = 0;
    if (std::sscanf(line.c_str(), "%255s %llu %64s %63s", n, &seq, hash, when) != 4 ||
        std::strlen(hash) != 64)
      return InvalidArgument("{}:{}: expected '<node> <seq> <sha256> <time>'", witness, line_no);
    if (node == n) out.push_back(WitnessEntry{n, seq, hash, when});
  }
  return out;
}

}  // namespace

Result<std::vector<WitnessEntry>> ReadWitness(const std::string& witness, const std::string& node) {
  HPCML_ASSIGN_OR_RETURN(std::string text, ReadLocked(witness));
  return ParseWitness(text, witness, node);
}

Result<bool> AppendWitness(const std::string& witness, const std::string& node,
                           const std::string& head_copy) {
  if (node.empty() || node.find_first_of(" \t\n") != std::string::npos)
    return InvalidArgument("witness: bad node name '{}'", node);
  HPCML_ASSIGN_OR_RETURN(std::string head_text, ReadSide(head_copy));
  auto head = ParseHead(head_text);
  if (!head) return InvalidArgument("{}: not a head file ('<seq> <sha256>')", head_copy);
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd,
                         OpenFd(witness, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW, 0640));
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return ErrnoError("flock " + witness, errno);
  }
  // Read through this descriptor: a second open file would wait on our lock.
  std::string text;
  char buf[1 << 16];
  for (off_t off = 0;;) {
    ssize_t n = ::pread(fd.get(), buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("read " + witness, errno);
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    off += n;
  }
  auto earlier = ParseWitness(text, witness, node);
  if (!earlier.ok()) return earlier.status();
  if (!earlier->empty() && earlier->back().seq == head->first &&
      earlier->back().hash == head->second)
    return false;
  HPCML_RETURN_IF_ERROR(WriteAll(fd.get(),
                                 fmt::format("{} {} {} {}\n", node, head->first, head->second,
                                             FormatUtcMillis(std::chrono::system_clock::now())),
                                 witness));
  HPCML_RETURN_IF_ERROR(fd.Close());
  return true;
}

Result<VerifyReport> VerifyAuditLog(const std::string& path) {
  return VerifyAuditFiles({path});
}

}  // namespace hpcml::guard
