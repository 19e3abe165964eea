#include "asof.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "derive.hpp"
#include "external_sort.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/featurecache/access.hpp"
#include "hpcml/featurecache/csv.hpp"
#include "hpcml/featurecache/entity_keys.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/timeutil.hpp"
#include "hpcml/featurecache/writer.hpp"

namespace hpcml::featurecache {

std::string_view Name(AsofMissing m) {
  switch (m) {
    case AsofMissing::kNan:
      return "nan";
    case AsofMissing::kDrop:
      return "drop";
    case AsofMissing::kError:
      return "error";
  }
  return "?";
}

namespace {

// Payload of a request on its way through the join. `label_code`: the
// label text's code in order of first appearance (RequestLabels), used
// when the labels turn out to be classes.
struct RequestInfo {
  int64_t entity;
  int64_t time;
  uint64_t line;
  float label;
  uint32_t missing;
  uint32_t label_code;
  uint32_t unused;
};
static_assert(sizeof(RequestInfo) == 40);

// The requests' labels: numbers (or true/false as 1/0) while every label
// is one; else classes, whose sorted names are known once all are read.
class RequestLabels {
 public:
  // The label cell `text` into `*r`; InvalidArgument for a missing label
  // or too many distinct texts to be classes.
  Status Parse(std::string_view text, RequestInfo* r) {
    std::string_view s = TrimBlanks(text);
    static const NaValues kMissing = NaValues::Default();
    if (s.empty() || kMissing.Contains(s))
      return InvalidArgument("missing label \"{}\" (every request needs its label)", s);
    auto v = ParseNumericLabel(s);
    if (v.ok()) {
      r->label = *v;
    } else {
      numeric_ = false;
    }
    if (texts_.size() <= kMaxLabelClasses) {
      HPCML_ASSIGN_OR_RETURN(int64_t code, texts_.Encode(s));
      r->label_code = static_cast<uint32_t>(code);
    }
    if (!numeric_ && texts_.size() > kMaxLabelClasses)
      return InvalidArgument("more than {} distinct labels, not all numbers", kMaxLabelClasses);
    return Status::Ok();
  }
  // After the last request: the sorted class names (empty: numbers).
  void Finish() {
    if (numeric_) return;
    classes_ = texts_.keys();
    std::sort(classes_.begin(), classes_.end());
    index_.resize(classes_.size());
    for (size_t i = 0; i < texts_.size(); ++i) {
      const auto pos = std::lower_bound(classes_.begin(), classes_.end(), texts_.keys()[i]);
      index_[i] = static_cast<float>(pos - classes_.begin());
    }
  }
  const std::vector<std::string>& classes() const { return classes_; }
  // The stored label of request `r`.
  float Label(const RequestInfo& r) const { return numeric_ ? r.label : index_[r.label_code]; }

