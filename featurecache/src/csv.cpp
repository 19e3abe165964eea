#include "hpcml/featurecache/csv.hpp"

#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "hpcml/common/parallel.hpp"
#include "hpcml/common/strings.hpp"

namespace hpcml::featurecache {
namespace {

// Eight bytes at a time (SWAR): the bytes of `w` equal to `c` get their high
// bit set, the others none (exact: no false matches).
inline uint64_t BytesEqual(uint64_t w, char c) {
  const uint64_t x = w ^ (0x0101010101010101ull * static_cast<unsigned char>(c));
  const uint64_t low7 = 0x7F7F7F7F7F7F7F7Full;
  return ~(((x & low7) + low7) | x | low7);
}

// The first of [p, end) that is `delim` or a line end, or end.
inline size_t FindFieldEnd(const char* text, size_t p, size_t end, char delim) {
  for (; p + 8 <= end; p += 8) {
    uint64_t w;
    std::memcpy(&w, text + p, 8);
    const uint64_t hit = BytesEqual(w, delim) | BytesEqual(w, '\n');
    if (hit != 0) return p + static_cast<size_t>(std::countr_zero(hit)) / 8;
  }
  while (p < end && text[p] != delim && text[p] != '\n') ++p;
  return p;
}

// The line ends in [p, end).
uint64_t CountLineEnds(const char* p, const char* end) {
  uint64_t n = 0;
  for (; p + 8 <= end; p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    n += static_cast<uint64_t>(std::popcount(BytesEqual(w, '\n')));
  }
  for (; p < end; ++p) n += *p == '\n';
  return n;
}

}  // namespace

CsvReader::CsvReader(std::string path, UniqueFd fd, char delimiter, Mode mode, size_t buffer)
    : path_(std::move(path)), fd_(std::move(fd)), delim_(delimiter), mode_(mode), buf_(buffer) {}

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
  const char* text = data();
  size_t p = pos + 1;
  bool escaped = false;
  size_t arena_start = arena_.size();
  for (;;) {
    if (p >= end_) {
      if (!eof_) return Parse::kNeedMore;
      *error = "unterminated quoted field";
      return Parse::kError;
    }
    char c = text[p];
    if (c == '"') {
      if (p + 1 >= end_ && !eof_) return Parse::kNeedMore;
      if (p + 1 < end_ && text[p + 1] == '"') {
        // First escape: copy what came before it; later characters are
        // appended one by one below.
        if (!escaped) arena_.append(text + pos + 1, p - pos - 1);
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
    AddSpan({true, arena_start, arena_.size() - arena_start});
  } else {
    AddSpan({false, pos + 1, p - pos - 1});
  }
  *close = p;
  return Parse::kRecord;
}

CsvReader::Parse CsvReader::ParseRecord(size_t* consumed, uint64_t* newlines, std::string* error) {
  nspans_ = 0;
  arena_.clear();
  const char* text = data();
  size_t pos = begin_;
  uint64_t nl = 0;
  for (;;) {
    // One field starting at pos.
    if (pos < end_ && text[pos] == '"') {
      size_t p = 0;
      Parse q = ScanQuoted(pos, &p, &nl, error);
      if (q != Parse::kRecord) return q;
      pos = p + 1;  // after the closing quote
      if (pos < end_ && text[pos] == '\r' && (pos + 1 >= end_ || text[pos + 1] == '\n')) {
        if (pos + 1 >= end_ && !eof_) return Parse::kNeedMore;
        ++pos;
      }
      if (pos >= end_) {
        if (!eof_) return Parse::kNeedMore;
        *consumed = pos - begin_;
        *newlines = nl;
        return Parse::kRecord;
      }
      if (text[pos] == delim_) {
        ++pos;
        continue;
      }
      if (text[pos] == '\n') {
        *consumed = pos + 1 - begin_;
        *newlines = nl + 1;
        return Parse::kRecord;
      }
      *error = "unexpected character after a closing quote";
      *newlines = nl;
      return Parse::kError;
    }
    // Unquoted field: up to the delimiter or the end of the line.
    const size_t p = FindFieldEnd(text, pos, end_, delim_);
    if (p >= end_ && !eof_) return Parse::kNeedMore;
    size_t len = p - pos;
    if (p < end_ && text[p] == '\n' && len > 0 && text[p - 1] == '\r') --len;
    if (p >= end_ && len > 0 && text[p - 1] == '\r') --len;
    AddSpan({false, pos, len});
    if (p >= end_) {
      *consumed = p - begin_;
      *newlines = nl;
      return Parse::kRecord;
    }
    if (text[p] == delim_) {
      pos = p + 1;
      continue;
    }
    *consumed = p + 1 - begin_;
    *newlines = nl + 1;
    return Parse::kRecord;
  }
}

Result<bool> CsvReader::Next() {
  for (;;) {
    if (begin_ >= end_) {
      if (eof_ || partial_) {
        finished_ = !partial_;
        fields_.clear();
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
      if (partial_) {  // the record goes on past these bytes
        fields_.clear();
        return false;
      }
      HPCML_RETURN_IF_ERROR(Fill());
      continue;
    }
    record_line_ = line_;
    if (r == Parse::kError) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("{}: line {}: {}", path_, line_ + newlines, error));
    }
    bool quoted_start = data()[begin_] == '"';
    begin_ += consumed;
    line_ += newlines;
    // A blank line parses as one empty unquoted field: skip it.
    if (nspans_ == 1 && spans_[0].length == 0 && !quoted_start) continue;
    if (fields_.size() != nspans_) fields_.resize(nspans_);
    for (size_t i = 0; i < nspans_; ++i) {
      const Span& s = spans_[i];
      fields_[i] =
          std::string_view(s.arena ? arena_.data() + s.offset : data() + s.offset, s.length);
    }
    if (mode_ == Mode::kFull && !valid_utf8_) HPCML_RETURN_IF_ERROR(CheckUtf8());
    return true;
  }
}

CsvReader CsvReader::OverBytes(const CsvReader& file, const char* bytes, size_t size,
                               uint64_t first_line, bool partial) {
  CsvReader r(file.path_, UniqueFd(), file.delim_, file.mode_, 0);
  r.bytes_ = bytes;
  r.end_ = size;
  // Valid as a whole, valid in every field: the bytes that separate and
  // quote fields are ASCII, which no multibyte sequence contains.
  r.valid_utf8_ = !FindInvalidUtf8(std::string_view(bytes, size));
  r.eof_ = !partial;
  r.partial_ = partial;
  r.bom_checked_ = true;
  r.line_ = first_line;
  return r;
}

Status CsvReader::ReadRestInParallel(
    unsigned threads, const std::function<Status(unsigned piece, CsvReader& reader)>& parse,
    const std::function<Status(unsigned pieces)>& done, size_t piece_bytes) {
  threads = std::max(1u, threads);
  piece_bytes = std::max<size_t>(piece_bytes, 1);
  // The window: the unparsed bytes so far, then more from the file.
  std::vector<char> window(buf_.begin() + static_cast<ptrdiff_t>(begin_),
                           buf_.begin() + static_cast<ptrdiff_t>(end_));
  std::vector<char>().swap(buf_);
  begin_ = end_ = 0;
  size_t want = threads * piece_bytes;
  size_t unhashed = window.size();  // window[unhashed, ...) is not in the digest yet
  for (bool last = eof_; !window.empty() || !last;) {
    size_t have = window.size();
    window.resize(std::max(want, have + piece_bytes));
    while (!last && have < window.size()) {
      ssize_t n = ::read(fd_.get(), window.data() + have, window.size() - have);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError(path_, errno);
      if (n == 0) last = true;
      bytes_read_ += static_cast<uint64_t>(n);
      have += static_cast<size_t>(n);
    }
    window.resize(have);
    // A window with a quote is one piece, parsed up to its last whole
    // record. Any other: whole records up to the last line end (all, at the
    // end of the file), cut after line ends into pieces.
    const bool quoted = std::memchr(window.data(), '"', have) != nullptr;
    std::vector<size_t> cut = {0};
    if (quoted) {
      cut.push_back(have);
    } else {
      size_t whole = have;
      if (!last) {
        const auto nl = std::find(window.rbegin(), window.rend(), '\n');
        if (nl == window.rend()) {  // one record longer than the window
          want *= 2;
          continue;
        }
        whole = static_cast<size_t>(window.rend() - nl);
      }
      for (unsigned p = 1; p < threads; ++p) {
        const size_t from = std::max(whole * p / threads, cut.back());
        const void* nl = std::memchr(window.data() + from, '\n', whole - from);
        if (nl == nullptr) break;
        const size_t at = static_cast<size_t>(static_cast<const char*>(nl) - window.data()) + 1;
        if (at < whole) cut.push_back(at);
      }
      cut.push_back(whole);
    }
    const auto pieces = static_cast<unsigned>(cut.size() - 1);
    // Each piece's first line: the line ends before it, counted at once.
    std::vector<uint64_t> first_line(pieces + 1, 0);
    if (!quoted) {
      ParallelFor(pieces, pieces, [&](unsigned p, size_t, size_t) {
        first_line[p + 1] = CountLineEnds(window.data() + cut[p], window.data() + cut[p + 1]);
      });
    }
    first_line[0] = line_;
    for (unsigned p = 0; p < pieces; ++p) first_line[p + 1] += first_line[p];
    // The digest of the new bytes as one more part, beside the parsing. A
    // quoted piece says where its whole records end and on which line.
    std::vector<Status> status(pieces);
    size_t whole = cut.back();
    ParallelFor(pieces + 1, pieces + 1, [&](unsigned p, size_t, size_t) {
      if (p == pieces) {
        if (mode_ == Mode::kFull) sha_.Update(window.data() + unhashed, have - unhashed);
        return;
      }
      CsvReader r = OverBytes(*this, window.data() + cut[p], cut[p + 1] - cut[p], first_line[p],
                              /*partial=*/quoted && !last);
      status[p] = parse(p, r);
      if (quoted) {
        whole = r.begin_;
        first_line[pieces] = r.line_;
      }
    });
    unhashed = have;
    for (const Status& st : status) HPCML_RETURN_IF_ERROR(st);
    HPCML_RETURN_IF_ERROR(done(pieces));
    line_ = first_line[pieces];
    if (whole == 0 && !last) want *= 2;  // one quoted record longer than the window
    window.erase(window.begin(), window.begin() + static_cast<ptrdiff_t>(whole));
    unhashed -= whole;
    if (last && window.empty()) break;
  }
  eof_ = true;
  finished_ = true;
  fields_.clear();
  return Status::Ok();
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
  na.Index();
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
  na.Index();
  return na;
}

void NaValues::Index() {
  std::fill(std::begin(first_), std::end(first_), 0);
  for (const std::string& w : words_) {
    const auto c = static_cast<unsigned char>(w[0]);
    first_[c / 64] |= uint64_t{1} << (c % 64);
  }
}

bool NaValues::ContainsWord(std::string_view s) const {
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
  // A word, as ParseBoolCell takes it: "+False" is text, not a bool.
  if (IsTrueWord(s) || IsFalseWord(s)) return CellShape::kBool;
  if (s.front() == '+' && s.size() > 1 && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  const char* end = s.data() + s.size();
  int64_t i = 0;
  auto ri = std::from_chars(s.data(), end, i);
  if (ri.ec == std::errc() && ri.ptr == end) return CellShape::kInt;
  double d = 0;
  auto rd = std::from_chars(s.data(), end, d);
  if ((rd.ec == std::errc() || rd.ec == std::errc::result_out_of_range) && rd.ptr == end)
    return CellShape::kFloat;
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
