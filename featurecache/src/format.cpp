#include "hpcml/featurecache/format.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <numeric>

#include "hpcml/common/h5.hpp"
#include "hpcml/common/sha256.hpp"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace hpcml::featurecache {

const std::vector<std::string>& ClassificationNames() {
  static const std::vector<std::string> kNames = {"public", "internal", "confidential",
                                                  "restricted"};
  return kNames;
}

Result<int> ClassificationLevel(std::string_view name) {
  const auto& names = ClassificationNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return InvalidArgument(
      "unknown classification \"{}\" (use public, internal, confidential or restricted)", name);
}

Status ValidateZone(std::string_view zone) {
  if (zone.empty() || zone.size() > 64)
    return InvalidArgument("zone \"{}\": must be 1 to 64 characters", zone);
  for (char c : zone) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) return InvalidArgument("zone \"{}\": use letters, digits, '-' and '_' only", zone);
  }
  return Status::Ok();
}

Result<int64_t> ParseVersionName(std::string_view name) {
  std::string_view digits = name;
  if (!digits.empty() && (digits.front() == 'v' || digits.front() == 'V')) digits.remove_prefix(1);
  int64_t n = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() || n < 1) {
    return InvalidArgument("\"{}\" is not a version (use v1, v2, ... or latest)", name);
  }
  return n;
}

std::string VersionName(int64_t number) {
  return fmt::format("v{}", number);
}

Status ValidateKind(std::string_view kind) {
  if (std::find(std::begin(kKinds), std::end(kKinds), kind) != std::end(kKinds))
    return Status::Ok();
  return InvalidArgument("unknown column kind \"{}\" (float, int, bool or category)", kind);
}

size_t VersionInfo::int_features() const {
  if (!typed) return 0;
  return static_cast<size_t>(std::count(feature_types.begin(), feature_types.end(), "int"));
}

uint64_t VersionInfo::total_categories() const {
  return std::accumulate(category_counts.begin(), category_counts.end(), uint64_t{0});
}

std::string DataDigest(const VersionInfo& info, const DatasetDigests& d) {
  std::string text = fmt::format("hpcml-featurecache-v{}\nrows={}\nfeatures={}\nfeatures:{}\n",
                                 info.typed ? 2 : 1, info.rows, info.features(), d.features);
  if (info.has_labels()) text += fmt::format("labels:{}\n", d.labels);
  text += fmt::format("entity_ids:{}\n", d.entity_ids);
  if (!d.entity_keys.empty()) text += fmt::format("entity_keys:{}\n", d.entity_keys);
  text += fmt::format("timestamps:{}\n", d.timestamps);
  if (info.has_available())
    text += fmt::format("available_times:{}\navailable_name={}\n", d.available_times,
                        info.available_name);
  if (!info.typed) return Sha256::Hex(text);
  text += fmt::format("kinds={}\n", fmt::join(info.feature_types, ","));
  if (info.has_labels())
    text += fmt::format("label_classes={}\n", nlohmann::json(info.label_classes).dump());
  if (info.int_features() > 0) text += fmt::format("int_values:{}\n", d.int_values);
  if (info.total_categories() > 0) {
    text += fmt::format("categories:{}\ncategory_counts={}\n", d.categories,
                        fmt::join(info.category_counts, ","));
  }
  return Sha256::Hex(text);
}

namespace {

std::vector<std::string> Column(const std::vector<SourceRef>& v, bool uri) {
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(uri ? s.uri : s.sha256);
  return out;
}

std::vector<std::string> Column(const std::vector<ParentRef>& v, bool name) {
  std::vector<std::string> out;
  for (const auto& p : v) out.push_back(name ? p.version : p.sha256);
  return out;
}

// The typed columns' attributes of version `v` against each other;
// v.category_counts set from `counts`.
Status CheckKinds(VersionInfo& v, int64_t typed, const std::vector<int64_t>& counts) {
  if (typed != 1) return Corrupt("version {}: typed_columns is {}, not 1", v.name, typed);
  v.typed = true;
  if (counts.size() != v.feature_names.size() || v.feature_types.size() != counts.size())
    return Corrupt("version {}: feature_types or category_counts of the wrong length", v.name);
  for (size_t j = 0; j < counts.size(); ++j) {
    HPCML_RETURN_IF_ERROR(ValidateKind(v.feature_types[j]).WithContext("version " + v.name));
    const bool category = v.feature_types[j] == "category";
    if (counts[j] < 0 || static_cast<uint64_t>(counts[j]) > kMaxCategories ||
        (!category && counts[j] != 0)) {
      return Corrupt("version {}: feature {} has {} categories", v.name, v.feature_names[j],
                     counts[j]);
    }
    v.category_counts.push_back(static_cast<uint64_t>(counts[j]));
  }
  if (!v.label_classes.empty() && v.label_name.empty())
    return Corrupt("version {}: label classes without a label", v.name);
  return Status::Ok();
}

}  // namespace

