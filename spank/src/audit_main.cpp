// hpcml-audit: checks the guard's hash-chained audit log.
//   hpcml-audit verify [--collector COPY] [--witness W --node N] FILE...
//       the log and its rotated files, oldest first (audit.jsonl.2
//       audit.jsonl.1 audit.jsonl), against the collector's copy of the
//       node's lines and the heads a collector recorded for node N in W;
//       exit 0 if intact, 3 naming every bad line
//   hpcml-audit witness --node N --head HEAD W
//       the collector (on another host than N, e.g. the controller): records
//       N's head (a copy of its audit.jsonl.head) in W if it changed
//   hpcml-audit report [--user U] [--dataset PREFIX] [--zone Z] [--decision D]
//                      [--since T] [--until T] [--csv|--json] FILE...
//       the decisions in logs and rotated files (any order, several logs),
//       each chain checked; exit 0, 3 when a chain is not intact (the
//       report is still written)
//   hpcml-audit metrics [--output F.prom] FILE...
//       decisions counted for Prometheus (docs/monitoring.md)
// Otherwise exit 1 when a file cannot be read or written, 2 for a usage
// error (common/exit_codes.hpp).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "hpcml/common/exit_codes.hpp"
#include "hpcml/common/fs.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/guard/audit.hpp"
#include "hpcml/guard/audit_report.hpp"

namespace {

namespace hg = hpcml::guard;

struct ReportArgs {
  std::vector<std::string> files, users, datasets, zones;
  std::string decision, since, until, output;
  bool csv = false, json = false;
};

// Comma-separated values, options repeatable: --user a,b --user c.
std::vector<std::string> Items(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& v : values) {
    for (std::string& item : hpcml::SplitList(v)) out.push_back(std::move(item));
  }
  return out;
}

hpcml::Status WriteOut(const std::string& output, const std::string& text) {
  if (output.empty() || output == "-") {
    std::cout << text << std::flush;
    if (!std::cout) return hpcml::IoError("writing to stdout failed");
    return hpcml::Status::Ok();
  }
  return hpcml::WriteFileAtomic(output, text);
}

void PrintProblems(const hg::AuditReport& r) {
  for (const hg::AuditLog& log : r.logs) {
    for (const auto& p : log.verify.problems) {
      if (p.line > 0) {
        fmt::print(stderr, "hpcml-audit: {}:{}: {}\n", p.file, p.line, p.reason);
      } else {
        fmt::print(stderr, "hpcml-audit: {}: {}\n", p.file, p.reason);
      }
    }
  }
}

int RunReport(const ReportArgs& a) {
  hg::AuditFilter f;
  f.users = Items(a.users);
  f.datasets = Items(a.datasets);
  f.zones = Items(a.zones);
  f.decision = a.decision;
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  for (const auto& [option, text, out] : {std::tuple{"--since", &a.since, &f.since_ms},
                                          std::tuple{"--until", &a.until, &f.until_ms}}) {
    if (text->empty()) continue;
    auto t = hg::ParseAuditTime(option, *text, now_ms);
    if (!t.ok()) {
      fmt::print(stderr, "hpcml-audit: report: {}\n", t.status().message());
      return hpcml::kExitUsage;
    }
    *out = *t;
  }
  auto report = hg::ReadAuditReport(a.files, f);
  if (!report.ok()) {
    fmt::print(stderr, "hpcml-audit: report: {}\n", report.status().message());
    return hpcml::kExitError;
  }
  const std::string text = a.json  ? hg::FormatAuditJson(*report)
                           : a.csv ? hg::FormatAuditCsv(*report)
                                   : hg::FormatAuditTable(*report);
  if (hpcml::Status st = WriteOut(a.output, text); !st.ok()) {
    fmt::print(stderr, "hpcml-audit: report: {}\n", st.message());
    return hpcml::kExitError;
  }
  PrintProblems(*report);
  if (!report->intact()) {
    fmt::print(stderr,
               "hpcml-audit: NOT intact: decisions marked 'bad' or 'unverified' are not vouched "
               "for by their log's hash chain\n");
    return hpcml::kExitCheckFailed;
  }
  return hpcml::kExitOk;
}

