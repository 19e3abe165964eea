#include "version_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <blosc.h>

#include <algorithm>
#include <cstring>

#include "hpcml/common/sha256.hpp"

namespace hpcml::featurecache {
namespace {

constexpr Column kColumns[] = {Column::kX,    Column::kY,   Column::kEntity,
                               Column::kTime, Column::kInt, Column::kAvailable};

// How a column is stored: its dataset's name, file and memory types, and
// whether it is a matrix (rows x features, or rows x int features), else
// one value per row.
struct ColumnSpec {
  const char* name;
  hid_t file_type;
  hid_t mem_type;
  bool matrix;
};

ColumnSpec SpecOf(Column c) {
  switch (c) {
    case Column::kX:
      return {kFeatures, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, true};
    case Column::kY:
      return {kLabels, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, false};
    case Column::kEntity:
      return {kEntityIds, H5T_STD_I64LE, H5T_NATIVE_INT64, false};
    case Column::kInt:
      return {kIntValues, H5T_STD_I64LE, H5T_NATIVE_INT64, true};
    case Column::kAvailable:
      return {kAvailableTimes, H5T_STD_I64LE, H5T_NATIVE_INT64, false};
    case Column::kTime:
    default:
      return {kTimestamps, H5T_STD_I64LE, H5T_NATIVE_INT64, false};
  }
}

}  // namespace

Result<h5::PropList> WriteFapl() {
  HPCML_ASSIGN_OR_RETURN(h5::PropList fapl, h5::Own<h5::PropList>(H5Pcreate(H5P_FILE_ACCESS),
                                                                  StatusCode::kInternal, "fapl"));
  if (H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V110) < 0 ||
      // Page-aligned chunks: the loader's reads of them are aligned too.
      H5Pset_alignment(fapl.get(), 64 * 1024, 4096) < 0) {
    return h5::Error(StatusCode::kInternal, "file access properties");
  }
  return fapl;
}

Status VersionFile::Create(TempFile temp, const std::string& set_path, const std::string& version,
                           const Layout& layout, const std::optional<struct stat>& published) {
  Discard();
  temp_ = std::move(temp);
  set_path_ = set_path;
  version_ = version;
  layout_ = layout;
  const std::string& path = temp_.path();
  HPCML_ASSIGN_OR_RETURN(h5::PropList fapl, WriteFapl());
  HPCML_ASSIGN_OR_RETURN(
      file_, h5::Own<h5::File>(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get()),
                               StatusCode::kIoError, fmt::format("{}: create", path)));
  if (published) {
    if (::chown(path.c_str(), published->st_uid, published->st_gid) != 0) {
      /* not permitted: the writer owns it */
    }
    ::chmod(path.c_str(), published->st_mode & 07777);
  }
  writeback_ = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  HPCML_ASSIGN_OR_RETURN(group_, h5::Own<h5::Group>(H5Gopen2(file_.get(), "/", H5P_DEFAULT),
                                                    StatusCode::kIoError, path));
  for (Column c : kColumns) {
    if (c == Column::kY && !layout_.labels) continue;
    if (c == Column::kInt && layout_.int_features == 0) continue;
    if (c == Column::kAvailable && !layout_.available) continue;
    HPCML_ASSIGN_OR_RETURN(dataset(c), CreateDataset(c));
  }
  return Status::Ok();
}

Result<h5::Dataset> VersionFile::CreateDataset(Column c) {
  const ColumnSpec spec = SpecOf(c);
  const uint64_t nfeat = Width(c);
  hsize_t dims[2] = {0, nfeat};
  hsize_t maxdims[2] = {H5S_UNLIMITED, nfeat};
  hsize_t chunk[2] = {layout_.chunk_rows, nfeat};
  const int rank = spec.matrix ? 2 : 1;
  HPCML_ASSIGN_OR_RETURN(h5::Dataspace space,
                         h5::Own<h5::Dataspace>(H5Screate_simple(rank, dims, maxdims),
                                                StatusCode::kInternal, "dataspace"));
  HPCML_ASSIGN_OR_RETURN(h5::PropList dcpl, h5::Own<h5::PropList>(H5Pcreate(H5P_DATASET_CREATE),
                                                                  StatusCode::kInternal, "dcpl"));
  if (H5Pset_chunk(dcpl.get(), rank, chunk) < 0 ||
      H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER) < 0) {
    return h5::Error(StatusCode::kInvalidArgument,
                     fmt::format("{}: chunk layout of {}", set_path_, spec.name));
  }
  HPCML_RETURN_IF_ERROR(SetCodec(dcpl.get(), spec.name));
  return h5::Own<h5::Dataset>(H5Dcreate2(group_.get(), spec.name, spec.file_type, space.get(),
                                         H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                              StatusCode::kIoError,
                              fmt::format("{}: create {}/{}", set_path_, version_, spec.name));
}

