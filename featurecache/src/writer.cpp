#include "hpcml/featurecache/writer.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <blosc.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/h5.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/job_env.hpp"
#include "hpcml/common/sha256.hpp"
#include "hpcml/common/time.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "hpcml/featurecache/access.hpp"
#include "hpcml/featurecache/entity_keys.hpp"
#include "hpcml/featurecache/stats.hpp"
#include "hpcml/featurecache/timeutil.hpp"

namespace hpcml::featurecache {
namespace {

static_assert(std::is_same_v<hid_t, int64_t>, "format.hpp passes hid_t as int64_t");

// Test hook: HPCML_FCACHE_TEST_CRASH=<point> makes the writer SIGKILL itself
// at that point, so tests can prove what a killed writer leaves behind.
void CrashPoint(const char* point) {
  const char* want = std::getenv("HPCML_FCACHE_TEST_CRASH");
  if (want != nullptr && std::strcmp(want, point) == 0) ::raise(SIGKILL);
}

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

Result<h5::PropList> WriteFapl() {
  HPCML_ASSIGN_OR_RETURN(h5::PropList fapl, h5::Own<h5::PropList>(H5Pcreate(H5P_FILE_ACCESS),
                                                                  StatusCode::kInternal, "fapl"));
  // Objects readable by HDF5 1.8 and later (h5py, h5dump); dense attribute
  // storage, so long feature-name lists fit.
  if (H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V110) < 0 ||
      // Page-aligned chunks: the loader's reads of them are aligned too.
      H5Pset_alignment(fapl.get(), 64 * 1024, 4096) < 0) {
    return h5::Error(StatusCode::kInternal, "file access properties");
  }
  return fapl;
}

std::string RandomSuffix() {
  std::random_device rd;
  return fmt::format("{}-{:08x}", ::getpid(), rd());
}

}  // namespace

void InheritCodec(const VersionInfo& parent, const std::string& codec, int level,
                  NewVersion* spec) {
  if (codec.empty() && level < 0) {
    spec->codec = parent.codec;
    spec->compression = parent.compression;
  } else {
    spec->codec = codec;
    spec->compression = std::max(level, 0);
  }
}

Status InheritEntities(const VersionReader& parent, NewVersion* spec) {
  spec->entity_type = parent.info().entity_type;
  HPCML_ASSIGN_OR_RETURN(spec->entity_keys, parent.EntityKeys());
  return Status::Ok();
}

std::string ToolString() {
  return fmt::format("hpcml-fcache {}", Version());
}

// A version is written to its own file, <set>.d/vN.h5 (through a temporary
// name there), and published by a new copy of the small set file whose
// /versions/vN is an external link to it: the cost of a version is its own
// size, and the set file is still replaced by one rename.
struct FeatureSetWriter::Impl {
  std::string path, canonical, dir, base, tmp_path;
  std::string vdir;                        // <set>.d: the version files
  std::string version_tmp, version_final;  // the new version's file
  std::optional<struct stat> published;    // the set file, when it existed
  UniqueFd lock_fd;
  bool creating = false;
  bool committed = false;
  std::string zone, file_classification;
  std::vector<std::string> versions;
  AccessContext ctx;

  h5::File file;   // the temporary copy of the set file
  h5::File vfile;  // the new version's file
  h5::Group version_group;
  h5::Dataset dx, dy, de, dt;
  bool started = false;
  NewVersion spec;
  std::string version_name;
  int64_t version_number = 0;
  uint64_t chunk_rows = 0;
  CodecChoice codec;
  uint64_t nfeat = 0;
  uint64_t block_rows = 0;
  uint64_t rows = 0;
  uint64_t flushes = 0;
  std::vector<float> bx, by;
  std::vector<int64_t> be, bt;
  int64_t min_entity = INT64_MAX, max_entity = INT64_MIN;
  uint64_t buffered = 0;
  Sha256 hx, hy, he, ht;
  std::optional<StatsAccumulator> stats;  // unless spec.statistics is false

  ~Impl() { Abort(); }

  void CloseHandles() {
    dx.reset();
    dy.reset();
    de.reset();
    dt.reset();
    version_group.reset();
    vfile.reset();
    file.reset();
  }

  VersionInfo FinishInfo();
  Result<std::string> WriteEntityKeys();
  Status WriteDigestsAndAttrs(const VersionInfo& info);
  Status Publish();

