#include "hpcml/featurecache/asof.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include <fmt/format.h>

#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/ingest.hpp"
#include "hpcml/featurecache/writer.hpp"
#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

constexpr int64_t kS = 1'000'000;

struct Row {
  int64_t entity;
  int64_t seconds;
  float value;
};

// The rows as a version of features (value, 2 x value); with `available`
// (seconds, one per row), their availability times too.
void WriteFeatures(const std::string& path, const std::vector<Row>& rows,
                   const std::vector<int64_t>& available = {}) {
  auto w = FeatureSetWriter::Begin(path, {"ae"});
  ASSERT_TRUE(w.ok());
  NewVersion s;
  s.feature_names = {"value", "twice"};
  s.feature_types = {"float", "float"};
  s.operation = "ingest";
  s.transform = "{}";
  s.classification = "internal";
  s.entity_name = "customer";
  if (!available.empty()) s.available_name = "recorded_at";
  ASSERT_TRUE(w->StartVersion(s).ok());
  std::vector<float> x;
  std::vector<int64_t> e, t, a;
  for (size_t i = 0; i < rows.size(); ++i) {
    x.push_back(rows[i].value);
    x.push_back(2 * rows[i].value);
    e.push_back(rows[i].entity);
    t.push_back(rows[i].seconds * kS);
    if (!available.empty()) a.push_back(available[i] * kS);
  }
  ASSERT_TRUE(w->Append(x.data(), nullptr, e.data(), t.data(), rows.size(), nullptr,
                        available.empty() ? nullptr : a.data())
                  .ok());
  ASSERT_TRUE(w->Commit().ok());
}

struct Out {
  std::vector<float> value;
  std::vector<int64_t> entity, time;
  std::vector<float> label;
};

Out ReadOut(const std::string& path, const std::string& version) {
  Out o;
  auto fs = FeatureSet::Open(path);
  EXPECT_TRUE(fs.ok());
  auto v = fs->OpenVersion(version);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  if (!v.ok()) return o;
  uint64_t n = v->rows();
  std::vector<float> x(2 * n);
  o.entity.resize(n);
  o.time.resize(n);
  if (v->info().has_labels()) o.label.resize(n);
  EXPECT_TRUE(v->Read(0, n, x.data(), o.label.empty() ? nullptr : o.label.data(), o.entity.data(),
                      o.time.data())
                  .ok());
  for (uint64_t i = 0; i < n; ++i) {
    o.value.push_back(x[2 * i]);
    if (!std::isnan(x[2 * i])) {
      EXPECT_EQ(x[2 * i + 1], 2 * x[2 * i]);
    }
  }
  EXPECT_TRUE(VerifyVersion(*v).ok());
  return o;
}

AsofOptions Opts(const std::string& req) {
  AsofOptions o;
  o.from = "v1";  // each call adds a version: never join against an earlier result
  o.requests_csv = req;
  o.entity_column = "cust";
  o.time_column = "at";
  o.label_column = "label";
  return o;
}

class AsofEdgesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path = dir / "fs.h5";
    // Entity 1 at 100, 200 (twice: the later row wins), 300; entity 3 at 50.
    WriteFeatures(path,
                  {{1, 200, 2.0f}, {1, 100, 1.0f}, {3, 50, 30.0f}, {1, 300, 3.0f}, {1, 200, 2.5f}});
    WriteText(dir / "req.csv",
              "cust,at,label\n"
              "1,199,10\n"   // just before 200: the row at 100
              "1,200,11\n"   // exactly at 200: the row at 200 (the later of the two)
              "1,201,12\n"   // just after 200: still 200, never 300
              "1,99,13\n"    // before any row of entity 1: missing
              "2,500,14\n"   // unknown entity: missing
              "1,1000,15\n"  // long after: the newest, 300
              "3,50,16\n");  // at the only row
  }
  TempDir dir;
  std::string path;
};

