#include "export.hpp"
#include "hpcml/featurecache/csv.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#include "hpcml/featurecache/ingest.hpp"
#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

TEST(Export, CsvRoundTripsExactly) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  VersionInfo v1 = MakeVersion(path, {.rows = 3000, .features = 3});
  auto fs = FeatureSet::Open(path);
  ASSERT_TRUE(fs.ok());
  int fd = ::open((dir / "out.csv").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(ExportCsv(*fs, {}, fd, "out.csv").ok());
  ::close(fd);
  std::string text = ReadText(dir / "out.csv");
  EXPECT_EQ(text.substr(0, text.find('\n')), "entity,timestamp,y,f0,f1,f2");
  IngestOptions o;
  o.csv_path = dir / "out.csv";
  o.entity_column = "entity";
  o.timestamp_column = "timestamp";
  o.label_column = "y";
  o.classification = "internal";
  auto v2 = Ingest(path, o);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  // Same bytes in every dataset: export -> ingest is lossless.
  EXPECT_EQ(v2->data_sha256, v1.data_sha256);
}

TEST(Export, LimitNanAndQuoting) {
  TempDir dir;
  WriteText(dir / "in.csv", "id,ts,\"odd,name\"\n1,0,nan\n2,0,1\n");
  IngestOptions o;
  o.csv_path = dir / "in.csv";
  o.entity_column = "id";
  o.timestamp_column = "ts";
  o.zone = "ae";
  o.classification = "public";
  ASSERT_TRUE(Ingest(dir / "fs.h5", o).ok());
  auto fs = FeatureSet::Open(dir / "fs.h5");
  int fd = ::open((dir / "out.csv").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ExportOptions eo;
  eo.limit = 1;
  ASSERT_TRUE(ExportCsv(*fs, eo, fd, "out.csv").ok());
  ::close(fd);
  // "nan" and 1: an int column, whose missing cell is an empty field.
  EXPECT_EQ(ReadText(dir / "out.csv"), "id,ts,\"odd,name\"\n1,1970-01-01T00:00:00Z,\n");
}

// Every kind, missing cells and class labels: export -> ingest gives the
// same data digest (kinds, dictionaries and classes included).
TEST(Export, TypedColumnsRoundTrip) {
  TempDir dir;
  WriteText(dir / "in.csv",
            "id,ts,grade,\"odd,cat\",cents,owner,rate,y\n"
            "1,0,A,\"x,1\",9007199254740993,TRUE,0.1,good\n"
            "2,0,NA,\"say \"\"hi\"\"\",,FALSE,NA,bad\n"
            "3,0,B,\"x,1\",-5,,2.5,good\n");
  IngestOptions o = CsvIngest(dir / "in.csv");
  auto v1 = Ingest(dir / "fs.h5", o);
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  auto fs = FeatureSet::Open(dir / "fs.h5");
  int fd = ::open((dir / "out.csv").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(ExportCsv(*fs, ExportOptions{}, fd, "out.csv").ok());
  ::close(fd);
  EXPECT_EQ(ReadText(dir / "out.csv"),
            "id,ts,y,grade,\"odd,cat\",cents,owner,rate\n"
            "1,1970-01-01T00:00:00Z,good,A,\"x,1\",9007199254740993,true,0.1\n"
            "2,1970-01-01T00:00:00Z,bad,,\"say \"\"hi\"\"\",,false,nan\n"
            "3,1970-01-01T00:00:00Z,good,B,\"x,1\",-5,,2.5\n");
  o.csv_path = dir / "out.csv";
  auto v2 = Ingest(dir / "fs.h5", o);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(v2->data_sha256, v1->data_sha256);
}

TEST(Export, WriteErrorsAreReported) {
  TempDir dir;
  MakeVersion(dir / "fs.h5", {.rows = 10});
  auto fs = FeatureSet::Open(dir / "fs.h5");
  int fd = ::open("/dev/full", O_WRONLY);
  if (fd < 0) GTEST_SKIP() << "no /dev/full";
  Status st = ExportCsv(*fs, {}, fd, "/dev/full");
  ::close(fd);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/dev/full"), std::string::npos);
}

TEST(CsvQuote, OnlyWhenNeeded) {
  EXPECT_EQ(CsvQuote("plain"), "plain");
  EXPECT_EQ(CsvQuote("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvQuote("say \"x\""), "\"say \"\"x\"\"\"");
}

}  // namespace
}  // namespace hpcml::featurecache
