#include "hpcml/featurecache/csv.hpp"

#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "hpcml/common/strings.hpp"

namespace hpcml::featurecache {

CsvReader::CsvReader(std::string path, UniqueFd fd, char delimiter, Mode mode)
    : path_(std::move(path)), fd_(std::move(fd)), delim_(delimiter), mode_(mode), buf_(4 << 20) {}

Result<CsvReader> CsvReader::Open(const std::string& path, char delimiter, Mode mode) {
  if (delimiter == '"' || delimiter == '\n' || delimiter == '\r') {
    return InvalidArgument("{}: unusable CSV delimiter", path);
  }
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY));
  return CsvReader(path, std::move(fd), delimiter, mode);
}

Result<std::string> CsvReader::Identity() const {
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0) return ErrnoError(path_, errno);
  return fmt::format("{}:{}:{}:{}.{}:{}.{}", st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec,
                     st.st_mtim.tv_nsec, st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
}

Status CsvReader::Fill() {
  // Keep the unparsed tail, then read more after it; grow for long records.
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
  for (;;) {
    ssize_t n = ::read(fd_.get(), buf_.data() + end_, buf_.size() - end_);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(path_, errno);
    }
    if (n == 0) {
      eof_ = true;
    } else {
      if (mode_ == Mode::kFull) sha_.Update(buf_.data() + end_, static_cast<size_t>(n));
      bytes_read_ += static_cast<uint64_t>(n);
      end_ += static_cast<size_t>(n);
    }
    break;
  }
  if (!bom_checked_ && (end_ >= 3 || eof_)) {
    bom_checked_ = true;
    if (end_ >= 3 && std::memcmp(buf_.data(), "\xEF\xBB\xBF", 3) == 0) begin_ = 3;
  }
  return Status::Ok();
}

CsvReader::Parse CsvReader::ScanQuoted(size_t pos, size_t* close, uint64_t* newlines,
                                       std::string* error) {
  const char* data = buf_.data();
  size_t p = pos + 1;
  bool escaped = false;
  size_t arena_start = arena_.size();
  for (;;) {
    if (p >= end_) {
      if (!eof_) return Parse::kNeedMore;
      *error = "unterminated quoted field";
      return Parse::kError;
    }
    char c = data[p];
    if (c == '"') {
      if (p + 1 >= end_ && !eof_) return Parse::kNeedMore;
      if (p + 1 < end_ && data[p + 1] == '"') {
        // First escape: copy what came before it; later characters are
        // appended one by one below.
        if (!escaped) arena_.append(data + pos + 1, p - pos - 1);
        escaped = true;
        arena_.push_back('"');
        p += 2;
        continue;
      }
      break;  // closing quote
    }
    if (c == '\n') ++*newlines;
    if (escaped) arena_.push_back(c);
    ++p;
  }
  if (escaped) {
    spans_.push_back({true, arena_start, arena_.size() - arena_start});
  } else {
    spans_.push_back({false, pos + 1, p - pos - 1});
  }
  *close = p;
  return Parse::kRecord;
}

CsvReader::Parse CsvReader::ParseRecord(size_t* consumed, uint64_t* newlines, std::string* error) {
  spans_.clear();
  arena_.clear();
  const char* data = buf_.data();
  size_t pos = begin_;
  uint64_t nl = 0;
  for (;;) {
    // One field starting at pos.
    if (pos < end_ && data[pos] == '"') {
      size_t p = 0;
      Parse q = ScanQuoted(pos, &p, &nl, error);
      if (q != Parse::kRecord) return q;
      pos = p + 1;  // after the closing quote
      if (pos < end_ && data[pos] == '\r' && (pos + 1 >= end_ || data[pos + 1] == '\n')) {
        if (pos + 1 >= end_ && !eof_) return Parse::kNeedMore;
        ++pos;
      }
      if (pos >= end_) {
        if (!eof_) return Parse::kNeedMore;
        *consumed = pos - begin_;
        *newlines = nl;
        return Parse::kRecord;
      }
      if (data[pos] == delim_) {
        ++pos;
        continue;
      }
      if (data[pos] == '\n') {
        *consumed = pos + 1 - begin_;
        *newlines = nl + 1;
        return Parse::kRecord;
      }
      *error = "unexpected character after a closing quote";
      *newlines = nl;
      return Parse::kError;
    }
    // Unquoted field: up to the delimiter or the end of the line.
    size_t p = pos;
    while (p < end_ && data[p] != delim_ && data[p] != '\n') ++p;
    if (p >= end_ && !eof_) return Parse::kNeedMore;
    size_t len = p - pos;
    if (p < end_ && data[p] == '\n' && len > 0 && data[p - 1] == '\r') --len;
    if (p >= end_ && len > 0 && data[p - 1] == '\r') --len;
    spans_.push_back({false, pos, len});
    if (p >= end_) {
      *consumed = p - begin_;
      *newlines = nl;
      return Parse::kRecord;
    }
    if (data[p] == delim_) {
      pos = p + 1;
      continue;
    }
    *consumed = p + 1 - begin_;
    *newlines = nl + 1;
    return Parse::kRecord;
  }
}

