// Helpers shared by the accounting unit tests.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <string>

#include "hpcml/common/unique_fd.hpp"
#include "prices.hpp"
#include "report.hpp"
#include "sacct.hpp"

namespace hpcml::accounting::testing {

inline std::string DataPath(const std::string& name) {
  return std::string(HPCML_ACCT_TEST_DATA) + "/" + name;
}

// Fixture times are written in UTC; every test binary runs in UTC so the
// expectations do not depend on the machine's zone.
inline bool UseUtc() {
  setenv("TZ", "UTC", 1);
  tzset();
  return true;
}

inline PriceTable LoadPrices(const std::string& name) {
  Result<PriceTable> p = PriceTable::Load(DataPath(name));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(p).value();
}

// Streams a fixture through a CostAggregator.
inline Status RunFixture(const std::string& name, CostAggregator& agg, bool strict = false) {
  Result<UniqueFd> fd = OpenFd(DataPath(name), O_RDONLY);
  if (!fd.ok()) return fd.status();
  SacctReader reader(fd->get(), name);
  return StreamSacct(reader, agg, strict);
}

inline int64_t Utc(const char* text) {
  Result<int64_t> t = ParseSlurmTime(text);
  EXPECT_TRUE(t.ok()) << text;
  return *t;
}

}  // namespace hpcml::accounting::testing
