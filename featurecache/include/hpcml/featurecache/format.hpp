// The on-disk format of a feature set (docs/featurecache.md is the reference):
//
//   /                      attrs: hpcml_format, format_version, zone,
//                                 classification (highest of any version), latest
//   /versions/v<N>         one immutable version, N = 1, 2, ...: since format 2
//                          an external link to the root group of its own file
//                          <set>.d/v<N>.h5 beside the set (VersionFileName),
//                          so adding a version writes only that version; in
//                          format 1 files, a group holding the same:
//       features     float32 (rows, features), chunked (chunk_rows, features)
//       labels       float32 (rows)            absent when the version has no label
//       entity_ids   int64   (rows)            the entity; with entity_type "string",
//                                              the code of its key in entity_keys
//       entity_keys  fixed-length UTF-8 (keys) string-keyed versions only (entity_keys.hpp)
//       timestamps   int64   (rows)            microseconds since 1970-01-01T00:00:00Z
//       available_times int64 (rows)           when each row became known (same unit);
//                                              versions ingested with an availability
//                                              column only (asof --known-at)
//       int_values   int64   (rows, int features)  typed versions with "int"
//                                              features: their exact values,
//                                              kIntMissing where missing
//       categories   fixed-length UTF-8        typed versions with "category"
//                                              features: each one's dictionary,
//                                              in feature order (category_counts)
//     attrs: see VersionInfo
//
// Column kinds (feature_types): every feature has a float32 column in
// `features`, the matrix models read; what it holds depends on the kind:
//   float     the value; NaN where missing
//   int       float32 of the value (rounded beyond 2^24); NaN where missing;
//             typed versions also keep the exact int64 in int_values
//   bool      1 or 0; NaN where missing
//   category  the code of the value in the column's dictionary (0..K-1, in
//             order of first appearance; exact, K <= 2^24); NaN where missing
// A version is "typed" (attribute typed_columns = 1) when written by a build
// that knows kinds; older versions read as before: all columns float32, their
// feature_types ("int"/"float") only how the cells looked.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::featurecache {

inline constexpr std::string_view kFormatName = "hpcml-featurecache";
inline constexpr int64_t kFormatVersion = 2;
inline constexpr const char* kVersionsGroup = "versions";
inline constexpr const char* kFeatures = "features";
inline constexpr const char* kLabels = "labels";
inline constexpr const char* kEntityIds = "entity_ids";
inline constexpr const char* kEntityKeys = "entity_keys";
inline constexpr const char* kTimestamps = "timestamps";
inline constexpr const char* kAvailableTimes = "available_times";
inline constexpr const char* kIntValues = "int_values";
inline constexpr const char* kCategories = "categories";

// The kinds of a feature column (see the top of this file).
inline constexpr std::string_view kKinds[] = {"float", "int", "bool", "category"};
// "float", ... or InvalidArgument naming the kinds.
Status ValidateKind(std::string_view kind);
// The int_values cell of a missing value (R's NA_integer_ is the same idea).
inline constexpr int64_t kIntMissing = INT64_MIN;
// Categories per column, at most: codes stay exact in float32.
inline constexpr uint64_t kMaxCategories = uint64_t{1} << 24;
// Classes of a string label, at most.
inline constexpr uint64_t kMaxLabelClasses = 65536;

// The external link target of version `version` of the set file named
// `set_base` (its file name, no directory): "<set_base>.d/<version>.h5",
// relative to the set's directory. Readers accept exactly this target.
std::string VersionFileName(std::string_view set_base, std::string_view version);

// Classification levels, lowest first: public < internal < confidential < restricted.
Result<int> ClassificationLevel(std::string_view name);
const std::vector<std::string>& ClassificationNames();

// The classification of data derived from `parent` (derive, asof, scoring
// output), which may not be below the parent's. Empty `requested` means the
// parent's.
Result<std::string> ChildClassification(const std::string& parent, const std::string& requested);

// How a version's chunks are compressed, with a byte shuffle whenever they
// are: "none"; "deflate" (HDF5's own; decodes at about 0.5 GB/s a core);
// "blosc-lz4" and "blosc-zstd" (the Blosc HDF5 filter, id 32001, from
// Debian's hdf5-filter-plugin-blosc-serial, which h5py finds without
// settings; LZ4 decodes at several GB/s a core).
inline constexpr std::string_view kCodecs[] = {"none", "deflate", "blosc-lz4", "blosc-zstd"};
inline constexpr int kBloscFilterId = 32001;

struct CodecChoice {
  std::string codec;
  int level = 0;
};
// The codec and level a new version is written with. An empty `codec` keeps
// the old meaning of a bare level: deflate when level > 0, else none. Level 0
// with a codec means its default (deflate 4, blosc 5). InvalidArgument names
// the bad codec or level.
Result<CodecChoice> ResolveCodec(std::string_view codec, int level);
// "deflate 4 + shuffle", "blosc-lz4 5 + shuffle", "none".
std::string DescribeCodec(std::string_view codec, int level);

// A zone is a short token: letters, digits, '-', '_' (1 to 64 characters).
Status ValidateZone(std::string_view zone);

