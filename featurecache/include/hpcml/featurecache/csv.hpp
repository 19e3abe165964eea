// Streaming CSV reader (RFC 4180: quoted fields, "" escapes, CRLF or LF line
// ends, newlines inside quotes) that knows where it is, so every error can
// name the file, line and column. Memory is bounded by the longest record, not
// the file. Also digests every byte it reads, so a source's SHA-256 costs no
// second pass. Blank lines are skipped; a UTF-8 byte order mark is ignored.
// Every field must be valid UTF-8 (column names reach JSON metadata): a
// record with a malformed byte (a Latin-1 export, say) is an error naming the
// file, line, column and byte.
//
// Not thread-safe. Field views stay valid until the next call to Next().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/sha256.hpp"
#include "hpcml/common/status.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::featurecache {

class CsvReader {
 public:
  // kFull checks UTF-8 and digests every byte; kScan does neither (a first
  // look at a file that a kFull pass reads again: ingest's kind inference).
  enum class Mode { kFull, kScan };
  static Result<CsvReader> Open(const std::string& path, char delimiter = ',',
                                Mode mode = Mode::kFull);

  // Reads the next record: true when one was read, false at the end.
  Result<bool> Next();

  const std::vector<std::string_view>& fields() const { return fields_; }
  size_t size() const { return fields_.size(); }
  std::string_view field(size_t i) const { return fields_[i]; }

  // 1-based line on which the current record starts.
  uint64_t line() const { return record_line_; }
  const std::string& path() const { return path_; }
  uint64_t bytes_read() const { return bytes_read_; }

  // SHA-256 of every byte of the file. Only complete once Next() returned
  // false (in kFull mode); an error before that.
  Result<std::string> Sha256Hex();
  // The open file's identity: device, inode, size, modification and change
  // times. Two reads of a file with the same identity read the same bytes.
  Result<std::string> Identity() const;

  // The records after the current one, on `threads` threads: the rest of
  // the file is read in windows of about threads x 8 MiB, each cut at line
  // ends into `threads` pieces (a window holding a quote character is one
  // piece, parsed up to its last whole record: only outside quotes does
  // every line end end a record). For each
  // window, parse(piece, reader) runs for all pieces at once, each on its
  // own thread, with a reader over the piece's bytes (this reader's mode
  // and path; its lines are the file's, so its errors name the right line);
  // then done(pieces) runs on the calling thread, pieces in file order. The
  // first error, in file order, ends the read. Afterwards this reader is at
  // the end of the file, its digest covering every byte.
  Status ReadRestInParallel(unsigned threads,
                            const std::function<Status(unsigned piece, CsvReader& reader)>& parse,
                            const std::function<Status(unsigned pieces)>& done,
                            size_t piece_bytes = size_t{8} << 20);

  // "<path>: line N, column C: <message>" (column is 1-based: index + 1).
  Status ErrorAt(size_t index, std::string_view message) const;
  // "<path>: line N: <message>".
  Status ErrorAtLine(std::string_view message) const;

 private:
  CsvReader(std::string path, UniqueFd fd, char delimiter, Mode mode, size_t buffer = 4 << 20);
  // A reader of `bytes` (not copied: they must outlive it), records
  // starting on line `first_line`: whole ones, or with `partial` the bytes
  // may end inside a record, where Next() then stops (at begin_).
  static CsvReader OverBytes(const CsvReader& file, const char* bytes, size_t size,
                             uint64_t first_line, bool partial = false);

  struct Span {
    bool arena;
    size_t offset;
    size_t length;
  };
  enum class Parse { kRecord, kNeedMore, kError };

  // One record from buf_[begin_..end_) into spans_: kRecord with the bytes
  // consumed and the line ends crossed, kNeedMore when the buffer ends inside
  // it before EOF, or kError with *error set.
  Parse ParseRecord(size_t* consumed, uint64_t* newlines, std::string* error);
  // The quoted field opening at buf_[pos]: its span into spans_ and the
  // closing quote's offset into *close (kRecord), or kNeedMore / kError. Adds
  // the newlines inside it to *newlines.
  Parse ScanQuoted(size_t pos, size_t* close, uint64_t* newlines, std::string* error);
  Status Fill();
  // Refuses a field of the current record that is not valid UTF-8, naming
  // its line and column.
  Status CheckUtf8() const;

