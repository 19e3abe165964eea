#include "hpcml/featurecache/writer.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

#include "column_digests.hpp"
#include "hpcml/common/fs.hpp"
#include "hpcml/common/h5.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/job_env.hpp"
#include "hpcml/common/parallel.hpp"
#include "hpcml/common/time.hpp"
#include "hpcml/featurecache/access.hpp"
#include "hpcml/featurecache/entity_keys.hpp"
#include "hpcml/featurecache/stats.hpp"
#include "hpcml/featurecache/timeutil.hpp"
#include "row_block.hpp"
#include "row_tally.hpp"
#include "set_paths.hpp"
#include "temp_file.hpp"
#include "version_file.hpp"
#include "version_lock.hpp"

namespace hpcml::featurecache {
namespace {

static_assert(std::is_same_v<hid_t, int64_t>, "format.hpp passes hid_t as int64_t");

// Test hook: HPCML_FCACHE_TEST_CRASH=<point> makes the writer SIGKILL itself
// at that point, so tests can prove what a killed writer leaves behind.
void CrashPoint(const char* point) {
  const char* want = std::getenv("HPCML_FCACHE_TEST_CRASH");
  if (want != nullptr && std::strcmp(want, point) == 0) ::raise(SIGKILL);
}

// The feature set as this writer found it, read once by Begin.
struct SetFacts {
  bool creating = false;                 // the set file did not exist
  std::optional<struct stat> published;  // the set file, when it existed
  std::string zone;
  std::string classification;         // the set file's; empty when creating
  std::vector<std::string> versions;  // its versions, in number order
  int64_t next_version = 0;           // the new version's number
};

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

void InheritFeature(const VersionInfo& parent, size_t j,
                    const std::vector<std::vector<std::string>>& categories, NewVersion* spec) {
  const std::string kind(parent.kind(j));
  spec->feature_names.push_back(parent.feature_names[j]);
  spec->feature_types.push_back(kind);
  const bool category = kind == "category";
  if (category || !spec->categories.empty()) {
    spec->categories.resize(spec->feature_names.size());
    if (category) spec->categories.back() = categories.at(j);
  }
}

std::string ToolString() {
  return fmt::format("hpcml-fcache {}", Version());
}

// A version is written to its own file, <set>.d/vN.h5 (through a temporary
// name there), and published by a new copy of the small set file whose
// /versions/vN is an external link to it: the cost of a version is its own
// size, and the set file is still replaced by one rename.
// Each concern has its type: the names of the files (SetPaths), the lock
// (VersionLock), the copy of the set file (a TempFile and its HDF5 file),
// the version's file and datasets (VersionFile), the rows not yet written
// (RowBlock), the rows' digests (ColumnDigests), and their entity range and
// statistics (RowTally).
struct FeatureSetWriter::Impl {
  SetPaths paths;
  AccessContext ctx;
  VersionLock lock;
  SetFacts set;
  TempFile set_temp;  // the copy of the set file ...
  h5::File set_file;  // ... open, from Begin until published
  bool committed = false;

  // The new version, from StartVersion.
  bool started = false;
  NewVersion spec;
  std::string version_name;
  uint64_t chunk_rows = 0;
  CodecChoice codec;
  VersionFile version;
  RowBlock block;     // appended rows not yet written
  uint64_t rows = 0;  // rows written to the version's datasets
  uint64_t flushes = 0;
  ColumnDigests digests;
  RowTally tally;
  unsigned threads = 1;

  ~Impl() { Abort(); }

