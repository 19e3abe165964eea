// The audit log: one JSON object per line, each carrying the SHA-256 of the
// previous line ("prev") and a sequence number ("seq"), so an edited,
// removed or reordered line breaks the chain. Appends take an exclusive
// flock(2) on the file, so lines of concurrent steps never interleave and
// each sees its predecessor.
//
// Beside the log, under the same lock:
// - "<log>.head" holds the last line's seq and hash. A log that is empty
//   (rotated away, or deleted) continues the chain from it, and verify
//   compares the log's end with it: dropped or edited last lines show.
// - "<log>.repeat" counts denials identical to the last line (same user,
//   node, role, zone, datasets and reason; job and step aside) within
//   kAuditRepeatWindow of it: they are written as one "repeat" line with
//   their count when anything else is logged or the window has passed, so a
//   loop of denied steps cannot fill the disk.
// - "<log>.flood" counts varied denials past kAuditFloodLines per user, node
//   and reason code within the window: written as one "flood" line (user,
//   reason_code, count, since, last job) once the window has passed.
// Both are the node's own files: root on the node can rewrite them with the
// log. Two defences are off the node:
// - The collector (audit_collector=): each line leaves the node as it is
//   written (ForwardAudit, to rsyslog's TCP input on another host), and
//   verify compares the node's chain with the collector's copy line by line
//   (CompareWithCollector). What can go unseen: a line the node's root
//   rewrites before the guard sends it (the step's line is sent before its
//   tasks start), or lines written while the guard itself is replaced.
// - The witness: a collector records each node's head now and then
//   (AppendWitness, from a copy of "<log>.head" it fetched), and verify
//   checks that every recorded head is still in the chain. What was logged
//   after the last recorded head can still go unseen. Logged strings are bounded (kMaxAuditField
//   bytes, kMaxAuditDatasets
// paths; less for a denial: kMaxDeniedField, kMaxDeniedDatasetsBytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::guard {

inline constexpr std::size_t kMaxAuditField = 512;
inline constexpr std::size_t kMaxAuditDatasets = 32;
// A denial's strings are the user's choice: its reason and each dataset at
// most kMaxDeniedField bytes, its datasets together at most
// kMaxDeniedDatasetsBytes (then a count and a digest): a line stays near
// 1 KB whatever the user sends.
inline constexpr std::size_t kMaxDeniedField = 192;
inline constexpr std::size_t kMaxDeniedDatasetsBytes = 256;
inline constexpr int kAuditRepeatWindowSeconds = 60;
// At most this many full denial lines per user, node and reason code within
// kAuditRepeatWindowSeconds; the rest are counted in "<log>.flood".
inline constexpr std::uint64_t kAuditFloodLines = 10;

struct AuditRecord {
  std::string context;  // "node" (slurmstepd) or "submit" (srun/sbatch/salloc)
  std::string enforce;  // the plugin's enforce= mode: "mount" or "advisory"
  // Which guard and which policy decided: the plugin's version, and the
  // SHA-256 of the policy text it parsed ("" when the policy could not be
  // loaded; the reason then says why). Lines written before these fields
  // existed lack them; verify does not need them.
  std::string guard_version;
  std::string policy_sha256;
  std::string cluster;
  std::string node;
  std::string job_id;   // "" on the submit side (no job yet)
  std::string step_id;  // "0", "batch", "extern", ...
  std::uint32_t uid = 0;
  std::string user;
  std::string role;
  std::string zone;
  std::vector<std::string> datasets;
  bool allow = false;
  std::string reason;
  std::string reason_code;  // Decision::code: a stable class for metrics ("" for an allow)
};

// The line (without newline) for `record` after a line whose hash is
// `prev_hash` and sequence number `seq`. Time is now, UTC.
std::string FormatAuditLine(const AuditRecord& record, std::uint64_t seq,
                            const std::string& prev_hash);

// Appends one line to `path` (created 0640 if absent; its directory must
// exist) under an exclusive flock, or counts a repeated denial (see the top
// of the file). With `sync`, fdatasync before returning: the line survives a
// power loss, at the cost of a disk flush per line (milliseconds on the
// launch path). A write that fails (a full disk) is cut back off, so the
// earlier lines stay intact. Returns the line written, or a note for a
// counted repeat.
Result<std::string> AppendAudit(const std::string& path, const AuditRecord& record,
                                bool sync = false);

