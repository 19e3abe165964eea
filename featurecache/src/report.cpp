#include "hpcml/featurecache/report.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/ranges.h>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "hpcml/common/json.hpp"

namespace hpcml::featurecache {
namespace {

std::string Short(const std::string& sha) {
  return sha.substr(0, 12);
}

std::string BaseName(const std::string& uri) {
  auto slash = uri.find_last_of('/');
  return slash == std::string::npos ? uri : uri.substr(slash + 1);
}

std::string DotEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::string Summary(const VersionInfo& v) {
  return fmt::format("{}  {}  rows={} features={}{}  {}  by {}  {}/{}  sha256:{}", v.name,
                     v.operation, v.rows, v.features(),
                     v.has_labels() ? " label=" + v.label_name : "", v.created_at, v.created_by,
                     v.zone, v.classification, Short(v.data_sha256));
}

}  // namespace

std::string FormatVersionList(const std::vector<VersionInfo>& versions, const std::string& latest) {
  std::string out = fmt::format("  {:<8} {:<7} {:>12} {:>8}  {:<20}  {:<12}  {}\n", "VERSION", "OP",
                                "ROWS", "FEATURES", "CREATED", "CLASS", "SHA256");
  for (const auto& v : versions) {
    out += fmt::format("{} {:<8} {:<7} {:>12} {:>8}  {:<20}  {:<12}  {}\n",
                       v.name == latest ? '*' : ' ', v.name, v.operation, v.rows, v.features(),
                       v.created_at, v.classification, Short(v.data_sha256));
  }
  return out;
}

std::string FormatInfo(const std::string& path, const VersionInfo& v) {
  std::string out;
  out += fmt::format("file:            {}\n", path);
  out += fmt::format("version:         {}\n", v.name);
  out += fmt::format("operation:       {}\n", v.operation);
  out += fmt::format("rows:            {}\n", v.rows);
  out += fmt::format("features:        {}\n", v.features());
  for (size_t i = 0; i < v.features(); ++i) {
    std::string kind = v.typed ? v.feature_types[i] : v.feature_types[i] + " (as read; float32)";
    if (v.kind(i) == "category") kind += fmt::format(" ({} categories)", v.category_counts[i]);
    out += fmt::format("  {:>4}  {:<32} {}\n", i, v.feature_names[i], kind);
  }
  out += fmt::format("label:           {}\n", v.has_labels() ? v.label_name : "(none)");
  if (!v.label_classes.empty())
    out += fmt::format("label classes:   {}\n", fmt::join(v.label_classes, ", "));
  out += fmt::format("entity:          {} ({})\n", v.entity_name,
                     v.string_keys() ? "string keys" : "integers");
  out += fmt::format("timestamp:       {}\n", v.timestamp_name);
  if (v.has_available())
    out += fmt::format("available at:    {} (asof --known-at)\n", v.available_name);
  out += fmt::format("zone:            {}\n", v.zone);
  out += fmt::format("classification:  {}\n", v.classification);
  out += fmt::format("created:         {} by {}\n", v.created_at, v.created_by);
  out += fmt::format("tool:            {}\n", v.tool);
  out += fmt::format("chunk rows:      {}\n", v.chunk_rows);
  out += fmt::format("compression:     {}\n", DescribeCodec(v.codec, v.compression));
  for (const auto& p : v.parents)
    out += fmt::format("parent:          {} (sha256 {})\n", p.version, p.sha256);
  for (const auto& s : v.sources)
    out += fmt::format("source:          {} (sha256 {})\n", s.uri, s.sha256);
  out += fmt::format("transform:       {}\n", v.transform);
  out += fmt::format("data sha256:     {}\n", v.data_sha256);
  return out;
}

std::string FormatInfoJson(const std::string& path, const VersionInfo& v) {
  nlohmann::json sources = nlohmann::json::array(), parents = nlohmann::json::array();
  for (const auto& s : v.sources) sources.push_back({{"uri", s.uri}, {"sha256", s.sha256}});
  for (const auto& p : v.parents) parents.push_back({{"version", p.version}, {"sha256", p.sha256}});
  nlohmann::json transform = nlohmann::json::parse(v.transform, nullptr, false);
  if (transform.is_discarded()) transform = v.transform;
  nlohmann::json j = {{"file", path},
                      {"version", v.name},
                      {"operation", v.operation},
                      {"rows", v.rows},
                      {"feature_names", v.feature_names},
                      {"feature_types", v.feature_types},
                      {"typed", v.typed},
                      {"category_counts", v.category_counts},
                      {"label", v.label_name},
                      {"label_classes", v.label_classes},
                      {"entity", v.entity_name},
                      {"entity_type", v.entity_type},
                      {"timestamp", v.timestamp_name},
                      {"available", v.available_name},
                      {"zone", v.zone},
                      {"classification", v.classification},
                      {"created_at", v.created_at},
                      {"created_by", v.created_by},
                      {"tool", v.tool},
                      {"chunk_rows", v.chunk_rows},
                      {"codec", v.codec},
                      {"compression", v.compression},
                      {"parents", parents},
                      {"sources", sources},
                      {"transform", transform},
                      {"data_sha256", v.data_sha256},
                      {"dataset_sha256",
                       {{"features", v.digests.features},
                        {"labels", v.digests.labels},
                        {"entity_ids", v.digests.entity_ids},
                        {"entity_keys", v.digests.entity_keys},
                        {"timestamps", v.digests.timestamps},
                        {"available_times", v.digests.available_times},
                        {"int_values", v.digests.int_values},
                        {"categories", v.digests.categories}}}};
  return JsonText(j, 2) + "\n";
}

namespace {

// "B 1714 (57.1%), A 857 (28.6%), ..." for a coded column's top `n`.
std::string TopCategories(const ColumnStats& x, size_t n) {
  std::vector<std::string> parts;
  for (size_t code : x.Top(n)) {
    const double share = x.count > 0 ? 100.0 * static_cast<double>(x.frequencies[code]) /
                                           static_cast<double>(x.count)
                                     : 0.0;
    parts.push_back(fmt::format("{} {} ({:.1f}%)", x.categories[code], x.frequencies[code], share));
  }
  if (x.categories.size() > n) parts.push_back("...");
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::string FormatStats(const std::string& path, const std::string& version,
                        const VersionStats& s) {
  std::string out = fmt::format("{} {}: {} rows; percentiles from a sample of {} rows\n", path,
                                version, s.rows, s.sample_rows());
  out +=
      fmt::format("{:<24} {:>10} {:>8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n",
                  "column", "count", "missing", "min", "max", "mean", "std", "p01", "p50", "p99");
  bool any_coded = false;
  for (size_t c = 0; c < s.columns.size(); ++c) {
    const ColumnStats& x = s.columns[c];
    if (x.coded) {
      any_coded = true;
      continue;
    }
    out += fmt::format(
        "{:<24} {:>10} {:>8} {:>12.6g} {:>12.6g} {:>12.6g} {:>12.6g} {:>12.6g} {:>12.6g} "
        "{:>12.6g}\n",
        x.name, x.count, x.missing, x.min, x.max, x.mean, x.std, s.Quantile(c, 0.01),
        s.Quantile(c, 0.5), s.Quantile(c, 0.99));
  }
  if (!any_coded) return out;
  out += fmt::format("\n{:<24} {:>10} {:>8} {:>8} {:>8}  {}\n", "categorical column", "count",
                     "missing", "distinct", "in dict", "most frequent");
  for (const ColumnStats& x : s.columns) {
    if (!x.coded) continue;
    const auto seen =
        std::count_if(x.frequencies.begin(), x.frequencies.end(), [](uint64_t f) { return f > 0; });
    out += fmt::format("{:<24} {:>10} {:>8} {:>8} {:>8}  {}\n", x.name, x.count, x.missing, seen,
                       x.categories.size(), TopCategories(x, 5));
  }
  return out;
}

std::string FormatStatsJson(const std::string& path, const std::string& version,
                            const VersionStats& s) {
  nlohmann::ordered_json j = {
      {"file", path}, {"version", version}, {"rows", s.rows}, {"sample_rows", s.sample_rows()}};
  // NaN (a column without values) is not JSON: null.
  auto num = [](double v) {
    return std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v);
  };
  nlohmann::ordered_json cols = nlohmann::ordered_json::array();
  for (size_t c = 0; c < s.columns.size(); ++c) {
    const ColumnStats& x = s.columns[c];
    if (x.coded) {
      nlohmann::ordered_json top = nlohmann::ordered_json::array();
      for (size_t code : x.Top(10))
        top.push_back({{"value", x.categories[code]}, {"rows", x.frequencies[code]}});
      cols.push_back({{"name", x.name},
                      {"kind", "category"},
                      {"count", x.count},
                      {"missing", x.missing},
                      {"categories", x.categories.size()},
                      {"seen", std::count_if(x.frequencies.begin(), x.frequencies.end(),
                                             [](uint64_t f) { return f > 0; })},
                      {"top", top}});
      continue;
    }
    cols.push_back({{"name", x.name},
                    {"count", x.count},
                    {"missing", x.missing},
                    {"min", num(x.min)},
                    {"max", num(x.max)},
                    {"mean", num(x.mean)},
                    {"std", num(x.std)},
                    {"p01", num(s.Quantile(c, 0.01))},
                    {"p50", num(s.Quantile(c, 0.5))},
                    {"p99", num(s.Quantile(c, 0.99))}});
  }
  j["columns"] = cols;
  return JsonText(j, 2) + "\n";
}

std::string FormatLineageText(const std::vector<VersionInfo>& all, const std::string& version) {
  std::map<std::string, const VersionInfo*> by_name;
  for (const auto& v : all) by_name[v.name] = &v;
  std::string out;
  std::function<void(const VersionInfo&, const std::string&, int)> walk =
      [&](const VersionInfo& v, const std::string& indent, int depth) {
        size_t n = v.sources.size() + v.parents.size();
        size_t i = 0;
        for (const auto& s : v.sources) {
          bool last = ++i == n;
          out += fmt::format("{}{} source {}  sha256:{}\n", indent, last ? "└─" : "├─", s.uri,
                             Short(s.sha256));
        }
        for (const auto& p : v.parents) {
          bool last = ++i == n;
          std::string branch = indent + (last ? "└─ " : "├─ ");
          std::string next = indent + (last ? "   " : "│  ");
          auto it = by_name.find(p.version);
          if (it == by_name.end()) {
            out += fmt::format("{}{}  (missing from this file; sha256:{})\n", branch, p.version,
                               Short(p.sha256));
            continue;
          }
          const VersionInfo& pv = *it->second;
          std::string flag = pv.data_sha256 == p.sha256
                                 ? ""
                                 : "  !! digest differs from the one recorded by its child";
          out += branch + Summary(pv) + flag + "\n";
          if (depth < 1000) walk(pv, next, depth + 1);
        }
      };
  auto it = by_name.find(version);
  if (it == by_name.end()) return fmt::format("{}: not found\n", version);
  out += Summary(*it->second) + "\n";
  out += fmt::format("   transform: {}\n", it->second->transform);
  walk(*it->second, "", 0);
  return out;
}

std::string FormatLineageDot(const std::vector<VersionInfo>& all, const std::string& version) {
  std::map<std::string, const VersionInfo*> by_name;
  for (const auto& v : all) by_name[v.name] = &v;
  std::set<std::string> keep;
  if (version.empty()) {
    for (const auto& v : all) keep.insert(v.name);
  } else {
    std::vector<std::string> stack = {version};
    while (!stack.empty()) {
      std::string n = stack.back();
      stack.pop_back();
      if (!keep.insert(n).second) continue;
      auto it = by_name.find(n);
      if (it == by_name.end()) continue;
      for (const auto& p : it->second->parents) stack.push_back(p.version);
    }
  }
  std::string out =
      "digraph lineage {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  std::map<std::string, std::string> source_ids;
  for (const auto& v : all) {
    if (!keep.count(v.name)) continue;
    out += fmt::format(
        "  \"{}\" [shape=box, label=\"{}\\n{}\\nrows={} features={}\\n{}/{}\\nsha256:{}\"];\n",
        v.name, v.name, v.operation, v.rows, v.features(), DotEscape(v.zone),
        DotEscape(v.classification), Short(v.data_sha256));
    for (const auto& s : v.sources) {
      std::string key = s.uri + "@" + s.sha256;
      auto [it, inserted] = source_ids.emplace(key, fmt::format("src{}", source_ids.size() + 1));
      if (inserted) {
        out +=
            fmt::format("  \"{}\" [shape=note, label=\"{}\\nsha256:{}\", tooltip=\"{}\"];\n",
                        it->second, DotEscape(BaseName(s.uri)), Short(s.sha256), DotEscape(s.uri));
      }
      out += fmt::format("  \"{}\" -> \"{}\" [label=\"{}\"];\n", it->second, v.name, v.operation);
    }
    for (const auto& p : v.parents) {
      if (!by_name.count(p.version)) {
        out += fmt::format("  \"{}\" [shape=box, style=dashed, label=\"{}\\n(missing)\"];\n",
                           p.version, p.version);
      }
      out += fmt::format("  \"{}\" -> \"{}\" [label=\"{}\"];\n", p.version, v.name, v.operation);
    }
  }
  out += "}\n";
  return out;
}

DiffReport DiffVersions(const VersionInfo& a, const VersionInfo& b) {
  DiffReport r;
  std::string& out = r.text;
  out += fmt::format("--- {}  ({} rows, {} features, sha256:{})\n", a.name, a.rows, a.features(),
                     Short(a.data_sha256));
  out += fmt::format("+++ {}  ({} rows, {} features, sha256:{})\n", b.name, b.rows, b.features(),
                     Short(b.data_sha256));
  std::map<std::string, size_t> ia, ib;
  for (size_t i = 0; i < a.features(); ++i) ia[a.feature_names[i]] = i;
  for (size_t i = 0; i < b.features(); ++i) ib[b.feature_names[i]] = i;
  for (size_t i = 0; i < a.features(); ++i) {
    if (!ib.count(a.feature_names[i])) {
      out += fmt::format("- feature {} ({})\n", a.feature_names[i], a.feature_types[i]);
      r.same_schema = false;
    }
  }
  for (size_t i = 0; i < b.features(); ++i) {
    auto it = ia.find(b.feature_names[i]);
    if (it == ia.end()) {
      out += fmt::format("+ feature {} ({})\n", b.feature_names[i], b.feature_types[i]);
      r.same_schema = false;
      continue;
    }
    if (a.feature_types[it->second] != b.feature_types[i]) {
      out += fmt::format("~ feature {}: type {} -> {}\n", b.feature_names[i],
                         a.feature_types[it->second], b.feature_types[i]);
      r.same_schema = false;
    }
  }
  bool same_set = r.same_schema && a.features() == b.features();
  if (same_set && a.feature_names != b.feature_names) {
    out += "~ feature order differs\n";
    r.same_schema = false;
  }
  auto field = [&](const char* what, const std::string& x, const std::string& y, bool schema) {
    if (x == y) return;
    out +=
        fmt::format("~ {}: {} -> {}\n", what, x.empty() ? "(none)" : x, y.empty() ? "(none)" : y);
    if (schema) r.same_schema = false;
  };
  field("label", a.label_name, b.label_name, true);
  field("entity column", a.entity_name, b.entity_name, true);
  field("timestamp column", a.timestamp_name, b.timestamp_name, true);
  field("availability column", a.available_name, b.available_name, true);
  field("zone", a.zone, b.zone, false);
  field("classification", a.classification, b.classification, false);
  if (a.rows != b.rows) {
    out += fmt::format("~ rows: {} -> {} ({:+})\n", a.rows, b.rows,
                       static_cast<int64_t>(b.rows) - static_cast<int64_t>(a.rows));
  }
  r.same_data = a.data_sha256 == b.data_sha256;
  out += r.same_schema ? "= schema identical\n" : "! schema differs\n";
  out += r.same_data ? "= data identical (same data_sha256)\n" : "! data differs\n";
  return r;
}

}  // namespace hpcml::featurecache
