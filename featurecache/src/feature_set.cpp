#include "hpcml/featurecache/feature_set.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "hpcml/common/sha256.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "hpcml/featurecache/access.hpp"

namespace hpcml::featurecache {
namespace {

herr_t CollectLink(hid_t /*group*/, const char* name, const H5L_info_t* /*info*/, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}

std::string Where(const std::string& path, std::string_view version, const char* dataset) {
  return fmt::format("{}: version {}: dataset {}", path, version, dataset);
}

Status CheckDataset(hid_t dset, const std::string& path, std::string_view version, const char* name,
                    H5T_class_t cls, size_t size, const std::vector<hsize_t>& dims) {
  HPCML_ASSIGN_OR_RETURN(
      h5::Datatype type,
      h5::Own<h5::Datatype>(H5Dget_type(dset), StatusCode::kCorrupt, Where(path, version, name)));
  if (H5Tget_class(type.get()) != cls || H5Tget_size(type.get()) != size) {
    return Corrupt("{}: schema mismatch: unexpected element type", Where(path, version, name));
  }
  HPCML_ASSIGN_OR_RETURN(std::vector<hsize_t> actual,
                         h5::DatasetDims(dset, Where(path, version, name)));
  if (actual != dims) {
    std::string want, got;
    for (auto d : dims) want += (want.empty() ? "" : " x ") + std::to_string(d);
    for (auto d : actual) got += (got.empty() ? "" : " x ") + std::to_string(d);
    return Corrupt("{}: schema mismatch: shape is {} but the version's attributes say {}",
                   Where(path, version, name), got.empty() ? "scalar" : got, want);
  }
  return Status::Ok();
}

}  // namespace

Result<DatasetDigests> ReadDatasetDigests(hid_t group, const VersionInfo& info) {
  const bool has_labels = info.has_labels();
  const std::string& version = info.name;
  DatasetDigests d;
  auto read = [&](const char* name, std::string* out) -> Status {
    HPCML_ASSIGN_OR_RETURN(
        h5::Dataset ds,
        h5::Own<h5::Dataset>(H5Dopen2(group, name, H5P_DEFAULT), StatusCode::kCorrupt,
                             fmt::format("version {}: dataset {}", version, name)));
    auto r = h5::ReadStringAttr(ds.get(), "sha256");
    if (!r.ok())
      return Status(r.status().code(),
                    fmt::format("version {}: dataset {}: {}", version, name, r.status().message()));
    *out = std::move(r).value();
    return Status::Ok();
  };
  HPCML_RETURN_IF_ERROR(read(kFeatures, &d.features));
  if (has_labels) HPCML_RETURN_IF_ERROR(read(kLabels, &d.labels));
  HPCML_RETURN_IF_ERROR(read(kEntityIds, &d.entity_ids));
  if (info.string_keys()) HPCML_RETURN_IF_ERROR(read(kEntityKeys, &d.entity_keys));
  HPCML_RETURN_IF_ERROR(read(kTimestamps, &d.timestamps));
  if (info.has_available()) HPCML_RETURN_IF_ERROR(read(kAvailableTimes, &d.available_times));
  if (info.int_features() > 0) HPCML_RETURN_IF_ERROR(read(kIntValues, &d.int_values));
  if (info.total_categories() > 0) HPCML_RETURN_IF_ERROR(read(kCategories, &d.categories));
  return d;
}

namespace {

// The names of the versions under /versions, in version order; any other
// object there is corruption.
Result<std::vector<std::string>> ListVersions(hid_t f, const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(
      h5::Group versions,
      h5::Own<h5::Group>(H5Gopen2(f, kVersionsGroup, H5P_DEFAULT), StatusCode::kCorrupt,
                         fmt::format("{}: group /{}", path, kVersionsGroup)));
  std::vector<std::string> names;
  hsize_t idx = 0;
  if (H5Literate(versions.get(), H5_INDEX_NAME, H5_ITER_NATIVE, &idx, CollectLink, &names) < 0) {
    return h5::Error(StatusCode::kCorrupt, fmt::format("{}: list /{}", path, kVersionsGroup));
  }
  std::vector<std::pair<int64_t, std::string>> numbered;
  for (auto& n : names) {
    auto num = ParseVersionName(n);
    if (!num.ok() || VersionName(*num) != n)
      return Corrupt("{}: unexpected object /versions/{}", path, n);
    numbered.emplace_back(*num, n);
  }
  std::sort(numbered.begin(), numbered.end());
  std::vector<std::string> sorted;
  for (auto& [num, n] : numbered) sorted.push_back(n);
  return sorted;
}

}  // namespace

Result<FeatureSet> FeatureSet::Open(const std::string& path) {
  h5::SilenceErrorPrinting();
  FeatureSet fs;
  fs.path_ = path;
  HPCML_ASSIGN_OR_RETURN(fs.canonical_, CanonicalPath(path, /*must_exist=*/true));
  AccessContext ctx = AccessContext::FromEnvironment();
  HPCML_RETURN_IF_ERROR(CheckPath(ctx, fs.canonical_, "open feature set"));

  htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 < 0) return h5::Error(StatusCode::kIoError, path);
  if (is_hdf5 == 0) return Corrupt("{}: not an HDF5 file", path);
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) {
    return h5::Error(StatusCode::kCorrupt,
                     fmt::format("{}: cannot open the HDF5 file (corrupt or truncated?)", path));
  }
  fs.file_ = std::make_shared<h5::File>(id);
  hid_t f = fs.file_->get();

  auto root_attr = [&](const char* name) -> Result<std::string> {
    auto r = h5::ReadStringAttr(f, name);
    if (!r.ok())
      return Status(StatusCode::kCorrupt, fmt::format("{}: {}", path, r.status().message()));
    return r;
  };
  if (!h5::HasAttr(f, "hpcml_format")) {
    return Corrupt("{}: not an hpcml feature set (no hpcml_format attribute on /)", path);
  }
  HPCML_ASSIGN_OR_RETURN(std::string format, root_attr("hpcml_format"));
  if (format != kFormatName)
    return Corrupt("{}: not an hpcml feature set (hpcml_format is \"{}\")", path, format);
  auto fv = h5::ReadIntAttr(f, "format_version");
  if (!fv.ok()) return Corrupt("{}: {}", path, fv.status().message());
  if (*fv > kFormatVersion || *fv < 1) {
    return FailedPrecondition("{}: format version {} is not supported (this build reads up to {})",
                              path, *fv, kFormatVersion);
  }
  HPCML_ASSIGN_OR_RETURN(fs.zone_, root_attr("zone"));
  HPCML_ASSIGN_OR_RETURN(fs.classification_, root_attr("classification"));
  HPCML_ASSIGN_OR_RETURN(fs.latest_, root_attr("latest"));
  HPCML_RETURN_IF_ERROR(CheckLabels(ctx, fs.canonical_, fs.zone_, fs.classification_));

  HPCML_ASSIGN_OR_RETURN(fs.versions_, ListVersions(f, path));
  if (fs.versions_.empty()) return Corrupt("{}: the feature set has no versions", path);
  if (fs.latest_ != fs.versions_.back()) {
    return Corrupt("{}: attribute latest says {} but the newest version is {}", path, fs.latest_,
                   fs.versions_.back());
  }
  return fs;
}