int RunMetrics(const std::vector<std::string>& files, const std::string& output) {
  auto report = hg::ReadAuditReport(files);
  if (!report.ok()) {
    fmt::print(stderr, "hpcml-audit: metrics: {}\n", report.status().message());
    return hpcml::kExitError;
  }
  if (hpcml::Status st = WriteOut(output, hg::FormatAuditMetrics(*report)); !st.ok()) {
    fmt::print(stderr, "hpcml-audit: metrics: {}\n", st.message());
    return hpcml::kExitError;
  }
  return hpcml::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hpcml-audit: check the hpcml guard's audit log", "hpcml-audit"};
  app.set_version_flag("--version", hpcml::VersionLine("hpcml-audit"));
  app.require_subcommand(1);
  std::vector<std::string> files;
  std::string witness, node, head, collector;
  auto* verify = app.add_subcommand(
      "verify", "verify the hash chain of an audit log and its rotated files (oldest first)");
  verify->add_option("FILE", files, "the audit log (JSON lines), after its rotated files")
      ->required();
  auto* w_opt = verify->add_option("--witness", witness, "heads recorded by the collector");
  verify->add_option("--node", node, "the node whose log this is (with --witness)")->needs(w_opt);
  w_opt->needs(verify->get_option("--node"));
  verify->add_option("--collector", collector,
                     "the collector's copy of this node's lines (audit_collector=); every line "
                     "missing, changed or extra on either side is reported");
  auto* collect = app.add_subcommand(
      "witness", "record a node's audit head in a witness file (run off the node)");
  collect->add_option("--node", node, "the node the head comes from")->required();
  collect->add_option("--head", head, "a copy of the node's <audit log>.head")->required();
  collect->add_option("WITNESS", witness, "the witness file (appended)")->required();
  ReportArgs ra;
  auto* report_cmd = app.add_subcommand(
      "report",
      "who was allowed or denied which datasets, where and when, from audit logs and their "
      "rotated files (any order; each chain is verified)");
  report_cmd->add_option("FILE", ra.files, "audit logs and rotated files")->required();
  report_cmd->add_option("--user", ra.users, "only these users (comma-separated, repeatable)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  report_cmd
      ->add_option("--dataset", ra.datasets,
                   "only decisions on datasets within (or containing) this path prefix "
                   "(repeatable)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  report_cmd->add_option("--zone", ra.zones, "only these zones (comma-separated, repeatable)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  report_cmd->add_option("--decision", ra.decision, "only allow or deny")
      ->check(CLI::IsMember({"allow", "deny"}));
  report_cmd->add_option("--since", ra.since,
                         "from this time: ISO 8601 (UTC unless an offset is given) or an age "
                         "(30m, 12h, 7d, 2w)");
  report_cmd->add_option("--until", ra.until, "before this time (same forms as --since)");
  auto* csv = report_cmd->add_flag("--csv", ra.csv, "CSV instead of a table");
  report_cmd->add_flag("--json", ra.json, "JSON instead of a table")->excludes(csv);
  report_cmd->add_option("--output,-o", ra.output, "write to FILE (atomically) instead of stdout");
  std::vector<std::string> metric_files;
  std::string metrics_output;
  auto* metrics_cmd = app.add_subcommand(
      "metrics",
      "decisions counted by decision and reason, in the Prometheus text format (for "
      "node_exporter's textfile collector)");
  metrics_cmd->add_option("FILE", metric_files, "audit logs and rotated files")->required();
  metrics_cmd->add_option("--output,-o", metrics_output,
                          "write to FILE (atomically; name it *.prom for the textfile collector)");
  // Set after the subcommands, which would copy it into their own --help.
  app.footer(hpcml::ExitStatusHelp(
      {{hpcml::kExitCheckFailed,
        "verify or report: a log is not intact (each bad line is named; report\n"
        "      still writes the report)"}}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? hpcml::kExitOk : hpcml::kExitUsage;  // --help and --version are 0
  }
  if (report_cmd->parsed()) return RunReport(ra);
  if (metrics_cmd->parsed()) return RunMetrics(metric_files, metrics_output);
  if (collect->parsed()) {
    auto added = hpcml::guard::AppendWitness(witness, node, head);
    if (!added.ok()) {
      fmt::print(stderr, "hpcml-audit: {}\n", added.status().message());
      return hpcml::kExitError;
    }
    fmt::print("hpcml-audit: {}: {}\n", witness,
               *added ? "recorded " + node + "'s head" : node + "'s head unchanged");
    return hpcml::kExitOk;
  }
  std::vector<hpcml::guard::WitnessEntry> witnessed;
  if (!witness.empty()) {
    auto read = hpcml::guard::ReadWitness(witness, node);
    if (!read.ok()) {
      fmt::print(stderr, "hpcml-audit: {}\n", read.status().message());
      return hpcml::kExitError;
    }
    witnessed = std::move(read).value();
  }
  auto report = hpcml::guard::VerifyAuditFiles(files, witnessed);
  if (!report.ok()) {
    fmt::print(stderr, "hpcml-audit: {}\n", report.status().message());
    return hpcml::kExitError;
  }
  std::string against_collector;
  if (!collector.empty()) {
    auto check = hpcml::guard::CompareWithCollector(files, collector);
    if (!check.ok()) {
      fmt::print(stderr, "hpcml-audit: {}\n", check.status().message());
      return hpcml::kExitError;
    }
    report->problems.insert(report->problems.end(), check->problems.begin(), check->problems.end());
    report->intact = report->intact && check->problems.empty();
    against_collector =
        fmt::format(", {} of {} line(s) at the collector matching", check->matched, check->lines);
  }
  for (const auto& p : report->problems) {
    if (p.line > 0) {
      fmt::print(stderr, "hpcml-audit: {}:{}: {}\n", p.file, p.line, p.reason);
    } else {
      fmt::print(stderr, "hpcml-audit: {}: {}\n", p.file, p.reason);
    }
  }
  if (!report->intact) {
    fmt::print(stderr, "hpcml-audit: NOT intact: {} problem(s) in {} lines\n",
               report->problems.size(), report->lines);
    return hpcml::kExitCheckFailed;
  }
  std::string from = report->first_seq > 0
                         ? fmt::format(" from seq {} (older lines rotated away)", report->first_seq)
                         : "";
  std::string against = witness.empty()
                            ? ""
                            : fmt::format(", {} of {} witnessed head(s) of {} checked and matching",
                                          report->witnessed_checked, report->witnessed, node);
  fmt::print("hpcml-audit: intact, {} lines{}{}{}, head sha256 {}\n", report->lines, from,
             against_collector, against, report->head.empty() ? "(empty log)" : report->head);
  return hpcml::kExitOk;
}
