// Streaming reader of `sacct -P` output and the parsed allocation row.
//
// `sacct -P -D` prints one row per job attempt (a requeued job has several
// rows with the same JobID, the earlier ones in state REQUEUED) and, unless
// -X is given, one row per step ("123.batch", "123.0"), which carries no cost
// of its own. Times are local wall-clock times without a zone, as sacct
// prints them; they are converted with the process's time zone (TZ), the
// same zone sacct used when both run on one machine.
//
// SacctReader holds one line at a time: memory does not grow with the input.
// It is not thread-safe; one reader per stream.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"
#include "tres.hpp"

namespace hpcml::accounting {

// The fields hpcml-cost asks sacct for (-o), and the order assumed for input
// that has no header line (sacct -n).
inline constexpr std::string_view kSacctFields =
    "JobID,User,Account,Partition,State,Start,End,ElapsedRaw,AllocTRES,Comment";

// Time values of a row: seconds since the epoch; these mark the absent ones.
inline constexpr int64_t kNoTime = std::numeric_limits<int64_t>::min();

// Parses "YYYY-MM-DDTHH:MM:SS" (also "YYYY-MM-DD", "YYYY-MM-DDTHH:MM") as
// local time. "Unknown", "None" and "" give kNoTime. Other text is an error.
Result<int64_t> ParseSlurmTime(std::string_view text);

// Formats seconds since the epoch as local "YYYY-MM-DDTHH:MM:SS".
std::string FormatSlurmTime(int64_t t);

// One allocation row (one attempt of one job).
struct Attempt {
  std::string job_id;
  std::string user;
  std::string account;
  std::string partition;
  std::string state;        // first word of State: "CANCELLED by 0" -> "CANCELLED"
  std::string comment;      // job Comment (may hold an hpcml usage summary)
  int64_t start = kNoTime;  // kNoTime: never started
  int64_t end = kNoTime;    // kNoTime: still running
  int64_t elapsed = -1;     // ElapsedRaw seconds; -1 if not in the input
  Tres tres;

  // The attempt ended by requeue or preemption: its work since the last
  // checkpoint is lost (REQUEUED, PREEMPTED, NODE_FAIL).
  bool interrupted() const;
};

// Reads lines of `sacct -P` output from a file descriptor and splits them at
// '|'. The first line is the header when one of its fields is "JobID"; the
// columns are then found by name (any order, extra columns ignored; JobID,
// State, Start, End and AllocTRES are required). Without a header (sacct -n)
// the columns are kSacctFields in order.
class SacctReader {
 public:
  // `fd` is borrowed and must stay open while the reader is used; `source`
  // names the input in messages ("sacct", a path, "stdin").
  SacctReader(int fd, std::string source);

  // Reads the next non-empty data line. Returns false at the end of input.
  // The line and fields stay valid until the next call.
  Result<bool> Next();

  // 1-based number of the line last returned.
  int64_t line_number() const { return line_number_; }
  std::string_view line() const { return line_; }
  const std::string& source() const { return source_; }

  // The current line is a step row ("123.batch", "123.0", "123.extern").
  bool IsStep() const;

  // Parses the current line into an attempt. Errors name the field and
  // value, not the line (the caller adds source and line number).
  Status Parse(Attempt* out) const;

 private:
  enum Field {
    kJobId,
    kUser,
    kAccount,
    kPartition,
    kState,
    kStart,
    kEnd,
    kElapsed,
    kTres,
    kComment,
    kFieldCount
  };
  Status UseHeader();
  Result<bool> ReadLine();
  void Split();
  std::string_view field(Field f) const;

  int fd_;
  std::string source_;
  std::string buffer_;
  size_t pos_ = 0;
  bool eof_ = false;
  bool started_ = false;
  int64_t line_number_ = 0;
  std::string_view line_;
  std::vector<std::string_view> fields_;
  int index_[kFieldCount];  // column of each field; -1 if absent
  size_t columns_ = 0;      // fields per line
};

}  // namespace hpcml::accounting