Result<std::string> FeatureSet::Resolve(std::string_view spec) const {
  if (spec.empty() || spec == "latest") return latest_;
  auto num = ParseVersionName(spec);
  if (!num.ok())
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("{}: {}", path_, num.status().message()));
  std::string name = VersionName(*num);
  if (std::find(versions_.begin(), versions_.end(), name) == versions_.end()) {
    std::string have;
    for (const auto& v : versions_) have += (have.empty() ? "" : ", ") + v;
    return NotFound("{}: version {} not found (have {})", path_, name, have);
  }
  return name;
}

// A version in its own file (format 2): the link must name exactly the file
// the writer makes, <set>.d/vN.h5 beside the set's canonical path (the path
// Open checked), and this code opens it (never HDF5's link traversal, which honours HDF5_EXT_PREFIX
// and the working directory): no link followed at the last two components,
// and HDF5 opens the very inode that was checked, through /proc/self/fd.
Result<FeatureSet::VersionGroup> FeatureSet::OpenExternalVersion(hid_t versions,
                                                                 const std::string& name,
                                                                 size_t val_size) const {
  const std::string what = fmt::format("{}: /{}/{}", path_, kVersionsGroup, name);
  std::vector<char> val(val_size);
  unsigned flags = 0;
  const char* target = nullptr;
  const char* object = nullptr;
  if (H5Lget_val(versions, name.c_str(), val.data(), val.size(), H5P_DEFAULT) < 0 ||
      H5Lunpack_elink_val(val.data(), val.size(), &flags, &target, &object) < 0) {
    return h5::Error(StatusCode::kCorrupt, what);
  }
  const std::filesystem::path canonical(canonical_);
  const std::string expected = VersionFileName(canonical.filename().string(), name);
  if (target == nullptr || object == nullptr || expected != target || std::string(object) != "/") {
    return Corrupt("{}: links to {}:{}, not to {}:/ (refused)", what, target ? target : "?",
                   object ? object : "?", expected);
  }
  // Part of the set, so covered by the set's access check in Open.
  const std::filesystem::path file = canonical.parent_path() / expected;
  HPCML_ASSIGN_OR_RETURN(UniqueFd dir,
                         OpenFd(file.parent_path().string(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
  int fd = ::openat(dir.get(), file.filename().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoError(file.string(), errno);
  UniqueFd vfd(fd);
  struct stat st;
  if (::fstat(vfd.get(), &st) != 0) return ErrnoError(file.string(), errno);
  if (!S_ISREG(st.st_mode)) return Corrupt("{}: not a regular file", file.string());
  const std::string proc = fmt::format("/proc/self/fd/{}", vfd.get());
  VersionGroup vg;
  HPCML_ASSIGN_OR_RETURN(
      h5::File f,
      h5::Own<h5::File>(H5Fopen(proc.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), StatusCode::kCorrupt,
                        fmt::format("{}: cannot open the HDF5 file", file.string())));
  vg.file = std::make_shared<h5::File>(std::move(f));
  HPCML_ASSIGN_OR_RETURN(vg.group, h5::Own<h5::Group>(H5Gopen2(vg.file->get(), "/", H5P_DEFAULT),
                                                      StatusCode::kCorrupt, file.string()));
  return vg;
}

Result<FeatureSet::VersionGroup> FeatureSet::OpenVersionGroup(const std::string& name) const {
  const std::string what = fmt::format("{}: /{}/{}", path_, kVersionsGroup, name);
  HPCML_ASSIGN_OR_RETURN(
      h5::Group versions,
      h5::Own<h5::Group>(H5Gopen2(file_->get(), kVersionsGroup, H5P_DEFAULT), StatusCode::kCorrupt,
                         fmt::format("{}: group /{}", path_, kVersionsGroup)));
  H5L_info_t li;
  if (H5Lget_info(versions.get(), name.c_str(), &li, H5P_DEFAULT) < 0)
    return h5::Error(StatusCode::kCorrupt, what);
  if (li.type == H5L_TYPE_EXTERNAL) return OpenExternalVersion(versions.get(), name, li.u.val_size);
  if (li.type != H5L_TYPE_HARD) return Corrupt("{}: neither a group nor a version file link", what);
  VersionGroup vg;
  vg.file = file_;
  HPCML_ASSIGN_OR_RETURN(vg.group,
                         h5::Own<h5::Group>(H5Gopen2(versions.get(), name.c_str(), H5P_DEFAULT),
                                            StatusCode::kCorrupt, what));
  return vg;
}

Result<VersionStats> FeatureSet::Stats(std::string_view spec) const {
  h5::SilenceErrorPrinting();
  HPCML_ASSIGN_OR_RETURN(std::string name, Resolve(spec));
  HPCML_ASSIGN_OR_RETURN(VersionGroup vg, OpenVersionGroup(name));
  auto stats = ReadStats(vg.group.get(), name);
  if (!stats.ok()) return stats.status().WithContext(path_);
  HPCML_ASSIGN_OR_RETURN(VersionReader version, OpenVersion(name));
  HPCML_ASSIGN_OR_RETURN(auto categories, version.Categories());
  NameCodes(categories, version.info().label_classes, &*stats);
  return stats;
}

Result<VersionInfo> FeatureSet::Info(std::string_view spec) const {
  h5::SilenceErrorPrinting();
  HPCML_ASSIGN_OR_RETURN(std::string name, Resolve(spec));
  HPCML_ASSIGN_OR_RETURN(VersionGroup vg, OpenVersionGroup(name));
  return InfoOf(vg, name);
}

Result<VersionInfo> FeatureSet::InfoOf(const VersionGroup& vg, const std::string& name) const {
  hid_t g = vg.group.get();
  auto info = ReadVersionAttrs(g, name);
  if (!info.ok())
    return Status(info.status().code(), fmt::format("{}: {}", path_, info.status().message()));
  // A version of another zone's data is not this set's, whatever links to it.
  if (info->zone != zone_) {
    return Corrupt("{}: version {} is in zone '{}' but the feature set is in zone '{}'", path_,
                   name, info->zone, zone_);
  }
  auto digests = ReadDatasetDigests(g, *info);
  if (!digests.ok())
    return Status(digests.status().code(),
                  fmt::format("{}: {}", path_, digests.status().message()));
  info->digests = std::move(digests).value();
  return info;
}

Result<VersionReader> FeatureSet::OpenVersion(std::string_view spec) const {
  h5::SilenceErrorPrinting();
  HPCML_ASSIGN_OR_RETURN(std::string version, Resolve(spec));
  HPCML_ASSIGN_OR_RETURN(VersionGroup vg, OpenVersionGroup(version));
  HPCML_ASSIGN_OR_RETURN(VersionInfo info, InfoOf(vg, version));
  VersionReader r;
  r.file_ = vg.file;
  r.path_ = path_;
  auto open = [&](const char* name, h5::Dataset* out) -> Status {
    HPCML_ASSIGN_OR_RETURN(
        *out, h5::Own<h5::Dataset>(H5Dopen2(vg.group.get(), name, H5P_DEFAULT),
                                   StatusCode::kCorrupt, Where(path_, info.name, name)));
    return Status::Ok();
  };
  HPCML_RETURN_IF_ERROR(open(kFeatures, &r.features_));
  HPCML_RETURN_IF_ERROR(CheckDataset(r.features_.get(), path_, info.name, kFeatures, H5T_FLOAT, 4,
                                     {info.rows, info.features()}));
  if (info.has_labels()) {
    HPCML_RETURN_IF_ERROR(open(kLabels, &r.labels_));
    HPCML_RETURN_IF_ERROR(
        CheckDataset(r.labels_.get(), path_, info.name, kLabels, H5T_FLOAT, 4, {info.rows}));
  }
  HPCML_RETURN_IF_ERROR(open(kEntityIds, &r.entity_ids_));
  HPCML_RETURN_IF_ERROR(
      CheckDataset(r.entity_ids_.get(), path_, info.name, kEntityIds, H5T_INTEGER, 8, {info.rows}));
  auto open_strings = [&](const char* name, h5::Dataset* out) -> Status {
    HPCML_RETURN_IF_ERROR(open(name, out));
    HPCML_ASSIGN_OR_RETURN(h5::Datatype type,
                           h5::Own<h5::Datatype>(H5Dget_type(out->get()), StatusCode::kCorrupt,
                                                 Where(path_, info.name, name)));
    if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) != 0)
      return Corrupt("{}: not fixed-length strings", Where(path_, info.name, name));
    return Status::Ok();
  };
  if (info.string_keys()) HPCML_RETURN_IF_ERROR(open_strings(kEntityKeys, &r.entity_keys_));
  if (info.total_categories() > 0) {
    HPCML_RETURN_IF_ERROR(open_strings(kCategories, &r.categories_));
    HPCML_ASSIGN_OR_RETURN(std::vector<hsize_t> dims,
                           h5::DatasetDims(r.categories_.get(), kCategories));
    if (dims.size() != 1 || dims[0] != info.total_categories())
      return Corrupt("{}: not the {} categories of category_counts",
                     Where(path_, info.name, kCategories), info.total_categories());
  }
  if (info.int_features() > 0) {
    HPCML_RETURN_IF_ERROR(open(kIntValues, &r.int_values_));
    HPCML_RETURN_IF_ERROR(CheckDataset(r.int_values_.get(), path_, info.name, kIntValues,
                                       H5T_INTEGER, 8, {info.rows, info.int_features()}));
  }
  HPCML_RETURN_IF_ERROR(open(kTimestamps, &r.timestamps_));
  HPCML_RETURN_IF_ERROR(CheckDataset(r.timestamps_.get(), path_, info.name, kTimestamps,
                                     H5T_INTEGER, 8, {info.rows}));
  if (info.has_available()) {
    HPCML_RETURN_IF_ERROR(open(kAvailableTimes, &r.available_));
    HPCML_RETURN_IF_ERROR(CheckDataset(r.available_.get(), path_, info.name, kAvailableTimes,
                                       H5T_INTEGER, 8, {info.rows}));
  }
  r.info_ = std::move(info);
  return r;
}

Status VersionReader::ReadSlab(hid_t dset, hid_t mem_type, uint64_t first, uint64_t count,
                               uint64_t width, void* out, const char* name) const {
  h5::SilenceErrorPrinting();
  const int rank = width == 0 ? 1 : 2;
  hsize_t start[2] = {first, 0};
  hsize_t cnt[2] = {count, width};
  HPCML_ASSIGN_OR_RETURN(h5::Dataspace fspace,
                         h5::Own<h5::Dataspace>(H5Dget_space(dset), StatusCode::kCorrupt,
                                                Where(path_, info_.name, name)));
  if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, cnt, nullptr) < 0) {
    return h5::Error(StatusCode::kInvalidArgument, Where(path_, info_.name, name));
  }
  HPCML_ASSIGN_OR_RETURN(h5::Dataspace mspace,
                         h5::Own<h5::Dataspace>(H5Screate_simple(rank, cnt, nullptr),
                                                StatusCode::kInternal, "dataspace"));
  if (H5Dread(dset, mem_type, mspace.get(), fspace.get(), H5P_DEFAULT, out) < 0) {
    return h5::Error(
        StatusCode::kCorrupt,
        fmt::format("{}: read rows {}..{}", Where(path_, info_.name, name), first, first + count));
  }
  return Status::Ok();
}

