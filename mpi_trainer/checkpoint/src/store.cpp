#include "hpcml/checkpoint/store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <memory>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/h5.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/owner.hpp"
#include "hpcml/common/time.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::checkpoint {
namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = "manifest.json";
constexpr int kManifestVersion = 1;

std::string ShardName(int rank) {
  return fmt::format("shard-{:05}.h5", rank);
}

nlohmann::json SliceJson(const Slice& s) {
  return {{"offset", s.offset}, {"shape", s.shape}};
}

Slice SliceFromJson(const nlohmann::json& j) {
  return Slice{j.at("offset").get<Shape>(), j.at("shape").get<Shape>()};
}

// A shape as a 1-D int64 attribute; a scalar's empty shape is stored as [0].
Status WriteShapeAttr(hid_t obj, const char* name, const Shape& v) {
  return h5::WriteAttr(obj, name, v.empty() ? Shape{0} : v);
}

// A string attribute of a shard; errors name the shard.
Result<std::string> ReadStringAttr(hid_t obj, const char* name, const std::string& path) {
  auto text = h5::ReadStringAttr(obj, name);
  if (!text.ok()) return Status(text.status().code(), path + ": " + text.status().message());
  return text;
}

Result<Manifest> ReadManifest(const std::string& set_path) {
  std::string path = set_path + "/" + kManifest;
  HPCML_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  Manifest m;
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("version").get<int>() != kManifestVersion) {
      return Corrupt("{}: manifest version {} (expected {})", path, JsonText(j.at("version")),
                     kManifestVersion);
    }
    m.step = j.at("step").get<std::int64_t>();
    m.created_at = j.at("created_at").get<std::string>();
    m.state = j.at("state");
    for (const auto& s : j.at("shards")) {
      HPCML_ASSIGN_OR_RETURN(ShardInfo info, ShardFromJson(s));
      m.shards.push_back(std::move(info));
    }
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("{}: {}", path, e.what());
  }
  return m;
}

Result<std::int64_t> StepOf(const std::string& name) {
  if (name.rfind("step-", 0) != 0 || name.size() != 17) return NotFound("not a set: {}", name);
  std::int64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return NotFound("not a set: {}", name);
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

}  // namespace

nlohmann::json ToJson(const ShardInfo& s) {
  nlohmann::json pieces = nlohmann::json::array();
  for (const auto& p : s.pieces) {
    pieces.push_back(
        {{"tensor", p.tensor}, {"global_shape", p.global_shape}, {"slice", SliceJson(p.slice)}});
  }
  return {{"rank", s.rank},
          {"file", s.file},
          {"checksum", s.checksum},
          {"bytes", s.bytes},
          {"pieces", pieces}};
}

Result<ShardInfo> ShardFromJson(const nlohmann::json& j) {
  ShardInfo s;
  try {
    s.rank = j.at("rank").get<int>();
    s.file = j.at("file").get<std::string>();
    s.checksum = j.at("checksum").get<std::string>();
    s.bytes = j.at("bytes").get<std::uint64_t>();
    for (const auto& p : j.at("pieces")) {
      s.pieces.push_back(Piece{p.at("tensor").get<std::string>(), p.at("global_shape").get<Shape>(),
                               SliceFromJson(p.at("slice"))});
    }
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("shard entry: {}", e.what());
  }
  if (s.file.find('/') != std::string::npos)
    return Corrupt("shard file '{}' must be a plain name", s.file);
  return s;
}

// XXH3-128 over what a shard holds, in the order it is written: per tensor
// its name, global shape, slice and float data; then the rank state.
class ContentHash {
 public:
  ContentHash() : state_(XXH3_createState()) { XXH3_128bits_reset(state_.get()); }
  void Add(const void* p, size_t n) { XXH3_128bits_update(state_.get(), p, n); }
  void AddString(const std::string& s) {
    std::uint64_t n = s.size();
    Add(&n, sizeof n);
    Add(s.data(), s.size());
  }
  void AddShape(const Shape& v) {
    std::uint64_t n = v.size();
    Add(&n, sizeof n);
    Add(v.data(), v.size() * sizeof(std::int64_t));
  }
  std::string Hex() {
    XXH128_hash_t h = XXH3_128bits_digest(state_.get());
    return fmt::format("xxh3-128:{:016x}{:016x}", h.high64, h.low64);
  }