  Status OpenCopy(const WriterOptions& options);
  Status CreateNew(const WriterOptions& options);
  Status Flush();
  Result<std::string> WriteEntityKeys();
  Result<std::string> WriteCategories();
  VersionInfo FinishInfo(const std::string& keys_digest, const std::string& categories_digest);
  Status WriteDigestsAndAttrs(const VersionInfo& info);
  Status Publish();
  void Abort();
};

// Opens the copy of an existing set: checks its format, zone (against
// options.zone and the job's) and classification, and lists its versions.
Status FeatureSetWriter::Impl::OpenCopy(const WriterOptions& options) {
  const std::string& path = paths.path;
  HPCML_ASSIGN_OR_RETURN(h5::PropList fapl, WriteFapl());
  hid_t id = H5Fopen(set_temp.path().c_str(), H5F_ACC_RDWR, fapl.get());
  if (id < 0)
    return h5::Error(StatusCode::kCorrupt,
                     fmt::format("{}: cannot open the HDF5 file (corrupt or truncated?)", path));
  set_file = h5::File(id);
  auto fmt_attr = h5::ReadStringAttr(set_file.get(), "hpcml_format");
  if (!fmt_attr.ok() || *fmt_attr != kFormatName) {
    return Corrupt(
        "{}: not an hpcml feature set (no hpcml_format attribute on /); refusing to add a "
        "version",
        path);
  }
  auto fv = h5::ReadIntAttr(set_file.get(), "format_version");
  if (!fv.ok()) return Corrupt("{}: {}", path, fv.status().message());
  if (*fv < 1 || *fv > kFormatVersion) {
    return FailedPrecondition("{}: format version {}; this build writes versions 1 to {}", path,
                              *fv, kFormatVersion);
  }
  auto z = h5::ReadStringAttr(set_file.get(), "zone");
  auto c = h5::ReadStringAttr(set_file.get(), "classification");
  if (!z.ok() || !c.ok()) return Corrupt("{}: missing zone or classification attribute on /", path);
  set.zone = *z;
  set.classification = *c;
  if (!options.zone.empty() && options.zone != set.zone) {
    return InvalidArgument(
        "{}: the feature set is in zone '{}', not '{}': a version cannot change zone", path,
        set.zone, options.zone);
  }
  HPCML_RETURN_IF_ERROR(CheckLabels(ctx, paths.canonical, set.zone, set.classification));
  HPCML_ASSIGN_OR_RETURN(
      h5::Group g, h5::Own<h5::Group>(H5Gopen2(set_file.get(), kVersionsGroup, H5P_DEFAULT),
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
  for (auto& [num, n] : numbered) set.versions.push_back(n);
  set.next_version = numbered.empty() ? 1 : numbered.back().first + 1;
  return Status::Ok();
}

// Creates the set file (as the copy, published by the same rename) with its
// format attributes and an empty /versions.
Status FeatureSetWriter::Impl::CreateNew(const WriterOptions& options) {
  if (options.zone.empty())
    return InvalidArgument("{}: a new feature set needs a zone", paths.path);
  HPCML_RETURN_IF_ERROR(ValidateZone(options.zone));
  set.zone = options.zone;
  HPCML_RETURN_IF_ERROR(CheckLabels(ctx, paths.canonical, set.zone, "public"));
  HPCML_ASSIGN_OR_RETURN(h5::PropList fapl, WriteFapl());
  hid_t id = H5Fcreate(set_temp.path().c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get());
  if (id < 0) return h5::Error(StatusCode::kIoError, fmt::format("{}: create", set_temp.path()));
  set_file = h5::File(id);
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(set_file.get(), "hpcml_format", kFormatName));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(set_file.get(), "format_version", kFormatVersion));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(set_file.get(), "zone", set.zone));
  HPCML_ASSIGN_OR_RETURN(
      h5::Group g,
      h5::Own<h5::Group>(
          H5Gcreate2(set_file.get(), kVersionsGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
          StatusCode::kIoError, fmt::format("{}: create /versions", paths.path)));
  set.next_version = 1;
  return Status::Ok();
}

// Writes column `c` of the block, then adds it to its digest: a column is
// hashed only once written.
// Writes the held rows column by column (HDF5, on the calling thread) while,
// with threads, other threads hash the columns and tally the rows: each
// reads the block only.
Status FeatureSetWriter::Impl::Flush() {
  if (block.empty()) return Status::Ok();
  std::vector<Column> columns = {Column::kX};
  if (version.has_labels()) columns.push_back(Column::kY);
  columns.push_back(Column::kEntity);
  columns.push_back(Column::kTime);
  if (version.has_ints()) columns.push_back(Column::kInt);
  if (version.has_available()) columns.push_back(Column::kAvailable);
  Status written;
  auto write = [&] {
    for (Column c : columns) {
      written = version.Write(c, block, rows);
      if (!written.ok()) return;
    }
    version.StartWriteback();
  };
  auto hash = [&] {
    for (Column c : columns) digests.Update(c, block);
  };
  if (threads <= 1) {
    write();
    if (written.ok()) hash();
    tally.Add(block);
  } else {
    ParallelFor(3, 3, [&](unsigned part, size_t, size_t) {
      if (part == 0) write();
      if (part == 1) hash();
      if (part == 2) tally.Add(block);
    });
  }
  HPCML_RETURN_IF_ERROR(written);
  rows += block.rows();
  block.Clear();
  if (++flushes == 1) CrashPoint("mid-write");
  return Status::Ok();
}

FeatureSetWriter::FeatureSetWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FeatureSetWriter::FeatureSetWriter(FeatureSetWriter&&) noexcept = default;
FeatureSetWriter& FeatureSetWriter::operator=(FeatureSetWriter&&) noexcept = default;
FeatureSetWriter::~FeatureSetWriter() = default;

Result<FeatureSetWriter> FeatureSetWriter::Begin(const std::string& path,
                                                 const WriterOptions& options) {
  h5::SilenceErrorPrinting();
  auto impl = std::make_unique<Impl>();
  impl->ctx = AccessContext::FromEnvironment();
  HPCML_ASSIGN_OR_RETURN(std::string canonical, CanonicalPath(path, /*must_exist=*/false));
  HPCML_RETURN_IF_ERROR(CheckPath(impl->ctx, canonical, "write feature set"));
  if (impl->ctx.guarded && !options.zone.empty() && options.zone != impl->ctx.zone) {
    return PermissionDenied(
        "{}: access denied: zone '{}' requested but this job runs in zone '{}' (HPCML_ZONE)",
        canonical, options.zone, impl->ctx.zone);
  }
  impl->threads = options.threads == 0 ? AvailableCpus() : options.threads;
  impl->paths = SetPaths::For(path, std::move(canonical));
  const SetPaths& paths = impl->paths;
  HPCML_ASSIGN_OR_RETURN(impl->lock,
                         VersionLock::Acquire(paths.LockFile(), path, options.lock_timeout_s));
  CrashPoint("after-lock");
  paths.RemoveStaleTemps();
  impl->set_temp = TempFile(paths.NewSetTemp(), paths.canonical);

  struct stat st;
  if (::stat(paths.canonical.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) return InvalidArgument("{}: not a regular file", path);
    htri_t is_hdf5 = H5Fis_hdf5(paths.canonical.c_str());
    if (is_hdf5 <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return Corrupt("{}: exists but is not an HDF5 file; refusing to overwrite it", path);
    }
    impl->set.published = st;
    HPCML_RETURN_IF_ERROR(impl->set_temp.CopyFrom(path, st));
    CrashPoint("after-copy");
    HPCML_RETURN_IF_ERROR(impl->OpenCopy(options));
  } else if (errno == ENOENT) {
    impl->set.creating = true;
    HPCML_RETURN_IF_ERROR(impl->CreateNew(options));
  } else {
    return ErrnoError(path, errno);
  }
  return FeatureSetWriter(std::move(impl));
}

bool FeatureSetWriter::creating() const {
  return impl_->set.creating;
}
const std::string& FeatureSetWriter::zone() const {
  return impl_->set.zone;
}
const std::string& FeatureSetWriter::path() const {
  return impl_->paths.path;
}
const std::vector<std::string>& FeatureSetWriter::existing_versions() const {
  return impl_->set.versions;
}
NewVersion* FeatureSetWriter::mutable_spec() {
  return &impl_->spec;
}
uint64_t FeatureSetWriter::rows() const {
  return impl_->rows + impl_->block.rows();
}

Result<std::string> FeatureSetWriter::StartVersion(const NewVersion& spec) {
  Impl& w = *impl_;
  const std::string& path = w.paths.path;
  if (!w.set_file.valid()) return FailedPrecondition("{}: writer is closed", path);
  if (w.started) return FailedPrecondition("{}: one version per writer", path);
  if (spec.feature_names.empty())
    return InvalidArgument("{}: a version needs at least one feature", path);
  if (spec.feature_types.size() != spec.feature_names.size()) {
    return InvalidArgument("{}: {} feature names but {} types", path, spec.feature_names.size(),
                           spec.feature_types.size());
  }
  for (const auto& k : spec.feature_types) HPCML_RETURN_IF_ERROR(ValidateKind(k).WithContext(path));
  if (!spec.categories.empty() && spec.categories.size() != spec.feature_names.size()) {
    return InvalidArgument("{}: {} features but {} category lists", path, spec.feature_names.size(),
                           spec.categories.size());
  }
  if (!spec.label_classes.empty() && spec.label_name.empty())
    return InvalidArgument("{}: label classes without a label", path);
  std::set<std::string> seen;
  for (const auto& n : spec.feature_names) {
    if (n.empty()) return InvalidArgument("{}: empty feature name", path);
    if (!seen.insert(n).second) return InvalidArgument("{}: feature \"{}\" appears twice", path, n);
  }
  HPCML_RETURN_IF_ERROR(ClassificationLevel(spec.classification).status());
  HPCML_RETURN_IF_ERROR(CheckLabels(w.ctx, w.paths.canonical, w.set.zone, spec.classification));
  if (spec.entity_type != "int" && spec.entity_type != "string")
    return InvalidArgument("{}: entity type \"{}\" is not int or string", path, spec.entity_type);
  HPCML_ASSIGN_OR_RETURN(w.codec, ResolveCodec(spec.codec, spec.compression));
  if (w.codec.codec.starts_with("blosc") && H5Zfilter_avail(kBloscFilterId) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return FailedPrecondition(
        "{}: codec {} needs the Blosc HDF5 filter plugin, which HDF5 cannot load (Debian: apt-get "
        "install hdf5-filter-plugin-blosc-serial; or set HDF5_PLUGIN_PATH)",
        path, w.codec.codec);
  }
  w.spec = spec;
  const uint64_t nfeat = spec.feature_names.size();
  const uint64_t nint = static_cast<uint64_t>(
      std::count(spec.feature_types.begin(), spec.feature_types.end(), "int"));
  const bool labels = !spec.label_name.empty();
  w.chunk_rows = spec.chunk_rows > 0 ? spec.chunk_rows : ChunkRowsFor(nfeat, spec.expected_rows);
  if (w.chunk_rows * std::max(nfeat * 4, nint * 8) >= (uint64_t{1} << 32))
    return InvalidArgument("chunk of {} rows is too large", w.chunk_rows);
  w.version_name = VersionName(w.set.next_version);
  HPCML_RETURN_IF_ERROR(w.paths.MakeVersionDir(w.set.published));
  HPCML_RETURN_IF_ERROR(w.version.Create(
      TempFile(w.paths.NewVersionTemp(w.version_name), w.paths.VersionFile(w.version_name)), path,
      w.version_name, {nfeat, nint, w.chunk_rows, w.codec, labels, !spec.available_name.empty()},
      w.set.published));
  w.block = RowBlock(nfeat, nint, w.chunk_rows, labels, !spec.available_name.empty());
  std::vector<std::string> columns = spec.feature_names;
  if (labels) columns.push_back(spec.label_name);
  // The columns holding codes: category features, and a class label.
  std::vector<bool> coded(columns.size(), false);
  for (size_t j = 0; j < nfeat; ++j) coded[j] = spec.feature_types[j] == "category";
  if (labels) coded.back() = !spec.label_classes.empty();
  w.tally = RowTally(spec.statistics, std::move(columns), labels, std::move(coded));
  w.started = true;
  return w.version_name;
}

Status FeatureSetWriter::Append(const float* x, const float* y, const int64_t* entity_ids,
                                const int64_t* timestamps, uint64_t n, const int64_t* ints,
                                const int64_t* available) {
  Impl& w = *impl_;
  if (!w.started) return FailedPrecondition("{}: Append before StartVersion", w.paths.path);
  if ((y != nullptr) != w.version.has_labels()) {
    return InvalidArgument("{}: labels given for a version without a label column, or missing",
                           w.paths.path);
  }
  if ((ints != nullptr) != w.version.has_ints()) {
    return InvalidArgument("{}: int values given for a version without int features, or missing",
                           w.paths.path);
  }
  if ((available != nullptr) != w.version.has_available()) {
    return InvalidArgument("{}: availability times given for a version without them, or missing",
                           w.paths.path);
  }
  uint64_t done = 0;
  while (done < n) {
    done += w.block.Take(x, y, entity_ids, timestamps, ints, available, done, n - done);
    if (w.block.full()) HPCML_RETURN_IF_ERROR(w.Flush());
  }
  return Status::Ok();
}

// The new version's metadata, its digests included (finishes the hashes).
VersionInfo FeatureSetWriter::Impl::FinishInfo(const std::string& keys_digest,
                                               const std::string& categories_digest) {
  VersionInfo info;
  info.name = version_name;
  info.number = set.next_version;
  info.rows = rows;
  info.feature_names = spec.feature_names;
  info.feature_types = spec.feature_types;
  info.typed = true;
  info.category_counts.assign(spec.feature_names.size(), 0);
  for (size_t j = 0; j < spec.categories.size(); ++j)
    info.category_counts[j] = spec.categories[j].size();
  info.label_name = spec.label_name;
  info.label_classes = spec.label_classes;
  info.entity_name = spec.entity_name;
  info.entity_type = spec.entity_type;
  info.timestamp_name = spec.timestamp_name;
  info.available_name = spec.available_name;
  info.created_at = UtcNow();
  info.created_by = CurrentPrincipal();
  info.operation = spec.operation;
  info.transform = spec.transform;
  info.sources = spec.sources;
  info.parents = spec.parents;
  info.zone = set.zone;
  info.classification = spec.classification;
  info.chunk_rows = chunk_rows;
  info.codec = codec.codec;
  info.compression = codec.level;
  info.tool = ToolString();
  info.digests = digests.Finish(version.has_labels(), version.has_ints(), version.has_available());
  info.digests.entity_keys = keys_digest;
  info.digests.categories = categories_digest;
  info.data_sha256 = DataDigest(info, info.digests);
  return info;
}

// The datasets' digests, the version's attributes, and the file's
// classification (never lowered) and latest version.
Status FeatureSetWriter::Impl::WriteDigestsAndAttrs(const VersionInfo& info) {
  HPCML_RETURN_IF_ERROR(version.WriteDigests(info.digests));
  HPCML_RETURN_IF_ERROR(WriteVersionAttrs(version.group(), info));
  if (tally.has_statistics())
    HPCML_RETURN_IF_ERROR(WriteStats(version.group(), tally.Statistics()));
  std::string classification = spec.classification;
  if (!set.creating) {
    auto old_level = ClassificationLevel(set.classification);
    auto new_level = ClassificationLevel(classification);
    if (old_level.ok() && new_level.ok() && *old_level > *new_level)
      classification = set.classification;
  }
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(set_file.get(), "classification", classification));
  return h5::WriteAttr(set_file.get(), "latest", version_name);
}

// Makes both files durable and puts them in place: the version file (closed,
// fsync, rename to <set>.d/vN.h5, fsync of <set>.d), then the set file with
// its link to it (closed, fsync, rename over the feature set, fsync of the
// directory), unlock. Until the second rename nobody sees the version; a
// version file left by a killed writer is replaced by the next one.
Status FeatureSetWriter::Impl::Publish() {
  HPCML_RETURN_IF_ERROR(version.Publish());
  HPCML_RETURN_IF_ERROR(SyncDirectory(paths.vdir));
  CrashPoint("after-version-rename");
  const std::string link = fmt::format("/{}/{}", kVersionsGroup, version_name);
  if (H5Lcreate_external(VersionFileName(paths.base, version_name).c_str(), "/", set_file.get(),
                         link.c_str(), H5P_DEFAULT, H5P_DEFAULT) < 0) {
    return h5::Error(StatusCode::kIoError, fmt::format("{}: link {}", paths.path, link));
  }
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(set_file.get(), "format_version", kFormatVersion));
  CrashPoint("before-close");
  HPCML_RETURN_IF_ERROR(h5::Close(set_file, set_temp.path()));
  HPCML_RETURN_IF_ERROR(set_temp.Sync());
  CrashPoint("before-rename");
  HPCML_RETURN_IF_ERROR(set_temp.Rename());
  committed = true;
  CrashPoint("after-rename");
  Status synced = SyncDirectory(paths.dir);
  lock.Release();
  return synced;
}

