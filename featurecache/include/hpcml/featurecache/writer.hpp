// Adding a version to a feature set, atomically.
//
// HDF5 1.10 has no transactions, and a file modified in place can be left
// unreadable by a writer killed in the middle of a metadata flush, or be seen
// half-updated by a reader that opens it at that moment. So a writer never
// modifies the published file. It
//   1. takes an exclusive flock on "<dir>/.<name>.lock" (one writer at a time)
//      and deletes temporary files that a killed writer left behind;
//   2. copies the published file to "<dir>/.<name>.tmp-<pid>-<random>"
//      (reflink where the filesystem can, else copy_file_range);
//   3. writes the new version into the copy, closes it and fsyncs it;
//   4. rename(2)s the copy over the published name and fsyncs the directory.
// Readers that opened the file before step 4 keep reading the old inode,
// undisturbed; readers that open after it see every version including the new
// one; a writer killed anywhere leaves the published file untouched or fully
// replaced, never half-written (tests/crash_test.cpp kills writers at each
// step and at random times). The price is one copy of the file per version
// added (free with reflinks); see docs/featurecache.md.
//
// A FeatureSetWriter is used by one thread. Versions are numbered v1, v2, ...
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/format.hpp"
#include "hpcml/featurecache/stats.hpp"

namespace hpcml::featurecache {

struct WriterOptions {
  // Required when the file is created; when it exists, empty means "the
  // file's zone" and anything else must equal it.
  std::string zone;
  // How long to wait for another writer's lock before giving up.
  double lock_timeout_s = 600;
  // Threads that write, hash and tally each block of rows side by side
  // (HDF5 is called from one of them only); 0: AvailableCpus().
  unsigned threads = 0;
};

struct NewVersion {
  std::vector<std::string> feature_names;
  std::vector<std::string> feature_types;  // same length; kinds (format.hpp)
  // Per feature, a category feature's dictionary, in code order (empty for
  // the others; an empty vector: no category features). May be completed
  // until Commit, which checks every code against it.
  std::vector<std::vector<std::string>> categories;
  std::string label_name;  // empty: no labels dataset
  // A class label's names (format.hpp's VersionInfo::label_classes); the
  // labels must be their indices. Empty: a numeric label.
  std::vector<std::string> label_classes;
  std::string entity_name = "entity";
  // "int", or "string": entity ids are codes into entity_keys, which must be
  // complete at Commit (entity_keys.hpp).
  std::string entity_type = "int";
  std::vector<std::string> entity_keys;
  std::string timestamp_name = "timestamp";
  // The column availability times came from (rows then given to Append);
  // empty: none.
  std::string available_name;
  std::string operation;  // ingest, derive, asof
  std::string transform;  // JSON
  std::vector<SourceRef> sources;
  std::vector<ParentRef> parents;
  std::string classification;
  uint64_t chunk_rows = 0;     // 0: ChunkRowsFor(features, expected_rows)
  uint64_t expected_rows = 0;  // upper bound on the rows, when known (sizes chunks)
  std::string codec;           // format.hpp's kCodecs; empty: see ResolveCodec
  int compression = 0;         // the codec's level 0..9 (0: its default)
  bool statistics = true;      // per-column statistics while writing (stats.hpp)
};

// A derived version's codec and level: the parent's when neither is given
// (codec empty, level < 0), else the given ones (ResolveCodec's rules).
void InheritCodec(const VersionInfo& parent, const std::string& codec, int level, NewVersion* spec);

// A version whose rows keep `parent`'s entities: its entity type and keys.
Status InheritEntities(const VersionReader& parent, NewVersion* spec);

// Appends feature `j` of `parent` to spec's features as it is: its name,
// kind (legacy columns are float) and dictionary (`categories`: the
// parent's, from VersionReader::Categories).
void InheritFeature(const VersionInfo& parent, size_t j,
                    const std::vector<std::vector<std::string>>& categories, NewVersion* spec);

class FeatureSetWriter {
 public:
  static Result<FeatureSetWriter> Begin(const std::string& path, const WriterOptions& options);

  FeatureSetWriter(FeatureSetWriter&&) noexcept;
  FeatureSetWriter& operator=(FeatureSetWriter&&) noexcept;
  ~FeatureSetWriter();  // Abort() unless committed

  bool creating() const;  // the file did not exist
  const std::string& zone() const;
  const std::string& path() const;
  const std::vector<std::string>& existing_versions() const;

  // Creates the new version's datasets; returns its name ("v4"). Checks the
  // schema and, inside a guarded job, the classification.
  Result<std::string> StartVersion(const NewVersion& spec);
  // Sources and feature types may be completed until Commit().
  NewVersion* mutable_spec();

  // Appends rows: x is rows * features (row-major); y is null iff the
  // version has no labels; ints (rows * int features, row-major: the exact
  // values of the "int" features, kIntMissing where missing) is null iff it
  // has no int features.
  // `available` (the rows' availability times) is null iff the version has
  // none (NewVersion::available_name).
  Status Append(const float* x, const float* y, const int64_t* entity_ids,
                const int64_t* timestamps, uint64_t rows, const int64_t* ints = nullptr,
                const int64_t* available = nullptr);
  uint64_t rows() const;
  // The statistics of the rows appended so far (stats.hpp), before Commit:
  // for checks that decide whether the version is published at all.
  // FailedPrecondition when the version is written without statistics.
  Result<VersionStats> Statistics();

  // Writes digests and attributes, publishes the file (steps 3 and 4) and
  // releases the lock. A version with no rows is refused.
  Result<VersionInfo> Commit();
  // Deletes the temporary copy and releases the lock; the published file is
  // untouched.
  void Abort();

 private:
  struct Impl;
  explicit FeatureSetWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The tool string recorded in every version ("hpcml-fcache 0.1.0").
std::string ToolString();

}  // namespace hpcml::featurecache
