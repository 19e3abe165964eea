// hpcml-audit: checks the guard's hash-chained audit log.
//   hpcml-audit verify [--witness W --node N] FILE...
//       the log and its rotated files, oldest first (audit.jsonl.2
//       audit.jsonl.1 audit.jsonl), and the heads a collector recorded for
//       node N in W; exit 0 if intact, 1 naming every bad line, 2 on
//       usage/IO errors
//   hpcml-audit witness --node N --head HEAD W
//       the collector (on another host than N, e.g. the controller): records
//       N's head (a copy of its audit.jsonl.head) in W if it changed
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "hpcml/common/identity.hpp"
#include "hpcml/guard/audit.hpp"

int main(int argc, char** argv) {
  CLI::App app{"hpcml-audit: check the hpcml guard's audit log", "hpcml-audit"};
  app.set_version_flag("--version", hpcml::VersionLine("hpcml-audit"));
  app.require_subcommand(1);
  std::vector<std::string> files;
  std::string witness, node, head;
  auto* verify = app.add_subcommand(
      "verify", "verify the hash chain of an audit log and its rotated files (oldest first)");
  verify->add_option("FILE", files, "the audit log (JSON lines), after its rotated files")
      ->required();
  auto* w_opt = verify->add_option("--witness", witness, "heads recorded by the collector");
  verify->add_option("--node", node, "the node whose log this is (with --witness)")->needs(w_opt);
  w_opt->needs(verify->get_option("--node"));
  auto* collect = app.add_subcommand(
      "witness", "record a node's audit head in a witness file (run off the node)");
  collect->add_option("--node", node, "the node the head comes from")->required();
  collect->add_option("--head", head, "a copy of the node's <audit log>.head")->required();
  collect->add_option("WITNESS", witness, "the witness file (appended)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (collect->parsed()) {
    auto added = hpcml::guard::AppendWitness(witness, node, head);
    if (!added.ok()) {
      fmt::print(stderr, "hpcml-audit: {}\n", added.status().message());
      return 2;
    }
    fmt::print("hpcml-audit: {}: {}\n", witness,
               *added ? "recorded " + node + "'s head" : node + "'s head unchanged");
    return 0;
  }
  std::vector<hpcml::guard::WitnessEntry> witnessed;
  if (!witness.empty()) {
    auto read = hpcml::guard::ReadWitness(witness, node);
    if (!read.ok()) {
      fmt::print(stderr, "hpcml-audit: {}\n", read.status().message());
      return 2;
    }
    witnessed = std::move(read).value();
  }
  auto report = hpcml::guard::VerifyAuditFiles(files, witnessed);
  if (!report.ok()) {
    fmt::print(stderr, "hpcml-audit: {}\n", report.status().message());
    return 2;
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
    return 1;
  }
  std::string from = report->first_seq > 0
                         ? fmt::format(" from seq {} (older lines rotated away)", report->first_seq)
                         : "";
  std::string against =
      witness.empty() ? ""
                      : fmt::format(", {} witnessed head(s) of {} match", witnessed.size(), node);
  fmt::print("hpcml-audit: intact, {} lines{}{}, head sha256 {}\n", report->lines, from, against,
             report->head.empty() ? "(empty log)" : report->head);
  return 0;
}
