#include "cli.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "derive.hpp"
#include "drift.hpp"
#include "export.hpp"
#include "hpcml/common/cli.hpp"
#include "hpcml/common/exit_codes.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/log.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/common/time.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "hpcml/featurecache/access.hpp"
#include "hpcml/featurecache/asof.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/ingest.hpp"
#include "hpcml/featurecache/report.hpp"
#include "hpcml/featurecache/timeutil.hpp"
#include "hpcml/featurecache/writer.hpp"
#include "rules.hpp"

namespace hpcml::featurecache {
namespace {

Result<uint64_t> ParseBytes(const std::string& text) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p == text.data())
    return InvalidArgument("\"{}\" is not a size (e.g. 256M, 2G)", text);
  std::string unit(p, text.data() + text.size());
  uint64_t mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k")
    mult = 1ull << 10;
  else if (unit == "M" || unit == "MiB")
    mult = 1ull << 20;
  else if (unit == "G" || unit == "GiB")
    mult = 1ull << 30;
  else
    return InvalidArgument("\"{}\": unknown size unit \"{}\" (K, M, G)", text, unit);
  return v * mult;
}

Result<char> ParseDelimiter(const std::string& d) {
  if (d == "\\t" || d == "tab") return '\t';
  if (d.size() != 1) return InvalidArgument("the delimiter must be one character (or \\t)");
  return d[0];
}

// `st` with "<option>: " before its message (an option's value was refused).
Status ForOption(const char* option, const Status& st) {
  return Status(st.code(), fmt::format("{}: {}", option, st.message()));
}

// Results go to stdout; warnings through the logger.
struct Out {
  Logger log{"hpcml-fcache"};
  void Print(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }
};

// Errors are "hpcml-fcache: <message>" without the "error: " tag: the message
// itself names the file or option and what is wrong. Returns `code`:
// kExitError by default, kExitUsage for an option value refused before any
// work (exit_codes.hpp).
int Fail(const Status& st, int code = kExitError) {
  std::string line = fmt::format("hpcml-fcache: {}\n", st.message());
  std::fwrite(line.data(), 1, line.size(), stderr);
  return code;
}

// A subcommand: its CLI11 node and the action run when it was parsed. The
// action returns the exit status.
struct Subcommand {
  CLI::App* cmd;
  std::function<int()> run;
};

constexpr const char* kCodecHelp =
    "compression: none, deflate (slow to decode), blosc-lz4 (fast) or blosc-zstd (smaller)";

std::vector<std::string> CodecNames() {
  return {std::begin(kCodecs), std::end(kCodecs)};
}

// ---- ingest ----

struct IngestArgs {
  IngestOptions opts;
  std::string path, features, delimiter = ",", rules, types, types_file;
  std::optional<std::string> na_values;
  std::vector<std::string> column_na_values;
};

// "  kinds: 3 float, 2 int, 1 category (term 2); label classes: bad, good".
std::string KindsLine(const VersionInfo& v) {
  std::map<std::string, int> count;
  std::vector<std::string> dictionaries;
  for (size_t j = 0; j < v.features(); ++j) {
    ++count[std::string(v.kind(j))];
    if (v.kind(j) == "category")
      dictionaries.push_back(fmt::format("{} {}", v.feature_names[j], v.category_counts[j]));
  }
  std::vector<std::string> parts;
  for (std::string_view k : kKinds) {
    auto it = count.find(std::string(k));
    if (it == count.end()) continue;
    parts.push_back(fmt::format("{} {}", it->second, k));
    if (k == "category") parts.back() += fmt::format(" ({})", fmt::join(dictionaries, ", "));
  }
  std::string line = fmt::format("  kinds: {}", fmt::join(parts, ", "));
  if (!v.label_classes.empty()) {
    const size_t shown = std::min<size_t>(v.label_classes.size(), 10);
    line += fmt::format("; label classes ({}): {}{}", v.label_classes.size(),
                        fmt::join(v.label_classes.begin(), v.label_classes.begin() + shown, ", "),
                        shown < v.label_classes.size() ? ", ..." : "");
  }
  return line + "\n";
}

