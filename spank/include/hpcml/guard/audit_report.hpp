// Reading the guard's audit logs for people: `hpcml-audit report` (who was
// allowed or denied which datasets, where, when, under which policy) and
// `hpcml-audit metrics` (decisions counted for Prometheus).
//
// Files may be given in any order and may belong to several logs: rotated
// files of one log share its name plus a ".N" suffix (audit.jsonl.2,
// audit.jsonl.1, audit.jsonl). Each log's files are ordered by their first
// sequence number and their chain is checked by VerifyAuditFiles, the same
// check as `hpcml-audit verify`; every decision says whether its line is
// vouched for by an intact chain.
//
// Lines are read tolerantly: fields the reader does not know are ignored,
// missing ones are empty (older and newer guards write different sets).
// Pure functions of the files' contents; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/guard/audit.hpp"

namespace hpcml::guard {

// One decision line (or a summary of repeated denials) as an auditor reads it.
struct AuditEntry {
  std::string file;
  std::size_t line = 0;  // 1-based in `file`
  std::optional<std::uint64_t> seq;
  std::string time;          // as logged, UTC
  std::int64_t time_ms = 0;  // parsed; 0 when the line has no readable time
  std::string context;       // "node", "submit"
  std::string enforce, cluster, node, job_id, step_id, uid, user, role, zone;
  std::vector<std::string> datasets;
  std::string decision;  // "allow" or "deny"
  std::string reason;
  std::string reason_code;    // "" in lines of older guards
  std::string policy_sha256;  // of the policy that decided, when the line records it
  std::string version;        // of the guard, when the line records it
  // A "repeat" line stands for `count` denials like the line it summarises
  // (whose fields it carries; job_id is the last of them); 1 otherwise.
  std::uint64_t count = 1;
  // "ok": in an intact chain; "bad": named by the chain check (edited,
  // out of sequence, not JSON); "unverified": in a chain with problems
  // elsewhere, so nothing vouches for it.
  std::string chain;
};

// One log: its files, oldest first, and its chain check.
struct AuditLog {
  std::vector<std::string> files;
  VerifyReport verify;
};

struct AuditFilter {
  std::vector<std::string> users;                  // login names; empty: all
  std::vector<std::string> datasets;               // path prefixes (component-wise); empty: all
  std::vector<std::string> zones;                  // empty: all
  std::string decision;                            // "allow", "deny" or "" (both)
  std::optional<std::int64_t> since_ms, until_ms;  // [since, until)
};

struct AuditReport {
  std::vector<AuditLog> logs;
  std::vector<AuditEntry> entries;  // the matching decisions, by time then log order
  std::size_t lines = 0;            // lines read, all files
  std::size_t unreadable = 0;       // lines that are not a decision (not JSON, no decision)
  bool intact() const;              // every log's chain is intact
};

// Reads, verifies and filters. The side files "<name>.jsonl.head" and
// ".repeat" among `files` (a glob's) are skipped. Fails only when a file
// cannot be read or is compressed (named in the error).
Result<AuditReport> ReadAuditReport(const std::vector<std::string>& files,
                                    const AuditFilter& filter = {});

// Whether `e` passes `f`. A dataset prefix matches a dataset within it and a
// dataset that contains it (a job given /data/ae could read /data/ae/x).
bool Matches(const AuditEntry& e, const AuditFilter& f);

// A --since/--until value: an ISO 8601 date or time (UTC unless it gives an
// offset), or an age before `now_ms`: "7d", "12h", "30m", "2w". The error
// names `option`.
Result<std::int64_t> ParseAuditTime(std::string_view option, std::string_view text,
                                    std::int64_t now_ms);

std::string FormatAuditTable(const AuditReport& r);
// Header, then one line per decision; datasets comma-joined in one field.
std::string FormatAuditCsv(const AuditReport& r);
// {"format": "hpcml-audit-report/1", "logs": [...], "decisions": [...]}.
std::string FormatAuditJson(const AuditReport& r);

// A denial's reason as a short class for a metric label ("role_unbound",
// "dataset_classification", ...; "other" when unknown); "none" for an allow.
std::string ReasonClass(std::string_view decision, std::string_view reason);

// Prometheus text (docs/monitoring.md): hpcml_guard_decisions_total by
// decision, reason class, zone and context; per log whether its chain is
// intact and its last decision's time.
std::string FormatAuditMetrics(const AuditReport& r);

}  // namespace hpcml::guard
