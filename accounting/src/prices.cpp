#include "prices.hpp"

#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "hpcml/common/toml.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>

#include "hpcml/common/fs.hpp"
#include "sacct.hpp"

namespace hpcml::accounting {

namespace {

int64_t LineOf(const toml::node& n) {
  return static_cast<int64_t>(n.source().begin.line);
}
int64_t LineOf(const toml::key& k) {
  return static_cast<int64_t>(k.source().begin.line);
}

// TOML date, local date-time or offset date-time -> seconds since the epoch.
// Local values use the process's time zone, like sacct's times.
Result<int64_t> ToEpoch(const toml::node& n) {
  toml::date date;
  toml::time time{};
  std::optional<toml::time_offset> offset;
  if (auto d = n.as_date()) {
    date = d->get();
  } else if (auto dt = n.as_date_time()) {
    date = dt->get().date;
    time = dt->get().time;
    offset = dt->get().offset;
  } else {
    return InvalidArgument("expected a TOML date or date-time (e.g. 2026-01-01), got a {}",
                           toml::impl::node_type_friendly_names[static_cast<int>(n.type())]);
  }
  if (offset) {
    struct tm tm {};
    tm.tm_year = date.year - 1900;
    tm.tm_mon = date.month - 1;
    tm.tm_mday = date.day;
    tm.tm_hour = time.hour;
    tm.tm_min = time.minute;
    tm.tm_sec = time.second;
    return static_cast<int64_t>(timegm(&tm)) - offset->minutes * 60;
  }
  std::string text = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", date.year, date.month,
                                 date.day, time.hour, time.minute, time.second);
  return ParseSlurmTime(text);
}

Result<Tier> ParseTier(std::string_view s) {
  if (s == "on_demand") return Tier::kOnDemand;
  if (s == "spot") return Tier::kSpot;
  return InvalidArgument("tier '{}' is not \"on_demand\" or \"spot\"", s);
}

Result<Resource> ParseResource(std::string_view s) {
  if (s == "gpu") return Resource::kGpu;
  if (s == "cpu") return Resource::kCpu;
  if (s == "mem") return Resource::kMem;
  if (s == "billing") return Resource::kBilling;
  return InvalidArgument("resource '{}' is not one of gpu, cpu, mem, billing", s);
}

Result<double> ToPrice(const toml::node& n) {
  std::optional<double> v = n.value<double>();  // accepts integers too
  if (!v || !n.is_number()) return InvalidArgument("expected a number");
  if (!std::isfinite(*v) || *v < 0) return InvalidArgument("price {} is negative", *v);
  return *v;
}

std::string ToText(const toml::node& n, std::string_view what, Status* st) {
  if (auto s = n.as_string()) return s->get();
  *st = InvalidArgument("{} must be a string", what);
  return {};
}

bool Overlap(const Rate& a, const Rate& b) {
  return a.from < b.until && b.from < a.until;
}

// "<source>:<line>: <key>: <message>".
Status KeyError(std::string_view source, int64_t line, std::string_view key, const Status& st) {
  return InvalidArgument("{}:{}: {}: {}", source, line, key, st.message());
}

// A string naming a tier ("on_demand", "spot"); `what` names it in errors.
Result<Tier> ToTier(const toml::node& n, std::string_view what) {
  Status st;
  std::string t = ToText(n, what, &st);
  if (!st.ok()) return st;
  return ParseTier(t);
}

// [tiers]: partition = tier.
Result<std::vector<std::pair<std::string, Tier>>> ParseTiers(const toml::key& key,
                                                             const toml::node& node,
                                                             std::string_view source) {
  const toml::table* tiers = node.as_table();
  if (!tiers)
    return KeyError(source, LineOf(key), key.str(), InvalidArgument("must be a table [tiers]"));
  std::vector<std::pair<std::string, Tier>> out;
  for (auto&& [part, tnode] : *tiers) {
    Result<Tier> tier = ToTier(tnode, "a tier");
    if (!tier.ok())
      return KeyError(source, LineOf(part), fmt::format("tiers.{}", part.str()), tier.status());
    out.emplace_back(std::string(part.str()), *tier);
  }
  return out;
}

// The presence of the keys a [[rate]] must have.
struct RateKeys {
  bool resource = false, on_demand = false;
};

// One key of a [[rate]] table, stored in `rate`.
Status ParseRateKey(std::string_view name, const toml::node& rv, Rate* rate, RateKeys* seen) {
  Status rs;
  if (name == "resource") {
    std::string s = ToText(rv, "resource", &rs);
    if (rs.ok()) {
      Result<Resource> r = ParseResource(s);
      if (r.ok())
        rate->resource = *r;
      else
        rs = r.status();
    }
    seen->resource = true;
  } else if (name == "gpu_type") {
    rate->gpu_type = ToText(rv, "gpu_type", &rs);
    if (rs.ok() && rate->gpu_type.empty()) rs = InvalidArgument("must not be empty");
  } else if (name == "partition") {
    rate->partition = ToText(rv, "partition", &rs);
    if (rs.ok() && rate->partition.empty()) rs = InvalidArgument("must not be empty");
  } else if (name == "on_demand" || name == "spot") {
    Result<double> p = ToPrice(rv);
    if (!p.ok()) {
      rs = p.status();
    } else if (name == "spot") {
      rate->spot = *p;
    } else {
      rate->on_demand = *p;
      seen->on_demand = true;
    }
  } else if (name == "effective_from" || name == "effective_until") {
    Result<int64_t> t = ToEpoch(rv);
    if (!t.ok())
      rs = t.status();
    else if (name == "effective_from")
      rate->from = *t;
    else
      rate->until = *t;
  } else {
    rs = InvalidArgument(
        "unknown key in [[rate]] (known: resource, gpu_type, partition, on_demand, spot, "
        "effective_from, effective_until)");
  }
  return rs;
}

// One [[rate]] table: each key, then the rate as a whole.
Result<Rate> ParseRate(const toml::table& t, std::string_view source) {
  Rate rate;
  rate.line = LineOf(t);
  RateKeys seen;
  for (auto&& [rk, rv] : t) {
    Status rs = ParseRateKey(rk.str(), rv, &rate, &seen);
    if (!rs.ok()) return KeyError(source, LineOf(rk), fmt::format("rate.{}", rk.str()), rs);
  }
  if (!seen.resource) {
    return KeyError(source, rate.line, "rate", InvalidArgument("missing key 'resource'"));
  }
  if (!seen.on_demand) {
    return KeyError(source, rate.line, "rate", InvalidArgument("missing key 'on_demand'"));
  }
  if (rate.resource != Resource::kGpu && rate.gpu_type != "*") {
    return KeyError(source, rate.line, "rate.gpu_type",
                    InvalidArgument("only a gpu rate has a gpu_type"));
  }
  if (rate.from >= rate.until) {
    return KeyError(source, rate.line, "rate",
                    InvalidArgument("effective_from is not before effective_until"));
  }
  return rate;
}

// [[rate]]: an array of tables, each a rate.
Status ParseRates(const toml::key& key, const toml::node& node, std::string_view source,
                  std::vector<Rate>* rates) {
  const toml::array* arr = node.as_array();
  if (!arr || !arr->is_array_of_tables()) {
    return KeyError(source, LineOf(key), key.str(),
                    InvalidArgument("must be an array of tables [[rate]]"));
  }
  for (const toml::node& item : *arr) {
    HPCML_ASSIGN_OR_RETURN(Rate rate, ParseRate(*item.as_table(), source));
    rates->push_back(std::move(rate));
  }
  return Status::Ok();
}

// Two rates that would both apply at one instant make the table ambiguous.
Status CheckNoOverlap(const std::vector<Rate>& rates, std::string_view source) {
  for (size_t i = 0; i < rates.size(); ++i) {
    for (size_t j = i + 1; j < rates.size(); ++j) {
      const Rate& a = rates[i];
      const Rate& b = rates[j];
      if (a.resource == b.resource && a.gpu_type == b.gpu_type && a.partition == b.partition &&
          Overlap(a, b)) {
        return InvalidArgument(
            "{}:{}: rate overlaps the one at line {} (same resource, gpu_type and partition for "
            "overlapping effective dates)",
            source, b.line, a.line);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

std::string_view ResourceName(Resource r) {
  switch (r) {
    case Resource::kGpu:
      return "gpu";
    case Resource::kCpu:
      return "cpu";
    case Resource::kMem:
      return "mem";
    case Resource::kBilling:
      return "billing";
  }
  return "?";
}

std::string_view TierName(Tier t) {
  return t == Tier::kSpot ? "spot" : "on_demand";
}

Result<PriceTable> PriceTable::Load(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return Parse(text, path);
}

Result<PriceTable> PriceTable::Parse(std::string_view text, std::string source) {
  PriceTable table;
  table.source_ = source;
  HPCML_ASSIGN_OR_RETURN(toml::table root, ParseToml(text, source));
  bool have_currency = false;
  for (auto&& [key, node] : root) {
    std::string_view k = key.str();
    Status st;
    if (k == "currency") {
      table.currency_ = ToText(node, "currency", &st);
      if (st.ok() && table.currency_.empty()) st = InvalidArgument("must not be empty");
      have_currency = true;
    } else if (k == "default_tier") {
      Result<Tier> tier = ToTier(node, "default_tier");
      if (tier.ok())
        table.default_tier_ = *tier;
      else
        st = tier.status();
    } else if (k == "tiers") {
      HPCML_ASSIGN_OR_RETURN(table.tiers_, ParseTiers(key, node, source));
    } else if (k == "rate") {
      HPCML_RETURN_IF_ERROR(ParseRates(key, node, source, &table.rates_));
    } else {
      st = InvalidArgument("unknown key (known: currency, default_tier, tiers, rate)");
    }
    if (!st.ok()) return KeyError(source, LineOf(key), k, st);
  }
  if (!have_currency) return InvalidArgument("{}: missing key 'currency'", source);
  HPCML_RETURN_IF_ERROR(CheckNoOverlap(table.rates_, source));
  return table;
}

Tier PriceTable::TierOf(std::string_view partition) const {
  for (const auto& [name, tier] : tiers_) {
    if (name == partition) return tier;
  }
  return default_tier_;
}

bool PriceTable::Charges(Resource r) const {
  return r == Resource::kGpu ||
         std::any_of(rates_.begin(), rates_.end(), [r](const Rate& x) { return x.resource == r; });
}

std::vector<std::string> PriceTable::KnownGpuTypes() const {
  std::set<std::string> types;
  for (const Rate& r : rates_) {
    if (r.resource == Resource::kGpu && r.gpu_type != "*") types.insert(r.gpu_type);
  }
  return {types.begin(), types.end()};
}

const Rate* PriceTable::Find(Resource r, std::string_view gpu_type, std::string_view partition,
                             int64_t t) const {
  const Rate* best = nullptr;
  int best_score = -1;
  for (const Rate& rate : rates_) {
    if (rate.resource != r || t < rate.from || t >= rate.until) continue;
    int score = 0;
    if (rate.partition == partition)
      score += 1;
    else if (rate.partition != "*")
      continue;
    if (r == Resource::kGpu) {
      // An exact type outranks an exact partition: the card decides the price.
      if (rate.gpu_type == gpu_type && !gpu_type.empty())
        score += 2;
      else if (rate.gpu_type != "*")
        continue;
    }
    if (score > best_score) {
      best = &rate;
      best_score = score;
    }
  }
  return best;
}

Result<double> PriceTable::Cost(Resource r, std::string_view gpu_type, std::string_view partition,
                                int64_t start, int64_t end, double quantity) const {
  if (quantity <= 0 || end <= start) return 0.0;
  // Split [start, end) where any rate of this resource starts or stops.
  std::vector<int64_t> cuts{start, end};
  for (const Rate& rate : rates_) {
    if (rate.resource != r) continue;
    if (rate.from > start && rate.from < end) cuts.push_back(rate.from);
    if (rate.until > start && rate.until < end) cuts.push_back(rate.until);
  }
  if (cuts.size() > 2) {
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  }
  const Tier tier = TierOf(partition);
  double cost = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const Rate* rate = Find(r, gpu_type, partition, cuts[i]);
    if (!rate) {
      std::string what =
          r == Resource::kGpu
              ? fmt::format("GPU type '{}'", gpu_type.empty() ? "(untyped)" : gpu_type)
              : fmt::format("resource '{}'", ResourceName(r));
      std::string hint;
      if (r == Resource::kGpu) {
        std::vector<std::string> known = KnownGpuTypes();
        bool is_known = std::find(known.begin(), known.end(), gpu_type) != known.end();
        hint = fmt::format("; {} GPU types priced in {}: {}",
                           is_known ? "the" : "unknown type: the", source_,
                           known.empty() ? "(none)" : fmt::format("{}", fmt::join(known, ", ")));
        if (gpu_type.empty()) hint += " (add a rate with gpu_type = \"*\" for untyped GPUs)";
      }
      return NotFound("no price for {} in partition '{}' at {} in {}{}", what, partition,
                      FormatSlurmTime(cuts[i]), source_, hint);
    }
    double price = rate->on_demand;
    if (tier == Tier::kSpot) {
      if (rate->spot < 0) {
        return NotFound(
            "{}:{}: partition '{}' is billed at spot rates but this {} rate has no spot price",
            source_, rate->line, partition, ResourceName(r));
      }
      price = rate->spot;
    }
    cost += quantity * static_cast<double>(cuts[i + 1] - cuts[i]) / 3600.0 * price;
  }
  return cost;
}

}  // namespace hpcml::accounting
