#include "cli.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <iostream>

#include "hpcml/common/log.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "hpcml/featurecache/access.hpp"
#include "hpcml/featurecache/asof.hpp"
#include "hpcml/featurecache/derive.hpp"
#include "hpcml/featurecache/export.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/ingest.hpp"
#include "hpcml/featurecache/report.hpp"
#include "hpcml/featurecache/timeutil.hpp"
#include "hpcml/featurecache/writer.hpp"

namespace hpcml::featurecache {
namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitDiffers = 3;

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string item =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

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

struct Out {
  Logger log{"hpcml-fcache"};
  void Print(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }
};

int Fail(Out& out, const Status& st) {
  out.log.error("{}", st.message());
  return kExitError;
}

}  // namespace

int RunCli(int argc, char** argv) {
  Out out;
  // Errors are "hpcml-fcache: <message>" without the "error: " tag: the
  // message itself names the file and what is wrong.
  out.log.set_level(LogLevel::kInfo);
  auto fail = [&](const Status& st) {
    std::string line = fmt::format("hpcml-fcache: {}\n", st.message());
    std::fwrite(line.data(), 1, line.size(), stderr);
    return kExitError;
  };
  (void)Fail;

  CLI::App app{
      "hpcml-fcache: versioned HDF5 feature sets with lineage, residency checks and point-in-time "
      "joins"};
  app.set_version_flag("--version", ToolString());
  app.require_subcommand(1);

  // ingest
  IngestOptions ing;
  std::string ing_path, ing_features, ing_delim = ",";
  auto* c_ingest =
      app.add_subcommand("ingest", "add a version from a CSV file (header row required)");
  c_ingest->add_option("file", ing_path, "feature set (.h5); created if missing")->required();
  c_ingest->add_option("--csv", ing.csv_path, "CSV file to read")->required();
  c_ingest->add_option("--entity", ing.entity_column, "entity id column (integers)")->required();
  c_ingest
      ->add_option("--timestamp", ing.timestamp_column,
                   "event time column (ISO 8601 or epoch seconds)")
      ->required();
  c_ingest->add_option("--label", ing.label_column, "label column (optional)");
  c_ingest->add_option("--features", ing_features,
                       "feature columns, comma-separated (default: all other columns)");
  c_ingest->add_option("--zone", ing.zone,
                       "residency zone (required for a new file; must match an existing one)");
  c_ingest
      ->add_option("--classification", ing.classification,
                   "public, internal, confidential or restricted")
      ->required();
  c_ingest->add_option("--chunk-rows", ing.chunk_rows,
                       "rows per HDF5 chunk (default: about 1 MiB chunks)");
  c_ingest->add_option("--compress", ing.compression, "deflate level 0-9 (0: none)")
      ->check(CLI::Range(0, 9));
  c_ingest->add_option("--delimiter", ing_delim, "field delimiter (default ,)");
  c_ingest->add_option("--lock-timeout", ing.lock_timeout_s, "seconds to wait for another writer");

  // derive
  DeriveOptions der;
  std::string der_path, der_select, der_std_cols, der_since, der_until;
  bool der_std = false;
  auto* c_derive =
      app.add_subcommand("derive", "add a version computed from another by a recorded transform");
  c_derive->add_option("file", der_path, "feature set")->required();
  c_derive->add_option("--from", der.from, "parent version (default latest)");
  c_derive->add_option("--select", der_select,
                       "keep these feature columns, comma-separated, in this order");
  c_derive->add_flag("--standardize", der_std, "standardise every kept column: (x - mean) / std");
  c_derive->add_option("--standardize-columns", der_std_cols, "standardise only these columns");
  c_derive->add_option("--since", der_since, "keep rows with timestamp >= this time");
  c_derive->add_option("--until", der_until, "keep rows with timestamp < this time");
  c_derive->add_option("--classification", der.classification,
                       "classification (default: the parent's; not lower)");
  c_derive->add_option("--chunk-rows", der.chunk_rows, "rows per HDF5 chunk");
  c_derive->add_option("--compress", der.compression, "deflate level 0-9 (default: the parent's)")
      ->check(CLI::Range(0, 9));
  c_derive->add_option("--lock-timeout", der.lock_timeout_s, "seconds to wait for another writer");

  // asof
  AsofOptions aso;
  std::string aso_path, aso_age, aso_missing = "nan", aso_mem = "256M", aso_delim = ",";
  auto* c_asof =
      app.add_subcommand("asof", "point-in-time join: a training set as of each request's time");
  c_asof->add_option("file", aso_path, "feature set")->required();
  c_asof->add_option("--from", aso.from, "feature version (default latest)");
  c_asof->add_option("--requests", aso.requests_csv, "CSV of (entity, time[, label]) requests")
      ->required();
  c_asof->add_option("--entity", aso.entity_column, "entity column of the requests")->required();
  c_asof->add_option("--time", aso.time_column, "time column of the requests")->required();
  c_asof->add_option("--label", aso.label_column, "label column of the requests (optional)");
  c_asof->add_option("--max-age", aso_age,
                     "ignore feature rows older than this before the request (e.g. 7d)");
  c_asof
      ->add_option("--missing", aso_missing,
                   "requests without a row: nan (keep, default), drop or error")
      ->check(CLI::IsMember({"nan", "drop", "error"}));
  c_asof->add_option("--memory", aso_mem, "memory budget (default 256M)");
  c_asof->add_option("--tmpdir", aso.tmpdir,
                     "directory for temporary sort runs (default $TMPDIR or /tmp)");
  c_asof->add_option("--classification", aso.classification,
                     "classification (default: the parent's; not lower)");
  c_asof->add_option("--compress", aso.compression, "deflate level 0-9 (default: the parent's)")
      ->check(CLI::Range(0, 9));
  c_asof->add_option("--delimiter", aso_delim, "field delimiter of the requests (default ,)");
  c_asof->add_option("--lock-timeout", aso.lock_timeout_s, "seconds to wait for another writer");

  // ls, info, lineage, verify, diff, export
  std::string q_path, q_version, q_version_b;
  bool q_json = false, q_dot = false, q_exit_code = false;
  auto* c_ls = app.add_subcommand("ls", "list the versions");
  c_ls->add_option("file", q_path, "feature set")->required();
  auto* c_info = app.add_subcommand("info", "describe a version");
  c_info->add_option("file", q_path, "feature set")->required();
  c_info->add_option("version", q_version, "version (default latest)");
  c_info->add_flag("--json", q_json, "JSON output");
  auto* c_lineage = app.add_subcommand("lineage", "where a version came from");
  c_lineage->add_option("file", q_path, "feature set")->required();
  c_lineage->add_option("version", q_version,
                        "version (default latest; with --dot and no version: every version)");
  c_lineage->add_flag("--dot", q_dot, "Graphviz DOT output");
  auto* c_verify =
      app.add_subcommand("verify", "recompute and check the digests of every version (or one)");
  c_verify->add_option("file", q_path, "feature set")->required();
  c_verify->add_option("version", q_version, "only this version");
  auto* c_diff = app.add_subcommand("diff", "schema and counts between two versions");
  c_diff->add_option("file", q_path, "feature set")->required();
  c_diff->add_option("a", q_version, "first version")->required();
  c_diff->add_option("b", q_version_b, "second version")->required();
  c_diff->add_flag("--exit-code", q_exit_code, "exit with 3 when the versions differ");
  std::string exp_out;
  uint64_t exp_limit = 0;
  auto* c_export = app.add_subcommand("export", "write a version as CSV");
  c_export->add_option("file", q_path, "feature set")->required();
  c_export->add_option("version", q_version, "version (default latest)");
  c_export->add_option("-o,--output", exp_out, "output file (default: standard output)");
  c_export->add_option("--limit", exp_limit, "at most this many rows");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }

  if (c_ingest->parsed()) {
    ing.feature_columns = SplitCommas(ing_features);
    auto d = ParseDelimiter(ing_delim);
    if (!d.ok()) return fail(d.status());
    ing.delimiter = *d;
    std::vector<std::string> warnings;
    auto r = Ingest(ing_path, ing, &warnings);
    for (const auto& w : warnings) out.log.warn("{}", w);
    if (!r.ok()) return fail(r.status());
    out.Print(fmt::format("{}: added {} ({} rows, {} features, {}/{}, sha256:{})\n", ing_path,
                          r->name, r->rows, r->features(), r->zone, r->classification,
                          r->data_sha256));
    return 0;
  }
  if (c_derive->parsed()) {
    der.select = SplitCommas(der_select);
    der.standardize = der_std;
    der.standardize_columns = SplitCommas(der_std_cols);
    if (!der_since.empty()) {
      auto t = ParseTimestamp(der_since);
      if (!t.ok()) return fail(Status(t.status().code(), "--since: " + t.status().message()));
      der.since = *t;
    }
    if (!der_until.empty()) {
      auto t = ParseTimestamp(der_until);
      if (!t.ok()) return fail(Status(t.status().code(), "--until: " + t.status().message()));
      der.until = *t;
    }
    auto r = Derive(der_path, der);
    if (!r.ok()) return fail(r.status());
    out.Print(fmt::format("{}: added {} from {} ({} rows, {} features, sha256:{})\n", der_path,
                          r->name, r->parents.empty() ? "?" : r->parents[0].version, r->rows,
                          r->features(), r->data_sha256));
    return 0;
  }
  if (c_asof->parsed()) {
    if (!aso_age.empty()) {
      auto a = ParseDuration(aso_age);
      if (!a.ok()) return fail(Status(a.status().code(), "--max-age: " + a.status().message()));
      aso.max_age = *a;
    }
    aso.missing = aso_missing == "drop"    ? AsofMissing::kDrop
                  : aso_missing == "error" ? AsofMissing::kError
                                           : AsofMissing::kNan;
    auto mem = ParseBytes(aso_mem);
    if (!mem.ok()) return fail(Status(mem.status().code(), "--memory: " + mem.status().message()));
    aso.memory_bytes = *mem;
    auto d = ParseDelimiter(aso_delim);
    if (!d.ok()) return fail(d.status());
    aso.delimiter = *d;
    AsofStats stats;
    auto r = Asof(aso_path, aso, &stats);
    if (!r.ok()) return fail(r.status());
    out.Print(fmt::format(
        "{}: added {} from {}: {} requests, {} matched, {} without a row at or before their time "
        "({}), {} rows written, sha256:{}\n",
        aso_path, r->name, r->parents.empty() ? "?" : r->parents[0].version, stats.requests,
        stats.matched, stats.missing, aso_missing, stats.written, r->data_sha256));
    return 0;
  }

  auto fs = FeatureSet::Open(q_path);
  if (!fs.ok()) return fail(fs.status());
  auto all_infos = [&]() -> Result<std::vector<VersionInfo>> {
    std::vector<VersionInfo> infos;
    for (const auto& v : fs->versions()) {
      HPCML_ASSIGN_OR_RETURN(VersionInfo i, fs->Info(v));
      infos.push_back(std::move(i));
    }
    return infos;
  };

  if (c_ls->parsed()) {
    auto infos = all_infos();
    if (!infos.ok()) return fail(infos.status());
    out.Print(fmt::format("{}: zone {}, classification {}, {} version(s), latest {}\n", q_path,
                          fs->zone(), fs->classification(), fs->versions().size(), fs->latest()));
    out.Print(FormatVersionList(*infos, fs->latest()));
    return 0;
  }
  if (c_info->parsed()) {
    auto info = fs->Info(q_version);
    if (!info.ok()) return fail(info.status());
    out.Print(q_json ? FormatInfoJson(q_path, *info) : FormatInfo(q_path, *info));
    return 0;
  }
  if (c_lineage->parsed()) {
    auto infos = all_infos();
    if (!infos.ok()) return fail(infos.status());
    if (q_dot && q_version.empty()) {
      out.Print(FormatLineageDot(*infos, ""));
      return 0;
    }
    auto name = fs->Resolve(q_version);
    if (!name.ok()) return fail(name.status());
    out.Print(q_dot ? FormatLineageDot(*infos, *name) : FormatLineageText(*infos, *name));
    return 0;
  }
  if (c_verify->parsed()) {
    std::vector<std::string> which;
    if (q_version.empty()) {
      which = fs->versions();
    } else {
      auto name = fs->Resolve(q_version);
      if (!name.ok()) return fail(name.status());
      which.push_back(*name);
    }
    int rc = 0;
    for (const auto& v : which) {
      auto reader = fs->OpenVersion(v);
      Status st = reader.ok() ? VerifyVersion(*reader) : reader.status();
      // Lineage: a parent inside this file must still have the digest the
      // child recorded.
      if (st.ok()) {
        for (const auto& p : reader->info().parents) {
          auto pi = fs->Info(p.version);
          if (pi.ok() && pi->data_sha256 != p.sha256) {
            st = Corrupt("{}: version {}: its parent {} has digest {} but {} was recorded", q_path,
                         v, p.version, pi->data_sha256, p.sha256);
          }
        }
      }
      if (st.ok()) {
        out.Print(fmt::format("{}: {}: ok ({} rows, sha256:{})\n", q_path, v, reader->rows(),
                              reader->info().data_sha256));
      } else {
        fail(st);
        rc = kExitError;
      }
    }
    return rc;
  }
  if (c_diff->parsed()) {
    auto a = fs->Info(q_version);
    if (!a.ok()) return fail(a.status());
    auto b = fs->Info(q_version_b);
    if (!b.ok()) return fail(b.status());
    DiffReport d = DiffVersions(*a, *b);
    out.Print(d.text);
    return q_exit_code && !(d.same_schema && d.same_data && a->rows == b->rows) ? kExitDiffers : 0;
  }
  if (c_export->parsed()) {
    AccessContext ctx = AccessContext::FromEnvironment();
    ExportOptions eo;
    eo.version = q_version;
    eo.limit = exp_limit;
    if (exp_out.empty()) {
      if (ctx.guarded) {
        return fail(
            PermissionDenied("{}: export to standard output is refused inside a guarded job: write "
                             "to an approved path with --output",
                             q_path));
      }
      Status st = ExportCsv(*fs, eo, STDOUT_FILENO, "standard output");
      return st.ok() ? 0 : fail(st);
    }
    auto canonical = CanonicalPath(exp_out, /*must_exist=*/false);
    if (!canonical.ok()) return fail(canonical.status());
    Status allowed = CheckPath(ctx, *canonical, "export");
    if (!allowed.ok()) return fail(allowed);
    auto fd = OpenFd(exp_out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!fd.ok()) return fail(fd.status());
    Status st = ExportCsv(*fs, eo, fd->get(), exp_out);
    if (st.ok()) st = fd->Close();
    if (!st.ok()) {
      ::unlink(exp_out.c_str());
      return fail(st);
    }
    return 0;
  }
  return kExitUsage;
}

}  // namespace hpcml::featurecache