 private:
  bool numeric_ = true;
  StringDictionary texts_;
  std::vector<std::string> classes_;
  std::vector<float> index_;  // first-appearance code -> class index
};

// Step 1: every feature row's key (entity, timestamp, row) into `fkeys`,
// which is finished.
Status SortFeatureKeys(VersionReader& src, ExternalSorter& fkeys) {
  const uint64_t rows = src.info().rows;
  const uint64_t step = 1 << 18;
  std::vector<int64_t> e(step), t(step);
  for (uint64_t first = 0; first < rows; first += step) {
    uint64_t n = std::min(step, rows - first);
    HPCML_RETURN_IF_ERROR(src.Read(first, n, nullptr, nullptr, e.data(), t.data()));
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t key[3] = {OrderedKey(e[i]), OrderedKey(t[i]), first + i};
      HPCML_RETURN_IF_ERROR(fkeys.Add(key, nullptr));
    }
  }
  return fkeys.Finish();
}

// Where the requests' columns are in their CSV.
struct RequestColumns {
  size_t fields = 0;  // in the header, so in every record
  size_t entity = 0, time = 0, label = 0;
  bool has_label = false;
};

Result<RequestColumns> FindRequestColumns(CsvReader& csv, const AsofOptions& o) {
  HPCML_ASSIGN_OR_RETURN(CsvHeader header, CsvHeader::Read(csv));
  RequestColumns c;
  c.fields = header.size();
  HPCML_ASSIGN_OR_RETURN(c.entity, header.Find(o.entity_column, "entity"));
  HPCML_ASSIGN_OR_RETURN(c.time, header.Find(o.time_column, "time"));
  c.has_label = !o.label_column.empty();
  if (c.has_label) {
    HPCML_ASSIGN_OR_RETURN(c.label, header.Find(o.label_column, "label"));
  }
  return c;
}

// The current record of `csv` as a request; errors name its line and column.
// With string keys (`keys` not null) the entity is its code in `keys`, which
// gains the keys the feature version lacks (they match no row).
Result<RequestInfo> ParseRequest(const CsvReader& csv, const RequestColumns& c,
                                 const AsofOptions& o, StringDictionary* keys,
                                 RequestLabels* labels) {
  if (csv.size() != c.fields) {
    return csv.ErrorAtLine(
        fmt::format("expected {} fields as in the header, found {}", c.fields, csv.size()));
  }
  RequestInfo r{};
  auto id = keys != nullptr ? keys->Encode(csv.field(c.entity)) : ParseIntCell(csv.field(c.entity));
  if (!id.ok())
    return csv.ErrorAt(
        c.entity, fmt::format("{} (entity column \"{}\")", id.status().message(), o.entity_column));
  auto ts = ParseTimestamp(csv.field(c.time));
  if (!ts.ok())
    return csv.ErrorAt(
        c.time, fmt::format("{} (time column \"{}\")", ts.status().message(), o.time_column));
  r.entity = *id;
  r.time = *ts;
  r.line = csv.line();
  r.label = 0;
  if (c.has_label) {
    Status st = labels->Parse(csv.field(c.label), &r);
    if (!st.ok())
      return csv.ErrorAt(c.label,
                         fmt::format("{} (label column \"{}\")", st.message(), o.label_column));
  }
  return r;
}

// What step 2 learnt of the requests' file.
struct RequestsRead {
  std::string sha256;
  bool has_label = false;
  RequestLabels labels;
};

// Step 2: the requests keyed by (entity, time, request index) into `reqs`,
// which is finished; counts them in stats->requests.
Result<RequestsRead> SortRequests(const AsofOptions& o, ExternalSorter& reqs, AsofStats* stats,
                                  StringDictionary* keys) {
  HPCML_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(o.requests_csv, o.delimiter));
  HPCML_ASSIGN_OR_RETURN(RequestColumns cols, FindRequestColumns(csv, o));
  RequestsRead read;
  for (;;) {
    HPCML_ASSIGN_OR_RETURN(bool more, csv.Next());
    if (!more) break;
    HPCML_ASSIGN_OR_RETURN(RequestInfo r, ParseRequest(csv, cols, o, keys, &read.labels));
    uint64_t key[3] = {OrderedKey(r.entity), OrderedKey(r.time), stats->requests++};
    HPCML_RETURN_IF_ERROR(reqs.Add(key, &r));
  }
  if (stats->requests == 0)
    return InvalidArgument("{}: no requests after the header", o.requests_csv);
  read.labels.Finish();
  HPCML_ASSIGN_OR_RETURN(read.sha256, csv.Sha256Hex());
  HPCML_RETURN_IF_ERROR(reqs.Finish());
  read.has_label = cols.has_label;
  return read;
}

// The output record of one request: its RequestInfo, its nf features, then
// its ni exact int values, keyed by request index in `result`.
class ResultRows {
 public:
  ResultRows(uint64_t nf, uint64_t ni, uint64_t memory_bytes, const std::string& tmpdir)
      : nf_(nf),
        ni_(ni),
        sorter_(1, RecordBytes(nf, ni), memory_bytes, tmpdir),
        rec_(RecordBytes(nf, ni)),
        nan_row_(nf, std::numeric_limits<float>::quiet_NaN()),
        missing_ints_(ni, kIntMissing) {}