TEST_F(AsofEdgesTest, JustBeforeAtAndAfter) {
  AsofStats stats;
  auto v = Asof(path, Opts(dir / "req.csv"), &stats);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(stats.requests, 7u);
  EXPECT_EQ(stats.matched, 5u);
  EXPECT_EQ(stats.missing, 2u);
  EXPECT_EQ(stats.written, 7u);
  EXPECT_EQ(v->operation, "asof");
  EXPECT_EQ(v->parents[0].version, "v1");
  EXPECT_EQ(v->label_name, "label");
  EXPECT_EQ(v->entity_name, "customer");
  Out o = ReadOut(path, v->name);
  ASSERT_EQ(o.value.size(), 7u);
  EXPECT_EQ(o.value[0], 1.0f);
  EXPECT_EQ(o.value[1], 2.5f);
  EXPECT_EQ(o.value[2], 2.5f);
  EXPECT_TRUE(std::isnan(o.value[3]));
  EXPECT_TRUE(std::isnan(o.value[4]));
  EXPECT_EQ(o.value[5], 3.0f);
  EXPECT_EQ(o.value[6], 30.0f);
  // Request order, with the request's entity, time and label.
  EXPECT_EQ(o.entity, (std::vector<int64_t>{1, 1, 1, 1, 2, 1, 3}));
  EXPECT_EQ(o.time[0], 199 * kS);
  EXPECT_EQ(o.label, (std::vector<float>{10, 11, 12, 13, 14, 15, 16}));
}

TEST_F(AsofEdgesTest, MaxAgeIsInclusive) {
  AsofOptions o = Opts(dir / "req.csv");
  o.max_age = 700 * kS;  // 1000 - 300: just old enough
  auto v = Asof(path, o);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(ReadOut(path, v->name).value[5], 3.0f);
  o.max_age = 699 * kS;
  auto w = Asof(path, o);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(std::isnan(ReadOut(path, w->name).value[5]));
}

TEST_F(AsofEdgesTest, DropAndErrorModes) {
  AsofOptions o = Opts(dir / "req.csv");
  o.missing = AsofMissing::kDrop;
  AsofStats stats;
  auto v = Asof(path, o, &stats);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(stats.written, 5u);
  Out out = ReadOut(path, v->name);
  EXPECT_EQ(out.label, (std::vector<float>{10, 11, 12, 15, 16}));
  o.missing = AsofMissing::kError;
  auto e = Asof(path, o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find(
                "req.csv: line 5: entity 1 has no feature row at or before 1970-01-01T00:01:39Z"),
            std::string::npos)
      << e.status().message();
}

TEST_F(AsofEdgesTest, BadRequestsNameLineAndColumn) {
  WriteText(dir / "bad.csv", "cust,at,label\n1,100,0\n1,soon,0\n");
  auto v = Asof(path, Opts(dir / "bad.csv"));
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("bad.csv: line 3, column 2: \"soon\" is not a time"),
            std::string::npos)
      << v.status().message();
  AsofOptions o = Opts(dir / "req.csv");
  o.time_column = "when";
  EXPECT_NE(Asof(path, o).status().message().find("no time column named \"when\""),
            std::string::npos);
}

// The join against a brute-force reference on 300,000 x 300,000, by the
// path `memory` and the requests' file choose: `long_first_lines` pads the
// first requests with a wide column, so the size estimate is far too low
// and the in-memory path gives way to the external one.
void MatchesBruteForce(uint64_t memory, bool long_first_lines, bool want_in_memory,
                       unsigned threads = 1) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  std::mt19937_64 rng(7);
  const int entities = 5000;
  std::vector<Row> rows;
  for (int i = 0; i < 300000; ++i) {
    rows.push_back({static_cast<int64_t>(rng() % entities), static_cast<int64_t>(rng() % 100000),
                    static_cast<float>(i)});
  }
  WriteFeatures(path, rows);
  std::string req = "cust,at,label,note\n";
  std::vector<std::pair<int64_t, int64_t>> requests;
  for (int i = 0; i < 300000; ++i) {
    requests.emplace_back(static_cast<int64_t>(rng() % (entities + 10)),
                          static_cast<int64_t>(rng() % 110000));
    req += std::to_string(requests.back().first) + "," + std::to_string(requests.back().second) +
           "," + std::to_string(i % 5) + "," +
           (long_first_lines && i < 100 ? std::string(2000, 'x') : std::string()) + "\n";
  }
  WriteText(dir / "req.csv", req);
  AsofOptions o = Opts(dir / "req.csv");
  o.memory_bytes = memory;
  o.tmpdir = dir.path();
  o.threads = threads;
  AsofStats stats;
  auto v = Asof(path, o, &stats);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(stats.in_memory, want_in_memory);
  Out out = ReadOut(path, v->name);
  ASSERT_EQ(out.value.size(), requests.size());

  // Brute force: per entity, rows sorted by (time, index); the last at or before.
  std::map<int64_t, std::vector<std::pair<int64_t, int>>> by_entity;
  for (int i = 0; i < static_cast<int>(rows.size()); ++i)
    by_entity[rows[i].entity].push_back({rows[i].seconds, i});
  for (auto& [e, list] : by_entity) std::sort(list.begin(), list.end());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto [e, t] = requests[i];
    float want = std::nanf("");
    auto it = by_entity.find(e);
    if (it != by_entity.end()) {
      auto& list = it->second;
      auto pos = std::upper_bound(list.begin(), list.end(), std::make_pair(t, INT32_MAX));
      if (pos != list.begin()) want = rows[std::prev(pos)->second].value;
    }
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(out.value[i])) << i;
    } else {
      ASSERT_EQ(out.value[i], want) << "request " << i;
    }
    ASSERT_EQ(out.entity[i], e);
    ASSERT_EQ(out.time[i], t * kS);
  }
}