// "  missing cells (empty, NA, ...): a 3, b 1" from an ingest's transform, or "".
std::string MissingCellsLine(const VersionInfo& v) {
  auto tr = nlohmann::json::parse(v.transform, nullptr, false);
  if (tr.is_discarded() || !tr.contains("missing_cells") || tr["missing_cells"].empty()) return "";
  std::vector<std::string> parts;  // in column order
  for (const auto& name : v.feature_names) {
    if (tr["missing_cells"].contains(name))
      parts.push_back(fmt::format("{} {}", name, tr["missing_cells"][name].get<uint64_t>()));
  }
  std::vector<std::string> words = {"empty"};
  for (auto& w : tr["na_values"]) words.push_back(w.get<std::string>());
  return fmt::format("  missing cells ({}; stored as NaN): {}\n", fmt::join(words, ", "),
                     fmt::join(parts, ", "));
}

int RunIngest(IngestArgs& a, Out& out) {
  a.opts.feature_columns = SplitList(a.features);
  auto d = ParseDelimiter(a.delimiter);
  if (!d.ok()) return Fail(ForOption("--delimiter", d.status()), kExitUsage);
  a.opts.delimiter = *d;
  if (a.na_values) {
    auto na = NaValues::Parse(*a.na_values);
    if (!na.ok()) return Fail(ForOption("--na-values", na.status()), kExitUsage);
    a.opts.na_values = *na;
  }
  for (const auto& entry : a.column_na_values) {
    auto na = ParseColumnNaValues(entry);
    if (!na.ok()) return Fail(ForOption("--column-na-values", na.status()), kExitUsage);
    a.opts.column_na_values.insert_or_assign(na->first, na->second);
  }
  if (!a.types_file.empty()) {
    auto kinds = LoadColumnKinds(a.types_file);
    if (!kinds.ok()) return Fail(ForOption("--types-file", kinds.status()), kExitUsage);
    a.opts.column_kinds = *kinds;
  }
  auto kinds = ParseColumnKinds(a.types);
  if (!kinds.ok()) return Fail(ForOption("--types", kinds.status()), kExitUsage);
  for (const auto& [name, kind] : *kinds) a.opts.column_kinds.insert_or_assign(name, kind);
  if (!a.rules.empty()) {
    auto rules = Rules::Load(a.rules);
    if (!rules.ok()) return Fail(rules.status());
    // Checked on the new version's statistics before it is published.
    a.opts.before_publish = [r = *rules, has_label = !a.opts.label_column.empty()](
                                const VersionStats& stats) -> Status {
      HPCML_ASSIGN_OR_RETURN(std::vector<std::string> broken, CheckRules(r, stats, has_label));
      if (broken.empty()) return Status::Ok();
      return FailedPrecondition("the batch breaks {} rule(s) of {}; no version was added:\n  {}",
                                broken.size(), r.source, fmt::join(broken, "\n  "));
    };
  }
  std::vector<std::string> warnings;
  auto r = Ingest(a.path, a.opts, &warnings);
  for (const auto& w : warnings) out.log.warn("{}", w);
  if (!r.ok()) return Fail(r.status());
  out.Print(fmt::format("{}: added {} ({} rows, {} features, {}/{}, sha256:{})\n", a.path, r->name,
                        r->rows, r->features(), r->zone, r->classification, r->data_sha256));
  out.Print(KindsLine(*r));
  out.Print(MissingCellsLine(*r));
  return 0;
}