Status VersionReader::Read(uint64_t first, uint64_t count, float* x, float* y, int64_t* entity_ids,
                           int64_t* timestamps) const {
  if (first > info_.rows || count > info_.rows - first) {
    return InvalidArgument("{}: version {}: rows {}..{} out of range (the version has {} rows)",
                           path_, info_.name, first, first + count, info_.rows);
  }
  if (y != nullptr && !info_.has_labels()) {
    return InvalidArgument("{}: version {} has no labels", path_, info_.name);
  }
  if (count == 0) return Status::Ok();
  if (x != nullptr && info_.features() > 0) {
    HPCML_RETURN_IF_ERROR(
        ReadSlab(features_.get(), H5T_NATIVE_FLOAT, first, count, info_.features(), x, kFeatures));
  }
  if (y != nullptr)
    HPCML_RETURN_IF_ERROR(ReadSlab(labels_.get(), H5T_NATIVE_FLOAT, first, count, 0, y, kLabels));
  if (entity_ids != nullptr) {
    HPCML_RETURN_IF_ERROR(
        ReadSlab(entity_ids_.get(), H5T_NATIVE_INT64, first, count, 0, entity_ids, kEntityIds));
  }
  if (timestamps != nullptr) {
    HPCML_RETURN_IF_ERROR(
        ReadSlab(timestamps_.get(), H5T_NATIVE_INT64, first, count, 0, timestamps, kTimestamps));
  }
  return Status::Ok();
}

