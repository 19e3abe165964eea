// The price table: what a GPU-, CPU- or memory-hour costs, per GPU type and
// partition, at on-demand and spot (preemptible) rates, over effective dates.
//
// TOML, strict: an unknown key, a wrong type or a bad value is an error that
// names the file, the line and the key. Example (examples/accounting/prices.toml):
//
//   currency = "EUR"
//   default_tier = "on_demand"          # tier of partitions not listed below
//   [tiers]
//   preempt = "spot"                    # partition -> "spot" | "on_demand"
//   [[rate]]
//   resource = "gpu"                    # gpu (per GPU-hour), cpu (per CPU-hour),
//                                       # mem (per GiB-hour), billing (per billing-unit-hour)
//   gpu_type = "h100"                   # gpu only; "*" = any type, also untyped GPUs
//   partition = "*"                     # optional, default "*"
//   on_demand = 2.90
//   spot = 1.10                         # optional; required where a spot partition uses it
//   effective_from = 2026-01-01         # optional, inclusive (local date or date-time)
//   effective_until = 2027-01-01        # optional, exclusive
//
// Lookup: among the rates of a resource (and GPU type) whose dates cover an
// instant, an exact partition beats "*", and an exact GPU type beats "*". Two
// rates equally specific for the same instant are an error at load time. A
// resource kind with no rate at all is not charged (a GPU-only table is
// valid), except GPUs: every GPU type used must be priced.
//
// Immutable after Load; thread-safe to share.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::accounting {

enum class Resource { kGpu, kCpu, kMem, kBilling };
enum class Tier { kOnDemand, kSpot };

std::string_view ResourceName(Resource r);
std::string_view TierName(Tier t);

struct Rate {
  Resource resource = Resource::kGpu;
  std::string gpu_type = "*";
  std::string partition = "*";
  double on_demand = 0;
  double spot = -1;  // < 0: not given
  int64_t from = INT64_MIN;
  int64_t until = INT64_MAX;
  int64_t line = 0;  // where it was defined, for messages
};

class PriceTable {
 public:
  // Parses TOML text; `source` names it in errors ("prices.toml:12: ...").
  static Result<PriceTable> Parse(std::string_view text, std::string source);
  static Result<PriceTable> Load(const std::string& path);

  const std::string& currency() const { return currency_; }
  const std::string& source() const { return source_; }
  const std::vector<Rate>& rates() const { return rates_; }
  Tier TierOf(std::string_view partition) const;
  bool Charges(Resource r) const;
  // GPU types with a rate of their own (not "*"), sorted.
  std::vector<std::string> KnownGpuTypes() const;

  // Cost of `quantity` units held over [start, end) in `partition`, rate per
  // unit-hour. The interval is split where rates change (effective dates).
  // Errors: no rate covers part of the interval (names resource, type,
  // partition, time, and for GPUs the known types); a spot partition whose
  // rate has no spot price.
  Result<double> Cost(Resource r, std::string_view gpu_type, std::string_view partition,
                      int64_t start, int64_t end, double quantity) const;

 private:
  const Rate* Find(Resource r, std::string_view gpu_type, std::string_view partition,
                   int64_t t) const;
  std::string currency_;
  std::string source_;
  Tier default_tier_ = Tier::kOnDemand;
  std::vector<std::pair<std::string, Tier>> tiers_;
  std::vector<Rate> rates_;
};

}  // namespace hpcml::accounting