Subcommand AddIngest(CLI::App& app, Out& out) {
  auto a = std::make_shared<IngestArgs>();
  IngestOptions& o = a->opts;
  auto* c = app.add_subcommand("ingest", "add a version from a CSV file (header row required)");
  c->add_option("file", a->path, "feature set (.h5); created if missing")->required();
  c->add_option("--csv", o.csv_path, "CSV file to read")->required();
  c->add_option("--entity", o.entity_column, "entity column (integer ids or string keys)")
      ->required();
  c->add_option("--entity-type", o.entity_type,
                "auto (default: the first row decides), int or string")
      ->check(CLI::IsMember({"auto", "int", "string"}));
  c->add_option("--timestamp", o.timestamp_column, "event time column (ISO 8601 or epoch seconds)")
      ->required();
  c->add_option("--available", o.available_column,
                "availability time column: when each row became known (arrived or was "
                "corrected); kept for asof --known-at");
  c->add_option("--label", o.label_column, "label column (optional)");
  c->add_option("--features", a->features,
                "feature columns, comma-separated (default: all other columns)");
  c->add_option("--zone", o.zone,
                "residency zone (required for a new file; must match an existing one)");
  c->add_option("--classification", o.classification,
                "public, internal, confidential or restricted")
      ->required();
  c->add_option("--chunk-rows", o.chunk_rows, "rows per HDF5 chunk (default: about 1 MiB chunks)");
  c->add_option("--codec", o.codec, kCodecHelp)->check(CLI::IsMember(CodecNames()));
  c->add_option("--compress", o.compression,
                "compression level 1-9 (alone: deflate at this level; 0: none)")
      ->check(CLI::Range(0, 9));
  c->add_option("--delimiter", a->delimiter, "field delimiter (default ,)");
  c->add_option("--na-values", a->na_values,
                "feature cells meaning missing, comma-separated, beside empty cells (default: "
                "NA,N/A,NaN,nan,NAN,null,NULL,None; '' for empty cells only); stored as NaN");
  c->add_option("--column-na-values", a->column_na_values,
                "COLUMN=WORD,WORD: that column's missing words instead (COLUMN= for empty cells "
                "only, when NA is a real category); repeatable")
      ->take_all()
      ->allow_extra_args(false);
  c->add_option("--types", a->types,
                "column kinds, comma-separated COLUMN=KIND (float, int, bool, category); the "
                "others are inferred from every cell");
  c->add_option("--types-file", a->types_file,
                "column kinds from a TOML file: one COLUMN = \"KIND\" per line ([columns] table "
                "or top level); --types adds to it");
  c->add_option("--lock-timeout", o.lock_timeout_s, "seconds to wait for another writer");
  c->add_option("--threads", o.threads,
                "threads that parse the CSV and write (default: the CPUs this process may use)")
      ->check(CLI::Range(1, 1024));
  c->add_option("--rules", a->rules,
                "validation rules (TOML): a batch that breaks one is not added");
  return {c, [a, &out] { return RunIngest(*a, out); }};
}

// ---- derive ----

struct DeriveArgs {
  DeriveOptions opts;
  std::string path, select, std_cols, since, until;
  bool standardize = false;
};

// `text` as a time into `*out`, unless empty; errors name `option`.
Status ParseTimeOption(const char* option, const std::string& text, std::optional<int64_t>* out) {
  if (text.empty()) return Status::Ok();
  auto t = ParseTimestamp(text);
  if (!t.ok()) return ForOption(option, t.status());
  *out = *t;
  return Status::Ok();
}

int RunDerive(DeriveArgs& a, Out& out) {
  DeriveOptions& o = a.opts;
  o.select = SplitList(a.select);
  o.standardize = a.standardize;
  o.standardize_columns = SplitList(a.std_cols);
  Status st = ParseTimeOption("--since", a.since, &o.since);
  if (st.ok()) st = ParseTimeOption("--until", a.until, &o.until);
  if (!st.ok()) return Fail(st, kExitUsage);
  auto r = Derive(a.path, o);
  if (!r.ok()) return Fail(r.status());
  out.Print(fmt::format("{}: added {} from {} ({} rows, {} features, sha256:{})\n", a.path, r->name,
                        r->parents.empty() ? "?" : r->parents[0].version, r->rows, r->features(),
                        r->data_sha256));
  return 0;
}