Status VersionReader::ReadInts(uint64_t first, uint64_t count, int64_t* ints) const {
  if (info_.int_features() == 0)
    return InvalidArgument("{}: version {} has no exact int values", path_, info_.name);
  if (first > info_.rows || count > info_.rows - first) {
    return InvalidArgument("{}: version {}: rows {}..{} out of range (the version has {} rows)",
                           path_, info_.name, first, first + count, info_.rows);
  }
  if (count == 0) return Status::Ok();
  return ReadSlab(int_values_.get(), H5T_NATIVE_INT64, first, count, info_.int_features(), ints,
                  kIntValues);
}

Status VersionReader::ReadAvailable(uint64_t first, uint64_t count, int64_t* available) const {
  if (!info_.has_available())
    return InvalidArgument("{}: version {} has no availability times", path_, info_.name);
  if (first > info_.rows || count > info_.rows - first) {
    return InvalidArgument("{}: version {}: rows {}..{} out of range (the version has {} rows)",
                           path_, info_.name, first, first + count, info_.rows);
  }
  if (count == 0) return Status::Ok();
  return ReadSlab(available_.get(), H5T_NATIVE_INT64, first, count, 0, available, kAvailableTimes);
}

// The raw stored bytes of entity_keys: `*count` keys of `*width` bytes.
Result<std::vector<char>> ReadKeyBytes(hid_t ds, const std::string& what, size_t* width,
                                       size_t* count) {
  HPCML_ASSIGN_OR_RETURN(h5::Datatype type,
                         h5::Own<h5::Datatype>(H5Dget_type(ds), StatusCode::kCorrupt, what));
  HPCML_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, h5::DatasetDims(ds, what));
  if (dims.size() != 1) return Corrupt("{}: not one-dimensional", what);
  *width = H5Tget_size(type.get());
  *count = dims[0];
  std::vector<char> buf(*width * *count + 1);
  if (*count > 0 && H5Dread(ds, type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0)
    return h5::Error(StatusCode::kCorrupt, what);
  buf.resize(*width * *count);
  return buf;
}

