// libFuzzer target: sacct -P text through the whole report, as hpcml-cost
// runs it: SacctReader (header, steps, malformed lines skipped), the
// CostAggregator (usage summaries read from Comments, periods, filters) and
// every output format. Any crash, sanitizer report or exception escaping is
// a bug; so is a report that does not reconcile.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string_view>

#include "format.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "prices.hpp"
#include "report.hpp"
#include "sacct.hpp"

namespace ha = hpcml::accounting;

namespace {

// Every GPU type priced ("*"), a rate change on h100, spot prices for the
// spot partition: the aggregator has a price for any row the reader accepts.
constexpr std::string_view kPrices = R"(currency = "EUR"
[tiers]
spot = "spot"
[[rate]]
resource = "gpu"
gpu_type = "*"
on_demand = 2.0
spot = 1.0
[[rate]]
resource = "gpu"
gpu_type = "h100"
on_demand = 4.0
spot = 2.0
effective_until = 2026-03-01
[[rate]]
resource = "gpu"
gpu_type = "h100"
on_demand = 5.0
spot = 2.5
effective_from = 2026-03-01
[[rate]]
resource = "cpu"
on_demand = 0.1
spot = 0.05
[[rate]]
resource = "mem"
on_demand = 0.01
spot = 0.005
[[rate]]
resource = "billing"
on_demand = 0.001
spot = 0.0005
)";

const ha::PriceTable& Prices() {
  static const ha::PriceTable table = [] {
    hpcml::Result<ha::PriceTable> t = ha::PriceTable::Parse(kPrices, "fuzz-prices.toml");
    if (!t.ok()) abort();
    return std::move(t).value();
  }();
  return table;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("TZ", "UTC", 1);
  tzset();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hpcml::UniqueFd fd(memfd_create("sacct", 0));
  if (!fd || write(fd.get(), data, size) != static_cast<ssize_t>(size)) abort();
  lseek(fd.get(), 0, SEEK_SET);
  ha::ReportOptions opt;
  opt.groups = {ha::GroupBy::kJob, ha::GroupBy::kUser, ha::GroupBy::kAccount,
                ha::GroupBy::kPartition, ha::GroupBy::kGpuType};
  opt.now = 1773000000;  // 2026-03-08T20:00:00Z, for rows still running
  opt.chart = true;
  if (size % 2 == 1) {              // half the inputs clipped to a period
    opt.period_start = 1772323200;  // 2026-03-01
    opt.period_end = 1772928000;    // 2026-03-08
  }
  ha::CostAggregator agg(Prices(), opt);
  ha::SacctReader reader(fd.get(), "fuzz.sacct");
  hpcml::Status st = ha::StreamSacct(reader, agg, /*strict=*/false);
  (void)st;  // a row priced past the rates' range is an error, not a bug
  const ha::Report& report = agg.report();
  if (!report.Reconcile(nullptr)) abort();
  for (ha::Format f : {ha::Format::kTable, ha::Format::kCsv, ha::Format::kJson, ha::Format::kSvg})
    (void)ha::Render(report, f);
  return 0;
}