Subcommand AddDerive(CLI::App& app, Out& out) {
  auto a = std::make_shared<DeriveArgs>();
  DeriveOptions& o = a->opts;
  auto* c =
      app.add_subcommand("derive", "add a version computed from another by a recorded transform");
  c->add_option("file", a->path, "feature set")->required();
  c->add_option("--from", o.from, "parent version (default latest)");
  c->add_option("--select", a->select,
                "keep these feature columns, comma-separated, in this order");
  c->add_flag("--drop-missing", o.drop_missing,
              "keep only rows with every kept feature and the label present (not nan)");
  c->add_flag("--standardize", a->standardize,
              "standardise every kept float and int column: (x - mean) / std over its present "
              "values (missing cells stay missing)");
  c->add_option("--transform-from", o.transform_from,
                "apply the standardisation and fill values another version's derive recorded "
                "(the training split's), to its columns, instead of computing them here "
                "(validation and test splits)");
  c->add_flag("--impute", o.impute,
              "fill missing cells: numbers with their mean (int columns rounded), bool and "
              "category columns with their most frequent value; the values are recorded");
  c->add_option("--standardize-columns", a->std_cols, "standardise only these columns");
  c->add_option("--since", a->since, "keep rows with timestamp >= this time");
  c->add_option("--until", a->until, "keep rows with timestamp < this time");
  c->add_option("--classification", o.classification,
                "classification (default: the parent's; not lower)");
  c->add_option("--chunk-rows", o.chunk_rows, "rows per HDF5 chunk");
  c->add_option("--codec", o.codec, std::string(kCodecHelp) + " (default: the parent's)")
      ->check(CLI::IsMember(CodecNames()));
  c->add_option("--compress", o.compression, "compression level 1-9 (default: the parent's)")
      ->check(CLI::Range(0, 9));
  c->add_option("--lock-timeout", o.lock_timeout_s, "seconds to wait for another writer");
  return {c, [a, &out] { return RunDerive(*a, out); }};
}

// ---- asof ----

struct AsofArgs {
  AsofOptions opts;
  std::string path, max_age, memory = "256M", delimiter = ",";
};

// The options given as text (--max-age, --memory, --delimiter)
// into `a.opts`.
Status ParseAsofArgs(AsofArgs& a) {
  AsofOptions& o = a.opts;
  if (!a.max_age.empty()) {
    auto age = ParseDurationMicros(TrimBlanks(a.max_age));
    if (!age.ok()) return ForOption("--max-age", age.status());
    o.max_age = *age;
  }
  auto mem = ParseBytes(a.memory);
  if (!mem.ok()) return ForOption("--memory", mem.status());
  o.memory_bytes = *mem;
  auto d = ParseDelimiter(a.delimiter);
  if (!d.ok()) return ForOption("--delimiter", d.status());
  o.delimiter = *d;
  return Status::Ok();
}

int RunAsof(AsofArgs& a, Out& out) {
  Status st = ParseAsofArgs(a);
  if (!st.ok()) return Fail(st, kExitUsage);
  AsofStats stats;
  auto r = Asof(a.path, a.opts, &stats);
  if (!r.ok()) return Fail(r.status());
  out.Print(fmt::format(
      "{}: added {} from {}: {} requests, {} matched, {} without a row at or before their time "
      "({}), {} rows written ({}{}), sha256:{}\n",
      a.path, r->name, r->parents.empty() ? "?" : r->parents[0].version, stats.requests,
      stats.matched, stats.missing, Name(a.opts.missing), stats.written,
      stats.in_memory ? "joined in memory" : "external sort",
      a.opts.known_at ? ", as known at" : "", r->data_sha256));
  return 0;
}