// The strings of a fixed-length string dataset.
Result<std::vector<std::string>> ReadStrings(hid_t ds, const std::string& what) {
  size_t width = 0, count = 0;
  HPCML_ASSIGN_OR_RETURN(std::vector<char> raw, ReadKeyBytes(ds, what, &width, &count));
  std::vector<std::string> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const char* p = raw.data() + i * width;
    out.emplace_back(p, ::strnlen(p, width));
  }
  return out;
}

Result<std::vector<std::string>> VersionReader::EntityKeys() const {
  if (!info_.string_keys()) return std::vector<std::string>();
  return ReadStrings(entity_keys_.get(), Where(path_, info_.name, kEntityKeys));
}

Result<std::vector<std::vector<std::string>>> VersionReader::Categories() const {
  std::vector<std::vector<std::string>> out(info_.features());
  if (info_.total_categories() == 0) return out;
  HPCML_ASSIGN_OR_RETURN(std::vector<std::string> all,
                         ReadStrings(categories_.get(), Where(path_, info_.name, kCategories)));
  size_t at = 0;
  for (size_t j = 0; j < out.size(); ++j) {
    const size_t n = info_.category_counts[j];
    out[j].assign(std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(at)),
                  std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(at + n)));
    at += n;
  }
  return out;
}

