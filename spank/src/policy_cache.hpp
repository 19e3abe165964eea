// The compiled policy cache behind LoadPolicyCached (policy.hpp): the parsed
// Policy in a flat binary file, so that a job step's slurmstepd, a fresh
// process for every step, need not parse the TOML again.
//
// A cache is named by the SHA-256 of the policy text it was compiled from
// ("<dir>/policy-<sha256>.cache") and records that digest: it serves only
// that exact text. Its header holds a format version, the payload's size and
// a checksum of the payload; any mismatch, a short file or a damaged one is
// a miss and the caller parses (and writes the cache again). The file is
// trusted only as a regular file (not a symlink) owned by root (or the
// tests' `required_owner`) and writable by nobody else, opened in a
// directory with the same properties, all checked on the opened
// descriptors. Only what the parse gives is stored; the policy's source is
// the caller's (one text may be installed under two paths).
//
// Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hpcml/common/status.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "hpcml/guard/policy.hpp"

namespace hpcml::guard {

// Raised whenever the layout changes: a cache of another version is a miss.
inline constexpr std::uint32_t kPolicyCacheVersion = 1;

// "<dir>/policy-<sha256>.cache"
std::string PolicyCachePath(const std::string& dir, std::string_view sha256);

// The cache file's bytes for `policy` (header and payload).
std::string EncodePolicyCache(const Policy& policy);

// The policy in `bytes`, which must be a cache of this version recording the
// digest `sha256`, whole and intact; its source() is `source`. Any mismatch
// is an error saying what did not match.
Result<Policy> DecodePolicyCache(std::string_view bytes, std::string_view sha256,
                                 std::string_view source);

// The cache of the text of digest `sha256` in `dir`, with the ownership and
// mode checks above; NotFound when there is none.
Result<Policy> ReadPolicyCache(const std::string& dir, std::string_view sha256,
                               std::string_view source, unsigned required_owner);

// Writes the cache of `policy` atomically (a temporary file, then a rename)
// into `dir`, created 0755 if absent; refuses a directory that is not safe
// as above. The file's mode is `mode` (the policy file's) without execute
// or write bits for anyone but the owner: whoever may read the policy may
// read its cache (srun, as the user), nobody else. Also removes caches of
// other policies not written for a day (a cache in use is written again at
// its next miss).
Status WritePolicyCache(const std::string& dir, const Policy& policy, unsigned required_owner,
                        unsigned mode);

// LoadPolicyFile's steps (policy.cpp). The policy file opened and checked:
Result<UniqueFd> OpenPolicyFile(const std::string& path, unsigned required_owner);
// then read whole from its start (at most 64 MiB), or only hashed, chunk by
// chunk (SHA-256 hex, as Policy::sha256()): no copy of the text is kept.
Result<std::string> ReadPolicyText(int fd, const std::string& path);
Result<std::string> HashPolicyText(int fd, const std::string& path);

}  // namespace hpcml::guard
