// hpcml-bench-audit-flood: the audit log's growth under a flood of varied
// denials (issue 32): N denials (default 10,000) from several users, each
// naming other long paths, appended through the guard's own writer, against
// the baseline measured in the same run: the bytes the same denials take
// written one line each (FormatAuditLine, as before any bound or summary).
//
//   hpcml-bench-audit-flood [denials] [users]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include <fmt/format.h>

#include "hpcml/guard/audit.hpp"

namespace fs = std::filesystem;
using hpcml::guard::AuditRecord;

int main(int argc, char** argv) {
  const int denials = argc > 1 ? std::atoi(argv[1]) : 10000;
  const int users = argc > 2 ? std::atoi(argv[2]) : 8;
  if (denials <= 0 || users <= 0) {
    std::fprintf(stderr, "usage: hpcml-bench-audit-flood [denials > 0] [users > 0]\n");
    return 2;
  }
  const fs::path dir = fs::temp_directory_path() / fmt::format("hpcml-audit-flood.{}", ::getpid());
  fs::create_directories(dir);
  const std::string log = (dir / "audit.jsonl").string();
  const char* codes[] = {"dataset_unknown", "dataset_zone", "dataset_classification"};
  std::mt19937 rng(42);
  std::uintmax_t baseline = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < denials; ++i) {
    AuditRecord r;
    r.context = "node";
    r.enforce = "mount";
    r.guard_version = "0.1.0";
    r.policy_sha256 = std::string(64, 'a');
    r.cluster = "c";
    r.node = "node1";
    const int u = static_cast<int>(rng() % static_cast<unsigned>(users));
    r.uid = 2000 + static_cast<std::uint32_t>(u);
    r.user = fmt::format("user{}", u);
    r.role = "reader";
    r.zone = "ae";
    r.job_id = std::to_string(1000 + i);
    r.step_id = "0";
    for (int d = 0; d < 32; ++d)  // 32 paths of about 2 KB, none like another
      r.datasets.push_back(fmt::format("/data/ae/{}/{:08x}", std::string(2000, 'p'), rng()));
    r.reason_code = codes[rng() % 3];
    r.reason = fmt::format("dataset '{}' is denied ({})", r.datasets[0], r.reason_code);
    baseline +=
        hpcml::guard::FormatAuditLine(r, static_cast<std::uint64_t>(i), std::string(64, '0'))
            .size() +
        1;
    if (auto st = hpcml::guard::AppendAudit(log, r); !st.ok()) {
      std::fprintf(stderr, "hpcml-bench-audit-flood: %s\n", st.status().message().c_str());
      return 1;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::uintmax_t bytes = fs::file_size(log);
  std::size_t lines = 0;
  {
    std::FILE* f = std::fopen(log.c_str(), "r");
    for (int c; f && (c = std::fgetc(f)) != EOF;) lines += c == '\n';
    if (f) std::fclose(f);
  }
  fmt::print(
      "{} varied denials from {} users (3 reason codes, 32 paths of 2 KB each) in {:.2f} s "
      "({:.0f} us each)\n",
      denials, users, secs, secs / denials * 1e6);
  fmt::print("baseline, one line each: {:.1f} MB\n", static_cast<double>(baseline) / 1e6);
  fmt::print(
      "the guard's log: {} lines, {:.1f} KB (at most {} lines per user and reason a "
      "window, then one flood line)\n",
      lines, static_cast<double>(bytes) / 1e3, hpcml::guard::kAuditFloodLines);
  fmt::print("ratio log/baseline: {:.4f}\n",
             static_cast<double>(bytes) / static_cast<double>(baseline));
  fs::remove_all(dir);
  return 0;
}