  static uint64_t RecordBytes(uint64_t nf, uint64_t ni) {
    return sizeof(RequestInfo) + nf * sizeof(float) + ni * sizeof(int64_t);
  }
  // Adds request `req` with the nf floats at `features` and ni ints at `ints`.
  Status Add(uint64_t req, const void* info, const float* features, const int64_t* ints) {
    std::memcpy(rec_.data(), info, sizeof(RequestInfo));
    std::memcpy(rec_.data() + sizeof(RequestInfo), features, nf_ * sizeof(float));
    if (ni_ > 0) {
      std::memcpy(rec_.data() + sizeof(RequestInfo) + nf_ * sizeof(float), ints,
                  ni_ * sizeof(int64_t));
    }
    uint64_t key[1] = {req};
    return sorter_.Add(key, rec_.data());
  }
  // Adds request `req` with missing features.
  Status AddNan(uint64_t req, const void* info) {
    return Add(req, info, nan_row_.data(), missing_ints_.data());
  }
  ExternalSorter& sorter() { return sorter_; }

 private:
  uint64_t nf_, ni_;
  ExternalSorter sorter_;
  std::vector<uint8_t> rec_;
  std::vector<float> nan_row_;
  std::vector<int64_t> missing_ints_;
};

// A request without a feature row: counted, then dropped, refused or kept
// with nan features, as o.missing says.
Status AddMissing(const AsofOptions& o, const VersionInfo& si, const StringDictionary& keys,
                  uint64_t req, RequestInfo r, ResultRows& result, AsofStats* stats) {
  ++stats->missing;
  if (o.missing == AsofMissing::kDrop) return Status::Ok();
  if (o.missing == AsofMissing::kError) {
    return InvalidArgument(
        "{}: line {}: entity {} has no feature row at or before {}{} in version {}", o.requests_csv,
        r.line, EntityText(r.entity, keys.keys()), FormatTimestamp(r.time),
        o.max_age ? fmt::format(" (within {} s)", static_cast<double>(*o.max_age) / 1e6) : "",
        si.name);
  }
  r.missing = 1;
  return result.AddNan(req, &r);
}

// Step 3: merge join of the sorted feature keys and requests. Matches go to
// `by_row` (keyed by feature row, so step 4 reads the features in storage
// order); misses straight to `result`. `by_row` is finished.
Status MergeJoin(const AsofOptions& o, const VersionInfo& si, const StringDictionary& keys,
                 ExternalSorter& fkeys, ExternalSorter& reqs, ExternalSorter& by_row,
                 ResultRows& result, AsofStats* stats) {
  const uint64_t* fk = nullptr;
  const uint8_t* fp = nullptr;
  HPCML_ASSIGN_OR_RETURN(bool f_valid, fkeys.Next(&fk, &fp));
  bool has_cand = false;
  int64_t cand_entity = 0, cand_ts = 0;
  uint64_t cand_row = 0;
  const uint64_t* rk = nullptr;
  const uint8_t* rp = nullptr;
  for (;;) {
    HPCML_ASSIGN_OR_RETURN(bool r_valid, reqs.Next(&rk, &rp));
    if (!r_valid) break;
    RequestInfo r;
    std::memcpy(&r, rp, sizeof r);
    const uint64_t e = rk[0], t = rk[1], req = rk[2];
    while (f_valid && (fk[0] < e || (fk[0] == e && fk[1] <= t))) {
      if (fk[0] == e) {
        has_cand = true;
        cand_entity = FromOrderedKey(fk[0]);
        cand_ts = FromOrderedKey(fk[1]);
        cand_row = fk[2];
      }
      HPCML_ASSIGN_OR_RETURN(f_valid, fkeys.Next(&fk, &fp));
    }
    bool match = has_cand && cand_entity == r.entity;
    if (match && o.max_age && r.time - cand_ts > *o.max_age) match = false;
    if (!match) {
      HPCML_RETURN_IF_ERROR(AddMissing(o, si, keys, req, r, result, stats));
      continue;
    }
    ++stats->matched;
    r.missing = 0;
    uint64_t key[2] = {cand_row, req};
    HPCML_RETURN_IF_ERROR(by_row.Add(key, &r));
  }
  return by_row.Finish();
}

