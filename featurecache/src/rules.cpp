#include "rules.hpp"

#include <toml++/toml.h>

#include "hpcml/common/toml.hpp"

#include <fmt/ranges.h>
#include <algorithm>
#include <cmath>

#include "hpcml/common/fs.hpp"

namespace hpcml::featurecache {
namespace {

int64_t LineOf(const toml::key& k) {
  return static_cast<int64_t>(k.source().begin.line);
}

// A table's numeric keys among `known`, into `out`; anything else is an error.
Status ReadNumbers(const toml::table& t, const std::string& source, const std::string& where,
                   const std::map<std::string, std::optional<double>*>& known) {
  for (auto&& [key, node] : t) {
    auto it = known.find(std::string(key.str()));
    if (it == known.end()) {
      std::string names;
      for (const auto& [n, _] : known) names += (names.empty() ? "" : ", ") + n;
      return InvalidArgument("{}:{}: unknown key '{}' in [{}] (known: {})", source, LineOf(key),
                             key.str(), where, names);
    }
    const std::optional<double> v = node.value<double>();
    if (!v || !std::isfinite(*v)) {
      return InvalidArgument("{}:{}: [{}] {} must be a number", source, LineOf(key), where,
                             key.str());
    }
    *it->second = *v;
  }
  return Status::Ok();
}

const toml::table* AsTable(const toml::key& key, const toml::node& node, const std::string& source,
                           Status* st) {
  const toml::table* t = node.as_table();
  if (t == nullptr)
    *st = InvalidArgument("{}:{}: '{}' must be a table", source, LineOf(key), key.str());
  return t;
}

Status ParseFeatures(const toml::table& t, const std::string& source, Rules* r) {
  for (auto&& [key, node] : t) {
    Status st;
    const toml::table* ft = AsTable(key, node, source, &st);
    if (ft == nullptr) return st;
    ColumnRule c;
    c.line = LineOf(key);
    toml::table numbers = *ft;
    if (const toml::node* allowed = ft->get("allowed"); allowed != nullptr) {
      const toml::array* list = allowed->as_array();
      c.allowed.emplace();
      for (size_t i = 0; list != nullptr && i < list->size(); ++i) {
        const auto* v = list->get(i)->as_string();
        if (v == nullptr) {
          list = nullptr;
          break;
        }
        c.allowed->push_back(v->get());
      }
      if (list == nullptr) {
        return InvalidArgument("{}:{}: features.{}.allowed must be a list of strings", source,
                               allowed->source().begin.line, key.str());
      }
      numbers.erase("allowed");
    }
    HPCML_RETURN_IF_ERROR(ReadNumbers(numbers, source, "features." + std::string(key.str()),
                                      {{"min", &c.min},
                                       {"max", &c.max},
                                       {"max_missing", &c.max_missing},
                                       {"max_categories", &c.max_categories}}));
    r->features[std::string(key.str())] = c;
  }
  return Status::Ok();
}

void Broken(std::vector<std::string>* out, const std::string& source, int64_t line,
            const std::string& what) {
  out->push_back(fmt::format("{} ({}:{})", what, source, line));
}

// The categories present in a coded column, and the rules on them.
void CheckCategories(const ColumnStats& c, const ColumnRule& rule, const std::string& source,
                     std::vector<std::string>* out) {
  std::vector<std::string> outside;
  uint64_t present = 0;
  for (size_t code = 0; code < c.frequencies.size(); ++code) {
    if (c.frequencies[code] == 0) continue;
    ++present;
    if (rule.allowed && std::find(rule.allowed->begin(), rule.allowed->end(), c.categories[code]) ==
                            rule.allowed->end())
      outside.push_back(fmt::format("\"{}\" ({} rows)", c.categories[code], c.frequencies[code]));
  }
  if (!outside.empty()) {
    const size_t shown = std::min<size_t>(outside.size(), 5);
    Broken(out, source, rule.line,
           fmt::format("{}: {} categor{} not allowed: {}{}", c.name, outside.size(),
                       outside.size() == 1 ? "y" : "ies",
                       fmt::join(outside.begin(), outside.begin() + shown, ", "),
                       shown < outside.size() ? ", ..." : ""));
  }
  if (rule.max_categories && static_cast<double>(present) > *rule.max_categories) {
    Broken(out, source, rule.line,
           fmt::format("{}: {} distinct categories, the rule allows {:g}", c.name, present,
                       *rule.max_categories));
  }
}

Status CheckColumn(const ColumnStats& c, const ColumnRule& rule, const std::string& source,
                   std::vector<std::string>* out) {
  if (c.coded && (rule.min || rule.max)) {
    return InvalidArgument("{}:{}: min and max do not apply to \"{}\", a category column", source,
                           rule.line, c.name);
  }
  if (!c.coded && (rule.allowed || rule.max_categories)) {
    return InvalidArgument(
        "{}:{}: allowed and max_categories apply to category columns; \"{}\" "
        "is a number",
        source, rule.line, c.name);
  }
  if (c.coded) CheckCategories(c, rule, source, out);
  const double total = static_cast<double>(c.count + c.missing);
  const double missing = total > 0 ? static_cast<double>(c.missing) / total : 0.0;
  if (rule.max_missing && missing > *rule.max_missing) {
    Broken(out, source, rule.line,
           fmt::format("{}: {:.4g} of the values are missing, the rule allows {:.4g}", c.name,
                       missing, *rule.max_missing));
  }
  if (rule.min && c.count > 0 && c.min < *rule.min) {
    Broken(out, source, rule.line,
           fmt::format("{}: min is {:.9g}, the rule asks for at least {:.9g}", c.name, c.min,
                       *rule.min));
  }
  if (rule.max && c.count > 0 && c.max > *rule.max) {
    Broken(out, source, rule.line,
           fmt::format("{}: max is {:.9g}, the rule allows {:.9g}", c.name, c.max, *rule.max));
  }
  return Status::Ok();
}

// Class shares of the label: exact for named classes, else from the sample.
void CheckBalance(const VersionStats& s, size_t col, const ColumnRule& rule,
                  const std::string& source, std::vector<std::string>* out) {
  const ColumnStats& label = s.columns[col];
  if (label.coded) {
    for (size_t k = 0; k < label.frequencies.size(); ++k) {
      const double share = label.count > 0 ? static_cast<double>(label.frequencies[k]) /
                                                 static_cast<double>(label.count)
                                           : 0.0;
      if (share < *rule.min_share) {
        Broken(out, source, rule.line,
               fmt::format("{}: class \"{}\" is {:.4g} of the labelled rows, the rule asks for "
                           "at least {:.4g}",
                           label.name, label.categories[k], share, *rule.min_share));
      }
    }
    return;
  }
  std::map<float, uint64_t> classes;
  uint64_t n = 0;
  const size_t cols = s.columns.size();
  for (size_t r = 0; r < s.sample_rows(); ++r) {
    const float v = s.sample[r * cols + col];
    if (std::isnan(v)) continue;
    ++classes[v];
    ++n;
  }
  for (const auto& [value, count] : classes) {
    const double share = static_cast<double>(count) / static_cast<double>(n);
    if (share < *rule.min_share) {
      Broken(out, source, rule.line,
             fmt::format("{}: class {:g} is {:.4g} of the labelled rows (sample of {}), the rule "
                         "asks for at least {:.4g}",
                         s.columns[col].name, value, share, n, *rule.min_share));
    }
  }
}

}  // namespace

Result<Rules> Rules::Load(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return Parse(text, path);
}

Result<Rules> Rules::Parse(std::string_view text, std::string source) {
  Rules r;
  r.source = source;
  HPCML_ASSIGN_OR_RETURN(toml::table root, ParseToml(text, source));
  for (auto&& [key, node] : root) {
    Status st;
    const toml::table* t = AsTable(key, node, source, &st);
    if (t == nullptr) return st;
    if (key.str() == "rows") {
      r.rows_line = LineOf(key);
      HPCML_RETURN_IF_ERROR(
          ReadNumbers(*t, source, "rows", {{"min", &r.rows_min}, {"max", &r.rows_max}}));
    } else if (key.str() == "features") {
      HPCML_RETURN_IF_ERROR(ParseFeatures(*t, source, &r));
    } else if (key.str() == "label") {
      ColumnRule c;
      c.line = LineOf(key);
      HPCML_RETURN_IF_ERROR(ReadNumbers(
          *t, source, "label", {{"min_share", &c.min_share}, {"max_missing", &c.max_missing}}));
      r.label = c;
    } else {
      return InvalidArgument("{}:{}: unknown table [{}] (known: rows, features, label)", source,
                             LineOf(key), key.str());
    }
  }
  return r;
}

Result<std::vector<std::string>> CheckRules(const Rules& rules, const VersionStats& s,
                                            bool has_label) {
  std::vector<std::string> out;
  const double rows = static_cast<double>(s.rows);
  if ((rules.rows_min && rows < *rules.rows_min) || (rules.rows_max && rows > *rules.rows_max)) {
    Broken(&out, rules.source, rules.rows_line,
           fmt::format("rows: {} rows, the rule expects {} to {}", s.rows,
                       rules.rows_min ? fmt::format("{:g}", *rules.rows_min) : "any",
                       rules.rows_max ? fmt::format("{:g}", *rules.rows_max) : "any"));
  }
  const size_t features = s.columns.size() - (has_label ? 1 : 0);
  for (const auto& [name, rule] : rules.features) {
    size_t c = 0;
    while (c < features && s.columns[c].name != name) ++c;
    if (c == features) {
      return InvalidArgument("{}:{}: the version has no feature \"{}\"", rules.source, rule.line,
                             name);
    }
    HPCML_RETURN_IF_ERROR(CheckColumn(s.columns[c], rule, rules.source, &out));
  }
  if (rules.label) {
    if (!has_label) {
      return InvalidArgument("{}:{}: a [label] rule, but the version has no labels", rules.source,
                             rules.label->line);
    }
    HPCML_RETURN_IF_ERROR(CheckColumn(s.columns.back(), *rules.label, rules.source, &out));
    if (rules.label->min_share)
      CheckBalance(s, s.columns.size() - 1, *rules.label, rules.source, &out);
  }
  return out;
}

}  // namespace hpcml::featurecache
