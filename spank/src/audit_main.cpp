// hpcml-audit: checks the guard's hash-chained audit log.
//   hpcml-audit verify FILE...   the log and its rotated files, oldest first
//                                (audit.jsonl.2 audit.jsonl.1 audit.jsonl);
//                                exit 0 if intact, 1 naming every bad line,
//                                2 on usage/IO errors
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "hpcml/spank/audit.hpp"

int main(int argc, char** argv) {
  CLI::App app{"hpcml-audit: check the hpcml guard's audit log"};
  app.require_subcommand(1);
  std::vector<std::string> files;
  auto* verify = app.add_subcommand(
      "verify", "verify the hash chain of an audit log and its rotated files (oldest first)");
  verify->add_option("FILE", files, "the audit log (JSON lines), after its rotated files")
      ->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto report = hpcml::guard::VerifyAuditFiles(files);
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
  fmt::print("hpcml-audit: intact, {} lines{}, head sha256 {}\n", report->lines, from,
             report->head.empty() ? "(empty log)" : report->head);
  return 0;
}