 private:
  Owner<CloseWith<XXH3_state_t*, XXH3_freeState>> state_;
};

Result<std::string> ChecksumShard(const std::string& path, const ShardInfo& info) {
  HPCML_ASSIGN_OR_RETURN(hid_t f,
                         h5::Check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path));
  h5::File file(f);
  ContentHash hash;
  std::vector<float> buf;
  for (const auto& p : info.pieces) {
    HPCML_ASSIGN_OR_RETURN(hid_t d, h5::Check(H5Dopen2(file.get(), p.tensor.c_str(), H5P_DEFAULT),
                                              fmt::format("{}: tensor {}", path, p.tensor)));
    h5::Dataset ds(d);
    h5::Dataspace space(H5Dget_space(ds.get()));
    if (H5Sget_simple_extent_npoints(space.get()) !=
        std::max<std::int64_t>(1, p.slice.elements())) {
      return Corrupt("{}: tensor '{}' has the wrong size", path, p.tensor);
    }
    buf.resize(static_cast<size_t>(p.slice.elements()));
    HPCML_RETURN_IF_ERROR(
        h5::CheckErr(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()),
                     fmt::format("{}: reading {}", path, p.tensor)));
    hash.AddString(p.tensor);
    hash.AddShape(p.global_shape);
    hash.AddShape(p.slice.offset);
    hash.AddShape(p.slice.shape);
    hash.Add(buf.data(), buf.size() * sizeof(float));
  }
  HPCML_ASSIGN_OR_RETURN(std::string state, ReadStringAttr(file.get(), "rank_state", path));
  hash.AddString(state);
  return hash.Hex();
}

Result<CheckpointDir> CheckpointDir::Open(const std::string& dir, int keep) {
  if (keep < 1) return InvalidArgument("checkpoint keep count must be >= 1, got {}", keep);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("{}: cannot create checkpoint directory: {}", dir, ec.message());
  h5::SilenceErrorPrinting();
  return CheckpointDir(dir, keep);
}

std::string CheckpointDir::SetPath(std::int64_t step) const {
  return fmt::format("{}/step-{:012}", dir_, step);
}

Result<ShardInfo> CheckpointDir::WriteShard(std::int64_t step, int rank,
                                            const std::vector<TensorRef>& tensors,
                                            const nlohmann::json& rank_state) const {
  h5::SilenceErrorPrinting();  // per thread: WriteShard may run on the async writer's thread
  std::string set = SetPath(step);
  std::error_code ec;
  fs::create_directories(set, ec);
  if (ec) return IoError("{}: {}", set, ec.message());
  ShardInfo info;
  info.rank = rank;
  info.file = ShardName(rank);
  std::string path = set + "/" + info.file;
  ContentHash hash;
  {
    HPCML_ASSIGN_OR_RETURN(
        hid_t f, h5::Check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), path));
    h5::File file(f);
    HPCML_RETURN_IF_ERROR(
        h5::WriteAttr(file.get(), "rank_state", JsonText(rank_state), h5::StringStorage::kFixed));
    for (const auto& t : tensors) {
      if (t.slice.shape.size() != t.global_shape.size() || t.data == nullptr) {
        return InvalidArgument("{}: tensor '{}' slice {} does not match its {}-d global shape",
                               path, t.name, t.slice.ToString(), t.global_shape.size());
      }
      std::vector<hsize_t> dims(t.slice.shape.begin(), t.slice.shape.end());
      if (dims.empty()) dims.push_back(1);
      h5::Dataspace space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
      HPCML_ASSIGN_OR_RETURN(
          hid_t d, h5::Check(H5Dcreate2(file.get(), t.name.c_str(), H5T_IEEE_F32LE, space.get(),
                                        H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                             fmt::format("{}: tensor {}", path, t.name)));
      h5::Dataset ds(d);
      HPCML_RETURN_IF_ERROR(
          h5::CheckErr(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data),
                       fmt::format("{}: writing {}", path, t.name)));
      HPCML_RETURN_IF_ERROR(WriteShapeAttr(ds.get(), "global_shape", t.global_shape));
      HPCML_RETURN_IF_ERROR(WriteShapeAttr(ds.get(), "offset", t.slice.offset));
      info.pieces.push_back(Piece{t.name, t.global_shape, t.slice});
      hash.AddString(t.name);
      hash.AddShape(t.global_shape);
      hash.AddShape(t.slice.offset);
      hash.AddShape(t.slice.shape);
      hash.Add(t.data, static_cast<size_t>(t.slice.elements()) * sizeof(float));
    }
    HPCML_RETURN_IF_ERROR(h5::CheckErr(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), path));
  }  // closed here: everything HDF5 buffers is in the kernel now
  HPCML_RETURN_IF_ERROR(SyncFile(path));
  hash.AddString(JsonText(rank_state));
  info.checksum = hash.Hex();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(path, errno);
  info.bytes = static_cast<std::uint64_t>(st.st_size);
  return info;
}

