// libFuzzer target: the price table parser (TOML text -> PriceTable or an
// error naming file, line and key) and, when a table parses, cost lookups
// across its rates' effective dates. Any crash, sanitizer report or
// exception escaping is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string_view>

#include "prices.hpp"

namespace ha = hpcml::accounting;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("TZ", "UTC", 1);
  tzset();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hpcml::Result<ha::PriceTable> table = ha::PriceTable::Parse(text, "fuzz.toml");
  if (!table.ok()) return 0;
  (void)table->KnownGpuTypes();
  // A fixed quarter, and an hour either side of each rate's own dates (TOML
  // dates are years 0..9999: no overflow in the arithmetic on them).
  constexpr std::int64_t kFrom = 1767225600, kUntil = 1775001600;  // 2026-01-01 .. 2026-04-01
  for (const ha::Rate& rate : table->rates()) {
    const std::int64_t from = rate.from == INT64_MIN ? kFrom : rate.from - 3600;
    const std::int64_t until = rate.until == INT64_MAX ? kUntil : rate.until + 3600;
    for (std::string_view partition : {std::string_view(rate.partition), std::string_view("p")}) {
      (void)table->TierOf(partition);
      for (std::string_view type : {std::string_view(rate.gpu_type), std::string_view("")}) {
        (void)table->Cost(rate.resource, type, partition, kFrom, kUntil, 2);
        (void)table->Cost(rate.resource, type, partition, from, until, 0.5);
      }
    }
  }
  return 0;
}