Result<bool> CsvReader::Next() {
  fields_.clear();
  for (;;) {
    if (begin_ >= end_) {
      if (eof_) {
        finished_ = true;
        return false;
      }
      HPCML_RETURN_IF_ERROR(Fill());
      continue;
    }
    size_t consumed = 0;
    uint64_t newlines = 0;
    std::string error;
    Parse r = ParseRecord(&consumed, &newlines, &error);
    if (r == Parse::kNeedMore) {
      HPCML_RETURN_IF_ERROR(Fill());
      continue;
    }
    record_line_ = line_;
    if (r == Parse::kError) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("{}: line {}: {}", path_, line_ + newlines, error));
    }
    bool quoted_start = buf_[begin_] == '"';
    begin_ += consumed;
    line_ += newlines;
    // A blank line parses as one empty unquoted field: skip it.
    if (spans_.size() == 1 && spans_[0].length == 0 && !quoted_start) continue;
    fields_.reserve(spans_.size());
    for (const Span& s : spans_) {
      fields_.emplace_back(s.arena ? arena_.data() + s.offset : buf_.data() + s.offset, s.length);
    }
    if (mode_ == Mode::kFull) HPCML_RETURN_IF_ERROR(CheckUtf8());
    return true;
  }
}

Result<std::string> CsvReader::Sha256Hex() {
  if (!finished_ || mode_ != Mode::kFull)
    return FailedPrecondition("{}: digest requested before the end of the file", path_);
  if (digest_.empty()) digest_ = sha_.FinishHex();
  return digest_;
}

Status CsvReader::ErrorAt(size_t index, std::string_view message) const {
  return InvalidArgument("{}: line {}, column {}: {}", path_, record_line_, index + 1, message);
}

Status CsvReader::CheckUtf8() const {
  for (size_t i = 0; i < fields_.size(); ++i) {
    const std::optional<size_t> bad = FindInvalidUtf8(fields_[i]);
    if (!bad) continue;
    return ErrorAt(i, fmt::format("not valid UTF-8: byte {} of the field is 0x{:02X} (columns are "
                                  "fields counted from 1); save the file as UTF-8",
                                  *bad + 1, static_cast<unsigned char>(fields_[i][*bad])));
  }
  return Status::Ok();
}

Status CsvReader::ErrorAtLine(std::string_view message) const {
  return InvalidArgument("{}: line {}: {}", path_, record_line_, message);
}

Result<CsvHeader> CsvHeader::Read(CsvReader& csv) {
  HPCML_ASSIGN_OR_RETURN(bool has_header, csv.Next());
  if (!has_header) return InvalidArgument("{}: empty file: expected a header row", csv.path());
  CsvHeader h;
  h.path_ = csv.path();
  for (size_t i = 0; i < csv.size(); ++i) {
    h.names_.emplace_back(TrimBlanks(csv.field(i)));
    h.index_.emplace(h.names_.back(), i);
  }
  return h;
}

Result<size_t> CsvHeader::Find(const std::string& name, const char* role) const {
  auto it = index_.find(name);
  if (it != index_.end()) return it->second;
  std::string all;
  for (const auto& n : names_) all += (all.empty() ? "" : ", ") + n;
  return InvalidArgument("{}: line 1: no {} column named \"{}\" (columns: {})", path_, role, name,
                         all);
}

NaValues NaValues::Default() {
  NaValues na;
  na.words_ = {"NA", "N/A", "NaN", "nan", "NAN", "null", "NULL", "None"};
  return na;
}

Result<NaValues> NaValues::Parse(std::string_view list) {
  NaValues na;
  if (TrimBlanks(list).empty()) return na;
  for (std::string_view w : SplitFields(list, ',')) {
    w = TrimBlanks(w);
    if (w.empty() || w.find('"') != std::string_view::npos)
      return InvalidArgument("\"{}\": an empty word or a quote in the list of missing values",
                             list);
    na.words_.emplace_back(w);
  }
  return na;
}

bool NaValues::Contains(std::string_view s) const {
  return std::find(words_.begin(), words_.end(), s) != words_.end();
}

