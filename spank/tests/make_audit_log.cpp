// guard_make_audit_log LOG: appends a fixed set of decisions to LOG with the
// guard's own writer (AppendAudit), for the monitoring and report tests:
// 3 allows, 2 denials for a classification, 1 for a dataset of another zone.
#include <cstdio>

#include "hpcml/guard/audit.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: guard_make_audit_log LOG\n");
    return 2;
  }
  using hpcml::guard::AuditRecord;
  auto rec = [](const char* user, const char* zone, const char* dataset, bool allow,
                const char* reason, const char* job) {
    AuditRecord r;
    r.context = "node";
    r.enforce = "mount";
    r.cluster = "hpcml";
    r.node = "node1";
    r.job_id = job;
    r.step_id = "0";
    r.uid = 1001;
    r.user = user;
    r.role = "ml-engineer";
    r.zone = zone;
    r.datasets = {dataset};
    r.allow = allow;
    r.reason = reason;
    return r;
  };
  const char* classified =
      "dataset '/data/ae/customers/c.h5' is classified 'restricted' (/etc/hpcml/policy.toml:21); "
      "role 'ml-engineer' allows: internal, public";
  const AuditRecord recs[] = {
      rec("alice", "ae", "/data/ae/fraud.h5", true, "role 'ml-engineer' in zone 'ae'", "11"),
      rec("bob", "ae", "/data/ae/customers/c.h5", false, classified, "12"),
      rec("alice", "ae", "/data/ae/fraud.h5", true, "role 'ml-engineer' in zone 'ae'", "13"),
      rec("bob", "ae", "/data/eu/x.h5", false,
          "dataset '/data/eu/x.h5' is in zone 'eu' (/etc/hpcml/policy.toml:9), not in zone 'ae'",
          "14"),
      rec("bob", "ae", "/data/ae/customers/d.h5", false,
          "dataset '/data/ae/customers/d.h5' is classified 'restricted' "
          "(/etc/hpcml/policy.toml:21); role 'ml-engineer' allows: internal, public",
          "15"),
      rec("carol", "ae", "/data/ae/b.h5", true, "role 'ml-engineer' in zone 'ae'", "16"),
  };
  for (const AuditRecord& r : recs) {
    auto line = hpcml::guard::AppendAudit(argv[1], r);
    if (!line.ok()) {
      std::fprintf(stderr, "guard_make_audit_log: %s\n", line.status().message().c_str());
      return 1;
    }
  }
  return 0;
}
