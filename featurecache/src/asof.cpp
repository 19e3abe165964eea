#include "hpcml/featurecache/asof.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "derive.hpp"
#include "external_sort.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/parallel.hpp"
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
  // Adds the labels of a piece of the file read after those so far, and
  // recodes that piece's requests [first, last) to match.
  void Merge(const RequestLabels& piece, RequestInfo* first, RequestInfo* last) {
    numeric_ = numeric_ && piece.numeric_;
    std::vector<uint32_t> code(piece.texts_.size(), 0);
    for (size_t i = 0; i < code.size() && texts_.size() <= kMaxLabelClasses; ++i) {
      auto c = texts_.Encode(piece.texts_.keys()[i]);  // valid: the piece took it
      code[i] = c.ok() ? static_cast<uint32_t>(*c) : 0;
    }
    for (RequestInfo* r = first; r != last; ++r)
      if (r->label_code < code.size()) r->label_code = code[r->label_code];
  }
  // Whether Parse has failed (or would have, for merged pieces).
  bool TooMany() const { return !numeric_ && texts_.size() > kMaxLabelClasses; }
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
// As known at, the key's time is when the row became visible (the later of
// its timestamp and availability time) and the payload its timestamp.
Status SortFeatureKeys(VersionReader& src, bool known_at, ExternalSorter& fkeys) {
  const uint64_t rows = src.info().rows;
  const uint64_t step = 1 << 18;
  std::vector<int64_t> e(step), t(step), a(known_at ? step : 0);
  for (uint64_t first = 0; first < rows; first += step) {
    uint64_t n = std::min(step, rows - first);
    HPCML_RETURN_IF_ERROR(src.Read(first, n, nullptr, nullptr, e.data(), t.data()));
    if (known_at) HPCML_RETURN_IF_ERROR(src.ReadAvailable(first, n, a.data()));
    for (uint64_t i = 0; i < n; ++i) {
      const int64_t visible = known_at ? std::max(t[i], a[i]) : t[i];
      uint64_t key[3] = {OrderedKey(e[i]), OrderedKey(visible), first + i};
      HPCML_RETURN_IF_ERROR(fkeys.Add(key, known_at ? &t[i] : nullptr));
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
        // Plain: rows come in (time, row) order, the last is the newest. As
        // known at, they come as they become visible: keep the newest by
        // (timestamp, row).
        int64_t ts = FromOrderedKey(fk[1]);
        if (o.known_at) std::memcpy(&ts, fp, sizeof ts);
        const bool same = has_cand && cand_entity == FromOrderedKey(fk[0]);
        if (!o.known_at || !same || ts > cand_ts || (ts == cand_ts && fk[2] > cand_row)) {
          has_cand = true;
          cand_entity = FromOrderedKey(fk[0]);
          cand_ts = ts;
          cand_row = fk[2];
        }
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
  const std::string source = o.source_uri.empty() ? "file://" + req_canonical : o.source_uri;
  spec.sources = {SourceRef{source, req.sha256}};
  spec.parents = {ParentRef{si.name, si.data_sha256}};
  spec.classification = classification;
  spec.chunk_rows = o.chunk_rows;
  spec.expected_rows = expected_rows;
  InheritCodec(si, o.codec, o.compression, &spec);
  nlohmann::json tr = {{"op", "asof"},
                       {"from", si.name},
                       {"requests", source},
                       {"entity", o.entity_column},
                       {"time", o.time_column},
                       {"label", o.label_column},
                       {"missing", Name(o.missing)},
                       {"requests_total", stats.requests},
                       {"matched", stats.matched},
                       {"unmatched", stats.missing}};
  if (o.max_age) tr["max_age_us"] = *o.max_age;
  if (o.known_at) {
    tr["known_at"] = true;
    tr["available"] = si.available_name;
    tr["rule"] =
        "each request joins the newest row of its entity (by timestamp, then storage order) whose "
        "timestamp and availability time are both at or before the request's time";
  }
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

// --- The join in memory, when its inputs fit the budget: the feature rows'
// keys and the requests, packed into one array of integers and radix-sorted
// together by (entity, time, side, index), then one sequential sweep gives
// each request its row, instead of four external sorts (at 2M x 2M under
// the default 256 MiB every one of those spilled, and spilling was half the
// time). Sort, sweep and gather run on o.threads threads; the sweep splits
// at entity boundaries, since no match crosses one.

constexpr uint32_t kNoRow = UINT32_MAX;

// Bytes the in-memory join holds at its peak for `rows` feature rows and
// `requests` requests (nf floats, ni ints a row) with `key_bytes`-byte sort
// keys: while it sorts, the requests, each request's match, the rows' keys
// (and availability times, `known_at`) and the sort's two arrays; then, the
// keys freed, the requests kept, the features and one write block.
uint64_t InMemoryBytes(uint64_t rows, uint64_t requests, uint64_t nf, uint64_t ni,
                       uint64_t key_bytes, bool known_at) {
  const uint64_t per_request = sizeof(RequestInfo) + sizeof(uint32_t);
  const uint64_t sorting =
      requests * per_request + rows * (known_at ? 24 : 16) + 2 * key_bytes * (rows + requests);
  const uint64_t writing = requests * (per_request + sizeof(uint32_t)) +
                           rows * (nf * sizeof(float) + ni * 8) +
                           (uint64_t{1} << 16) * (nf * 4 + ni * 8 + 24);
  return std::max(sorting, writing);
}

// An estimate of the requests in the CSV from its size and the length of
// its first lines (at least one).
uint64_t EstimateRequests(const std::string& csv) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(csv, ec);
  if (ec || size == 0) return 1;
  std::FILE* f = std::fopen(csv.c_str(), "rb");
  if (f == nullptr) return 1;
  std::vector<char> head(64 << 10);
  const size_t got = std::fread(head.data(), 1, head.size(), f);
  std::fclose(f);
  const auto lines = static_cast<uint64_t>(std::count(head.begin(), head.begin() + got, '\n'));
  if (lines == 0) return 1;
  return std::max<uint64_t>(1, size / std::max<uint64_t>(1, got / lines));
}

// Step 2 in memory: the requests in file order; nullopt once there are
// more than `max_requests` (the caller takes the external path). With
// threads > 1, pieces of the file are parsed at once, each with its own
// entity keys and labels, merged in file order; a merge that fails (more
// label texts than classes may have) reads the file again on one thread,
// whose error names the line.
Result<std::optional<std::vector<RequestInfo>>> ReadRequests(const AsofOptions& o,
                                                             uint64_t max_requests,
                                                             unsigned threads,
                                                             StringDictionary* keys,
                                                             RequestsRead* read) {
  using Requests = std::optional<std::vector<RequestInfo>>;
  HPCML_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(o.requests_csv, o.delimiter));
  HPCML_ASSIGN_OR_RETURN(RequestColumns cols, FindRequestColumns(csv, o));
  std::vector<RequestInfo> reqs;
  reqs.reserve(max_requests);  // untouched pages cost no memory
  if (threads <= 1) {
    for (;;) {
      HPCML_ASSIGN_OR_RETURN(bool more, csv.Next());
      if (!more) break;
      if (reqs.size() >= max_requests) return Requests();
      HPCML_ASSIGN_OR_RETURN(RequestInfo r, ParseRequest(csv, cols, o, keys, &read->labels));
      reqs.push_back(r);
    }
  } else {
    struct Piece {
      std::vector<RequestInfo> reqs;
      StringDictionary keys;
      RequestLabels labels;
    };
    std::vector<Piece> pieces(threads);
    bool too_many = false, redo = false;
    Status st = csv.ReadRestInParallel(
        threads,
        [&](unsigned p, CsvReader& piece) {
          Piece& pc = pieces[p];
          pc.reqs.clear();  // keeps its memory for the next window
          pc.keys = StringDictionary();
          pc.labels = RequestLabels();
          for (;;) {
            HPCML_ASSIGN_OR_RETURN(bool more, piece.Next());
            if (!more) return Status::Ok();
            HPCML_ASSIGN_OR_RETURN(
                RequestInfo r,
                ParseRequest(piece, cols, o, keys != nullptr ? &pc.keys : nullptr, &pc.labels));
            pc.reqs.push_back(r);
          }
        },
        [&](unsigned n) {
          for (unsigned p = 0; p < n; ++p) {
            Piece& pc = pieces[p];
            if (keys != nullptr) {  // piece codes -> the version's
              std::vector<int64_t> code;
              for (const std::string& k : pc.keys.keys()) {
                HPCML_ASSIGN_OR_RETURN(int64_t c, keys->Encode(k));
                code.push_back(c);
              }
              for (RequestInfo& r : pc.reqs) r.entity = code[static_cast<size_t>(r.entity)];
            }
            read->labels.Merge(pc.labels, pc.reqs.data(), pc.reqs.data() + pc.reqs.size());
            reqs.insert(reqs.end(), pc.reqs.begin(), pc.reqs.end());
          }
          too_many = reqs.size() > max_requests;
          redo = read->labels.TooMany();
          return too_many || redo ? FailedPrecondition("stop") : Status::Ok();
        });
    if (too_many) return Requests();
    if (redo) {
      *read = RequestsRead{};
      return ReadRequests(o, max_requests, 1, keys, read);
    }
    HPCML_RETURN_IF_ERROR(st);
  }
  if (reqs.empty()) return InvalidArgument("{}: no requests after the header", o.requests_csv);
  read->labels.Finish();
  HPCML_ASSIGN_OR_RETURN(read->sha256, csv.Sha256Hex());
  read->has_label = cols.has_label;
  return Requests(std::move(reqs));
}

// Times in microseconds are mostly whole seconds, minutes or days: dividing
// (time - the earliest) by the largest of these that divides all of them
// keeps the order and often lets the keys fit 64 bits instead of 128.
constexpr int64_t kTimeScales[] = {86'400'000'000, 3'600'000'000, 60'000'000, 1'000'000, 1'000, 1};

class TimeScale {
 public:
  // The scale for times `all(visit)` visits (visit(fn) calls fn on each).
  template <typename Visit>
  static TimeScale For(Visit visit) {
    TimeScale s;
    uint64_t lo = ~uint64_t{0};
    visit([&](int64_t t) { lo = std::min(lo, OrderedKey(t)); });
    s.min_ = lo;
    for (s.scale_ = 0; s.scale_ + 1 < std::size(kTimeScales); ++s.scale_) {
      bool divides = true;
      visit([&](int64_t t) { divides = divides && s.Scaled<true>(t); });
      if (divides) break;
    }
    return s;
  }
  // (t - the earliest) / the scale.
  uint64_t operator()(int64_t t) const { return Scaled<false>(t); }
  int64_t scale() const { return kTimeScales[scale_]; }

 private:
  // Divisions by constants, which compile to multiplications; with
  // kCheck, whether the scale divides t - the earliest.
  template <bool kCheck>
  uint64_t Scaled(int64_t t) const {
    const uint64_t d = OrderedKey(t) - min_;
    switch (scale_) {
#define HPCML_SCALE(i) \
  case i:              \
    return kCheck ? d % uint64_t{kTimeScales[i]} == 0 : d / uint64_t{kTimeScales[i]};
      HPCML_SCALE(0)
      HPCML_SCALE(1)
      HPCML_SCALE(2)
      HPCML_SCALE(3)
      HPCML_SCALE(4)
#undef HPCML_SCALE
      default:
        return kCheck ? 1 : d;
    }
  }
  uint64_t min_ = 0;
  size_t scale_ = 0;
};

// How a feature row's or a request's sort key is packed, least significant
// end first: its index, its side (0: a feature row, so that a row at a
// request's time sorts before the request; 1: a request), then the bits of
// its scaled time and of its entity that vary (VaryingBits).
struct JoinPacking {
  unsigned index_bits = 0;
  TimeScale scale;
  VaryingBits entity, time;
  unsigned bits() const { return index_bits + 1 + time.width() + entity.width(); }
  unsigned entity_shift() const { return index_bits + 1 + time.width(); }
  template <typename K>
  K Pack(int64_t e, int64_t t, unsigned side, uint64_t index) const {
    K k = entity.Bits(OrderedKey(e));
    k = (k << time.width()) | time.Bits(scale(t));
    k = (k << 1) | side;
    return (k << index_bits) | index;
  }
};

// The feature rows' columns the join needs: entity, event time and, for
// "as known at", the time each row became available (else empty).
struct FeatureKeys {
  std::vector<int64_t> entity, time, available;
  // The time from which row i may be matched: its event time, or the
  // later of its event and availability times.
  int64_t Visible(size_t i) const {
    return available.empty() ? time[i] : std::max(time[i], available[i]);
  }
};

JoinPacking PackingFor(const FeatureKeys& f, const std::vector<RequestInfo>& reqs) {
  JoinPacking p;
  p.index_bits = static_cast<unsigned>(std::bit_width(std::max(f.entity.size(), reqs.size())));
  auto times = [&](auto fn) {
    for (size_t i = 0; i < f.entity.size(); ++i) fn(f.Visible(i));
    for (const RequestInfo& r : reqs) fn(r.time);
  };
  p.scale = TimeScale::For(times);
  times([&](int64_t t) { p.time.Add(p.scale(t)); });
  for (int64_t e : f.entity) p.entity.Add(OrderedKey(e));
  for (const RequestInfo& r : reqs) p.entity.Add(OrderedKey(r.entity));
  return p;
}

// What the sweep found: each request's row (kNoRow: none), the counts, and
// the first request without a row in (entity, time) order.
struct Matches {
  std::vector<uint32_t> row;
  uint64_t matched = 0, missing = 0;
  uint32_t first_missing = kNoRow;
};

// Sorts the keys of the rows and requests together and sweeps them: each
// request gets the newest row of its entity visible at its time (by event
// time, then storage order; within max_age of it).
template <typename K>
Matches SortAndSweep(const AsofOptions& o, const JoinPacking& p, const FeatureKeys& f,
                     const std::vector<RequestInfo>& reqs, unsigned threads) {
  const size_t rows = f.entity.size(), n = rows + reqs.size();
  std::vector<K> keys(n);
  ParallelFor(threads, n, [&](unsigned, size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      keys[i] = i < rows ? p.Pack<K>(f.entity[i], f.Visible(i), 0, i)
                         : p.Pack<K>(reqs[i - rows].entity, reqs[i - rows].time, 1, i - rows);
    }
  });
  RadixSort(keys, p.bits(), threads);
  const unsigned shift = p.entity_shift();
  const K index_mask = (K{1} << p.index_bits) - 1;
  // Parts start at an entity's first key.
  std::vector<size_t> cut(threads + 1, n);
  cut[0] = 0;
  for (unsigned t = 1; t < threads; ++t) {
    size_t s = std::max(n * t / threads, cut[t - 1]);
    while (s > 0 && s < n && keys[s] >> shift == keys[s - 1] >> shift) ++s;
    cut[t] = s;
  }
  Matches m;
  m.row.assign(reqs.size(), kNoRow);
  std::vector<Matches> part(threads);
  const bool known_at = !f.available.empty();
  ParallelFor(threads, threads, [&](unsigned t, size_t, size_t) {
    Matches& out = part[t];
    uint32_t cand = kNoRow;
    for (size_t i = cut[t]; i < cut[t + 1]; ++i) {
      const K k = keys[i];
      const auto index = static_cast<uint32_t>(k & index_mask);
      if (i == cut[t] || k >> shift != keys[i - 1] >> shift) cand = kNoRow;  // a new entity
      if (((k >> p.index_bits) & 1) == 0) {
        // Plain: keys come in (time, row) order. Known at: rows become
        // visible in that order, so keep the best by (event time, row).
        if (!known_at || cand == kNoRow || f.time[index] > f.time[cand] ||
            (f.time[index] == f.time[cand] && index > cand))
          cand = index;
        continue;
      }
      uint32_t row = cand;
      if (row != kNoRow && o.max_age && reqs[index].time - f.time[row] > *o.max_age) row = kNoRow;
      m.row[index] = row;
      if (row != kNoRow) {
        ++out.matched;
      } else if (out.missing++ == 0) {
        out.first_missing = index;
      }
    }
  });
  for (const Matches& x : part) {
    m.matched += x.matched;
    m.missing += x.missing;
    if (m.first_missing == kNoRow) m.first_missing = x.first_missing;
  }
  return m;
}

// Steps 1, 3, 4 and 5 in memory: each request's row, then the result in
// request order. A miss is counted, dropped or refused (the first in
// (entity, time) order, as the external path). Returns false, having done
// nothing, when the packed keys need more than 128 bits or more memory
// than the budget (the caller takes the external path).
Result<bool> JoinInMemory(const AsofOptions& o, unsigned threads, VersionReader& src,
                          const StringDictionary& keys, const std::vector<RequestInfo>& reqs,
                          const RequestsRead& read, AsofStats* stats, FeatureSetWriter& writer,
                          const std::function<Status(uint64_t)>& start) {
  __extension__ typedef unsigned __int128 U128;
  const VersionInfo& si = src.info();
  const uint64_t rows = si.rows, nf = si.features(), ni = si.int_features();
  FeatureKeys f;
  f.entity.resize(rows);
  f.time.resize(rows);
  HPCML_RETURN_IF_ERROR(src.Read(0, rows, nullptr, nullptr, f.entity.data(), f.time.data()));
  if (o.known_at) {
    f.available.resize(rows);
    HPCML_RETURN_IF_ERROR(src.ReadAvailable(0, rows, f.available.data()));
  }
  const JoinPacking p = PackingFor(f, reqs);
  if (p.bits() > 128 ||
      InMemoryBytes(rows, reqs.size(), nf, ni, p.bits() > 64 ? 16 : 8, o.known_at) > o.memory_bytes)
    return false;
  Matches m = p.bits() <= 64 ? SortAndSweep<uint64_t>(o, p, f, reqs, threads)
                             : SortAndSweep<U128>(o, p, f, reqs, threads);
  stats->matched = m.matched;
  stats->missing = m.missing;
  if (m.missing > 0 && o.missing == AsofMissing::kError) {
    const RequestInfo& r = reqs[m.first_missing];
    return InvalidArgument(
        "{}: line {}: entity {} has no feature row at or before {}{} in version {}", o.requests_csv,
        r.line, EntityText(r.entity, keys.keys()), FormatTimestamp(r.time),
        o.max_age ? fmt::format(" (within {} s)", static_cast<double>(*o.max_age) / 1e6) : "",
        si.name);
  }
  // The requests written, in request order.
  std::vector<uint32_t> kept;
  if (o.missing == AsofMissing::kDrop) {
    kept.reserve(m.matched);
    for (uint32_t q = 0; q < reqs.size(); ++q)
      if (m.row[q] != kNoRow) kept.push_back(q);
  }
  const uint64_t count = o.missing == AsofMissing::kDrop ? kept.size() : reqs.size();
  if (count == 0) {
    return InvalidArgument("{}: none of the {} requests has a feature row at or before its time",
                           o.requests_csv, stats->requests);
  }
  HPCML_RETURN_IF_ERROR(start(count));
  f = FeatureKeys{};  // their memory goes to the features
  std::vector<float> fx(rows * nf);
  std::vector<int64_t> fints(rows * ni);
  HPCML_RETURN_IF_ERROR(src.Read(0, rows, fx.data(), nullptr, nullptr, nullptr));
  if (ni > 0) HPCML_RETURN_IF_ERROR(src.ReadInts(0, rows, fints.data()));
  const uint64_t block = uint64_t{1} << 16;
  std::vector<float> x(block * nf), y(read.has_label ? block : 0);
  std::vector<int64_t> e(block), t(block), ints(block * ni);
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  for (uint64_t first = 0; first < count; first += block) {
    const uint64_t n = std::min(block, count - first);
    ParallelFor(n >= 8192 ? threads : 1, n, [&](unsigned, size_t b, size_t end) {
      for (size_t i = b; i < end; ++i) {
        if (i + 16 < end) {  // the rows are in random order: fetch ahead
          const uint64_t ahead = kept.empty() ? first + i + 16 : kept[first + i + 16];
          if (m.row[ahead] != kNoRow) __builtin_prefetch(fx.data() + uint64_t{m.row[ahead]} * nf);
        }
        const uint64_t q = kept.empty() ? first + i : kept[first + i];
        const RequestInfo& r = reqs[q];
        const uint32_t row = m.row[q];
        for (uint64_t j = 0; j < nf; ++j) x[i * nf + j] = row == kNoRow ? kNaN : fx[row * nf + j];
        for (uint64_t j = 0; j < ni; ++j)
          ints[i * ni + j] = row == kNoRow ? kIntMissing : fints[row * ni + j];
        if (read.has_label) y[i] = read.labels.Label(r);
        e[i] = r.entity;
        t[i] = r.time;
      }
    });
    HPCML_RETURN_IF_ERROR(writer.Append(x.data(), read.has_label ? y.data() : nullptr, e.data(),
                                        t.data(), n, ni > 0 ? ints.data() : nullptr));
    stats->written += n;
  }
  return true;
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

  HPCML_ASSIGN_OR_RETURN(
      FeatureSetWriter writer,
      FeatureSetWriter::Begin(path, WriterOptions{"", o.lock_timeout_s, o.threads}));
  HPCML_ASSIGN_OR_RETURN(FeatureSet fs, FeatureSet::Open(path));
  HPCML_ASSIGN_OR_RETURN(VersionReader src, fs.OpenVersion(o.from));
  const VersionInfo& si = src.info();
  if (o.known_at && !si.has_available()) {
    return FailedPrecondition(
        "{}: version {} has no availability times, so it cannot be joined as known at (ingest "
        "the table with --available COLUMN, the time each row became known)",
        path, si.name);
  }
  HPCML_ASSIGN_OR_RETURN(std::string classification,
                         ChildClassification(si.classification, o.classification));
  HPCML_ASSIGN_OR_RETURN(auto categories, src.Categories());
  // String keys: the requests' keys are coded with the version's codes.
  HPCML_ASSIGN_OR_RETURN(std::vector<std::string> version_keys, src.EntityKeys());
  StringDictionary keys(std::move(version_keys));
  StringDictionary* codes = si.string_keys() ? &keys : nullptr;
  // Starts the new version for `count` rows, once the requests are read.
  RequestsRead req;
  auto start = [&](uint64_t count) -> Status {
    NewVersion spec = AsofSpec(o, si, classification, req_canonical, req, count, stats, categories);
    spec.entity_type = si.entity_type;
    spec.entity_keys = keys.keys();
    return writer.StartVersion(spec).status();
  };

  // In memory when the feature rows and the estimated requests fit the
  // budget (and the row indices fit 32 bits); a CSV with more requests than
  // estimated (by a quarter), or keys wider than 128 bits, take the
  // external path (the requests are read again).
  const uint64_t nf = si.features(), ni = si.int_features();
  const unsigned threads = o.threads == 0 ? AvailableCpus() : o.threads;
  const uint64_t estimate = EstimateRequests(o.requests_csv);
  const uint64_t max_requests = estimate + estimate / 4;
  if (si.rows < kNoRow && max_requests < kNoRow &&
      InMemoryBytes(si.rows, max_requests, nf, ni, 8, o.known_at) <= o.memory_bytes) {
    HPCML_ASSIGN_OR_RETURN(auto reqs, ReadRequests(o, max_requests, threads, codes, &req));
    if (reqs) {
      stats.requests = reqs->size();
      HPCML_ASSIGN_OR_RETURN(
          bool joined, JoinInMemory(o, threads, src, keys, *reqs, req, &stats, writer, start));
      if (joined) {
        stats.in_memory = true;
        HPCML_ASSIGN_OR_RETURN(VersionInfo info, writer.Commit());
        if (stats_out != nullptr) *stats_out = stats;
        return info;
      }
    }
    req = RequestsRead{};
    stats = AsofStats{};
  }

  const uint64_t third = o.memory_bytes / 3;
  ExternalSorter fkeys(3, o.known_at ? sizeof(int64_t) : 0, third, o.tmpdir);
  HPCML_RETURN_IF_ERROR(SortFeatureKeys(src, o.known_at, fkeys));
  ExternalSorter reqs(3, sizeof(RequestInfo), third, o.tmpdir);
  HPCML_ASSIGN_OR_RETURN(req, SortRequests(o, reqs, &stats, codes));
  ExternalSorter by_row(2, sizeof(RequestInfo), third, o.tmpdir);
  ResultRows result(nf, ni, o.memory_bytes / 2, o.tmpdir);
  HPCML_RETURN_IF_ERROR(MergeJoin(o, si, keys, fkeys, reqs, by_row, result, &stats));
  HPCML_RETURN_IF_ERROR(GatherFeatures(o, src, by_row, result));
  const uint64_t count = result.sorter().count();
  if (count == 0) {
    return InvalidArgument("{}: none of the {} requests has a feature row at or before its time",
                           o.requests_csv, stats.requests);
  }
  HPCML_RETURN_IF_ERROR(start(count));
  HPCML_RETURN_IF_ERROR(WriteResult(result.sorter(), nf, ni, req, writer, &stats));
  HPCML_ASSIGN_OR_RETURN(VersionInfo info, writer.Commit());
  if (stats_out != nullptr) *stats_out = stats;
  return info;
}

}  // namespace hpcml::featurecache
