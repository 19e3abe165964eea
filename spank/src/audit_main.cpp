// hpcml-audit: checks the guard's hash-chained audit log.
//   hpcml-audit verify FILE    exit 0 if intact, 1 naming the first bad line, 2 on usage/IO errors
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "hpcml/spank/audit.hpp"

int main(int argc, char** argv) {
  CLI::App app{"hpcml-audit: check the hpcml guard's audit log"};
  app.require_subcommand(1);
  std::string file;
  auto* verify = app.add_subcommand("verify", "verify the hash chain of an audit log");
  verify->add_option("FILE", file, "the audit log (JSON lines)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto report = hpcml::guard::VerifyAuditLog(file);
  if (!report.ok()) {
    fmt::print(stderr, "hpcml-audit: {}\n", report.status().message());
    return 2;
  }
  if (!report->intact) {
    fmt::print(stderr, "hpcml-audit: {}:{}: {}\n", file, report->bad_line, report->reason);
    return 1;
  }
  fmt::print("hpcml-audit: {}: intact, {} lines, head sha256 {}\n", file, report->lines,
             report->head.empty() ? "(empty log)" : report->head);
  return 0;
}
