#include "temp_file.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>
#include <vector>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::featurecache {
namespace {

// Copies `size` bytes of `in` to `out`; IoError when `in` changed size meanwhile.
Status CopyFileContents(int in, int out, uint64_t size, const std::string& src) {
  if (::ioctl(out, FICLONE, in) == 0)
    return Status::Ok();  // reflink: shares extents, no bytes copied
  uint64_t done = 0;
  bool kernel_copy = true;
  std::vector<char> buf;
  while (done < size) {
    if (kernel_copy) {
      loff_t ioff = static_cast<loff_t>(done), ooff = static_cast<loff_t>(done);
      ssize_t n = ::copy_file_range(in, &ioff, out, &ooff, size - done, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP) {
          kernel_copy = false;
          continue;
        }
        return ErrnoError("copy " + src, errno);
      }
      if (n == 0) break;
      done += static_cast<uint64_t>(n);
      continue;
    }
    if (buf.empty()) buf.resize(4 << 20);
    size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - done));
    ssize_t n = ::pread(in, buf.data(), want, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read " + src, errno);
    }
    if (n == 0) break;
    size_t off = 0;
    while (off < static_cast<size_t>(n)) {
      ssize_t w = ::pwrite(out, buf.data() + off, static_cast<size_t>(n) - off,
                           static_cast<off_t>(done + off));
      if (w < 0) {
        if (errno == EINTR) continue;
        return ErrnoError("write copy of " + src, errno);
      }
      off += static_cast<size_t>(w);
    }
    done += static_cast<uint64_t>(n);
  }
  if (done != size) return IoError("copy {}: the file changed size while being copied", src);
  return Status::Ok();
}

}  // namespace

TempFile::TempFile(TempFile&& o) noexcept
    : temp_(std::exchange(o.temp_, {})), final_(std::exchange(o.final_, {})) {}

TempFile& TempFile::operator=(TempFile&& o) noexcept {
  if (this != &o) {
    Discard();
    temp_ = std::exchange(o.temp_, {});
    final_ = std::exchange(o.final_, {});
  }
  return *this;
}

Status TempFile::CopyFrom(const std::string& src, const struct stat& st) const {
  HPCML_ASSIGN_OR_RETURN(UniqueFd in, OpenFd(src, O_RDONLY));
  HPCML_ASSIGN_OR_RETURN(UniqueFd out,
                         OpenFd(temp_, O_WRONLY | O_CREAT | O_EXCL, st.st_mode & 07777));
  if (::fchown(out.get(), st.st_uid, st.st_gid) != 0) { /* not permitted: the writer owns it */
  }
  ::fchmod(out.get(), st.st_mode & 07777);
  HPCML_RETURN_IF_ERROR(
      CopyFileContents(in.get(), out.get(), static_cast<uint64_t>(st.st_size), src));
  return out.Close();
}

Status TempFile::Sync() const {
  return SyncFile(temp_);
}

Status TempFile::Rename() {
  if (::rename(temp_.c_str(), final_.c_str()) != 0) return ErrnoError("rename to " + final_, errno);
  temp_.clear();
  return Status::Ok();
}

void TempFile::Discard() {
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

}  // namespace hpcml::featurecache
