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
  EXPECT_EQ(ReadText(dir / "out.csv"), "id,ts,\"odd,name\"\n1,1970-01-01T00:00:00Z,nan\n");
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