Status CheckpointDir::Commit(const Manifest& m) const {
  std::string set = SetPath(m.step);
  // The shard files' directory entries must be durable before the manifest
  // that names them.
  HPCML_RETURN_IF_ERROR(SyncDirectory(set));
  nlohmann::json shards = nlohmann::json::array();
  for (const auto& s : m.shards) shards.push_back(ToJson(s));
  nlohmann::json j = {{"version", kManifestVersion},
                      {"step", m.step},
                      {"created_at", m.created_at.empty() ? UtcNow() : m.created_at},
                      {"state", m.state},
                      {"shards", shards}};
  HPCML_RETURN_IF_ERROR(WriteFileAtomic(set + "/" + kManifest, JsonText(j, 1)));
  HPCML_RETURN_IF_ERROR(SyncDirectory(dir_));

  // Retention: keep the newest `keep_` complete sets; drop incomplete sets
  // older than the one just committed (a writer killed half way).
  int complete = 0;
  for (std::int64_t step : ListSteps()) {
    std::string p = SetPath(step);
    bool has_manifest = fs::exists(p + "/" + kManifest);
    bool drop = has_manifest ? ++complete > keep_ : step < m.step;
    if (drop) {
      std::error_code ec;
      fs::remove_all(p, ec);  // best effort: a leftover set is harmless
    }
  }
  return Status::Ok();
}

