#include "hpcml/common/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <random>

#include "hpcml/common/unique_fd.hpp"

namespace hpcml {
namespace {

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

Status SyncDirectory(const std::string& dir) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(dir, O_RDONLY | O_DIRECTORY));
  if (::fsync(fd.get()) != 0) return ErrnoError("fsync " + dir, errno);
  return Status::Ok();
}

Status SyncFile(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY));
  if (::fsync(fd.get()) != 0) return ErrnoError("fsync " + path, errno);
  return fd.Close();
}

Status CommitFile(const std::string& tmp, const std::string& path) {
  HPCML_RETURN_IF_ERROR(SyncFile(tmp));
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return IoError("{}: cannot rename to {}: {}", tmp, path, ec.message());
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return SyncDirectory(dir.empty() ? "." : dir.string());
}

Status WriteFileAtomic(const std::string& path, std::string_view data, unsigned mode) {
  namespace fs = std::filesystem;
  fs::path target(path);
  std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  // A random suffix: two writers of the same target never share a temp file.
  std::random_device rd;
  std::string tmp = fmt::format("{}.tmp.{:08x}", path, rd());
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(tmp, O_WRONLY | O_CREAT | O_EXCL, mode));
  Status st = WriteAll(fd.get(), data, tmp);
  if (st.ok() && ::fsync(fd.get()) != 0) st = ErrnoError("fsync " + tmp, errno);
  if (st.ok()) st = fd.Close();
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    st = ErrnoError("rename to " + path, errno);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return SyncDirectory(dir);
}

Result<std::string> ReadFile(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(path, errno);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace hpcml