// Step 4: the matched requests' features, read in storage order a block of
// rows at a time, into `result`, which is finished.
Status GatherFeatures(const AsofOptions& o, VersionReader& src, ExternalSorter& by_row,
                      ResultRows& result) {
  const uint64_t nf = src.info().features(), ni = src.info().int_features();
  const uint64_t rows = src.info().rows;
  const uint64_t row_bytes = std::max<uint64_t>(4, nf * 4 + ni * 8);
  const uint64_t block = std::clamp<uint64_t>(o.memory_bytes / 16 / row_bytes, 1, 1u << 20);
  std::vector<float> x(block * nf);
  std::vector<int64_t> ints(block * ni);
  uint64_t loaded_first = 0, loaded_n = 0;
  const uint64_t* k = nullptr;
  const uint8_t* p = nullptr;
  for (;;) {
    HPCML_ASSIGN_OR_RETURN(bool valid, by_row.Next(&k, &p));
    if (!valid) break;
    const uint64_t row = k[0], req = k[1];
    if (row < loaded_first || row >= loaded_first + loaded_n) {
      loaded_first = row;
      loaded_n = std::min(block, rows - row);
      HPCML_RETURN_IF_ERROR(src.Read(loaded_first, loaded_n, x.data(), nullptr, nullptr, nullptr));
      if (ni > 0) HPCML_RETURN_IF_ERROR(src.ReadInts(loaded_first, loaded_n, ints.data()));
    }
    HPCML_RETURN_IF_ERROR(result.Add(req, p, x.data() + (row - loaded_first) * nf,
                                     ints.data() + (row - loaded_first) * ni));
  }
  return result.sorter().Finish();
}

// The new version's description and its recorded transform.
NewVersion AsofSpec(const AsofOptions& o, const VersionInfo& si, const std::string& classification,
                    const std::string& req_canonical, const RequestsRead& req,
                    uint64_t expected_rows, const AsofStats& stats,
                    const std::vector<std::vector<std::string>>& categories) {
  NewVersion spec;
  for (size_t j = 0; j < si.features(); ++j) InheritFeature(si, j, categories, &spec);
  spec.label_name = req.has_label ? o.label_column : "";
  spec.label_classes = req.labels.classes();
  spec.entity_name = si.entity_name;
  spec.timestamp_name = si.timestamp_name;
  spec.operation = "asof";
  spec.sources = {SourceRef{"file://" + req_canonical, req.sha256}};
  spec.parents = {ParentRef{si.name, si.data_sha256}};
  spec.classification = classification;
  spec.chunk_rows = o.chunk_rows;
  spec.expected_rows = expected_rows;
  InheritCodec(si, o.codec, o.compression, &spec);
  nlohmann::json tr = {{"op", "asof"},
                       {"from", si.name},
                       {"requests", "file://" + req_canonical},
                       {"entity", o.entity_column},
                       {"time", o.time_column},
                       {"label", o.label_column},
                       {"missing", Name(o.missing)},
                       {"requests_total", stats.requests},
                       {"matched", stats.matched},
                       {"unmatched", stats.missing}};
  if (o.max_age) tr["max_age_us"] = *o.max_age;
  spec.transform = JsonText(tr);
  return spec;
}

// Step 5: the result rows, in request order, appended to the started version;
// counts them in stats->written.
Status WriteResult(ExternalSorter& result, uint64_t nf, uint64_t ni, const RequestsRead& req,
                   FeatureSetWriter& writer, AsofStats* stats) {
  const uint64_t block = 4096;
  const bool has_label = req.has_label;
  std::vector<float> x(block * nf), y(has_label ? block : 0);
  std::vector<int64_t> e(block), t(block), ints(block * ni);
  uint64_t n = 0;
  const uint64_t* k = nullptr;
  const uint8_t* p = nullptr;
  for (;;) {
    HPCML_ASSIGN_OR_RETURN(bool valid, result.Next(&k, &p));
    if (valid) {
      RequestInfo r;
      std::memcpy(&r, p, sizeof r);
      std::memcpy(x.data() + n * nf, p + sizeof r, nf * sizeof(float));
      if (ni > 0) {
        std::memcpy(ints.data() + n * ni, p + sizeof r + nf * sizeof(float), ni * sizeof(int64_t));
      }
      if (has_label) y[n] = req.labels.Label(r);
      e[n] = r.entity;
      t[n] = r.time;
      ++n;
    }
    if (n == block || (!valid && n > 0)) {
      HPCML_RETURN_IF_ERROR(writer.Append(x.data(), has_label ? y.data() : nullptr, e.data(),
                                          t.data(), n, ni > 0 ? ints.data() : nullptr));
      stats->written += n;
      n = 0;
    }
    if (!valid) return Status::Ok();
  }
}

}  // namespace