std::vector<std::int64_t> CheckpointDir::ListSteps() const {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (!e.is_directory()) continue;
    auto s = StepOf(e.path().filename().string());
    if (s.ok()) steps.push_back(*s);
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

Result<LoadedSet> CheckpointDir::Load(std::int64_t step, bool verify) const {
  LoadedSet set;
  set.path_ = SetPath(step);
  HPCML_ASSIGN_OR_RETURN(set.manifest_, ReadManifest(set.path_));
  if (set.manifest_.step != step) {
    return Corrupt("{}: manifest says step {}", set.path_, set.manifest_.step);
  }
  for (const auto& s : set.manifest_.shards) {
    std::string p = set.path_ + "/" + s.file;
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return ErrnoError(p, errno);
    if (static_cast<std::uint64_t>(st.st_size) != s.bytes) {
      return Corrupt("{}: {} bytes, manifest says {}", p, st.st_size, s.bytes);
    }
    if (verify) {
      HPCML_ASSIGN_OR_RETURN(std::string sum, ChecksumShard(p, s));
      if (sum != s.checksum)
        return Corrupt("{}: checksum mismatch (shard damaged after it was written)", p);
    }
  }
  return set;
}

Result<LoadedSet> CheckpointDir::LoadLatest(bool verify, std::vector<std::string>* warnings) const {
  for (std::int64_t step : ListSteps()) {
    if (!fs::exists(SetPath(step) + "/" + kManifest)) {
      if (warnings)
        warnings->push_back(fmt::format("{}: incomplete (no manifest), skipped", SetPath(step)));
      continue;
    }
    auto set = Load(step, verify);
    if (set.ok()) return set;
    if (warnings)
      warnings->push_back(fmt::format("{}; using an older checkpoint", set.status().message()));
  }
  return NotFound("{}: no complete checkpoint", dir_);
}

Result<Shape> LoadedSet::GlobalShape(const std::string& name) const {
  for (const auto& s : manifest_.shards) {
    for (const auto& p : s.pieces) {
      if (p.tensor == name) return p.global_shape;
    }
  }
  return NotFound("{}: no tensor '{}' in the checkpoint", path_, name);
}

Status LoadedSet::Read(const std::string& name, const Slice& want, float* out) const {
  HPCML_ASSIGN_OR_RETURN(Shape global, GlobalShape(name));
  if (want.shape.size() != global.size()) {
    return InvalidArgument("{}: tensor '{}' is {}-d, asked for {}", path_, name, global.size(),
                           want.ToString());
  }
  std::int64_t covered = 0;
  std::vector<float> buf;
  for (const auto& s : manifest_.shards) {
    for (const auto& p : s.pieces) {
      if (p.tensor != name) continue;
      if (p.global_shape != global)
        return Corrupt("{}: tensor '{}' has two global shapes", path_, name);
      auto overlap = Intersect(p.slice, want);
      if (!overlap) continue;
      std::string file = path_ + "/" + s.file;
      HPCML_ASSIGN_OR_RETURN(hid_t f,
                             h5::Check(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), file));
      h5::File h(f);
      HPCML_ASSIGN_OR_RETURN(hid_t d, h5::Check(H5Dopen2(h.get(), name.c_str(), H5P_DEFAULT),
                                                fmt::format("{}: tensor {}", file, name)));
      h5::Dataset ds(d);
      // Read only the overlapping box (a hyperslab), then place it.
      std::vector<hsize_t> start, count;
      for (size_t i = 0; i < global.size(); ++i) {
        start.push_back(static_cast<hsize_t>(overlap->offset[i] - p.slice.offset[i]));
        count.push_back(static_cast<hsize_t>(overlap->shape[i]));
      }
      if (start.empty()) {
        start.push_back(0);
        count.push_back(1);
      }
      h5::Dataspace file_space(H5Dget_space(ds.get()));
      if (static_cast<size_t>(H5Sget_simple_extent_ndims(file_space.get())) != count.size()) {
        return Corrupt("{}: tensor '{}' has the wrong rank", file, name);
      }
      HPCML_RETURN_IF_ERROR(
          h5::CheckErr(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr,
                                           count.data(), nullptr),
                       fmt::format("{}: selecting {}", file, overlap->ToString())));
      h5::Dataspace mem_space(
          H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr));
      buf.resize(static_cast<size_t>(overlap->elements()));
      HPCML_RETURN_IF_ERROR(
          h5::CheckErr(H5Dread(ds.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(),
                               H5P_DEFAULT, buf.data()),
                       fmt::format("{}: reading {} {}", file, name, overlap->ToString())));
      CopyRegion(*overlap, *overlap, buf.data(), want, out);
      covered += overlap->elements();
    }
  }
  // Saved pieces never overlap each other (each element has one owner), so
  // counting elements tells whether the request is fully covered.
  if (covered != want.elements()) {
    return Corrupt("{}: tensor '{}' {}: only {} of {} elements saved", path_, name, want.ToString(),
                   covered, want.elements());
  }
  return Status::Ok();
}

Result<nlohmann::json> LoadedSet::RankState(int rank) const {
  for (const auto& s : manifest_.shards) {
    if (s.rank != rank) continue;
    std::string file = path_ + "/" + s.file;
    HPCML_ASSIGN_OR_RETURN(hid_t f,
                           h5::Check(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), file));
    h5::File h(f);
    HPCML_ASSIGN_OR_RETURN(std::string text, ReadStringAttr(h.get(), "rank_state", file));
    try {
      return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      return Corrupt("{}: rank_state: {}", file, e.what());
    }
  }
  return NotFound("{}: no shard of rank {}", path_, rank);
}

}  // namespace hpcml::checkpoint