Subcommand AddAsof(CLI::App& app, Out& out) {
  auto a = std::make_shared<AsofArgs>();
  AsofOptions& o = a->opts;
  auto* c =
      app.add_subcommand("asof", "point-in-time join: a training set as of each request's time");
  c->add_option("file", a->path, "feature set")->required();
  c->add_option("--from", o.from, "feature version (default latest)");
  c->add_option("--requests", o.requests_csv, "CSV of (entity, time[, label]) requests")
      ->required();
  c->add_option("--entity", o.entity_column, "entity column of the requests")->required();
  c->add_option("--time", o.time_column, "time column of the requests")->required();
  c->add_option("--label", o.label_column, "label column of the requests (optional)");
  c->add_flag("--known-at", o.known_at,
              "as known at each request's time: only rows both effective and available then "
              "(the version needs availability times: ingest --available)");
  c->add_option("--max-age", a->max_age,
                "ignore feature rows older than this before the request (e.g. 7d)");
  AddEnumOption(*c, "--missing", &o.missing,
                {AsofMissing::kNan, AsofMissing::kDrop, AsofMissing::kError},
                "requests without a row: nan (keep, default), drop or error");
  c->add_option("--memory", a->memory, "memory budget (default 256M)");
  c->add_option("--threads", o.threads,
                "threads for the join in memory (default: the CPUs this process may use)")
      ->check(CLI::Range(1, 1024));
  c->add_option("--tmpdir", o.tmpdir,
                "directory for temporary sort runs (default $TMPDIR or /tmp)");
  c->add_option("--classification", o.classification,
                "classification (default: the parent's; not lower)");
  c->add_option("--codec", o.codec, std::string(kCodecHelp) + " (default: the parent's)")
      ->check(CLI::IsMember(CodecNames()));
  c->add_option("--compress", o.compression, "compression level 1-9 (default: the parent's)")
      ->check(CLI::Range(0, 9));
  c->add_option("--delimiter", a->delimiter, "field delimiter of the requests (default ,)");
  c->add_option("--lock-timeout", o.lock_timeout_s, "seconds to wait for another writer");
  return {c, [a, &out] { return RunAsof(*a, out); }};
}

// ---- ls, info, lineage, verify, diff, export: queries on an existing file ----

// The arguments the queries share; each subcommand sets the ones it offers.
struct QueryArgs {
  std::string path, version, version_b, output;
  bool json = false, dot = false, exit_code = false;
  uint64_t limit = 0;
  DriftOptions drift;
};

using Query = int (*)(const QueryArgs&, FeatureSet&, Out&);

// The subcommand `name` with its "file" argument; its action opens the
// feature set and runs `query` on it.
Subcommand AddQuery(CLI::App& app, Out& out, const char* name, const char* help,
                    std::shared_ptr<QueryArgs> a, Query query) {
  auto* c = app.add_subcommand(name, help);
  c->add_option("file", a->path, "feature set")->required();
  return {c, [a, query, &out] {
            auto fs = FeatureSet::Open(a->path);
            if (!fs.ok()) return Fail(fs.status());
            return query(*a, *fs, out);
          }};
}

Result<std::vector<VersionInfo>> AllInfos(const FeatureSet& fs) {
  std::vector<VersionInfo> infos;
  for (const auto& v : fs.versions()) {
    HPCML_ASSIGN_OR_RETURN(VersionInfo i, fs.Info(v));
    infos.push_back(std::move(i));
  }
  return infos;
}

int RunLs(const QueryArgs& a, FeatureSet& fs, Out& out) {
  auto infos = AllInfos(fs);
  if (!infos.ok()) return Fail(infos.status());
  out.Print(fmt::format("{}: zone {}, classification {}, {} version(s), latest {}\n", a.path,
                        fs.zone(), fs.classification(), fs.versions().size(), fs.latest()));
  out.Print(FormatVersionList(*infos, fs.latest()));
  return 0;
}

Subcommand AddLs(CLI::App& app, Out& out) {
  return AddQuery(app, out, "ls", "list the versions", std::make_shared<QueryArgs>(), RunLs);
}

int RunInfo(const QueryArgs& a, FeatureSet& fs, Out& out) {
  auto info = fs.Info(a.version);
  if (!info.ok()) return Fail(info.status());
  out.Print(a.json ? FormatInfoJson(a.path, *info) : FormatInfo(a.path, *info));
  return 0;
}

