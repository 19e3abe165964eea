#include "hpcml/featurecache/asof.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "external_sort.hpp"
#include "hpcml/featurecache/access.hpp"
#include "hpcml/featurecache/csv.hpp"
#include "hpcml/featurecache/derive.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/timeutil.hpp"
#include "hpcml/featurecache/writer.hpp"

namespace hpcml::featurecache {
namespace {

// Payload of a request on its way through the join.
struct RequestInfo {
  int64_t entity;
  int64_t time;
  uint64_t line;
  float label;
  uint32_t missing;
};
static_assert(sizeof(RequestInfo) == 32);

std::string Trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

const char* MissingName(AsofMissing m) {
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
  const uint64_t nf = si.features();
  HPCML_ASSIGN_OR_RETURN(std::string classification,
                         ChildClassification(si.classification, o.classification));
  const uint64_t third = o.memory_bytes / 3;

  // 1. Feature keys sorted by (entity, timestamp, row).
  ExternalSorter fkeys(3, 0, third, o.tmpdir);
  {
    const uint64_t step = 1 << 18;
    std::vector<int64_t> e(step), t(step);
    for (uint64_t first = 0; first < si.rows; first += step) {
      uint64_t n = std::min(step, si.rows - first);
      HPCML_RETURN_IF_ERROR(src.Read(first, n, nullptr, nullptr, e.data(), t.data()));
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t key[3] = {OrderedKey(e[i]), OrderedKey(t[i]), first + i};
        HPCML_RETURN_IF_ERROR(fkeys.Add(key, nullptr));
      }
    }
    HPCML_RETURN_IF_ERROR(fkeys.Finish());
  }

  // 2. Requests sorted by (entity, time, request index).
  ExternalSorter reqs(3, sizeof(RequestInfo), third, o.tmpdir);
  HPCML_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(o.requests_csv, o.delimiter));
  HPCML_ASSIGN_OR_RETURN(bool has_header, csv.Next());
  if (!has_header) return InvalidArgument("{}: empty file: expected a header row", o.requests_csv);
  std::map<std::string, size_t> index;
  std::string all;
  for (size_t i = 0; i < csv.size(); ++i) {
    index.emplace(Trimmed(csv.field(i)), i);
    all += (all.empty() ? "" : ", ") + Trimmed(csv.field(i));
  }
  const size_t nfields = csv.size();
  auto find = [&](const std::string& name, const char* role) -> Result<size_t> {
    auto it = index.find(name);
    if (it == index.end()) {
      return InvalidArgument("{}: line 1: no {} column named \"{}\" (columns: {})", o.requests_csv,
                             role, name, all);
    }
    return it->second;
  };
  HPCML_ASSIGN_OR_RETURN(size_t ecol, find(o.entity_column, "entity"));
  HPCML_ASSIGN_OR_RETURN(size_t tcol, find(o.time_column, "time"));
  const bool has_label = !o.label_column.empty();
  size_t lcol = 0;
  if (has_label) {
    HPCML_ASSIGN_OR_RETURN(lcol, find(o.label_column, "label"));
  }
  for (;;) {
    HPCML_ASSIGN_OR_RETURN(bool more, csv.Next());
    if (!more) break;
    if (csv.size() != nfields) {
      return csv.ErrorAtLine(
          fmt::format("expected {} fields as in the header, found {}", nfields, csv.size()));
    }
    RequestInfo r{};
    auto id = ParseIntCell(csv.field(ecol));
    if (!id.ok())
      return csv.ErrorAt(
          ecol, fmt::format("{} (entity column \"{}\")", id.status().message(), o.entity_column));
    auto ts = ParseTimestamp(csv.field(tcol));
    if (!ts.ok())
      return csv.ErrorAt(
          tcol, fmt::format("{} (time column \"{}\")", ts.status().message(), o.time_column));
    r.entity = *id;
    r.time = *ts;
    r.line = csv.line();
    r.label = 0;
    if (has_label) {
      auto v = ParseFloatCell(csv.field(lcol));
      if (!v.ok())
        return csv.ErrorAt(
            lcol, fmt::format("{} (label column \"{}\")", v.status().message(), o.label_column));
      r.label = *v;
    }
    uint64_t key[3] = {OrderedKey(r.entity), OrderedKey(r.time), stats.requests++};
    HPCML_RETURN_IF_ERROR(reqs.Add(key, &r));
  }
  if (stats.requests == 0)
    return InvalidArgument("{}: no requests after the header", o.requests_csv);
  HPCML_ASSIGN_OR_RETURN(std::string req_sha, csv.Sha256Hex());
  HPCML_RETURN_IF_ERROR(reqs.Finish());

