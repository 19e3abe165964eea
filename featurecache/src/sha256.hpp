// SHA-256 through OpenSSL's EVP interface (uses the SHA extensions where the
// CPU has them). Not thread-safe per object; one object per stream.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "hpcml/common/status.hpp"

namespace hpcml::featurecache {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  void Update(std::string_view text) { Update(text.data(), text.size()); }
  // Lower-case hex of the digest; the object is reset for a new stream.
  std::string FinishHex();

  static std::string Hex(std::string_view data);

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// Digest of a whole file, streamed; the error names the path.
Result<std::string> Sha256File(const std::string& path);

}  // namespace hpcml::featurecache