  void Abort() {
    if (committed) return;
    CloseHandles();
    for (std::string* p : {&tmp_path, &version_tmp}) {
      if (!p->empty()) ::unlink(p->c_str());
      p->clear();
    }
    lock_fd.reset();
  }

  Status Lock(double timeout_s) {
    std::string lock_path = (std::filesystem::path(dir) / ("." + base + ".lock")).string();
    HPCML_ASSIGN_OR_RETURN(lock_fd, OpenFd(lock_path, O_RDWR | O_CREAT, 0666));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      if (::flock(lock_fd.get(), LOCK_EX | LOCK_NB) == 0) break;
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK) return ErrnoError("flock " + lock_path, errno);
      if (std::chrono::steady_clock::now() >= deadline) {
        return Unavailable("{}: another writer holds {} (waited {:.0f} s)", path, lock_path,
                           timeout_s);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CrashPoint("after-lock");
    return Status::Ok();
  }

  // Temporary files left by killed writers (set copies beside the set,
  // version files in <set>.d); only lock holders create them, so any that
  // exist now are stale.
  void RemoveStaleTemps() {
    auto remove = [](const std::string& in, const std::string& prefix, bool any_version) {
      UniqueDir d(::opendir(in.c_str()));
      if (!d) return;
      while (struct dirent* ent = ::readdir(d.get())) {
        const char* n = ent->d_name;
        bool stale = any_version ? (n[0] == '.' && std::strstr(n, ".h5.tmp-") != nullptr)
                                 : std::strncmp(n, prefix.c_str(), prefix.size()) == 0;
        if (stale) ::unlinkat(::dirfd(d.get()), n, 0);
      }
    };
    remove(dir, "." + base + ".tmp-", false);
    remove(vdir, "", true);
  }