TEST(Asof, MatchesBruteForceWithSpills) {
  MatchesBruteForce(16 << 20, false, false);  // every external sort spills
}
TEST(Asof, MatchesBruteForceInMemory) {
  MatchesBruteForce(256 << 20, false, true);
}
TEST(Asof, MatchesBruteForceInMemoryOnThreeThreads) {
  MatchesBruteForce(256 << 20, false, true, 3);  // three parts, cut at entity boundaries
}
TEST(Asof, MatchesBruteForceWhenTheEstimateFallsShort) {
  MatchesBruteForce(256 << 20, true, false);
}

// "As known at" against a brute-force reference: rows arrive late (some
// long after their timestamp, a few before it), and corrections restate an
// earlier row's (entity, timestamp) with a new value, available later. A
// request sees the newest row by (timestamp, storage order) among those
// whose timestamp and availability time are both at or before its time.
void KnownAtMatchesBruteForce(int n, uint64_t memory, bool want_in_memory, unsigned threads) {
  TempDir dir;
  const std::string path = dir / "fs.h5";
  std::mt19937_64 rng(5);
  const int entities = n / 50;
  std::vector<Row> rows;
  std::vector<int64_t> avail;
  for (int i = 0; i < n; ++i) {
    if (i > 100 && rng() % 10 == 0) {  // a correction of an earlier row
      Row r = rows[rng() % rows.size()];
      r.value = static_cast<float>(i);
      avail.push_back(r.seconds + 1000 + static_cast<int64_t>(rng() % 50000));
      rows.push_back(r);
      continue;
    }
    Row r{static_cast<int64_t>(rng() % entities), static_cast<int64_t>(rng() % 100000),
          static_cast<float>(i)};
    const uint64_t kind = rng() % 10;
    const int64_t delay = kind < 7   ? static_cast<int64_t>(rng() % 100)
                          : kind < 9 ? static_cast<int64_t>(rng() % 20000)
                                     : -static_cast<int64_t>(rng() % 1000);  // known ahead
    rows.push_back(r);
    avail.push_back(r.seconds + delay);
  }
  WriteFeatures(path, rows, avail);
  std::string req = "cust,at,label\n";
  std::vector<std::pair<int64_t, int64_t>> requests;
  for (int i = 0; i < n; ++i) {
    requests.emplace_back(static_cast<int64_t>(rng() % (entities + 10)),
                          static_cast<int64_t>(rng() % 130000));
    req += fmt::format("{},{},{}\n", requests.back().first, requests.back().second, i % 2);
  }
  WriteText(dir / "req.csv", req);
  AsofOptions o = Opts(dir / "req.csv");
  o.known_at = true;
  o.memory_bytes = memory;
  o.tmpdir = dir.path();
  o.threads = threads;
  AsofStats stats;
  auto v = Asof(path, o, &stats);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(stats.in_memory, want_in_memory);
  EXPECT_NE(v->transform.find("\"known_at\":true"), std::string::npos) << v->transform;
  EXPECT_NE(v->transform.find("recorded_at"), std::string::npos) << v->transform;
  Out out = ReadOut(path, v->name);
  ASSERT_EQ(out.value.size(), requests.size());

  std::map<int64_t, std::vector<int>> by_entity;
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) by_entity[rows[i].entity].push_back(i);
  uint64_t later_than_plain = 0;
  for (size_t q = 0; q < requests.size(); ++q) {
    const auto [e, t] = requests[q];
    int best = -1, plain = -1;
    for (int i : by_entity[e]) {
      if (rows[i].seconds > t) continue;
      auto newer = [&](int cur) {
        return cur < 0 || rows[i].seconds > rows[cur].seconds ||
               (rows[i].seconds == rows[cur].seconds && i > cur);
      };
      if (newer(plain)) plain = i;
      if (avail[i] <= t && newer(best)) best = i;
    }
    if (best < 0) {
      ASSERT_TRUE(std::isnan(out.value[q])) << "request " << q;
    } else {
      ASSERT_EQ(out.value[q], rows[best].value) << "request " << q;
    }
    later_than_plain += best != plain;
  }
  EXPECT_GT(later_than_plain, 1000u);  // the rule changed many answers
}