Result<float> ParseFloatCell(std::string_view text, bool* integral, const NaValues* na,
                             bool* missing) {
  std::string_view s = TrimBlanks(text);
  if (missing != nullptr) *missing = false;
  if (na != nullptr && (s.empty() || na->Contains(s))) {
    if (missing != nullptr) *missing = true;
    if (integral != nullptr) *integral = true;  // votes for no kind
    return std::numeric_limits<float>::quiet_NaN();
  }
  if (s.empty()) return InvalidArgument("empty cell (write nan to mark a missing value)");
  if (s == "nan" || s == "NaN" || s == "NAN") {
    if (integral != nullptr) *integral = false;
    if (missing != nullptr) *missing = true;
    return std::numeric_limits<float>::quiet_NaN();
  }
  std::string_view digits = s;
  if (digits.front() == '+') digits.remove_prefix(1);
  float v = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec == std::errc::result_out_of_range) {
    return InvalidArgument("\"{}\" is outside the range of float32", s);
  }
  if (ec != std::errc() || p != digits.data() + digits.size() || digits.empty()) {
    return InvalidArgument("\"{}\" is not a number", s);
  }
  if (std::isinf(v)) return InvalidArgument("\"{}\": infinite values are not allowed", s);
  if (std::isnan(v)) return InvalidArgument("\"{}\" is not a number", s);
  if (integral != nullptr) {
    bool only_digits = true;
    for (size_t i = 0; i < digits.size(); ++i) {
      char c = digits[i];
      if (!((c >= '0' && c <= '9') || (i == 0 && c == '-'))) only_digits = false;
    }
    *integral = only_digits;
  }
  return v;
}

Result<int64_t> ParseIntCell(std::string_view text) {
  std::string_view s = TrimBlanks(text);
  if (s.empty()) return InvalidArgument("empty cell");
  if (s.front() == '+') s.remove_prefix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range)
    return InvalidArgument("\"{}\" is outside the range of int64", s);
  if (ec != std::errc() || p != s.data() + s.size())
    return InvalidArgument("\"{}\" is not an integer", s);
  return v;
}

namespace {

bool IsTrueWord(std::string_view s) {
  return s == "true" || s == "TRUE" || s == "True";
}
bool IsFalseWord(std::string_view s) {
  return s == "false" || s == "FALSE" || s == "False";
}

}  // namespace

Result<bool> ParseBoolCell(std::string_view text) {
  std::string_view s = TrimBlanks(text);
  if (IsTrueWord(s) || s == "1") return true;
  if (IsFalseWord(s) || s == "0") return false;
  return InvalidArgument("\"{}\" is not a boolean (true/false, TRUE/FALSE, True/False, 1/0)", s);
}

namespace {

// The common shapes of a number, without a parse: [-+]digits (up to 18, so
// int64 holds it) is kInt; [-+]digits.digits[e[-+]digits] (at least one
// digit before the exponent) is kFloat; anything else nullopt (the caller
// parses).
std::optional<CellShape> QuickNumberShape(std::string_view s) {
  size_t i = 0, n = s.size();
  if (i < n && (s[i] == '-' || s[i] == '+')) ++i;
  auto digits = [&] {
    const size_t from = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') ++i;
    return i - from;
  };
  const size_t whole = digits();
  if (i == n) return whole > 0 && whole <= 18 ? std::optional(CellShape::kInt) : std::nullopt;
  size_t frac = 0;
  if (s[i] == '.') {
    ++i;
    frac = digits();
  }
  if (whole + frac == 0) return std::nullopt;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '-' || s[i] == '+')) ++i;
    if (digits() == 0) return std::nullopt;
  }
  return i == n ? std::optional(CellShape::kFloat) : std::nullopt;
}

}  // namespace

Result<float> ParseNumericLabel(std::string_view text) {
  auto v = ParseFloatCell(text);
  if (v.ok()) return v;
  std::string_view s = TrimBlanks(text);
  if (IsTrueWord(s)) return 1.0f;
  if (IsFalseWord(s)) return 0.0f;
  return v;
}

CellShape ClassifyCell(std::string_view text, const NaValues& na) {
  std::string_view s = TrimBlanks(text);
  if (s.empty() || na.Contains(s)) return CellShape::kMissing;
  if (auto quick = QuickNumberShape(s)) return *quick;
  if (s.front() == '+' && s.size() > 1 && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  const char* end = s.data() + s.size();
  int64_t i = 0;
  auto ri = std::from_chars(s.data(), end, i);
  if (ri.ec == std::errc() && ri.ptr == end) return CellShape::kInt;
  double d = 0;
  auto rd = std::from_chars(s.data(), end, d);
  if ((rd.ec == std::errc() || rd.ec == std::errc::result_out_of_range) && rd.ptr == end)
    return CellShape::kFloat;
  if (IsTrueWord(s) || IsFalseWord(s)) return CellShape::kBool;
  return CellShape::kText;
}

std::string CsvQuote(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

}  // namespace hpcml::featurecache