  // <set>.d, created when missing; a directory of its own, never a link.
  Status MakeVersionDir() {
    struct stat st;
    if (::lstat(vdir.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return FailedPrecondition("{}: exists but is not a directory (it holds the versions)",
                                  vdir);
      return Status::Ok();
    }
    if (errno != ENOENT) return ErrnoError(vdir, errno);
    if (::mkdir(vdir.c_str(), 0777) != 0) return ErrnoError("mkdir " + vdir, errno);
    if (published) {
      // Same owner and mode as the set (root adding a version to a user's set).
      if (::chown(vdir.c_str(), published->st_uid, published->st_gid) != 0) { /* not permitted */
      }
      ::chmod(vdir.c_str(), (published->st_mode & 0777) | ((published->st_mode & 0444) >> 2));
    }
    return SyncDirectory(dir);
  }

  Status CopyPublished(const struct stat& st) {
    HPCML_ASSIGN_OR_RETURN(UniqueFd in, OpenFd(path, O_RDONLY));
    HPCML_ASSIGN_OR_RETURN(UniqueFd out,
                           OpenFd(tmp_path, O_WRONLY | O_CREAT | O_EXCL, st.st_mode & 07777));
    // Keep the owner where we may (root adding a version to a user's file).
    if (::fchown(out.get(), st.st_uid, st.st_gid) !=
        0) { /* not permitted: the writer owns the copy */
    }
    ::fchmod(out.get(), st.st_mode & 07777);
    HPCML_RETURN_IF_ERROR(
        CopyFileContents(in.get(), out.get(), static_cast<uint64_t>(st.st_size), path));
    HPCML_RETURN_IF_ERROR(out.Close());
    CrashPoint("after-copy");
    return Status::Ok();
  }

  Status OpenCopy(const WriterOptions& options) {
    HPCML_ASSIGN_OR_RETURN(h5::PropList fapl, WriteFapl());
    hid_t id = H5Fopen(tmp_path.c_str(), H5F_ACC_RDWR, fapl.get());
    if (id < 0)
      return h5::Error(StatusCode::kCorrupt,
                       fmt::format("{}: cannot open the HDF5 file (corrupt or truncated?)", path));
    file = h5::File(id);
    auto fmt_attr = h5::ReadStringAttr(file.get(), "hpcml_format");
    if (!fmt_attr.ok() || *fmt_attr != kFormatName) {
      return Corrupt(
          "{}: not an hpcml feature set (no hpcml_format attribute on /); refusing to add a "
          "version",
          path);
    }
    auto fv = h5::ReadIntAttr(file.get(), "format_version");
    if (!fv.ok()) return Corrupt("{}: {}", path, fv.status().message());
    if (*fv < 1 || *fv > kFormatVersion) {
      return FailedPrecondition("{}: format version {}; this build writes versions 1 to {}", path,
                                *fv, kFormatVersion);
    }
    auto z = h5::ReadStringAttr(file.get(), "zone");
    auto c = h5::ReadStringAttr(file.get(), "classification");
    if (!z.ok() || !c.ok())
      return Corrupt("{}: missing zone or classification attribute on /", path);
    zone = *z;
    file_classification = *c;
    if (!options.zone.empty() && options.zone != zone) {
      return InvalidArgument(
          "{}: the feature set is in zone '{}', not '{}': a version cannot change zone", path, zone,
          options.zone);
    }
    HPCML_RETURN_IF_ERROR(CheckLabels(ctx, canonical, zone, file_classification));
    HPCML_ASSIGN_OR_RETURN(
        h5::Group g, h5::Own<h5::Group>(H5Gopen2(file.get(), kVersionsGroup, H5P_DEFAULT),
                                        StatusCode::kCorrupt, fmt::format("{}: /versions", path)));
    std::vector<std::string> names;
    hsize_t idx = 0;
    auto collect = [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
      static_cast<std::vector<std::string>*>(data)->emplace_back(name);
      return 0;
    };
    if (H5Literate(g.get(), H5_INDEX_NAME, H5_ITER_NATIVE, &idx, collect, &names) < 0) {
      return h5::Error(StatusCode::kCorrupt, fmt::format("{}: list /versions", path));
    }
    std::vector<std::pair<int64_t, std::string>> numbered;
    for (auto& n : names) {
      auto num = ParseVersionName(n);
      if (!num.ok()) return Corrupt("{}: unexpected object /versions/{}", path, n);
      numbered.emplace_back(*num, n);
    }
    std::sort(numbered.begin(), numbered.end());
    for (auto& [num, n] : numbered) versions.push_back(n);
    version_number = numbered.empty() ? 1 : numbered.back().first + 1;
    return Status::Ok();
  }

  Status CreateNew(const WriterOptions& options) {
    if (options.zone.empty()) return InvalidArgument("{}: a new feature set needs a zone", path);
    HPCML_RETURN_IF_ERROR(ValidateZone(options.zone));
    zone = options.zone;
    HPCML_RETURN_IF_ERROR(CheckLabels(ctx, canonical, zone, "public"));
    HPCML_ASSIGN_OR_RETURN(h5::PropList fapl, WriteFapl());
    hid_t id = H5Fcreate(tmp_path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get());
    if (id < 0) return h5::Error(StatusCode::kIoError, fmt::format("{}: create", tmp_path));
    file = h5::File(id);
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(file.get(), "hpcml_format", kFormatName));
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(file.get(), "format_version", kFormatVersion));
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(file.get(), "zone", zone));
    HPCML_ASSIGN_OR_RETURN(
        h5::Group g,
        h5::Own<h5::Group>(
            H5Gcreate2(file.get(), kVersionsGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            StatusCode::kIoError, fmt::format("{}: create /versions", path)));
    version_number = 1;
    return Status::Ok();
  }

  Result<h5::Dataset> CreateDataset(const char* name, hid_t file_type, bool matrix) {
    hsize_t dims[2] = {0, nfeat};
    hsize_t maxdims[2] = {H5S_UNLIMITED, nfeat};
    hsize_t chunk[2] = {chunk_rows, nfeat};
    const int rank = matrix ? 2 : 1;
    HPCML_ASSIGN_OR_RETURN(h5::Dataspace space,
                           h5::Own<h5::Dataspace>(H5Screate_simple(rank, dims, maxdims),
                                                  StatusCode::kInternal, "dataspace"));
    HPCML_ASSIGN_OR_RETURN(h5::PropList dcpl, h5::Own<h5::PropList>(H5Pcreate(H5P_DATASET_CREATE),
                                                                    StatusCode::kInternal, "dcpl"));
    if (H5Pset_chunk(dcpl.get(), rank, chunk) < 0 ||
        H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER) < 0) {
      return h5::Error(StatusCode::kInvalidArgument,
                       fmt::format("{}: chunk layout of {}", path, name));
    }
    HPCML_RETURN_IF_ERROR(SetCodec(dcpl.get(), name));
    return h5::Own<h5::Dataset>(H5Dcreate2(version_group.get(), name, file_type, space.get(),
                                           H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                                StatusCode::kIoError,
                                fmt::format("{}: create {}/{}", path, version_name, name));
  }

  // <set>.d/.vN.h5.tmp-*, whose root group is the version.
  Status CreateVersionFile() {
    HPCML_RETURN_IF_ERROR(MakeVersionDir());
    version_final = (std::filesystem::path(dir) / VersionFileName(base, version_name)).string();
    version_tmp = fmt::format("{}/.{}.h5.tmp-{}", vdir, version_name, RandomSuffix());
    HPCML_ASSIGN_OR_RETURN(h5::PropList fapl, WriteFapl());
    HPCML_ASSIGN_OR_RETURN(
        vfile,
        h5::Own<h5::File>(H5Fcreate(version_tmp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get()),
                          StatusCode::kIoError, fmt::format("{}: create", version_tmp)));
    if (published) {
      if (::chown(version_tmp.c_str(), published->st_uid, published->st_gid) != 0) {
        /* not permitted: the writer owns it */
      }
      ::chmod(version_tmp.c_str(), published->st_mode & 07777);
    }
    HPCML_ASSIGN_OR_RETURN(version_group,
                           h5::Own<h5::Group>(H5Gopen2(vfile.get(), "/", H5P_DEFAULT),
                                              StatusCode::kIoError, version_tmp));
    return Status::Ok();
  }

  Status SetCodec(hid_t dcpl, const char* name) {
    const std::string what = fmt::format("{}: {} compression of {}", path, codec.codec, name);
    if (codec.codec == "deflate") {
      if (H5Pset_shuffle(dcpl) < 0 || H5Pset_deflate(dcpl, static_cast<unsigned>(codec.level)) < 0)
        return h5::Error(StatusCode::kInternal, what);
    } else if (codec.codec == "blosc-lz4" || codec.codec == "blosc-zstd") {
      // cd_values 0-3 are filled in by the filter; then level, byte
      // shuffle, compressor.
      const int compressor = codec.codec == "blosc-lz4" ? BLOSC_LZ4 : BLOSC_ZSTD;
      const unsigned cd[7] = {0,
                              0,
                              0,
                              0,
                              static_cast<unsigned>(codec.level),
                              BLOSC_SHUFFLE,
                              static_cast<unsigned>(compressor)};
      if (H5Pset_filter(dcpl, kBloscFilterId, H5Z_FLAG_MANDATORY, 7, cd) < 0)
        return h5::Error(StatusCode::kInternal, what);
    }
    return Status::Ok();
  }

  Status WriteSlab(hid_t dset, hid_t mem_type, const void* data, uint64_t first, uint64_t n,
                   bool matrix, const char* name) {
    hsize_t newdims[2] = {first + n, nfeat};
    if (H5Dset_extent(dset, newdims) < 0) {
      return h5::Error(StatusCode::kIoError,
                       fmt::format("{}: extend {}/{}", path, version_name, name));
    }
    const int rank = matrix ? 2 : 1;
    hsize_t start[2] = {first, 0};
    hsize_t count[2] = {n, nfeat};
    HPCML_ASSIGN_OR_RETURN(h5::Dataspace fspace,
                           h5::Own<h5::Dataspace>(H5Dget_space(dset), StatusCode::kIoError, name));
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) < 0) {
      return h5::Error(StatusCode::kInternal, name);
    }
    HPCML_ASSIGN_OR_RETURN(h5::Dataspace mspace,
                           h5::Own<h5::Dataspace>(H5Screate_simple(rank, count, nullptr),
                                                  StatusCode::kInternal, "dataspace"));
    if (H5Dwrite(dset, mem_type, mspace.get(), fspace.get(), H5P_DEFAULT, data) < 0) {
      return h5::Error(StatusCode::kIoError,
                       fmt::format("{}: write {}/{}", path, version_name, name));
    }
    return Status::Ok();
  }

  Status Flush() {
    if (buffered == 0) return Status::Ok();
    const uint64_t n = buffered;
    HPCML_RETURN_IF_ERROR(
        WriteSlab(dx.get(), H5T_NATIVE_FLOAT, bx.data(), rows, n, true, kFeatures));
    hx.Update(bx.data(), n * nfeat * sizeof(float));
    if (stats) stats->Add(bx.data(), dy.valid() ? by.data() : nullptr, n);
    if (dy.valid()) {
      HPCML_RETURN_IF_ERROR(
          WriteSlab(dy.get(), H5T_NATIVE_FLOAT, by.data(), rows, n, false, kLabels));
      hy.Update(by.data(), n * sizeof(float));
    }
    HPCML_RETURN_IF_ERROR(
        WriteSlab(de.get(), H5T_NATIVE_INT64, be.data(), rows, n, false, kEntityIds));
    he.Update(be.data(), n * sizeof(int64_t));
    HPCML_RETURN_IF_ERROR(
        WriteSlab(dt.get(), H5T_NATIVE_INT64, bt.data(), rows, n, false, kTimestamps));
    ht.Update(bt.data(), n * sizeof(int64_t));
    rows += n;
    buffered = 0;
    if (++flushes == 1) CrashPoint("mid-write");
    return Status::Ok();
  }
};