Status WriteVersionAttrs(int64_t group, const VersionInfo& v) {
  hid_t g = group;
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "version", v.number));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "rows", static_cast<int64_t>(v.rows)));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "feature_names", v.feature_names));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "feature_types", v.feature_types));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "label_name", v.label_name));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "entity_name", v.entity_name));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "entity_type", v.entity_type));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "timestamp_name", v.timestamp_name));
  if (v.has_available())
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "available_name", v.available_name));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "created_at", v.created_at));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "created_by", v.created_by));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "operation", v.operation));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "transform", v.transform));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "source_uris", Column(v.sources, true)));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "source_sha256", Column(v.sources, false)));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "parents", Column(v.parents, true)));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "parent_sha256", Column(v.parents, false)));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "zone", v.zone));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "classification", v.classification));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "data_sha256", v.data_sha256));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "chunk_rows", static_cast<int64_t>(v.chunk_rows)));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "codec", v.codec));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "compression", static_cast<int64_t>(v.compression)));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "tool", v.tool));
  if (v.typed) {
    std::vector<int64_t> counts(v.category_counts.begin(), v.category_counts.end());
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "typed_columns", int64_t{1}));
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "category_counts", counts));
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "label_classes", v.label_classes));
  }
  return Status::Ok();
}

Result<VersionInfo> ReadVersionAttrs(int64_t group, std::string_view name) {
  hid_t g = group;
  VersionInfo v;
  v.name = std::string(name);
  auto ctx = [&](const Status& st) {
    return Status(st.code(), fmt::format("version {}: {}", name, st.message()));
  };
#define FC_READ(field, fn, attr)                      \
  do {                                                \
    auto r_ = fn(g, attr);                            \
    if (!r_.ok()) return ctx(std::move(r_).status()); \
    field = std::move(r_).value();                    \
  } while (0)
  int64_t rows = 0, chunk_rows = 0, compression = 0;
  std::vector<std::string> uris, uri_sums, parents, parent_sums;
  FC_READ(v.number, h5::ReadIntAttr, "version");
  FC_READ(rows, h5::ReadIntAttr, "rows");
  FC_READ(v.feature_names, h5::ReadStringListAttr, "feature_names");
  FC_READ(v.feature_types, h5::ReadStringListAttr, "feature_types");
  FC_READ(v.label_name, h5::ReadStringAttr, "label_name");
  FC_READ(v.entity_name, h5::ReadStringAttr, "entity_name");
  FC_READ(v.timestamp_name, h5::ReadStringAttr, "timestamp_name");
  if (h5::HasAttr(g, "available_name"))
    FC_READ(v.available_name, h5::ReadStringAttr, "available_name");
  FC_READ(v.created_at, h5::ReadStringAttr, "created_at");
  FC_READ(v.created_by, h5::ReadStringAttr, "created_by");
  FC_READ(v.operation, h5::ReadStringAttr, "operation");
  FC_READ(v.transform, h5::ReadStringAttr, "transform");
  FC_READ(uris, h5::ReadStringListAttr, "source_uris");
  FC_READ(uri_sums, h5::ReadStringListAttr, "source_sha256");
  FC_READ(parents, h5::ReadStringListAttr, "parents");
  FC_READ(parent_sums, h5::ReadStringListAttr, "parent_sha256");
  FC_READ(v.zone, h5::ReadStringAttr, "zone");
  FC_READ(v.classification, h5::ReadStringAttr, "classification");
  FC_READ(v.data_sha256, h5::ReadStringAttr, "data_sha256");
  FC_READ(chunk_rows, h5::ReadIntAttr, "chunk_rows");
  FC_READ(compression, h5::ReadIntAttr, "compression");
  FC_READ(v.tool, h5::ReadStringAttr, "tool");
  // Versions written before string keys have integer entities.
  if (h5::HasAttr(g, "entity_type")) FC_READ(v.entity_type, h5::ReadStringAttr, "entity_type");
  if (v.entity_type != "int" && v.entity_type != "string")
    return Corrupt("version {}: entity_type is \"{}\", not int or string", name, v.entity_type);
  // Versions written before codecs had only the deflate level.
  if (h5::HasAttr(g, "codec")) {
    FC_READ(v.codec, h5::ReadStringAttr, "codec");
  } else {
    v.codec = compression > 0 ? "deflate" : "none";
  }
  // Versions written before kinds: every column float32.
  if (h5::HasAttr(g, "typed_columns")) {
    int64_t typed = 0;
    std::vector<int64_t> counts;
    FC_READ(typed, h5::ReadIntAttr, "typed_columns");
    FC_READ(counts, h5::ReadIntListAttr, "category_counts");
    FC_READ(v.label_classes, h5::ReadStringListAttr, "label_classes");
    HPCML_RETURN_IF_ERROR(CheckKinds(v, typed, counts));
  }
#undef FC_READ
  if (rows < 0 || chunk_rows < 1 || compression < 0 || compression > 9 ||
      std::find(std::begin(kCodecs), std::end(kCodecs), v.codec) == std::end(kCodecs)) {
    return Corrupt("version {}: bad rows, chunk_rows, codec or compression attribute", name);
  }
  v.rows = static_cast<uint64_t>(rows);
  v.chunk_rows = static_cast<uint64_t>(chunk_rows);
  v.compression = static_cast<int>(compression);
  if (v.feature_types.size() != v.feature_names.size()) {
    return Corrupt("version {}: {} feature names but {} feature types", name,
                   v.feature_names.size(), v.feature_types.size());
  }
  if (uris.size() != uri_sums.size() || parents.size() != parent_sums.size()) {
    return Corrupt("version {}: source or parent lists of different lengths", name);
  }
  for (size_t i = 0; i < uris.size(); ++i) v.sources.push_back({uris[i], uri_sums[i]});
  for (size_t i = 0; i < parents.size(); ++i) v.parents.push_back({parents[i], parent_sums[i]});
  auto expected = VersionName(v.number);
  if (expected != name) return Corrupt("version {}: its version attribute says {}", name, expected);
  return v;
}