// Closes every handle, deletes both temporary files and unlocks, unless
// committed: the published set is untouched.
void FeatureSetWriter::Impl::Abort() {
  if (committed) return;
  version.CloseHandles();
  set_file.reset();
  set_temp.Discard();
  version.Discard();
  lock.Release();
}

Result<VersionStats> FeatureSetWriter::Statistics() {
  Impl& w = *impl_;
  if (!w.started || !w.tally.has_statistics()) {
    return FailedPrecondition("{}: the new version is written without statistics", w.paths.path);
  }
  HPCML_RETURN_IF_ERROR(w.Flush());
  VersionStats stats = w.tally.Statistics();
  std::vector<std::vector<std::string>> categories = w.spec.categories;
  categories.resize(w.spec.feature_names.size());
  NameCodes(categories, w.spec.label_classes, &stats);
  return stats;
}

// String keys: every code has its key; entity_keys written (fixed-length,
// null-padded UTF-8, in slabs) with its digest.
Result<std::string> FeatureSetWriter::Impl::WriteEntityKeys() {
  const std::vector<std::string>& keys = spec.entity_keys;
  if (spec.entity_type != "string") {
    if (!keys.empty()) return InvalidArgument("{}: entity keys for integer entities", paths.path);
    return std::string();
  }
  if (tally.min_entity() < 0 || static_cast<uint64_t>(tally.max_entity()) >= keys.size()) {
    return InvalidArgument("{}: entity codes {}..{} but {} entity keys", paths.path,
                           tally.min_entity(), tally.max_entity(), keys.size());
  }
  size_t width = 1;
  for (const auto& k : keys) {
    HPCML_RETURN_IF_ERROR(ValidateEntityKey(k));
    width = std::max(width, k.size());
  }
  return version.WriteStrings(kEntityKeys, keys, width);
}

