// Read access to a feature set file: its versions, their metadata and rows.
//
// A FeatureSet is a snapshot: it holds the file that was at `path` when it was
// opened, so a writer publishing a new version meanwhile (which replaces the
// file by rename, see writer.hpp) never disturbs it. Open again to see new
// versions. Opening performs the access check of access.hpp.
//
// Thread safety: a FeatureSet and a VersionReader may be used from several
// threads (HDF5 serialises calls); their methods are const.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/h5.hpp"
#include "hpcml/common/status.hpp"
#include "hpcml/featurecache/format.hpp"
#include "hpcml/featurecache/stats.hpp"

namespace hpcml::featurecache {

class VersionReader {
 public:
  const VersionInfo& info() const { return info_; }
  uint64_t rows() const { return info_.rows; }
  size_t features() const { return info_.features(); }
  const std::string& path() const { return path_; }

  // Rows [first, first + count) into the given arrays (x: count * features,
  // row-major; the others: count). A null pointer skips that dataset; y must
  // be null for a version without labels.
  Status Read(uint64_t first, uint64_t count, float* x, float* y, int64_t* entity_ids,
              int64_t* timestamps) const;

  // Rows [first, first + count) of int_values (count * int features,
  // row-major; kIntMissing where missing): the exact values of the int
  // features of a typed version. InvalidArgument when it has none.
  Status ReadInts(uint64_t first, uint64_t count, int64_t* ints) const;
  // Rows [first, first + count) of available_times; InvalidArgument for a
  // version without them.
  Status ReadAvailable(uint64_t first, uint64_t count, int64_t* available) const;

  // The keys of a string-keyed version (entity_keys.hpp), in code order;
  // empty for integer entities.
  Result<std::vector<std::string>> EntityKeys() const;
  // Per feature, its categories in code order (empty for features that are
  // not category features).
  Result<std::vector<std::vector<std::string>>> Categories() const;

  // For the loader's direct reads.
  hid_t features_dataset() const { return features_.get(); }
  hid_t labels_dataset() const { return labels_.get(); }
  hid_t file_id() const { return file_->get(); }  // the file holding the version

 private:
  friend class FeatureSet;
  friend Status VerifyVersion(const VersionReader& version);
  Status ReadSlab(hid_t dset, hid_t mem_type, uint64_t first, uint64_t count, uint64_t width,
                  void* out, const char* name) const;

  std::shared_ptr<h5::File> file_;
  std::string path_;
  VersionInfo info_;
  h5::Dataset features_, labels_, entity_ids_, timestamps_, entity_keys_, int_values_, categories_,
      available_;
};

class FeatureSet {
 public:
  // Opens `path` read-only. Errors: NotFound (no file), Corrupt (not HDF5,
  // truncated, not a feature set, inconsistent), PermissionDenied (access
  // check inside a guarded job).
  static Result<FeatureSet> Open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::string& canonical_path() const { return canonical_; }
  const std::string& zone() const { return zone_; }
  const std::string& classification() const { return classification_; }
  // Published versions, oldest first ("v1", "v2", ...), and the newest.
  const std::vector<std::string>& versions() const { return versions_; }
  const std::string& latest() const { return latest_; }

  // "", "latest", "v3" or "3" -> "v3"; NotFound for an unknown version.
  Result<std::string> Resolve(std::string_view spec) const;
  // A version's attributes, including the per-dataset digests.
  Result<VersionInfo> Info(std::string_view spec) const;
  // The statistics recorded when the version was written (stats.hpp);
  // NotFound for a version written before they were recorded.
  Result<VersionStats> Stats(std::string_view spec) const;
  // Opens a version's datasets and checks their shapes against its
  // attributes (Corrupt on any mismatch).
  Result<VersionReader> OpenVersion(std::string_view spec) const;

 private:
  // A version's group and the file that holds it (the set's, or its own).
  struct VersionGroup {
    std::shared_ptr<h5::File> file;
    h5::Group group;
  };
  Result<VersionGroup> OpenVersionGroup(const std::string& name) const;
  Result<VersionGroup> OpenExternalVersion(hid_t versions, const std::string& name,
                                           size_t val_size) const;
  Result<VersionInfo> InfoOf(const VersionGroup& vg, const std::string& name) const;

  std::shared_ptr<h5::File> file_;
  std::string path_, canonical_, zone_, classification_, latest_;
  std::vector<std::string> versions_;
};

// Recomputes every digest of a version by reading all of it (memory bounded):
// each dataset's SHA-256, the version's data_sha256, and the shapes. Corrupt
// names the first dataset that differs.
Status VerifyVersion(const VersionReader& version);

// Reads the `sha256` attribute of each dataset of the version group (labels
// and entity keys when `info` has them).
Result<DatasetDigests> ReadDatasetDigests(hid_t group, const VersionInfo& info);

}  // namespace hpcml::featurecache