  std::string path_;
  UniqueFd fd_;
  char delim_;
  Mode mode_;
  std::vector<char> buf_;
  const char* bytes_ = nullptr;  // the bytes read instead of buf_ (OverBytes)
  bool valid_utf8_ = false;      // bytes_ are valid UTF-8 as a whole
  bool partial_ = false;         // bytes_ may end inside a record: stop there
  const char* data() const { return bytes_ != nullptr ? bytes_ : buf_.data(); }
  size_t begin_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
  bool finished_ = false;
  bool bom_checked_ = false;
  uint64_t line_ = 1;
  uint64_t record_line_ = 0;
  uint64_t bytes_read_ = 0;
  std::string arena_;
  // The current record's spans: spans_[0, nspans_) (the vector only grows,
  // so adding one costs no call).
  void AddSpan(Span s) {
    if (nspans_ == spans_.size()) spans_.resize(2 * nspans_ + 8);
    spans_[nspans_++] = s;
  }
  std::vector<Span> spans_;
  size_t nspans_ = 0;
  std::vector<std::string_view> fields_;
  Sha256 sha_;
  std::string digest_;
};

// The header row of a CSV file: its column names without surrounding blanks,
// and a lookup whose error names the file and every column.
class CsvHeader {
 public:
  // Reads the first record of `csv` as the header; an empty file is an error.
  static Result<CsvHeader> Read(CsvReader& csv);

  const std::vector<std::string>& names() const { return names_; }
  size_t size() const { return names_.size(); }
  // Index of the first column called `name`, or "<path>: line 1: no <role>
  // column named "<name>" (columns: a, b, ...)".
  Result<size_t> Find(const std::string& name, const char* role) const;

 private:
  std::string path_;
  std::vector<std::string> names_;
  std::map<std::string, size_t> index_;
};

// The words that mean "missing" in a numeric cell, as R's write.csv and
// pandas' to_csv write it; an empty cell always does. Default: NA, N/A, NaN,
// nan, NAN, null, NULL, None.
class NaValues {
 public:
  static NaValues Default();
  // A comma-separated list replacing the default ("" for none: only empty
  // cells are missing); each word trimmed, none may hold a quote.
  static Result<NaValues> Parse(std::string_view list);
  // Whether the trimmed cell `s` is missing.
  bool Contains(std::string_view s) const {
    if (s.empty()) return false;
    const auto c = static_cast<unsigned char>(s[0]);
    return ((first_[c / 64] >> (c % 64)) & 1) != 0 && ContainsWord(s);
  }
  const std::vector<std::string>& words() const { return words_; }

 private:
  bool ContainsWord(std::string_view s) const;
  void Index();  // first_ from words_
  std::vector<std::string> words_;
  uint64_t first_[4] = {};  // the words' first bytes: most cells start otherwise
};

// Cell parsers shared by ingest, asof and derive. Errors carry no location;
// callers wrap them with CsvReader::ErrorAt. Surrounding spaces are ignored.
// A float cell is a decimal or scientific number, or "nan" for a missing
// value; infinities and values outside float32's range are refused.
// `integral` (optional) says whether the text was a plain integer. Without
// `na`, an empty cell is refused; with it, an empty cell or one of its words
// is NaN with `*missing` set (a missing cell says nothing of `integral`).
Result<float> ParseFloatCell(std::string_view text, bool* integral = nullptr,
                             const NaValues* na = nullptr, bool* missing = nullptr);
Result<int64_t> ParseIntCell(std::string_view text);
// A boolean cell: true/false, TRUE/FALSE (R), True/False (pandas), or 1/0.
Result<bool> ParseBoolCell(std::string_view text);
// A numeric label: a float cell, or a boolean word as 1/0 (tried only when
// the cell is not a number). The error is the float parser's.
Result<float> ParseNumericLabel(std::string_view text);

// What a cell could be, for inferring a column's kind from all its cells
// (ingest): missing (empty or an `na` word), an integer int64 holds, another
// number (including nan and inf, which the float parser then judges), a
// true/false word, or text. Surrounding spaces are ignored.
enum class CellShape : uint8_t { kMissing, kInt, kFloat, kBool, kText };
CellShape ClassifyCell(std::string_view text, const NaValues& na);

// Quotes a CSV field when it holds a comma, quote or line break.
std::string CsvQuote(const std::string& field);

}  // namespace hpcml::featurecache
