#include "hpcml/common/sha256.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "hpcml/common/unique_fd.hpp"

namespace hpcml {

void Sha256::Update(const void* data, std::size_t size) {
  if (size > 0) sha256_update(&ctx_, size, static_cast<const std::uint8_t*>(data));
}

std::string Sha256::FinishHex() {
  std::uint8_t md[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx_, sizeof md, md);  // also re-initialises the context
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * sizeof md, '\0');
  for (std::size_t i = 0; i < sizeof md; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 0xf];
  }
  return out;
}

std::string Sha256::Hex(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.FinishHex();
}

Result<std::string> Sha256File(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY));
  Sha256 h;
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(path, errno);
    }
    if (n == 0) break;
    h.Update(buf.data(), static_cast<std::size_t>(n));
  }
  return h.FinishHex();
}

}  // namespace hpcml