  // 3. Merge join. Matches go to `by_row` (sorted by feature row, so step 4
  // reads the features in storage order); misses straight to `result`.
  const size_t out_payload = sizeof(RequestInfo) + nf * sizeof(float);
  ExternalSorter by_row(2, sizeof(RequestInfo), third, o.tmpdir);
  ExternalSorter result(1, out_payload, o.memory_bytes / 2, o.tmpdir);
  std::vector<uint8_t> out_rec(out_payload);
  const std::vector<float> nan_row(nf, std::numeric_limits<float>::quiet_NaN());
  auto add_missing = [&](uint64_t req, RequestInfo r) -> Status {
    ++stats.missing;
    if (o.missing == AsofMissing::kDrop) return Status::Ok();
    if (o.missing == AsofMissing::kError) {
      return InvalidArgument(
          "{}: line {}: entity {} has no feature row at or before {}{} in version {}",
          o.requests_csv, r.line, r.entity, FormatTimestamp(r.time),
          o.max_age ? fmt::format(" (within {} s)", static_cast<double>(*o.max_age) / 1e6) : "",
          si.name);
    }
    r.missing = 1;
    std::memcpy(out_rec.data(), &r, sizeof r);
    std::memcpy(out_rec.data() + sizeof r, nan_row.data(), nf * sizeof(float));
    uint64_t key[1] = {req};
    return result.Add(key, out_rec.data());
  };
  {
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
        HPCML_RETURN_IF_ERROR(add_missing(req, r));
        continue;
      }
      ++stats.matched;
      r.missing = 0;
      uint64_t key[2] = {cand_row, req};
      HPCML_RETURN_IF_ERROR(by_row.Add(key, &r));
    }
  }
  HPCML_RETURN_IF_ERROR(by_row.Finish());

  // 4. Features in storage order, a block of rows at a time.
  {
    const uint64_t row_bytes = std::max<uint64_t>(4, nf * 4);
    const uint64_t block = std::clamp<uint64_t>(o.memory_bytes / 16 / row_bytes, 1, 1u << 20);
    std::vector<float> x(block * nf);
    uint64_t loaded_first = 0, loaded_n = 0;
    const uint64_t* k = nullptr;
    const uint8_t* p = nullptr;
    for (;;) {
      HPCML_ASSIGN_OR_RETURN(bool valid, by_row.Next(&k, &p));
      if (!valid) break;
      const uint64_t row = k[0], req = k[1];
      if (row < loaded_first || row >= loaded_first + loaded_n) {
        loaded_first = row;
        loaded_n = std::min(block, si.rows - row);
        HPCML_RETURN_IF_ERROR(
            src.Read(loaded_first, loaded_n, x.data(), nullptr, nullptr, nullptr));
      }
      std::memcpy(out_rec.data(), p, sizeof(RequestInfo));
      std::memcpy(out_rec.data() + sizeof(RequestInfo), x.data() + (row - loaded_first) * nf,
                  nf * sizeof(float));
      uint64_t key[1] = {req};
      HPCML_RETURN_IF_ERROR(result.Add(key, out_rec.data()));
    }
  }
  HPCML_RETURN_IF_ERROR(result.Finish());
  if (result.count() == 0) {
    return InvalidArgument("{}: none of the {} requests has a feature row at or before its time",
                           o.requests_csv, stats.requests);
  }

  // 5. The new version, in request order.
  NewVersion spec;
  spec.feature_names = si.feature_names;
  spec.feature_types = si.feature_types;
  spec.label_name = has_label ? o.label_column : "";
  spec.entity_name = si.entity_name;
  spec.timestamp_name = si.timestamp_name;
  spec.operation = "asof";
  spec.sources = {SourceRef{"file://" + req_canonical, req_sha}};
  spec.parents = {ParentRef{si.name, si.data_sha256}};
  spec.classification = classification;
  spec.chunk_rows = o.chunk_rows;
  spec.expected_rows = result.count();
  spec.compression = o.compression >= 0 ? o.compression : si.compression;
  nlohmann::json tr = {{"op", "asof"},
                       {"from", si.name},
                       {"requests", "file://" + req_canonical},
                       {"entity", o.entity_column},
                       {"time", o.time_column},
                       {"label", o.label_column},
                       {"missing", MissingName(o.missing)},
                       {"requests_total", stats.requests},
                       {"matched", stats.matched},
                       {"unmatched", stats.missing}};
  if (o.max_age) tr["max_age_us"] = *o.max_age;
  spec.transform = tr.dump();
  HPCML_RETURN_IF_ERROR(writer.StartVersion(spec).status());
  {
    const uint64_t block = 4096;
    std::vector<float> x(block * nf), y(has_label ? block : 0);
    std::vector<int64_t> e(block), t(block);
    uint64_t n = 0;
    const uint64_t* k = nullptr;
    const uint8_t* p = nullptr;
    for (;;) {
      HPCML_ASSIGN_OR_RETURN(bool valid, result.Next(&k, &p));
      if (valid) {
        RequestInfo r;
        std::memcpy(&r, p, sizeof r);
        std::memcpy(x.data() + n * nf, p + sizeof r, nf * sizeof(float));
        if (has_label) y[n] = r.label;
        e[n] = r.entity;
        t[n] = r.time;
        ++n;
      }
      if (n == block || (!valid && n > 0)) {
        HPCML_RETURN_IF_ERROR(
            writer.Append(x.data(), has_label ? y.data() : nullptr, e.data(), t.data(), n));
        stats.written += n;
        n = 0;
      }
      if (!valid) break;
    }
  }
  HPCML_ASSIGN_OR_RETURN(VersionInfo info, writer.Commit());
  if (stats_out != nullptr) *stats_out = stats;
  return info;
}

}  // namespace hpcml::featurecache
