// The compiled policy cache behind LoadPolicyCached (policy.hpp): the parsed
// Policy in a binary file, so that a job step's slurmstepd, a fresh process
// for every step, need not parse the TOML again, nor read it.
//
// A cache is named by the policy file's device and inode
// ("<dir>/policy-<dev>-<ino>.cache") and records the file's identity when it
// was compiled (size, mtime and ctime to the nanosecond), the SHA-256 of the
// text and when the text was read. It serves a load whose policy file has
// the same identity: any write to the file changes its ctime, which nobody
// can set back. A write within one timestamp tick of the last could keep
// the ctime (the kernel's clock for file times is coarse), so, as git does
// for its index, a cache whose text was read less than kRacySeconds after
// the file's ctime is trusted only once the text, hashed again, has the
// recorded digest (and a root load after that window records the new read
// time, so later loads skip the hash).
//
// The dataset entries (DatasetTable, the bulk of a large policy) are used
// where they lie, mapped from the file: a load touches only the pages its
// lookups need. The header and the rest of the policy carry a checksum; the
// table is checked for bounds, not checksummed (only root writes the file,
// atomically, in a root-owned directory): damage can give wrong answers but
// never a read outside the file. Any mismatch, a short file or a damaged
// one is a miss and the caller parses (and writes the cache again). The
// file is trusted only as a regular file (not a symlink) owned by root (or
// the tests' `required_owner`) and writable by nobody else, opened in a
// directory with the same properties, all checked on the opened
// descriptors.
//
// Thread-safe: no shared state.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include "hpcml/common/status.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "hpcml/guard/policy.hpp"

namespace hpcml::guard {

// Raised whenever the layout changes: a cache of another version is a miss.
inline constexpr std::uint32_t kPolicyCacheVersion = 2;
// A text read this soon after its file's ctime is hashed again at use.
inline constexpr int kRacySeconds = 2;

// What the cache knows of the policy file it was compiled from.
struct PolicyFileIdentity {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_sec = 0, mtime_nsec = 0, ctime_sec = 0, ctime_nsec = 0;

  static PolicyFileIdentity Of(const struct stat& st);
  friend bool operator==(const PolicyFileIdentity&, const PolicyFileIdentity&) = default;
};

// A cache's contents: the policy, and what it was compiled from.
struct CompiledPolicy {
  Policy policy;
  PolicyFileIdentity identity;
  struct timespec read_at {};  // CLOCK_REALTIME, before the file was opened
  // Whether the text was read at least kRacySeconds after the file's ctime.
  bool Settled() const;
};

// "<dir>/policy-<dev>-<ino>.cache" (hexadecimal numbers)
std::string PolicyCachePath(const std::string& dir, const PolicyFileIdentity& file);

// The cache file's bytes for `policy`, compiled from `file` read at `read_at`.
std::string EncodePolicyCache(const Policy& policy, const PolicyFileIdentity& file,
                              struct timespec read_at);

// The compiled policy in `bytes`, which must be a cache of this version,
// whole, with its checksum and bounds right; its source() is `source`. The
// policy's dataset table points into `bytes`, which `keep` keeps alive. Any
// mismatch is an error saying what did not match.
Result<CompiledPolicy> DecodePolicyCache(std::string_view bytes, std::shared_ptr<const void> keep,
                                         std::string_view source);

// The cache of the policy file `file` in `dir` (mapped, not read), with the
// ownership and mode checks above; NotFound when there is none, an error
// when it was compiled from another identity.
Result<CompiledPolicy> ReadPolicyCache(const std::string& dir, const PolicyFileIdentity& file,
                                       std::string_view source, unsigned required_owner);

// Writes the cache of `policy`, compiled from `file` read at `read_at`,
// atomically (a temporary file, then a rename) into `dir`, created 0755 if
// absent; refuses a directory that is not safe as above. The file's mode is
// `mode` (the policy file's) without execute or write bits for anyone but
// the owner: whoever may read the policy may read its cache (srun, as the
// user), nobody else. Also removes caches of other policy files not written
// for a day (a cache in use is written again at its next miss).
Status WritePolicyCache(const std::string& dir, const Policy& policy,
                        const PolicyFileIdentity& file, struct timespec read_at,
                        unsigned required_owner, unsigned mode);

// LoadPolicyFile's steps (policy.cpp). The policy file opened and checked:
Result<UniqueFd> OpenPolicyFile(const std::string& path, unsigned required_owner);
// then read whole from its start (at most 64 MiB), or only hashed, chunk by
// chunk (SHA-256 hex, as Policy::sha256()): no copy of the text is kept.
Result<std::string> ReadPolicyText(int fd, const std::string& path);
Result<std::string> HashPolicyText(int fd, const std::string& path);

}  // namespace hpcml::guard
