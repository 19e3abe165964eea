// SHA-256, the project's one implementation: nettle (Debian's libnettle, with
// the SHA extensions where the CPU has them). nettle rather than OpenSSL: the
// guard plugin links it into every srun and slurmstepd, where libcrypto took
// about 0.8 ms longer to load; on bulk data the two run at the same speed
// here (about 1 GB/s per core).
// Not thread-safe per object; one object per stream.
#pragma once

#include <nettle/sha2.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "hpcml/common/status.hpp"

namespace hpcml {

class Sha256 {
 public:
  Sha256() { sha256_init(&ctx_); }

  void Update(const void* data, std::size_t size);
  void Update(std::string_view text) { Update(text.data(), text.size()); }
  // Lower-case hex of the digest; the object is reset for a new stream.
  std::string FinishHex();

  // Lower-case hex digest of `data`.
  static std::string Hex(std::string_view data);

 private:
  sha256_ctx ctx_;
};

// Digest of a whole file, streamed; the error names the path.
Result<std::string> Sha256File(const std::string& path);

}  // namespace hpcml