TEST(Asof, KnownAtMatchesBruteForceInMemory) {
  KnownAtMatchesBruteForce(100000, 256 << 20, true, 1);
}
TEST(Asof, KnownAtMatchesBruteForceOnThreeThreads) {
  KnownAtMatchesBruteForce(100000, 256 << 20, true, 3);
}
TEST(Asof, KnownAtMatchesBruteForceWithSpills) {
  KnownAtMatchesBruteForce(300000, 16 << 20, false, 1);  // every external sort spills
}

// A version without availability times cannot be joined as known at, and
// says how to get them.
TEST_F(AsofEdgesTest, KnownAtNeedsAvailabilityTimes) {
  AsofOptions o = Opts(dir / "req.csv");
  o.known_at = true;
  auto v = Asof(path, o);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("version v1 has no availability times"), std::string::npos)
      << v.status().message();
  EXPECT_NE(v.status().message().find("--available"), std::string::npos);
}

// A typed version joined: the features keep their kinds, dictionaries and
// exact integers (missing where no row matched), and string request labels
// become sorted classes.
TEST(Asof, KeepsKindsAndMakesClassesOfStringLabels) {
  TempDir dir;
  WriteText(dir / "f.csv",
            "id,ts,grade,cents\n1,2024-01-01,A,16777217\n2,2024-01-01,B,NA\n"
            "1,2024-02-01,C,16777219\n");
  IngestOptions io = CsvIngest(dir / "f.csv", "");
  std::string path = dir / "fs.h5";
  ASSERT_TRUE(Ingest(path, io).ok());
  WriteText(dir / "req.csv",
            "id,at,outcome\n1,2024-01-15,good\n1,2024-03-01,bad\n3,2024-03-01,good\n"
            "2,2024-01-02,bad\n");
  AsofOptions o;
  o.requests_csv = dir / "req.csv";
  o.entity_column = "id";
  o.time_column = "at";
  o.label_column = "outcome";
  auto v = Asof(path, o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->feature_types, (std::vector<std::string>{"category", "int"}));
  EXPECT_EQ(v->label_classes, (std::vector<std::string>{"bad", "good"}));
  auto r = FeatureSet::Open(path)->OpenVersion("v2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(VerifyVersion(*r).ok());
  EXPECT_EQ((*r->Categories())[0], (std::vector<std::string>{"A", "B", "C"}));
  std::vector<float> x(8), y(4);
  std::vector<int64_t> ints(4);
  ASSERT_TRUE(r->Read(0, 4, x.data(), y.data(), nullptr, nullptr).ok());
  ASSERT_TRUE(r->ReadInts(0, 4, ints.data()).ok());
  EXPECT_EQ(ints, (std::vector<int64_t>{16777217, 16777219, kIntMissing, kIntMissing}));
  EXPECT_EQ(x[0], 0.0f);          // A
  EXPECT_EQ(x[2], 2.0f);          // C
  EXPECT_TRUE(std::isnan(x[4]));  // entity 3: no row
  EXPECT_EQ(x[6], 1.0f);          // B
  EXPECT_EQ(y, (std::vector<float>{1, 0, 1, 0}));
}

}  // namespace
}  // namespace hpcml::featurecache