Status VersionFile::SetCodec(hid_t dcpl, const char* name) const {
  const CodecChoice& codec = layout_.codec;
  const std::string what = fmt::format("{}: {} compression of {}", set_path_, codec.codec, name);
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

Status VersionFile::Write(Column c, const RowBlock& block, uint64_t first) {
  const ColumnSpec spec = SpecOf(c);
  const hid_t dset = dataset(c).get();
  const uint64_t n = block.rows(), nfeat = Width(c);
  hsize_t newdims[2] = {first + n, nfeat};
  if (H5Dset_extent(dset, newdims) < 0) {
    return h5::Error(StatusCode::kIoError,
                     fmt::format("{}: extend {}/{}", set_path_, version_, spec.name));
  }
  const int rank = spec.matrix ? 2 : 1;
  hsize_t start[2] = {first, 0};
  hsize_t count[2] = {n, nfeat};
  HPCML_ASSIGN_OR_RETURN(
      h5::Dataspace fspace,
      h5::Own<h5::Dataspace>(H5Dget_space(dset), StatusCode::kIoError, spec.name));
  if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) < 0) {
    return h5::Error(StatusCode::kInternal, spec.name);
  }
  HPCML_ASSIGN_OR_RETURN(h5::Dataspace mspace,
                         h5::Own<h5::Dataspace>(H5Screate_simple(rank, count, nullptr),
                                                StatusCode::kInternal, "dataspace"));
  if (H5Dwrite(dset, spec.mem_type, mspace.get(), fspace.get(), H5P_DEFAULT, block.data(c)) < 0) {
    return h5::Error(StatusCode::kIoError,
                     fmt::format("{}: write {}/{}", set_path_, version_, spec.name));
  }
  return Status::Ok();
}

Result<std::string> VersionFile::WriteStrings(const char* name,
                                              const std::vector<std::string>& keys, size_t width) {
  HPCML_ASSIGN_OR_RETURN(h5::Datatype type,
                         h5::Own<h5::Datatype>(H5Tcopy(H5T_C_S1), StatusCode::kInternal, "type"));
  if (H5Tset_size(type.get(), width) < 0 || H5Tset_strpad(type.get(), H5T_STR_NULLPAD) < 0 ||
      H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0) {
    return h5::Error(StatusCode::kInternal, "string type");
  }
  const hsize_t n = keys.size();
  HPCML_ASSIGN_OR_RETURN(
      h5::Dataspace space,
      h5::Own<h5::Dataspace>(H5Screate_simple(1, &n, nullptr), StatusCode::kInternal, "dataspace"));
  HPCML_ASSIGN_OR_RETURN(
      h5::Dataset ds,
      h5::Own<h5::Dataset>(H5Dcreate2(group_.get(), name, type.get(), space.get(), H5P_DEFAULT,
                                      H5P_DEFAULT, H5P_DEFAULT),
                           StatusCode::kIoError, fmt::format("{}: create {}", set_path_, name)));
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
        h5::Own<h5::Dataspace>(H5Dget_space(ds.get()), StatusCode::kIoError, name));
    HPCML_ASSIGN_OR_RETURN(h5::Dataspace mspace,
                           h5::Own<h5::Dataspace>(H5Screate_simple(1, &m, nullptr),
                                                  StatusCode::kInternal, "dataspace"));
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &first, nullptr, &m, nullptr) < 0 ||
        H5Dwrite(ds.get(), type.get(), mspace.get(), fspace.get(), H5P_DEFAULT, buf.data()) < 0) {
      return h5::Error(StatusCode::kIoError, fmt::format("{}: write {}", set_path_, name));
    }
  }
  std::string digest = sha.FinishHex();
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(ds.get(), "sha256", digest));
  HPCML_RETURN_IF_ERROR(h5::Close(ds, fmt::format("{}/{}", version_, name)));
  return digest;
}

Status VersionFile::WriteDigests(const DatasetDigests& digests) {
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(dataset(Column::kX).get(), "sha256", digests.features));
  if (has_labels()) {
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(dataset(Column::kY).get(), "sha256", digests.labels));
  }
  HPCML_RETURN_IF_ERROR(
      h5::WriteAttr(dataset(Column::kEntity).get(), "sha256", digests.entity_ids));
  if (dataset(Column::kInt).valid()) {
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(dataset(Column::kInt).get(), "sha256", digests.int_values));
  }
  if (has_available()) {
    HPCML_RETURN_IF_ERROR(
        h5::WriteAttr(dataset(Column::kAvailable).get(), "sha256", digests.available_times));
  }
  return h5::WriteAttr(dataset(Column::kTime).get(), "sha256", digests.timestamps);
}

Status VersionFile::Publish() {
  for (Column c : kColumns)
    HPCML_RETURN_IF_ERROR(h5::Close(dataset(c), version_ + "/" + SpecOf(c).name));
  HPCML_RETURN_IF_ERROR(h5::Close(group_, version_));
  HPCML_RETURN_IF_ERROR(h5::Close(file_, temp_.path()));
  HPCML_RETURN_IF_ERROR(temp_.Sync());
  return temp_.Rename();
}

void VersionFile::StartWriteback() const {
  if (writeback_.valid()) ::sync_file_range(writeback_.get(), 0, 0, SYNC_FILE_RANGE_WRITE);
}

void VersionFile::CloseHandles() {
  for (h5::Dataset& d : datasets_) d.reset();
  group_.reset();
  file_.reset();
  writeback_ = UniqueFd();
}

void VersionFile::Discard() {
  CloseHandles();
  temp_.Discard();
}

}  // namespace hpcml::featurecache