struct AuditProblem {
  std::string file;
  std::size_t line = 0;  // 1-based in `file`; 0 for the whole file
  std::string reason;
};

struct VerifyReport {
  bool intact = false;
  std::size_t lines = 0;               // lines read, all files
  std::uint64_t first_seq = 0;         // > 0 when older files were rotated away
  std::string head;                    // hash of the last line
  std::vector<AuditProblem> problems;  // every bad line, in order
  std::size_t witnessed = 0;           // witness entries given
  std::size_t witnessed_checked = 0;   // of those, found in the chain and compared
};

// A head a collector recorded: node, seq and hash of that line, when.
struct WitnessEntry {
  std::string node;
  std::uint64_t seq = 0;
  std::string hash;
  std::string time;
};

// Appends the node's head (a copy of its "<log>.head") to the witness file
// `witness` ("<node> <seq> <sha256> <time>" lines, created 0640) when it
// differs from the node's last entry there. Returns whether it appended.
Result<bool> AppendWitness(const std::string& witness, const std::string& node,
                           const std::string& head_copy);

// The witness file's entries for `node`, in order.
Result<std::vector<WitnessEntry>> ReadWitness(const std::string& witness, const std::string& node);

// Checks a chain held in `paths`, oldest first (a log and its rotated
// files): every line valid JSON with "seq" and "prev", each line's seq one
// more than the line before and its prev the hash of that line, across
// files. The chain starts at seq 0 (prev all zeros), or later when older
// files are gone. The last file's end is checked against its head file when
// there is one. A bad line is reported and checking goes on from it. Fails
// only when a file cannot be read.
// With `witnessed`, each recorded head must be a line of the chain with the
// same hash: one that is different, or missing (the log is empty, ends
// before it, or starts after it: cut, restarted, or its rotated file not
// given) is a problem. A "gap" line (the writer found the log gone: deleted,
// emptied or moved away, not rotated) is a problem for ever.
Result<VerifyReport> VerifyAuditFiles(const std::vector<std::string>& paths,
                                      const std::vector<WitnessEntry>& witnessed = {});
Result<VerifyReport> VerifyAuditLog(const std::string& path);

// Sends the lines of the log at `path` that the collector at host:port has
// not yet received, as RFC 5424 messages (HOSTNAME `node`, MSG the line)
// octet-framed over TCP, and waits until the collector's host has
// acknowledged every byte (TCP's ACK: the lines are off the node; its
// rsyslogd reads them in its own time). "<log>.sent" records how far
// (file and offset, under its own flock): lines a failed send left behind
// go with the next, a rotated file's rest ("<log>.1") first. Returns the
// number of lines sent; fails after `timeout_ms` in all. Within
// `retry_after_ms` of a failed send it fails at once, without trying: a
// collector that drops packets would otherwise hold every step on the
// node for the timeout, one after another.
inline constexpr int kAuditRetryAfterMs = 3000;
Result<std::size_t> ForwardAudit(const std::string& path, const std::string& host,
                                 std::uint16_t port, const std::string& node, int timeout_ms = 3000,
                                 int retry_after_ms = kAuditRetryAfterMs);

struct CollectorCheck {
  std::size_t lines = 0;    // lines in the collector's copy
  std::size_t matched = 0;  // sequence numbers whose lines are identical on both sides
  std::vector<AuditProblem> problems;
};

// Compares a node's chain (its log and rotated files, `paths`) with the
// collector's copy of that node's lines (any order, a line sent twice
// counted once). A problem for each line at the collector that the node
// lacks (removed) or holds changed, each line of the node the collector
// never received (inserted, or sent while it was unreachable), and two
// different lines with one seq at the collector (a rewritten chain sent).
Result<CollectorCheck> CompareWithCollector(const std::vector<std::string>& paths,
                                            const std::string& collector_copy);
// One chain in memory, which must start at seq 0.
VerifyReport VerifyAuditText(std::string_view text);

}  // namespace hpcml::guard