FeatureSetWriter::FeatureSetWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FeatureSetWriter::FeatureSetWriter(FeatureSetWriter&&) noexcept = default;
FeatureSetWriter& FeatureSetWriter::operator=(FeatureSetWriter&&) noexcept = default;
FeatureSetWriter::~FeatureSetWriter() = default;

Result<FeatureSetWriter> FeatureSetWriter::Begin(const std::string& path,
                                                 const WriterOptions& options) {
  h5::SilenceErrorPrinting();
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->ctx = AccessContext::FromEnvironment();
  HPCML_ASSIGN_OR_RETURN(impl->canonical, CanonicalPath(path, /*must_exist=*/false));
  HPCML_RETURN_IF_ERROR(CheckPath(impl->ctx, impl->canonical, "write feature set"));
  if (impl->ctx.guarded && !options.zone.empty() && options.zone != impl->ctx.zone) {
    return PermissionDenied(
        "{}: access denied: zone '{}' requested but this job runs in zone '{}' (HPCML_ZONE)",
        impl->canonical, options.zone, impl->ctx.zone);
  }
  std::filesystem::path p(impl->canonical);
  impl->dir = p.parent_path().string();
  impl->base = p.filename().string();
  impl->vdir = (std::filesystem::path(impl->dir) / (impl->base + ".d")).string();
  HPCML_RETURN_IF_ERROR(impl->Lock(options.lock_timeout_s));
  impl->RemoveStaleTemps();
  impl->tmp_path =
      (std::filesystem::path(impl->dir) / ("." + impl->base + ".tmp-" + RandomSuffix())).string();

  struct stat st;
  if (::stat(impl->canonical.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) return InvalidArgument("{}: not a regular file", path);
    htri_t is_hdf5 = H5Fis_hdf5(impl->canonical.c_str());
    if (is_hdf5 <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return Corrupt("{}: exists but is not an HDF5 file; refusing to overwrite it", path);
    }
    impl->published = st;
    HPCML_RETURN_IF_ERROR(impl->CopyPublished(st));
    HPCML_RETURN_IF_ERROR(impl->OpenCopy(options));
  } else if (errno == ENOENT) {
    impl->creating = true;
    HPCML_RETURN_IF_ERROR(impl->CreateNew(options));
  } else {
    return ErrnoError(path, errno);
  }
  return FeatureSetWriter(std::move(impl));
}