Result<VersionInfo> Asof(const std::string& path, const AsofOptions& o, AsofStats* stats_out) {
  AsofStats stats;
  if (o.entity_column.empty() || o.time_column.empty()) {
    return InvalidArgument("asof needs the requests' entity and time columns");
  }
  if (o.memory_bytes < (16u << 20))
    return InvalidArgument("asof needs a memory budget of at least 16 MiB");
  AccessContext ctx = AccessContext::FromEnvironment();
  HPCML_ASSIGN_OR_RETURN(std::string req_canonical,
                         CanonicalPath(o.requests_csv, /*must_exist=*/true));
  HPCML_RETURN_IF_ERROR(CheckPath(ctx, req_canonical, "read requests"));

  HPCML_ASSIGN_OR_RETURN(FeatureSetWriter writer,
                         FeatureSetWriter::Begin(path, WriterOptions{"", o.lock_timeout_s}));
  HPCML_ASSIGN_OR_RETURN(FeatureSet fs, FeatureSet::Open(path));
  HPCML_ASSIGN_OR_RETURN(VersionReader src, fs.OpenVersion(o.from));
  const VersionInfo& si = src.info();
  HPCML_ASSIGN_OR_RETURN(std::string classification,
                         ChildClassification(si.classification, o.classification));
  const uint64_t third = o.memory_bytes / 3;

  ExternalSorter fkeys(3, 0, third, o.tmpdir);
  HPCML_RETURN_IF_ERROR(SortFeatureKeys(src, fkeys));
  ExternalSorter reqs(3, sizeof(RequestInfo), third, o.tmpdir);
  // String keys: the requests' keys are coded with the version's codes.
  HPCML_ASSIGN_OR_RETURN(std::vector<std::string> version_keys, src.EntityKeys());
  StringDictionary keys(std::move(version_keys));
  HPCML_ASSIGN_OR_RETURN(RequestsRead req,
                         SortRequests(o, reqs, &stats, si.string_keys() ? &keys : nullptr));
  ExternalSorter by_row(2, sizeof(RequestInfo), third, o.tmpdir);
  ResultRows result(si.features(), si.int_features(), o.memory_bytes / 2, o.tmpdir);
  HPCML_RETURN_IF_ERROR(MergeJoin(o, si, keys, fkeys, reqs, by_row, result, &stats));
  HPCML_RETURN_IF_ERROR(GatherFeatures(o, src, by_row, result));
  const uint64_t count = result.sorter().count();
  if (count == 0) {
    return InvalidArgument("{}: none of the {} requests has a feature row at or before its time",
                           o.requests_csv, stats.requests);
  }
  HPCML_ASSIGN_OR_RETURN(auto categories, src.Categories());
  NewVersion spec = AsofSpec(o, si, classification, req_canonical, req, count, stats, categories);
  spec.entity_type = si.entity_type;
  spec.entity_keys = keys.keys();
  HPCML_RETURN_IF_ERROR(writer.StartVersion(spec).status());
  HPCML_RETURN_IF_ERROR(
      WriteResult(result.sorter(), si.features(), si.int_features(), req, writer, &stats));
  HPCML_ASSIGN_OR_RETURN(VersionInfo info, writer.Commit());
  if (stats_out != nullptr) *stats_out = stats;
  return info;
}

}  // namespace hpcml::featurecache