Subcommand AddInfo(CLI::App& app, Out& out) {
  auto a = std::make_shared<QueryArgs>();
  Subcommand s = AddQuery(app, out, "info", "describe a version", a, RunInfo);
  s.cmd->add_option("version", a->version, "version (default latest)");
  s.cmd->add_flag("--json", a->json, "JSON output");
  return s;
}

int RunStats(const QueryArgs& a, FeatureSet& fs, Out& out) {
  auto name = fs.Resolve(a.version);
  if (!name.ok()) return Fail(name.status());
  auto stats = fs.Stats(*name);
  if (!stats.ok()) return Fail(stats.status());
  out.Print(a.json ? FormatStatsJson(a.path, *name, *stats) : FormatStats(a.path, *name, *stats));
  return 0;
}

Subcommand AddStats(CLI::App& app, Out& out) {
  auto a = std::make_shared<QueryArgs>();
  Subcommand s = AddQuery(app, out, "stats", "per-column statistics of a version", a, RunStats);
  s.cmd->add_option("version", a->version, "version (default latest)");
  s.cmd->add_flag("--json", a->json, "JSON output");
  return s;
}

// Exit 3 when a column drifted, so a pipeline can gate retraining on it.
int RunDrift(const QueryArgs& a, FeatureSet& fs, Out& out) {
  auto r = Drift(fs, a.version, a.version_b, a.drift);
  if (!r.ok()) return Fail(r.status());
  out.Print(a.json ? FormatDriftJson(a.path, *r, a.drift) : FormatDrift(a.path, *r, a.drift));
  return r->any_drift() ? kExitCheckFailed : 0;
}

Subcommand AddDrift(CLI::App& app, Out& out) {
  auto a = std::make_shared<QueryArgs>();
  Subcommand s = AddQuery(app, out, "drift",
                          "PSI and Kolmogorov-Smirnov per column between two versions; exit 3 on "
                          "drift",
                          a, RunDrift);
  s.cmd->add_option("a", a->version, "reference version")->required();
  s.cmd->add_option("b", a->version_b, "version compared with it")->required();
  s.cmd->add_option("--psi", a->drift.psi_threshold, "PSI above which a column drifted")
      ->capture_default_str();
  s.cmd->add_option("--ks", a->drift.ks_threshold, "KS statistic above which a column drifted")
      ->capture_default_str();
  s.cmd->add_flag("--exact", a->drift.exact,
                  "compare the full columns (default: the stored 4096-row samples)");
  s.cmd->add_flag("--json", a->json, "JSON output");
  return s;
}

// The broken rules, one per line; exit 3 when any, so a pipeline can stop.
int RunValidate(const QueryArgs& a, FeatureSet& fs, Out& out) {
  auto rules = Rules::Load(a.output);
  if (!rules.ok()) return Fail(rules.status());
  auto name = fs.Resolve(a.version);
  if (!name.ok()) return Fail(name.status());
  auto info = fs.Info(*name);
  if (!info.ok()) return Fail(info.status());
  auto stats = fs.Stats(*name);
  if (!stats.ok()) return Fail(stats.status());
  auto broken = CheckRules(*rules, *stats, info->has_labels());
  if (!broken.ok()) return Fail(broken.status());
  if (a.json) {
    out.Print(JsonText(nlohmann::ordered_json{{"file", a.path},
                                              {"version", *name},
                                              {"rules", a.output},
                                              {"ok", broken->empty()},
                                              {"broken", *broken}},
                       2) +
              "\n");
  } else {
    std::string text = fmt::format("{} {}: {} against {}\n", a.path, *name,
                                   broken->empty() ? "every rule holds" : "rules broken", a.output);
    for (const std::string& b : *broken) text += "  " + b + "\n";
    out.Print(text);
  }
  return broken->empty() ? 0 : kExitCheckFailed;
}