bool FeatureSetWriter::creating() const {
  return impl_->creating;
}
const std::string& FeatureSetWriter::zone() const {
  return impl_->zone;
}
const std::string& FeatureSetWriter::path() const {
  return impl_->path;
}
const std::vector<std::string>& FeatureSetWriter::existing_versions() const {
  return impl_->versions;
}
NewVersion* FeatureSetWriter::mutable_spec() {
  return &impl_->spec;
}
uint64_t FeatureSetWriter::rows() const {
  return impl_->rows + impl_->buffered;
}

Result<std::string> FeatureSetWriter::StartVersion(const NewVersion& spec) {
  Impl& w = *impl_;
  if (!w.file.valid()) return FailedPrecondition("{}: writer is closed", w.path);
  if (w.started) return FailedPrecondition("{}: one version per writer", w.path);
  if (spec.feature_names.empty())
    return InvalidArgument("{}: a version needs at least one feature", w.path);
  if (spec.feature_types.size() != spec.feature_names.size()) {
    return InvalidArgument("{}: {} feature names but {} types", w.path, spec.feature_names.size(),
                           spec.feature_types.size());
  }
  std::set<std::string> seen;
  for (const auto& n : spec.feature_names) {
    if (n.empty()) return InvalidArgument("{}: empty feature name", w.path);
    if (!seen.insert(n).second)
      return InvalidArgument("{}: feature \"{}\" appears twice", w.path, n);
  }
  HPCML_RETURN_IF_ERROR(ClassificationLevel(spec.classification).status());
  HPCML_RETURN_IF_ERROR(CheckLabels(w.ctx, w.canonical, w.zone, spec.classification));
  if (spec.entity_type != "int" && spec.entity_type != "string")
    return InvalidArgument("{}: entity type \"{}\" is not int or string", w.path, spec.entity_type);
  HPCML_ASSIGN_OR_RETURN(w.codec, ResolveCodec(spec.codec, spec.compression));
  if (w.codec.codec.starts_with("blosc") && H5Zfilter_avail(kBloscFilterId) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return FailedPrecondition(
        "{}: codec {} needs the Blosc HDF5 filter plugin, which HDF5 cannot load (Debian: apt-get "
        "install hdf5-filter-plugin-blosc-serial; or set HDF5_PLUGIN_PATH)",
        w.path, w.codec.codec);
  }
  w.spec = spec;
  w.nfeat = spec.feature_names.size();
  w.chunk_rows = spec.chunk_rows > 0 ? spec.chunk_rows : ChunkRowsFor(w.nfeat, spec.expected_rows);
  if (w.chunk_rows * w.nfeat * 4 >= (uint64_t{1} << 32))
    return InvalidArgument("chunk of {} rows is too large", w.chunk_rows);
  w.version_name = VersionName(w.version_number);
  HPCML_RETURN_IF_ERROR(w.CreateVersionFile());
  HPCML_ASSIGN_OR_RETURN(w.dx, w.CreateDataset(kFeatures, H5T_IEEE_F32LE, true));
  if (!spec.label_name.empty()) {
    HPCML_ASSIGN_OR_RETURN(w.dy, w.CreateDataset(kLabels, H5T_IEEE_F32LE, false));
  }
  HPCML_ASSIGN_OR_RETURN(w.de, w.CreateDataset(kEntityIds, H5T_STD_I64LE, false));
  HPCML_ASSIGN_OR_RETURN(w.dt, w.CreateDataset(kTimestamps, H5T_STD_I64LE, false));
  // Write whole chunks, about 4 MiB of features at a time.
  uint64_t chunk_bytes = w.chunk_rows * w.nfeat * 4;
  w.block_rows = w.chunk_rows * std::max<uint64_t>(1, (4u << 20) / chunk_bytes);
  w.bx.resize(w.block_rows * w.nfeat);
  if (w.dy.valid()) w.by.resize(w.block_rows);
  w.be.resize(w.block_rows);
  w.bt.resize(w.block_rows);
  if (spec.statistics) {
    std::vector<std::string> columns = spec.feature_names;
    if (!spec.label_name.empty()) columns.push_back(spec.label_name);
    w.stats.emplace(std::move(columns), !spec.label_name.empty());
  }
  w.started = true;
  return w.version_name;
}