Status VerifyVersion(const VersionReader& v) {
  const VersionInfo& info = v.info();
  const uint64_t f = info.features();
  const uint64_t step = std::max<uint64_t>(1, (8u << 20) / (4 * std::max<uint64_t>(f, 1)));
  std::vector<float> x(step * f), y(info.has_labels() ? step : 0);
  std::vector<int64_t> e(step), t(step), ints(step * info.int_features());
  std::vector<int64_t> avail(info.has_available() ? step : 0);
  Sha256 hx, hy, he, ht, hi, ha;
  int64_t min_code = INT64_MAX, max_code = INT64_MIN;
  // Codes of category features and a class label: whole, within their sizes.
  std::vector<uint64_t> sizes(info.category_counts);
  sizes.resize(f, 0);
  if (info.has_labels()) sizes.push_back(info.label_classes.size());
  std::optional<size_t> bad_code;
  for (uint64_t first = 0; first < info.rows; first += step) {
    uint64_t n = std::min(step, info.rows - first);
    HPCML_RETURN_IF_ERROR(
        v.Read(first, n, x.data(), info.has_labels() ? y.data() : nullptr, e.data(), t.data()));
    hx.Update(x.data(), n * f * sizeof(float));
    if (info.has_labels()) hy.Update(y.data(), n * sizeof(float));
    he.Update(e.data(), n * sizeof(int64_t));
    ht.Update(t.data(), n * sizeof(int64_t));
    if (!ints.empty()) {
      HPCML_RETURN_IF_ERROR(v.ReadInts(first, n, ints.data()));
      hi.Update(ints.data(), n * info.int_features() * sizeof(int64_t));
    }
    if (!avail.empty()) {
      HPCML_RETURN_IF_ERROR(v.ReadAvailable(first, n, avail.data()));
      ha.Update(avail.data(), n * sizeof(int64_t));
    }
    for (uint64_t i = 0; i < n; ++i)
      max_code = std::max(max_code, e[i]), min_code = std::min(min_code, e[i]);
    for (size_t c = 0; c < sizes.size() && !bad_code; ++c) {
      if (sizes[c] == 0) continue;
      for (uint64_t i = 0; i < n; ++i) {
        const float code = c < f ? x[i * f + c] : y[i];
        if (!std::isnan(code) && (code < 0 || code != std::floor(code) || code >= float(sizes[c])))
          bad_code = c;
      }
    }
  }
  if (bad_code) {
    return Corrupt("{}: version {}: column {} holds codes outside its {} categories", v.path(),
                   info.name, *bad_code < f ? info.feature_names[*bad_code] : info.label_name,
                   sizes[*bad_code]);
  }
  DatasetDigests got;
  got.features = hx.FinishHex();
  if (info.has_labels()) got.labels = hy.FinishHex();
  got.entity_ids = he.FinishHex();
  got.timestamps = ht.FinishHex();
  if (!ints.empty()) got.int_values = hi.FinishHex();
  if (!avail.empty()) got.available_times = ha.FinishHex();
  if (info.total_categories() > 0) {
    size_t width = 0, count = 0;
    HPCML_ASSIGN_OR_RETURN(
        std::vector<char> raw,
        ReadKeyBytes(v.categories_.get(), Where(v.path(), info.name, kCategories), &width, &count));
    got.categories = Sha256::Hex(std::string_view(raw.data(), raw.size()));
  }
  if (info.string_keys()) {
    size_t width = 0, count = 0;
    HPCML_ASSIGN_OR_RETURN(std::vector<char> raw,
                           ReadKeyBytes(v.entity_keys_.get(),
                                        Where(v.path(), info.name, kEntityKeys), &width, &count));
    got.entity_keys = Sha256::Hex(std::string_view(raw.data(), raw.size()));
    if (min_code < 0 || static_cast<uint64_t>(max_code) >= count) {
      return Corrupt("{}: version {}: entity codes {}..{} but {} entity keys", v.path(), info.name,
                     min_code, max_code, count);
    }
  }
  auto check = [&](const char* name, const std::string& stored,
                   const std::string& computed) -> Status {
    if (stored == computed) return Status::Ok();
    return Corrupt("{}: version {}: dataset {}: SHA-256 mismatch (recorded {}, data has {})",
                   v.path(), info.name, name, stored, computed);
  };
  HPCML_RETURN_IF_ERROR(check(kFeatures, info.digests.features, got.features));
  if (info.has_labels()) HPCML_RETURN_IF_ERROR(check(kLabels, info.digests.labels, got.labels));
  HPCML_RETURN_IF_ERROR(check(kEntityIds, info.digests.entity_ids, got.entity_ids));
  if (info.string_keys())
    HPCML_RETURN_IF_ERROR(check(kEntityKeys, info.digests.entity_keys, got.entity_keys));
  HPCML_RETURN_IF_ERROR(check(kTimestamps, info.digests.timestamps, got.timestamps));
  if (!ints.empty())
    HPCML_RETURN_IF_ERROR(check(kIntValues, info.digests.int_values, got.int_values));
  if (!avail.empty()) {
    HPCML_RETURN_IF_ERROR(
        check(kAvailableTimes, info.digests.available_times, got.available_times));
  }
  if (info.total_categories() > 0)
    HPCML_RETURN_IF_ERROR(check(kCategories, info.digests.categories, got.categories));
  std::string data = DataDigest(info, got);
  if (data != info.data_sha256) {
    return Corrupt("{}: version {}: data_sha256 mismatch (recorded {}, data has {})", v.path(),
                   info.name, info.data_sha256, data);
  }
  return Status::Ok();
}

}  // namespace hpcml::featurecache