Subcommand AddValidate(CLI::App& app, Out& out) {
  auto a = std::make_shared<QueryArgs>();
  Subcommand s = AddQuery(app, out, "validate",
                          "check a version against validation rules (TOML); exit 3 when one breaks",
                          a, RunValidate);
  s.cmd->add_option("version", a->version, "version (default latest)");
  s.cmd->add_option("--rules", a->output, "rules file (docs/featurecache.md)")->required();
  s.cmd->add_flag("--json", a->json, "JSON output");
  return s;
}

int RunLineage(const QueryArgs& a, FeatureSet& fs, Out& out) {
  auto infos = AllInfos(fs);
  if (!infos.ok()) return Fail(infos.status());
  if (a.dot && a.version.empty()) {
    out.Print(FormatLineageDot(*infos, ""));
    return 0;
  }
  auto name = fs.Resolve(a.version);
  if (!name.ok()) return Fail(name.status());
  out.Print(a.dot ? FormatLineageDot(*infos, *name) : FormatLineageText(*infos, *name));
  return 0;
}

Subcommand AddLineage(CLI::App& app, Out& out) {
  auto a = std::make_shared<QueryArgs>();
  Subcommand s = AddQuery(app, out, "lineage", "where a version came from", a, RunLineage);
  s.cmd->add_option("version", a->version,
                    "version (default latest; with --dot and no version: every version)");
  s.cmd->add_flag("--dot", a->dot, "Graphviz DOT output");
  return s;
}

// Version `v`'s digests, and those its children recorded of its parents
// inside this file; its row count and digest into `*rows` and `*sha256`.
Status VerifyOne(const std::string& path, FeatureSet& fs, const std::string& v, uint64_t* rows,
                 std::string* sha256) {
  HPCML_ASSIGN_OR_RETURN(VersionReader reader, fs.OpenVersion(v));
  HPCML_RETURN_IF_ERROR(VerifyVersion(reader));
  // Lineage: a parent inside this file must still have the digest the child
  // recorded.
  Status st = Status::Ok();
  for (const auto& p : reader.info().parents) {
    auto pi = fs.Info(p.version);
    if (pi.ok() && pi->data_sha256 != p.sha256) {
      st = Corrupt("{}: version {}: its parent {} has digest {} but {} was recorded", path, v,
                   p.version, pi->data_sha256, p.sha256);
    }
  }
  *rows = reader.rows();
  *sha256 = reader.info().data_sha256;
  return st;
}

int RunVerify(const QueryArgs& a, FeatureSet& fs, Out& out) {
  std::vector<std::string> which;
  if (a.version.empty()) {
    which = fs.versions();
  } else {
    auto name = fs.Resolve(a.version);
    if (!name.ok()) return Fail(name.status());
    which.push_back(*name);
  }
  // Data that does not match its digests (Corrupt) is a failed check, 3; a
  // version that could not be read otherwise is 1. The larger wins.
  int rc = 0;
  for (const auto& v : which) {
    uint64_t rows = 0;
    std::string sha256;
    Status st = VerifyOne(a.path, fs, v, &rows, &sha256);
    if (st.ok()) {
      out.Print(fmt::format("{}: {}: ok ({} rows, sha256:{})\n", a.path, v, rows, sha256));
    } else {
      const int code = st.code() == StatusCode::kCorrupt ? kExitCheckFailed : kExitError;
      rc = std::max(rc, Fail(st, code));
    }
  }
  return rc;
}

Subcommand AddVerify(CLI::App& app, Out& out) {
  auto a = std::make_shared<QueryArgs>();
  Subcommand s =
      AddQuery(app, out, "verify",
               "recompute and check the digests of every version (or one); exit 3 when one "
               "does not match",
               a, RunVerify);
  s.cmd->add_option("version", a->version, "only this version");
  return s;
}

