// The audit log: one JSON object per line, each carrying the SHA-256 of the
// previous line ("prev") and a sequence number ("seq"), so an edited,
// removed or reordered line breaks the chain. Appends take an exclusive
// flock(2) on the file, so lines of concurrent steps never interleave and
// each sees its predecessor. The last line is only protected by copies kept
// elsewhere (syslog, or the head hash printed by `hpcml-audit verify`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::guard {

struct AuditRecord {
  std::string context;  // "node" (slurmstepd) or "submit" (srun/sbatch/salloc)
  std::string enforce;  // the plugin's enforce= mode: "mount" or "advisory"
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
};

// Lowercase hex SHA-256 (OpenSSL).
std::string Sha256Hex(std::string_view data);

// The line (without newline) for `record` after a line whose hash is
// `prev_hash` and sequence number `seq`. Time is now, UTC.
std::string FormatAuditLine(const AuditRecord& record, std::uint64_t seq,
                            const std::string& prev_hash);

// Appends one line to `path` (created 0640 if absent; its directory must
// exist) under an exclusive flock. With `sync`, fdatasync before returning:
// the line survives a power loss, at the cost of a disk flush per line
// (milliseconds on the launch path). Returns the line written.
Result<std::string> AppendAudit(const std::string& path, const AuditRecord& record,
                                bool sync = false);

struct VerifyReport {
  bool intact = false;
  std::size_t lines = 0;     // lines read
  std::size_t bad_line = 0;  // 1-based; 0 when intact
  std::string reason;        // why bad_line is bad
  std::string head;          // hash of the last line when intact
};

// Checks the whole chain: every line valid JSON with "seq" and "prev", seq
// increasing by one from 0, prev equal to the hash of the line before (all
// zeros for the first). Fails only when the file cannot be read.
Result<VerifyReport> VerifyAuditLog(const std::string& path);
VerifyReport VerifyAuditText(std::string_view text);

}  // namespace hpcml::guard
