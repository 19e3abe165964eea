#include "hpcml/guard/audit_report.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/prometheus.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/common/text_table.hpp"
#include "hpcml/common/time.hpp"

namespace hpcml::guard {
namespace {

// "audit.jsonl.2" -> {"audit.jsonl", 2}; "audit.jsonl" -> {"audit.jsonl", 0}.
std::pair<std::string, std::uint64_t> SplitRotation(const std::string& path) {
  const std::size_t dot = path.rfind('.');
  if (dot == std::string::npos || dot + 1 == path.size() ||
      path.find('/', dot) != std::string::npos)
    return {path, 0};
  std::uint64_t n = 0;
  const char* first = path.data() + dot + 1;
  const char* last = path.data() + path.size();
  auto [end, ec] = std::from_chars(first, last, n);
  if (ec != std::errc() || end != last) return {path, 0};
  return {path.substr(0, dot), n};
}

bool Compressed(const std::string& path) {
  for (const char* ext : {".gz", ".bz2", ".xz", ".zst", ".lz4"}) {
    if (path.ends_with(ext)) return true;
  }
  return false;
}

// Each line of `text` (the last one also without a newline).
std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

// A field as text whatever its JSON type; "" when absent or null.
std::string Text(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

std::optional<std::uint64_t> Seq(const nlohmann::json& j) {
  auto it = j.find("seq");
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::uint64_t>();
}

// One file of a log, read once.
struct LogFile {
  std::string path;
  std::string text;
  std::uint64_t rotation = 0;
  std::optional<std::uint64_t> first_seq;
};

// Oldest first: by first sequence number; files whose first line has none
// after them, by rotation number (higher is older, the current log last);
// empty files last (a fresh log after rotation).
auto AgeKey(const LogFile& f) {
  const std::uint64_t rotation =
      f.rotation == 0 ? UINT64_MAX
                      : UINT64_MAX - 1 - std::min<std::uint64_t>(f.rotation, UINT64_MAX - 2);
  return std::make_tuple(f.text.empty(), !f.first_seq.has_value(), f.first_seq.value_or(0),
                         rotation, f.path);
}

bool Older(const LogFile& a, const LogFile& b) {
  return AgeKey(a) < AgeKey(b);
}

AuditEntry EntryOf(const nlohmann::json& j, const std::string& file, std::size_t line) {
  AuditEntry e;
  e.file = file;
  e.line = line;
  e.seq = Seq(j);
  e.time = Text(j, "time");
  if (auto t = ParseIsoMillis(e.time); t.ok()) e.time_ms = *t;
  e.context = Text(j, "context");
  e.enforce = Text(j, "enforce");
  e.cluster = Text(j, "cluster");
  e.node = Text(j, "node");
  e.job_id = Text(j, "job_id");
  e.step_id = Text(j, "step_id");
  e.uid = Text(j, "uid");
  e.user = Text(j, "user");
  e.role = Text(j, "role");
  e.zone = Text(j, "zone");
  if (auto it = j.find("datasets"); it != j.end() && it->is_array()) {
    for (const auto& d : *it) e.datasets.push_back(d.is_string() ? d.get<std::string>() : d.dump());
  }
  e.decision = Text(j, "decision");
  e.reason = Text(j, "reason");
  e.reason_code = Text(j, "reason_code");
  // The policy's digest and the guard's version, under the names a guard
  // may write them.
  for (const char* key : {"policy_sha256", "policy_digest"}) {
    if (e.policy_sha256.empty()) e.policy_sha256 = Text(j, key);
  }
  for (const char* key : {"version", "guard_version"}) {
    if (e.version.empty()) e.version = Text(j, key);
  }
  return e;
}

// Reads one log's files (ordered) into `report`, after checking its chain.
Status ReadLog(std::vector<LogFile> files, AuditReport& report, const AuditFilter& filter) {
  std::sort(files.begin(), files.end(), Older);
  AuditLog log;
  for (const LogFile& f : files) log.files.push_back(f.path);
  HPCML_ASSIGN_OR_RETURN(log.verify, VerifyAuditFiles(log.files));
  std::set<std::pair<std::string, std::size_t>> bad;
  for (const AuditProblem& p : log.verify.problems) bad.emplace(p.file, p.line);
  const bool intact = log.verify.intact;
  // Decisions by seq, for the repeat lines that refer to them.
  std::map<std::uint64_t, AuditEntry> by_seq;
  for (const LogFile& f : files) {
    std::size_t line_no = 0;
    for (std::string_view line : Lines(f.text)) {
      ++line_no;
      ++report.lines;
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object()) {
        ++report.unreadable;
        continue;
      }
      AuditEntry e;
      if (Text(j, "context") == "repeat") {
        const std::string of = Text(j, "of");
        std::uint64_t of_seq = 0;
        auto found = std::from_chars(of.data(), of.data() + of.size(), of_seq).ec == std::errc()
                         ? by_seq.find(of_seq)
                         : by_seq.end();
        if (found != by_seq.end()) {
          e = found->second;
        } else {
          e.decision = "deny";
          e.reason = fmt::format("(repeats of the denial at seq {}, not in the files read)", of);
        }
        e.file = f.path;
        e.line = line_no;
        e.seq = Seq(j);
        e.time = Text(j, "time");
        e.time_ms = 0;
        if (auto t = ParseIsoMillis(e.time); t.ok()) e.time_ms = *t;
        const std::string last = Text(j, "last");
        const std::size_t dot = last.rfind('.');
        e.job_id = dot == std::string::npos ? last : last.substr(0, dot);
        e.step_id = dot == std::string::npos ? "" : last.substr(dot + 1);
        e.count = 0;
        const std::string count = Text(j, "count");
        (void)std::from_chars(count.data(), count.data() + count.size(), e.count);
      } else if (Text(j, "context") == "flood") {
        // Denials counted, not written one by one: who, why, how many.
        e.file = f.path;
        e.line = line_no;
        e.seq = Seq(j);
        e.time = Text(j, "time");
        if (auto t = ParseIsoMillis(e.time); t.ok()) e.time_ms = *t;
        e.context = "node";
        e.decision = "deny";
        e.user = Text(j, "user");
        e.reason_code = Text(j, "reason_code");
        e.count = 0;
        const std::string count = Text(j, "count");
        (void)std::from_chars(count.data(), count.data() + count.size(), e.count);
        e.reason = fmt::format("({} denials of a flood since {}, counted, not written one by one)",
                               e.count, Text(j, "since"));
      } else if (j.contains("decision")) {
        e = EntryOf(j, f.path, line_no);
        if (e.seq) by_seq[*e.seq] = e;
      } else {
        ++report.unreadable;
        continue;
      }
      e.chain = bad.count({f.path, line_no}) ? "bad" : intact ? "ok" : "unverified";
      if (Matches(e, filter)) report.entries.push_back(std::move(e));
    }
  }
  report.logs.push_back(std::move(log));
  return Status::Ok();
}

bool AnyWithin(const std::vector<std::string>& datasets, const std::vector<std::string>& prefixes) {
  for (const std::string& p : prefixes) {
    std::string_view prefix = p;
    while (prefix.size() > 1 && prefix.back() == '/') prefix.remove_suffix(1);
    for (const std::string& d : datasets) {
      if (IsWithin(d, prefix) || IsWithin(prefix, d)) return true;
    }
  }
  return false;
}

bool In(const std::vector<std::string>& list, const std::string& v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

std::string JobText(const AuditEntry& e) {
  if (e.job_id.empty()) return e.step_id;
  return e.step_id.empty() ? e.job_id : e.job_id + "." + e.step_id;
}

std::string DecisionText(const AuditEntry& e) {
  return e.count == 1 ? e.decision : fmt::format("{} x{}", e.decision, e.count);
}

std::string JoinDatasets(const std::vector<std::string>& d) {
  std::string out;
  for (const std::string& s : d) out += (out.empty() ? "" : ",") + s;
  return out;
}

// Problems and the summary, as verify words them.
std::string ChainText(const AuditReport& r) {
  std::string out;
  for (const AuditLog& log : r.logs) {
    const std::string name = log.files.empty() ? "" : log.files.back();
    if (log.verify.intact) {
      out += fmt::format(
          "chain {}: intact, {} lines{}\n", name, log.verify.lines,
          log.verify.first_seq > 0
              ? fmt::format(" from seq {} (older lines rotated away)", log.verify.first_seq)
              : "");
    } else {
      out += fmt::format("chain {}: NOT intact, {} problem(s) in {} lines\n", name,
                         log.verify.problems.size(), log.verify.lines);
    }
  }
  return out;
}

}  // namespace

bool AuditReport::intact() const {
  return std::all_of(logs.begin(), logs.end(), [](const AuditLog& l) { return l.verify.intact; });
}

bool Matches(const AuditEntry& e, const AuditFilter& f) {
  if (!In(f.users, e.user) || !In(f.zones, e.zone)) return false;
  if (!f.decision.empty() && e.decision != f.decision) return false;
  if (f.since_ms && e.time_ms < *f.since_ms) return false;
  if (f.until_ms && e.time_ms >= *f.until_ms) return false;
  if (!f.datasets.empty() && !AnyWithin(e.datasets, f.datasets)) return false;
  return true;
}

Result<AuditReport> ReadAuditReport(const std::vector<std::string>& files,
                                    const AuditFilter& filter) {
  if (files.empty()) return InvalidArgument("no audit log given");
  // Logs in the order their first file was named; files by log.
  std::vector<std::string> stems;
  std::map<std::string, std::vector<LogFile>> by_stem;
  for (const std::string& path : files) {
    // The log's side files, as a glob (audit.jsonl*) names them: the chain
    // check reads the head file itself.
    if (path.ends_with(".jsonl.head") || path.ends_with(".jsonl.repeat") ||
        path.ends_with(".jsonl.flood"))
      continue;
    if (Compressed(path))
      return InvalidArgument("{}: compressed; decompress rotated logs first (zcat, xzcat ...)",
                             path);
    LogFile f;
    f.path = path;
    auto [stem, rotation] = SplitRotation(path);
    f.rotation = rotation;
    HPCML_ASSIGN_OR_RETURN(f.text, ReadFile(path));
    const std::string_view first = std::string_view(f.text).substr(0, f.text.find('\n'));
    auto j = nlohmann::json::parse(first, nullptr, false);
    if (j.is_object()) f.first_seq = Seq(j);
    if (!by_stem.count(stem)) stems.push_back(stem);
    by_stem[stem].push_back(std::move(f));
  }
  if (stems.empty()) return InvalidArgument("no audit log given (only side files)");
  AuditReport report;
  for (const std::string& stem : stems) {
    HPCML_RETURN_IF_ERROR(ReadLog(std::move(by_stem[stem]), report, filter));
  }
  std::stable_sort(report.entries.begin(), report.entries.end(),
                   [](const AuditEntry& a, const AuditEntry& b) { return a.time_ms < b.time_ms; });
  return report;
}

Result<std::int64_t> ParseAuditTime(std::string_view option, std::string_view text,
                                    std::int64_t now_ms) {
  // An age ends in its unit (a plain number is not one here: "2026" would
  // be ambiguous).
  if (!text.empty() && std::isalpha(static_cast<unsigned char>(text.back()))) {
    if (auto age = ParseDurationMicros(text); age.ok() && *age / 1000 <= now_ms)
      return now_ms - *age / 1000;
  }
  auto t = ParseIsoMillis(text);
  if (t.ok()) return t;
  return InvalidArgument(
      "{} '{}': expected an ISO 8601 date or time (UTC unless it gives an offset, e.g. "
      "2026-11-17 or 2026-11-17T08:00:00Z) or an age (90s, 30m, 12h, 7d, 2w)",
      option, text);
}

std::string FormatAuditTable(const AuditReport& r) {
  const std::vector<std::string> headers = {"time", "decision", "user",   "role",  "zone",  "node",
                                            "job",  "datasets", "policy", "chain", "reason"};
  TextTable table{headers, {}, {}};
  for (const AuditEntry& e : r.entries) {
    table.rows.push_back({e.time, DecisionText(e), e.user, e.role, e.zone, e.node, JobText(e),
                          JoinDatasets(e.datasets), e.policy_sha256.substr(0, 12), e.chain,
                          e.reason});
  }
  const auto& rows = table.rows;
  std::string out = table.Format();
  std::size_t allowed = 0, denied = 0;
  for (const AuditEntry& e : r.entries) (e.decision == "allow" ? allowed : denied) += e.count;
  out += fmt::format("{} decision line(s) shown: {} allowed, {} denied; {} lines read", rows.size(),
                     allowed, denied, r.lines);
  if (r.unreadable) out += fmt::format(", {} not decisions", r.unreadable);
  out += "\n" + ChainText(r);
  return out;
}

std::string FormatAuditCsv(const AuditReport& r) {
  std::string out =
      "time,decision,count,user,uid,role,zone,node,cluster,job_id,step_id,context,enforce,"
      "datasets,policy_sha256,version,reason,chain,file,line,seq\n";
  for (const AuditEntry& e : r.entries) {
    const std::vector<std::string> cells = {e.time,
                                            e.decision,
                                            std::to_string(e.count),
                                            e.user,
                                            e.uid,
                                            e.role,
                                            e.zone,
                                            e.node,
                                            e.cluster,
                                            e.job_id,
                                            e.step_id,
                                            e.context,
                                            e.enforce,
                                            JoinDatasets(e.datasets),
                                            e.policy_sha256,
                                            e.version,
                                            e.reason,
                                            e.chain,
                                            e.file,
                                            std::to_string(e.line),
                                            e.seq ? std::to_string(*e.seq) : ""};
    for (std::size_t c = 0; c < cells.size(); ++c) out += (c ? "," : "") + CsvField(cells[c]);
    out += "\n";
  }
  return out;
}

std::string FormatAuditJson(const AuditReport& r) {
  nlohmann::ordered_json j;
  j["format"] = "hpcml-audit-report/1";
  j["intact"] = r.intact();
  j["lines"] = r.lines;
  j["not_decisions"] = r.unreadable;
  nlohmann::ordered_json logs = nlohmann::ordered_json::array();
  for (const AuditLog& log : r.logs) {
    nlohmann::ordered_json problems = nlohmann::ordered_json::array();
    for (const AuditProblem& p : log.verify.problems)
      problems.push_back({{"file", p.file}, {"line", p.line}, {"reason", p.reason}});
    logs.push_back({{"files", log.files},
                    {"intact", log.verify.intact},
                    {"lines", log.verify.lines},
                    {"first_seq", log.verify.first_seq},
                    {"head", log.verify.head},
                    {"problems", std::move(problems)}});
  }
  j["logs"] = std::move(logs);
  nlohmann::ordered_json decisions = nlohmann::ordered_json::array();
  for (const AuditEntry& e : r.entries) {
    nlohmann::ordered_json d;
    d["time"] = e.time;
    d["decision"] = e.decision;
    d["count"] = e.count;
    d["user"] = e.user;
    d["uid"] = e.uid;
    d["role"] = e.role;
    d["zone"] = e.zone;
    d["node"] = e.node;
    d["cluster"] = e.cluster;
    d["job_id"] = e.job_id;
    d["step_id"] = e.step_id;
    d["context"] = e.context;
    d["enforce"] = e.enforce;
    d["datasets"] = e.datasets;
    d["policy_sha256"] = e.policy_sha256;
    d["version"] = e.version;
    d["reason"] = e.reason;
    d["chain"] = e.chain;
    d["file"] = e.file;
    d["line"] = e.line;
    d["seq"] = e.seq ? nlohmann::ordered_json(*e.seq) : nlohmann::ordered_json();
    decisions.push_back(std::move(d));
  }
  j["decisions"] = std::move(decisions);
  return JsonText(j, 2) + "\n";
}

std::string ReasonClass(std::string_view decision, std::string_view reason) {
  if (decision == "allow") return "none";
  auto has = [&](std::string_view s) { return reason.find(s) != std::string_view::npos; };
  // In the order the guard checks (spank/src/decision.cpp), dataset
  // messages before zone ones: they name zones too.
  if (reason.starts_with("task: ")) return "task";
  if (has("no --ml-role given")) return "role_missing";
  if (reason.starts_with("role '") && has("is not defined in")) return "role_unknown";
  if (has("is not bound to role")) return "role_unbound";
  if (has("comes only from the binding of account")) return "role_account_unenforced";
  if (has("matches no [[datasets]] entry")) return "dataset_unknown";
  if (reason.starts_with("dataset '") && has("zone '")) return "dataset_zone";
  if (reason.starts_with("dataset '") && has("classified '")) return "dataset_classification";
  if (has("the zones disagree")) return "node_zone_conflict";
  if (has("may not run in zone")) return "role_zone";
  if (has("zone '")) return "zone";
  if (has(" GPUs; role ")) return "gpus";
  if (has("partition")) return "partition";
  if (reason.starts_with("audit log")) return "audit_log";
  if (has("policy")) return "policy";
  return "other";
}

std::string FormatAuditMetrics(const AuditReport& r) {
  MetricsText m;
  struct Key {
    std::string decision, reason, zone, context;
    auto operator<=>(const Key&) const = default;
  };
  std::map<Key, double> counts;
  std::map<std::string, std::int64_t> last;
  for (const AuditEntry& e : r.entries) {
    // The line's own code; the wording only for lines of older guards.
    const std::string reason = e.decision == "allow"    ? std::string("none")
                               : !e.reason_code.empty() ? e.reason_code
                                                        : ReasonClass(e.decision, e.reason);
    counts[Key{e.decision, reason, e.zone, e.context}] += static_cast<double>(e.count);
    last[e.decision] = std::max(last[e.decision], e.time_ms);
  }
  m.Family("hpcml_guard_decisions_total", MetricType::kCounter,
           "Guard decisions in the audit logs read, by decision, reason class (none for an "
           "allow), zone and context (node: authoritative, submit: advisory).");
  for (const auto& [k, n] : counts) {
    m.Sample(
        {{"decision", k.decision}, {"reason", k.reason}, {"zone", k.zone}, {"context", k.context}},
        n);
  }
  m.Family("hpcml_guard_last_decision_timestamp_seconds", MetricType::kGauge,
           "Time of the newest decision of each kind in the logs read, seconds since the epoch.");
  for (const auto& [decision, ms] : last) {
    m.Sample({{"decision", decision}}, static_cast<double>(ms) / 1e3);
  }
  m.Family("hpcml_guard_audit_chain_intact", MetricType::kGauge,
           "1 when the log's hash chain (and its rotated files) verifies, else 0.");
  for (const AuditLog& log : r.logs) {
    m.Sample({{"log", log.files.empty() ? "" : log.files.back()}}, log.verify.intact ? 1 : 0);
  }
  m.Family("hpcml_guard_audit_lines", MetricType::kGauge, "Lines in the log's files read.");
  for (const AuditLog& log : r.logs) {
    m.Sample({{"log", log.files.empty() ? "" : log.files.back()}},
             static_cast<double>(log.verify.lines));
  }
  return m.text();
}

}  // namespace hpcml::guard
