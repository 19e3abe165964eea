#include "sacct.hpp"

#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <unordered_map>

#include "hpcml/common/strings.hpp"
#include "hpcml/common/time.hpp"
#include "numbers.hpp"

namespace hpcml::accounting {

namespace {

constexpr size_t kReadChunk = 1 << 20;

bool Digits(std::string_view text, size_t pos, size_t n, int* out) {
  if (pos + n > text.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    char c = text[i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// Offset of local time from UTC at a local wall-clock time, in seconds.
// mktime is slow (it takes a lock and may re-read TZ), and a report converts
// two times per row, so the offset is cached per local hour: zones change
// offsets only on hour boundaries (all but a few historic ones).
int64_t LocalOffset(int64_t wall) {
  thread_local std::unordered_map<int64_t, int64_t> cache;
  int64_t hour = wall >= 0 ? wall / 3600 : (wall - 3599) / 3600;
  auto it = cache.find(hour);
  if (it != cache.end()) return it->second;
  time_t t = static_cast<time_t>(hour * 3600);
  struct tm tm {};
  gmtime_r(&t, &tm);
  tm.tm_isdst = -1;
  time_t local = mktime(&tm);
  int64_t offset = hour * 3600 - static_cast<int64_t>(local);
  if (cache.size() > 100000) cache.clear();
  cache.emplace(hour, offset);
  return offset;
}

std::string_view FirstWord(std::string_view s) {
  size_t sp = s.find(' ');
  return sp == std::string_view::npos ? s : s.substr(0, sp);
}

}  // namespace

Result<int64_t> ParseSlurmTime(std::string_view text) {
  if (text.empty() || text == "Unknown" || text == "None") return kNoTime;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  bool ok = text.size() >= 10 && Digits(text, 0, 4, &y) && text[4] == '-' &&
            Digits(text, 5, 2, &mo) && text[7] == '-' && Digits(text, 8, 2, &d);
  if (ok && text.size() > 10) {
    ok = text[10] == 'T' && text.size() >= 16 && Digits(text, 11, 2, &h) && text[13] == ':' &&
         Digits(text, 14, 2, &mi);
    if (ok && text.size() > 16) {
      ok = text.size() == 19 && text[16] == ':' && Digits(text, 17, 2, &s);
    }
  }
  if (!ok || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) {
    return InvalidArgument("time '{}' is not YYYY-MM-DD[THH:MM[:SS]]", text);
  }
  int64_t wall = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 +
                 h * 3600 + mi * 60 + s;
  return wall - LocalOffset(wall);
}

std::string FormatSlurmTime(int64_t t) {
  if (t == kNoTime) return "Unknown";
  time_t tt = static_cast<time_t>(t);
  struct tm tm {};
  localtime_r(&tt, &tm);
  char buf[32];
  size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return std::string(buf, n);
}

bool Attempt::interrupted() const {
  return state == "REQUEUED" || state == "PREEMPTED" || state == "NODE_FAIL";
}

SacctReader::SacctReader(int fd, std::string source) : fd_(fd), source_(std::move(source)) {
  // Without a header, kSacctFields in order.
  for (int i = 0; i < kFieldCount; ++i) index_[i] = i;
  columns_ = kFieldCount;
}

Result<bool> SacctReader::ReadLine() {
  for (;;) {
    size_t nl = buffer_.find('\n', pos_);
    if (nl != std::string::npos) {
      line_ = std::string_view(buffer_).substr(pos_, nl - pos_);
      pos_ = nl + 1;
      ++line_number_;
      if (!line_.empty() && line_.back() == '\r') line_.remove_suffix(1);
      return true;
    }
    if (eof_) {
      if (pos_ < buffer_.size()) {  // last line without a newline
        line_ = std::string_view(buffer_).substr(pos_);
        pos_ = buffer_.size();
        ++line_number_;
        return true;
      }
      return false;
    }
    // Keep the partial line, drop what was consumed, read more.
    buffer_.erase(0, pos_);
    pos_ = 0;
    size_t old = buffer_.size();
    buffer_.resize(old + kReadChunk);
    ssize_t n;
    do {
      n = ::read(fd_, buffer_.data() + old, kReadChunk);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      int err = errno;
      buffer_.resize(old);
      return ErrnoError(source_ + ": read", err);
    }
    buffer_.resize(old + static_cast<size_t>(n));
    if (n == 0) eof_ = true;
  }
}

void SacctReader::Split() {
  fields_ = SplitFields(line_, '|');
  // `sacct -p` (not -P) ends every line with a '|': accept it.
  if (fields_.size() == columns_ + 1 && fields_.back().empty()) fields_.pop_back();
}

Status SacctReader::UseHeader() {
  static constexpr std::string_view kNames[kFieldCount] = {
      "JobID", "User", "Account",    "Partition", "State",
      "Start", "End",  "ElapsedRaw", "AllocTRES", "Comment"};
  for (int i = 0; i < kFieldCount; ++i) index_[i] = -1;
  for (size_t col = 0; col < fields_.size(); ++col) {
    for (int i = 0; i < kFieldCount; ++i) {
      if (fields_[col] == kNames[i]) index_[i] = static_cast<int>(col);
    }
  }
  columns_ = fields_.size();
  for (Field f : {kJobId, kState, kStart, kEnd, kTres}) {
    if (index_[f] < 0) {
      return InvalidArgument("{}:{}: header has no {} column (run sacct with -o {})", source_,
                             line_number_, kNames[f], kSacctFields);
    }
  }
  return Status::Ok();
}

Result<bool> SacctReader::Next() {
  for (;;) {
    HPCML_ASSIGN_OR_RETURN(bool more, ReadLine());
    if (!more) return false;
    if (line_.empty()) continue;
    Split();
    if (!started_) {
      started_ = true;
      bool header = false;
      for (auto f : fields_) header = header || f == "JobID";
      if (header) {
        HPCML_RETURN_IF_ERROR(UseHeader());
        continue;
      }
    } else if (index_[kJobId] >= 0 && field(kJobId) == "JobID") {
      continue;  // the header again: outputs of several sacct runs concatenated
    }
    return true;
  }
}

std::string_view SacctReader::field(Field f) const {
  int i = index_[f];
  if (i < 0 || static_cast<size_t>(i) >= fields_.size()) return {};
  return fields_[static_cast<size_t>(i)];
}

bool SacctReader::IsStep() const {
  return fields_.size() == columns_ && field(kJobId).find('.') != std::string_view::npos;
}

Status SacctReader::Parse(Attempt* out) const {
  if (fields_.size() != columns_) {
    return InvalidArgument("{} fields, expected {} (a '|' inside a value?)", fields_.size(),
                           columns_);
  }
  std::string_view job_id = field(kJobId);
  if (job_id.empty()) return InvalidArgument("empty JobID");
  out->job_id.assign(job_id);
  out->user.assign(field(kUser));
  out->account.assign(field(kAccount));
  out->partition.assign(field(kPartition));
  out->state.assign(FirstWord(field(kState)));
  if (out->state.empty()) return InvalidArgument("empty State");
  out->comment.assign(field(kComment));
  Result<int64_t> start = ParseSlurmTime(field(kStart));
  if (!start.ok()) return InvalidArgument("Start: {}", start.status().message());
  Result<int64_t> end = ParseSlurmTime(field(kEnd));
  if (!end.ok()) return InvalidArgument("End: {}", end.status().message());
  out->start = *start;
  out->end = *end;
  if (out->start != kNoTime && out->end != kNoTime && out->end < out->start) {
    return InvalidArgument("End {} is before Start {}", field(kEnd), field(kStart));
  }
  out->elapsed = -1;
  std::string_view elapsed = field(kElapsed);
  if (index_[kElapsed] >= 0 && !elapsed.empty()) {
    if (!ParseWholeInt(elapsed, &out->elapsed) || out->elapsed < 0) {
      return InvalidArgument("ElapsedRaw '{}' is not a number of seconds", elapsed);
    }
  }
  Result<Tres> tres = ParseTres(field(kTres));
  if (!tres.ok()) return InvalidArgument("AllocTRES: {}", tres.status().message());
  out->tres = std::move(tres).value();
  return Status::Ok();
}

}  // namespace hpcml::accounting