// "v3" <-> 3. ParseVersionName also accepts "3"; not "latest" (see
// FeatureSet::Resolve).
Result<int64_t> ParseVersionName(std::string_view name);
std::string VersionName(int64_t number);

struct SourceRef {
  std::string uri;     // file:///abs/path.csv
  std::string sha256;  // of the file's bytes
};

struct ParentRef {
  std::string version;  // "v2"
  std::string sha256;   // that version's data_sha256
};

// SHA-256 of each dataset's raw little-endian bytes in row-major order.
struct DatasetDigests {
  std::string features, labels, entity_ids, timestamps;
  std::string entity_keys;      // string-keyed versions only
  std::string int_values;       // typed versions with int features only
  std::string categories;       // typed versions with category features only
  std::string available_times;  // versions with availability times only
};

// Everything a version records about itself (its group's attributes).
struct VersionInfo {
  std::string name;  // "v3"
  int64_t number = 0;
  uint64_t rows = 0;
  std::vector<std::string> feature_names;
  // Per feature, its kind (kKinds); in versions that are not typed, "float"
  // or "int" as the cells looked, every column stored as float32 only.
  std::vector<std::string> feature_types;
  bool typed = false;  // see the top of this file
  // Typed versions: per feature, how many categories its dictionary holds
  // (0 unless a category feature).
  std::vector<uint64_t> category_counts;
  std::string label_name;  // empty: no labels dataset
  // A class label's names, in sorted byte order (as scikit-learn's
  // LabelEncoder): label value i means label_classes[i]. Empty: the label is
  // a number.
  std::vector<std::string> label_classes;
  std::string entity_name;
  std::string entity_type = "int";  // "int", or "string" (entity_keys.hpp)
  std::string timestamp_name;
  // The column the availability times came from; empty: the version has
  // none (and cannot be joined "as known at").
  std::string available_name;
  std::string created_at;  // ISO 8601 UTC
  std::string created_by;  // user@host, with the job and role when inside one
  std::string operation;   // ingest, derive or asof
  std::string transform;   // JSON describing the operation and its parameters
  std::vector<SourceRef> sources;
  std::vector<ParentRef> parents;
  std::string zone;
  std::string classification;
  std::string data_sha256;
  DatasetDigests digests;
  uint64_t chunk_rows = 0;
  std::string codec = "none";  // see kCodecs
  int compression = 0;         // the codec's level (0 with "none")
  std::string tool;            // "hpcml-fcache <version>"

  size_t features() const { return feature_names.size(); }
  bool has_labels() const { return !label_name.empty(); }
  bool string_keys() const { return entity_type == "string"; }
  bool has_available() const { return !available_name.empty(); }
  // Feature j's kind, "float" for every column of a version that is not
  // typed (its values are float32 only).
  std::string_view kind(size_t j) const {
    return typed ? std::string_view(feature_types[j]) : std::string_view("float");
  }
  // Features of kind "int" in a typed version (columns of int_values) and
  // the total size of the category dictionaries.
  size_t int_features() const;
  uint64_t total_categories() const;
};

// One column's standardisation as a derive recorded it in its transform:
// the stored value is float((raw - mean) / scale), computed in double.
struct ColumnScaling {
  std::string column;
  double mean = 0, scale = 1;
};

// The columns that `info`'s own transform standardised, in its order (empty
// when it standardised none). Corrupt, naming the version, when the
// transform's standardize block is malformed.
Result<std::vector<ColumnScaling>> RecordedStandardization(const VersionInfo& info);

// The version digest: SHA-256 of this text (labels line only with labels,
// entity_keys line only with string keys):
//   hpcml-featurecache-v1\nrows=<N>\nfeatures=<F>\nfeatures:<hex>\n
//   labels:<hex>\nentity_ids:<hex>\nentity_keys:<hex>\ntimestamps:<hex>\n
// and for a typed version, "hpcml-featurecache-v2" on its first line, then
// the same lines, then kinds=<k1,k2,...>\n, label_classes=<JSON list>\n
// (with labels), and, when the version has them, int_values:<hex>\n,
// categories:<hex>\ncategory_counts=<c1,c2,...>\n: kinds, class names and
// dictionaries are data, so they are covered.
std::string DataDigest(const VersionInfo& info, const DatasetDigests& d);

// Version attributes <-> VersionInfo. Reading checks that every attribute is
// present and well-formed (Corrupt names the missing one).
Status WriteVersionAttrs(int64_t group, const VersionInfo& info);
Result<VersionInfo> ReadVersionAttrs(int64_t group, std::string_view name);

// Rows per chunk for `features` columns when the user gave none: about
// 1 MiB per chunk, and a whole number of 4 KiB pages where that is possible,
// so page-aligned chunks keep reads aligned.
uint64_t DefaultChunkRows(uint64_t features);
// The same, but no larger than needed for `expected_rows` (an upper bound on
// the version's rows; 0: unknown), so small versions do not allocate 1 MiB
// chunks.
uint64_t ChunkRowsFor(uint64_t features, uint64_t expected_rows);

}  // namespace hpcml::featurecache