// Every code of a coded column (category feature, class label) names an
// entry of its dictionary; the dictionaries, concatenated in feature order,
// written as `categories` with its digest (none without category features).
Result<std::string> FeatureSetWriter::Impl::WriteCategories() {
  const size_t nfeat = spec.feature_names.size();
  for (size_t j = 0; j <= nfeat; ++j) {
    if (j == nfeat && spec.label_name.empty()) break;
    const bool label = j == nfeat;
    if (!tally.coded(j)) continue;
    const size_t size = label ? spec.label_classes.size()
                              : (j < spec.categories.size() ? spec.categories[j].size() : 0);
    const std::string& name = label ? spec.label_name : spec.feature_names[j];
    if (!tally.CodesWithin(j, size)) {
      return InvalidArgument("{}: column \"{}\" holds codes outside its {} {}", paths.path, name,
                             size, label ? "classes" : "categories");
    }
  }
  std::vector<std::string> all;
  size_t width = 1;
  for (size_t j = 0; j < spec.categories.size(); ++j) {
    if (spec.feature_types[j] != "category" && !spec.categories[j].empty())
      return InvalidArgument("{}: categories for feature \"{}\", which is {}", paths.path,
                             spec.feature_names[j], spec.feature_types[j]);
    for (const auto& c : spec.categories[j]) {
      HPCML_RETURN_IF_ERROR(ValidateEntityKey(c));
      width = std::max(width, c.size());
      all.push_back(c);
    }
  }
  if (all.empty()) return std::string();
  return version.WriteStrings(kCategories, all, width);
}

Result<VersionInfo> FeatureSetWriter::Commit() {
  Impl& w = *impl_;
  if (!w.started) return FailedPrecondition("{}: Commit before StartVersion", w.paths.path);
  HPCML_RETURN_IF_ERROR(w.Flush());
  if (w.rows == 0) return InvalidArgument("{}: the new version would have no rows", w.paths.path);
  HPCML_ASSIGN_OR_RETURN(std::string keys_digest, w.WriteEntityKeys());
  HPCML_ASSIGN_OR_RETURN(std::string categories_digest, w.WriteCategories());
  VersionInfo info = w.FinishInfo(keys_digest, categories_digest);
  HPCML_RETURN_IF_ERROR(w.WriteDigestsAndAttrs(info));
  HPCML_RETURN_IF_ERROR(w.Publish());
  return info;
}

void FeatureSetWriter::Abort() {
  if (impl_) impl_->Abort();
}

}  // namespace hpcml::featurecache