Status FeatureSetWriter::Append(const float* x, const float* y, const int64_t* entity_ids,
                                const int64_t* timestamps, uint64_t n) {
  Impl& w = *impl_;
  if (!w.started) return FailedPrecondition("{}: Append before StartVersion", w.path);
  if ((y != nullptr) != w.dy.valid()) {
    return InvalidArgument("{}: labels given for a version without a label column, or missing",
                           w.path);
  }
  uint64_t done = 0;
  while (done < n) {
    uint64_t take = std::min(n - done, w.block_rows - w.buffered);
    std::memcpy(w.bx.data() + w.buffered * w.nfeat, x + done * w.nfeat,
                take * w.nfeat * sizeof(float));
    if (y != nullptr) std::memcpy(w.by.data() + w.buffered, y + done, take * sizeof(float));
    std::memcpy(w.be.data() + w.buffered, entity_ids + done, take * sizeof(int64_t));
    for (uint64_t i = done; i < done + take; ++i) {
      w.min_entity = std::min(w.min_entity, entity_ids[i]);
      w.max_entity = std::max(w.max_entity, entity_ids[i]);
    }
    std::memcpy(w.bt.data() + w.buffered, timestamps + done, take * sizeof(int64_t));
    w.buffered += take;
    done += take;
    if (w.buffered == w.block_rows) HPCML_RETURN_IF_ERROR(w.Flush());
  }
  return Status::Ok();
}

