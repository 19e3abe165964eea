// String entity keys: ingest, as-of join, derive and export keep them, codes
// never leak, an integer column stays integer, and bad keys are refused.
#include "hpcml/featurecache/entity_keys.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "derive.hpp"
#include "export.hpp"
#include "hpcml/featurecache/asof.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/ingest.hpp"
#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

IngestOptions Opts(const std::string& csv) {
  IngestOptions o;
  o.csv_path = csv;
  o.entity_column = "customer";
  o.timestamp_column = "ts";
  o.zone = "ae";
  o.classification = "internal";
  return o;
}

std::string Export(const std::string& path, const std::string& version) {
  auto fs = FeatureSet::Open(path);
  EXPECT_TRUE(fs.ok());
  TempDir out;
  int fd = ::open((out / "x.csv").c_str(), O_WRONLY | O_CREAT, 0644);
  Status st = ExportCsv(*fs, ExportOptions{version, 0}, fd, "x.csv");
  ::close(fd);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return ReadText(out / "x.csv");
}

TEST(EntityKeys, DictionaryCodesInOrderOfFirstAppearance) {
  StringDictionary d;
  EXPECT_EQ(*d.Encode("b"), 0);
  EXPECT_EQ(*d.Encode("a"), 1);
  EXPECT_EQ(*d.Encode("b"), 0);
  EXPECT_EQ(d.Find("a"), 1);
  EXPECT_EQ(d.Find("zz"), -1);
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"b", "a"}));
  EXPECT_FALSE(d.Encode("").ok());
  EXPECT_FALSE(d.Encode(std::string("a\0b", 3)).ok());
  EXPECT_FALSE(d.Encode(std::string(kMaxEntityKeyBytes + 1, 'x')).ok());
  EXPECT_EQ(EntityText(1, d.keys()), "a");
  EXPECT_EQ(EntityText(42, {}), "42");
}

TEST(EntityKeys, IngestJoinDeriveExport) {
  TempDir dir;
  const std::string path = dir / "fs.h5";
  WriteText(dir / "f.csv",
            "customer,ts,spend\n"
            "c231,2024-01-01T00:00:00Z,10.5\n"
            "\"acct,9\",2024-01-02T00:00:00Z,20\n"
            "c231,2024-01-03T00:00:00Z,11.5\n"
            "00123,2024-01-04T00:00:00Z,5\n");
  auto v1 = Ingest(path, Opts(dir / "f.csv"));
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(v1->entity_type, "string");
  EXPECT_FALSE(v1->digests.entity_keys.empty());
  auto fs = FeatureSet::Open(path);
  auto r = fs->OpenVersion("v1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r->EntityKeys(), (std::vector<std::string>{"c231", "acct,9", "00123"}));
  std::vector<int64_t> e(4);
  ASSERT_TRUE(r->Read(0, 4, nullptr, nullptr, e.data(), nullptr).ok());
  EXPECT_EQ(e, (std::vector<int64_t>{0, 1, 0, 2}));
  EXPECT_TRUE(VerifyVersion(*r).ok());

  // The join matches by key; a key the version lacks gets a code of its own
  // and no row; the leading zeros of 00123 survive.
  WriteText(dir / "r.csv",
            "customer,when\n"
            "c231,2024-01-02T12:00:00Z\n"
            "00123,2024-01-05T00:00:00Z\n"
            "zz-unknown,2024-01-05T00:00:00Z\n");
  AsofOptions ao;
  ao.from = "v1";
  ao.requests_csv = dir / "r.csv";
  ao.entity_column = "customer";
  ao.time_column = "when";
  auto v2 = Asof(path, ao);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(v2->entity_type, "string");
  EXPECT_EQ(Export(path, "v2"),
            "customer,ts,spend\n"
            "c231,2024-01-02T12:00:00Z,10.5\n"
            "00123,2024-01-05T00:00:00Z,5\n"
            "zz-unknown,2024-01-05T00:00:00Z,nan\n");
  ao.missing = AsofMissing::kError;
  auto refused = Asof(path, ao);
  EXPECT_NE(refused.status().message().find("entity zz-unknown has no feature row"),
            std::string::npos)
      << refused.status().message();

  DeriveOptions d;
  d.from = "v1";
  auto v3 = Derive(path, d);
  ASSERT_TRUE(v3.ok()) << v3.status().ToString();
  EXPECT_EQ(Export(path, "v3"), Export(path, "v1"));
  EXPECT_EQ(
      Export(path, "v1").rfind("customer,ts,spend\nc231,2024-01-01T00:00:00Z,10.5\n\"acct,9\",", 0),
      0u);
}

TEST(EntityKeys, IntegersStayIntegersAndMixedColumnsNeedTheOption) {
  TempDir dir;
  WriteText(dir / "ints.csv", "customer,ts,x\n5,1700000000,1\n-7,1700000001,2\n");
  auto v = Ingest(dir / "a.h5", Opts(dir / "ints.csv"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->entity_type, "int");
  EXPECT_TRUE(v->digests.entity_keys.empty());
  EXPECT_EQ(Export(dir / "a.h5", "v1"),
            "customer,ts,x\n5,2023-11-14T22:13:20Z,1\n-7,2023-11-14T22:13:21Z,2\n");

  WriteText(dir / "mixed.csv", "customer,ts,x\n5,1700000000,1\nc7,1700000001,2\n");
  auto mixed = Ingest(dir / "b.h5", Opts(dir / "mixed.csv"));
  EXPECT_EQ(mixed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mixed.status().message().find("line 3"), std::string::npos);
  EXPECT_NE(mixed.status().message().find("--entity-type string"), std::string::npos)
      << mixed.status().message();
  IngestOptions o = Opts(dir / "mixed.csv");
  o.entity_type = "string";
  auto as_strings = Ingest(dir / "b.h5", o);
  ASSERT_TRUE(as_strings.ok()) << as_strings.status().ToString();
  EXPECT_EQ(*FeatureSet::Open(dir / "b.h5")->OpenVersion("v1")->EntityKeys(),
            (std::vector<std::string>{"5", "c7"}));
  o.entity_type = "int";
  EXPECT_FALSE(Ingest(dir / "c.h5", o).ok());
}

TEST(EntityKeys, VerifyCatchesACodeWithoutAKey) {
  TempDir dir;
  WriteText(dir / "f.csv", "customer,ts,x\na,1700000000,1\nb,1700000001,2\n");
  ASSERT_TRUE(Ingest(dir / "fs.h5", Opts(dir / "f.csv")).ok());
  {  // entity_ids[1] = 9: no such key
    const std::string vfile = dir / "fs.h5.d/v1.h5";
    hid_t f = H5Fopen(vfile.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "entity_ids", H5P_DEFAULT);
    int64_t ids[2] = {0, 9};
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids), 0);
    H5Dclose(ds);
    H5Fclose(f);
  }
  Status st = VerifyVersion(*FeatureSet::Open(dir / "fs.h5")->OpenVersion("v1"));
  EXPECT_EQ(st.code(), StatusCode::kCorrupt);
}

}  // namespace
}  // namespace hpcml::featurecache