std::string VersionFileName(std::string_view set_base, std::string_view version) {
  return fmt::format("{}.d/{}.h5", set_base, version);
}

Result<CodecChoice> ResolveCodec(std::string_view codec, int level) {
  if (level < 0 || level > 9) return InvalidArgument("compression level {} is not in 0..9", level);
  if (codec.empty()) return CodecChoice{level > 0 ? "deflate" : "none", level};
  if (codec == "none") {
    if (level > 0) return InvalidArgument("--codec none takes no compression level");
    return CodecChoice{"none", 0};
  }
  if (codec == "deflate") return CodecChoice{"deflate", level > 0 ? level : 4};
  if (codec == "blosc-lz4" || codec == "blosc-zstd")
    return CodecChoice{std::string(codec), level > 0 ? level : 5};
  return InvalidArgument("unknown codec '{}' (none, deflate, blosc-lz4 or blosc-zstd)", codec);
}

std::string DescribeCodec(std::string_view codec, int level) {
  if (codec == "none") return "none";
  return fmt::format("{} {} + shuffle", codec, level);
}

uint64_t DefaultChunkRows(uint64_t features) {
  const uint64_t row_bytes = 4 * std::max<uint64_t>(features, 1);
  const uint64_t target = 1 << 20;
  // rows * row_bytes is a multiple of 4096 when rows is a multiple of m.
  const uint64_t m = 4096 / std::gcd(row_bytes, uint64_t{4096});
  if (m * row_bytes <= 4 * target) {
    uint64_t rows = target / row_bytes / m * m;
    return std::max(rows, m);
  }
  return std::max<uint64_t>(1, target / row_bytes);
}

uint64_t ChunkRowsFor(uint64_t features, uint64_t expected_rows) {
  const uint64_t full = DefaultChunkRows(features);
  if (expected_rows == 0 || expected_rows >= full) return full;
  const uint64_t row_bytes = 4 * std::max<uint64_t>(features, 1);
  uint64_t m = 4096 / std::gcd(row_bytes, uint64_t{4096});
  if (full % m != 0) m = 1;
  const uint64_t rows = (expected_rows + m - 1) / m * m;
  return std::min(full, std::max<uint64_t>(rows, 1));
}

}  // namespace hpcml::featurecache