// The new version's metadata, its digests included (finishes the hashes).
VersionInfo FeatureSetWriter::Impl::FinishInfo() {
  VersionInfo info;
  info.name = version_name;
  info.number = version_number;
  info.rows = rows;
  info.feature_names = spec.feature_names;
  info.feature_types = spec.feature_types;
  info.label_name = spec.label_name;
  info.entity_name = spec.entity_name;
  info.entity_type = spec.entity_type;
  info.timestamp_name = spec.timestamp_name;
  info.created_at = UtcNow();
  info.created_by = CurrentPrincipal();
  info.operation = spec.operation;
  info.transform = spec.transform;
  info.sources = spec.sources;
  info.parents = spec.parents;
  info.zone = zone;
  info.classification = spec.classification;
  info.chunk_rows = chunk_rows;
  info.codec = codec.codec;
  info.compression = codec.level;
  info.tool = ToolString();
  info.digests.features = hx.FinishHex();
  if (dy.valid()) info.digests.labels = hy.FinishHex();
  info.digests.entity_ids = he.FinishHex();
  info.digests.timestamps = ht.FinishHex();
  info.data_sha256 = DataDigest(info.rows, info.features(), info.has_labels(), info.digests);
  return info;
}

// The datasets' digests, the version's attributes, and the file's
// classification (never lowered) and latest version.
Status FeatureSetWriter::Impl::WriteDigestsAndAttrs(const VersionInfo& info) {
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(dx.get(), "sha256", info.digests.features));
  if (dy.valid()) HPCML_RETURN_IF_ERROR(h5::WriteAttr(dy.get(), "sha256", info.digests.labels));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(de.get(), "sha256", info.digests.entity_ids));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(dt.get(), "sha256", info.digests.timestamps));
  HPCML_RETURN_IF_ERROR(WriteVersionAttrs(version_group.get(), info));
  if (stats) HPCML_RETURN_IF_ERROR(WriteStats(version_group.get(), stats->Finish()));
  std::string classification = spec.classification;
  if (!creating) {
    auto old_level = ClassificationLevel(file_classification);
    auto new_level = ClassificationLevel(classification);
    if (old_level.ok() && new_level.ok() && *old_level > *new_level)
      classification = file_classification;
  }
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(file.get(), "classification", classification));
  return h5::WriteAttr(file.get(), "latest", version_name);
}

// Closes the handles, then makes both files durable and puts them in place:
// the version file (fsync, rename to <set>.d/vN.h5, fsync of <set>.d), then
// the set file with its link to it (fsync, rename over the feature set, fsync
// of the directory), unlock. Until the second rename nobody sees the version;
// a version file left by a killed writer is replaced by the next one.
Status FeatureSetWriter::Impl::Publish() {
  HPCML_RETURN_IF_ERROR(h5::Close(dx, version_name + "/features"));
  HPCML_RETURN_IF_ERROR(h5::Close(dy, version_name + "/labels"));
  HPCML_RETURN_IF_ERROR(h5::Close(de, version_name + "/entity_ids"));
  HPCML_RETURN_IF_ERROR(h5::Close(dt, version_name + "/timestamps"));
  HPCML_RETURN_IF_ERROR(h5::Close(version_group, version_name));
  HPCML_RETURN_IF_ERROR(h5::Close(vfile, version_tmp));
  HPCML_RETURN_IF_ERROR(SyncFile(version_tmp));
  if (::rename(version_tmp.c_str(), version_final.c_str()) != 0)
    return ErrnoError("rename to " + version_final, errno);
  version_tmp.clear();
  HPCML_RETURN_IF_ERROR(SyncDirectory(vdir));
  CrashPoint("after-version-rename");
  const std::string link = fmt::format("/{}/{}", kVersionsGroup, version_name);
  if (H5Lcreate_external(VersionFileName(base, version_name).c_str(), "/", file.get(), link.c_str(),
                         H5P_DEFAULT, H5P_DEFAULT) < 0) {
    return h5::Error(StatusCode::kIoError, fmt::format("{}: link {}", path, link));
  }
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(file.get(), "format_version", kFormatVersion));
  CrashPoint("before-close");
  HPCML_RETURN_IF_ERROR(h5::Close(file, tmp_path));
  HPCML_RETURN_IF_ERROR(SyncFile(tmp_path));
  CrashPoint("before-rename");
  if (::rename(tmp_path.c_str(), canonical.c_str()) != 0)
    return ErrnoError("rename to " + canonical, errno);
  tmp_path.clear();
  committed = true;
  CrashPoint("after-rename");
  Status synced = SyncDirectory(dir);
  lock_fd.reset();
  return synced;
}