int RunDiff(const QueryArgs& a, FeatureSet& fs, Out& out) {
  auto va = fs.Info(a.version);
  if (!va.ok()) return Fail(va.status());
  auto vb = fs.Info(a.version_b);
  if (!vb.ok()) return Fail(vb.status());
  DiffReport d = DiffVersions(*va, *vb);
  out.Print(d.text);
  const bool differ = !(d.same_schema && d.same_data && va->rows == vb->rows);
  return a.exit_code && differ ? kExitCheckFailed : 0;
}

Subcommand AddDiff(CLI::App& app, Out& out) {
  auto a = std::make_shared<QueryArgs>();
  Subcommand s = AddQuery(app, out, "diff", "schema and counts between two versions", a, RunDiff);
  s.cmd->add_option("a", a->version, "first version")->required();
  s.cmd->add_option("b", a->version_b, "second version")->required();
  s.cmd->add_flag("--exit-code", a->exit_code, "exit with 3 when the versions differ");
  return s;
}

// Export to `a.output`, a path the access policy must allow; the file is
// removed when the export fails.
int ExportToFile(const QueryArgs& a, FeatureSet& fs, const AccessContext& ctx,
                 const ExportOptions& eo) {
  auto canonical = CanonicalPath(a.output, /*must_exist=*/false);
  if (!canonical.ok()) return Fail(canonical.status());
  Status allowed = CheckPath(ctx, *canonical, "export");
  if (!allowed.ok()) return Fail(allowed);
  auto fd = OpenFd(a.output, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!fd.ok()) return Fail(fd.status());
  Status st = ExportCsv(fs, eo, fd->get(), a.output);
  if (st.ok()) st = fd->Close();
  if (!st.ok()) {
    ::unlink(a.output.c_str());
    return Fail(st);
  }
  return 0;
}

int RunExport(const QueryArgs& a, FeatureSet& fs, Out&) {
  AccessContext ctx = AccessContext::FromEnvironment();
  ExportOptions eo;
  eo.version = a.version;
  eo.limit = a.limit;
  if (!a.output.empty()) return ExportToFile(a, fs, ctx, eo);
  if (ctx.guarded) {
    return Fail(
        PermissionDenied("{}: export to standard output is refused inside a guarded job: write "
                         "to an approved path with --output",
                         a.path));
  }
  Status st = ExportCsv(fs, eo, STDOUT_FILENO, "standard output");
  return st.ok() ? 0 : Fail(st);
}

Subcommand AddExport(CLI::App& app, Out& out) {
  auto a = std::make_shared<QueryArgs>();
  Subcommand s = AddQuery(app, out, "export", "write a version as CSV", a, RunExport);
  s.cmd->add_option("version", a->version, "version (default latest)");
  s.cmd->add_option("-o,--output", a->output, "output file (default: standard output)");
  s.cmd->add_option("--limit", a->limit, "at most this many rows");
  return s;
}

}  // namespace

int RunCli(int argc, char** argv) {
  Out out;
  out.log.set_level(LogLevel::kInfo);
  CLI::App app{
      "hpcml-fcache: versioned HDF5 feature sets with lineage, residency checks and point-in-time "
      "joins",
      "hpcml-fcache"};
  app.set_version_flag("--version", ToolString());
  app.require_subcommand(1);
  // In this order in the help.
  const std::vector<Subcommand> subcommands = {
      AddIngest(app, out), AddDerive(app, out), AddAsof(app, out),     AddLs(app, out),
      AddInfo(app, out),   AddStats(app, out),  AddLineage(app, out),  AddVerify(app, out),
      AddDiff(app, out),   AddDrift(app, out),  AddValidate(app, out), AddExport(app, out)};
  // Set after the subcommands, which would copy it into their own --help.
  app.footer(ExitStatusHelp(
      {{kExitCheckFailed,
        "a check found a problem: verify a digest that does not match, validate a\n"
        "      broken rule, drift a drifted column, diff --exit-code a difference"}}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;  // --help and --version are 0
  }
  for (const Subcommand& s : subcommands) {
    if (s.cmd->parsed()) return s.run();
  }
  return kExitUsage;  // not reached: require_subcommand(1)
}

}  // namespace hpcml::featurecache