Result<VersionStats> FeatureSetWriter::Statistics() {
  Impl& w = *impl_;
  if (!w.started || !w.stats) {
    return FailedPrecondition("{}: the new version is written without statistics", w.path);
  }
  HPCML_RETURN_IF_ERROR(w.Flush());
  return w.stats->Finish();
}

// String keys: every code has its key; entity_keys written (fixed-length,
// null-padded UTF-8, in slabs) with its digest.
Result<std::string> FeatureSetWriter::Impl::WriteEntityKeys() {
  const std::vector<std::string>& keys = spec.entity_keys;
  if (spec.entity_type != "string") {
    if (!keys.empty()) return InvalidArgument("{}: entity keys for integer entities", path);
    return std::string();
  }
  if (min_entity < 0 || static_cast<uint64_t>(max_entity) >= keys.size()) {
    return InvalidArgument("{}: entity codes {}..{} but {} entity keys", path, min_entity,
                           max_entity, keys.size());
  }
  size_t width = 1;
  for (const auto& k : keys) {
    HPCML_RETURN_IF_ERROR(ValidateEntityKey(k));
    width = std::max(width, k.size());
  }
  HPCML_ASSIGN_OR_RETURN(h5::Datatype type,
                         h5::Own<h5::Datatype>(H5Tcopy(H5T_C_S1), StatusCode::kInternal, "type"));
  if (H5Tset_size(type.get(), width) < 0 || H5Tset_strpad(type.get(), H5T_STR_NULLPAD) < 0 ||
      H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0) {
    return h5::Error(StatusCode::kInternal, "entity key type");
  }
  const hsize_t n = keys.size();
  HPCML_ASSIGN_OR_RETURN(
      h5::Dataspace space,
      h5::Own<h5::Dataspace>(H5Screate_simple(1, &n, nullptr), StatusCode::kInternal, "dataspace"));
  HPCML_ASSIGN_OR_RETURN(
      h5::Dataset ds,
      h5::Own<h5::Dataset>(H5Dcreate2(version_group.get(), kEntityKeys, type.get(), space.get(),
                                      H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                           StatusCode::kIoError, fmt::format("{}: create entity_keys", path)));
  Sha256 sha;
  const hsize_t slab = 65536;
  std::vector<char> buf;
  for (hsize_t first = 0; first < n; first += slab) {
    const hsize_t m = std::min(slab, n - first);
    buf.assign(m * width, '\0');
    for (hsize_t i = 0; i < m; ++i)
      std::memcpy(buf.data() + i * width, keys[first + i].data(), keys[first + i].size());
    sha.Update(buf.data(), buf.size());
    HPCML_ASSIGN_OR_RETURN(
        h5::Dataspace fspace,
        h5::Own<h5::Dataspace>(H5Dget_space(ds.get()), StatusCode::kIoError, "entity_keys"));
    HPCML_ASSIGN_OR_RETURN(h5::Dataspace mspace,
                           h5::Own<h5::Dataspace>(H5Screate_simple(1, &m, nullptr),
                                                  StatusCode::kInternal, "dataspace"));
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &first, nullptr, &m, nullptr) < 0 ||
        H5Dwrite(ds.get(), type.get(), mspace.get(), fspace.get(), H5P_DEFAULT, buf.data()) < 0) {
      return h5::Error(StatusCode::kIoError, fmt::format("{}: write entity_keys", path));
    }
  }
  std::string digest = sha.FinishHex();
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(ds.get(), "sha256", digest));
  HPCML_RETURN_IF_ERROR(h5::Close(ds, version_name + "/entity_keys"));
  return digest;
}

Result<VersionInfo> FeatureSetWriter::Commit() {
  Impl& w = *impl_;
  if (!w.started) return FailedPrecondition("{}: Commit before StartVersion", w.path);
  HPCML_RETURN_IF_ERROR(w.Flush());
  if (w.rows == 0) return InvalidArgument("{}: the new version would have no rows", w.path);
  HPCML_ASSIGN_OR_RETURN(std::string keys_digest, w.WriteEntityKeys());
  VersionInfo info = w.FinishInfo();
  info.digests.entity_keys = keys_digest;
  info.data_sha256 = DataDigest(info.rows, info.features(), info.has_labels(), info.digests);
  HPCML_RETURN_IF_ERROR(w.WriteDigestsAndAttrs(info));
  HPCML_RETURN_IF_ERROR(w.Publish());
  return info;
}

void FeatureSetWriter::Abort() {
  if (impl_) impl_->Abort();
}

}  // namespace hpcml::featurecache
