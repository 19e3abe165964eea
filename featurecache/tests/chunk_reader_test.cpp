#include "chunk_reader.hpp"

#include <gtest/gtest.h>

#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

void CheckRows(const ChunkReader& r, uint64_t first, uint64_t count, uint64_t nf, ChunkScratch* s) {
  std::vector<float> out(count * nf, -1.0f);
  Status st = r.Read(first, count, out.data(), s);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (uint64_t i = 0; i < count; ++i) {
    for (uint64_t j = 0; j < nf; ++j)
      ASSERT_EQ(out[i * nf + j], Value(first + i, j)) << first + i << "," << j;
  }
}

class ChunkReaderTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChunkReaderTest, DirectReadsEqualTheData) {
  const std::string codec = GetParam();
  const bool compression = codec != "none";
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 10007, .features = 5, .chunk_rows = 512, .codec = codec});
  ASSERT_EQ(FeatureSet::Open(path)->Info("v1")->codec, codec);
  auto fs = FeatureSet::Open(path);
  auto v = fs->OpenVersion("v1");
  ASSERT_TRUE(v.ok());
  auto r = ChunkReader::Open(*v, v->features_dataset(), 5, "features", true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->direct());
  EXPECT_EQ(r->compressed(), compression);
  EXPECT_EQ(r->chunk_rows(), 512u);
  ChunkScratch s;
  CheckRows(*r, 0, 10007, 5, &s);   // everything
  CheckRows(*r, 500, 30, 5, &s);    // across one chunk boundary
  CheckRows(*r, 10000, 7, 5, &s);   // the short last chunk
  CheckRows(*r, 1024, 512, 5, &s);  // exactly one chunk
  CheckRows(*r, 3, 1, 5, &s);
  std::vector<float> out(10);
  EXPECT_FALSE(r->Read(10006, 2, out.data(), &s).ok());
  if (!compression) {
    EXPECT_EQ(r->FileOffset(1) - r->FileOffset(0), 20u);
  }

  auto labels = ChunkReader::Open(*v, v->labels_dataset(), 1, "labels", true);
  ASSERT_TRUE(labels.ok());
  std::vector<float> y(700);
  ASSERT_TRUE(labels->Read(300, 700, y.data(), &s).ok());
  for (uint64_t i = 0; i < 700; ++i) ASSERT_EQ(y[i], Label(300 + i));

  auto slow = ChunkReader::Open(*v, v->features_dataset(), 5, "features", false);
  ASSERT_TRUE(slow.ok());
  EXPECT_FALSE(slow->direct());
  CheckRows(*slow, 495, 40, 5, &s);
}

TEST(ChunkReader, LargeChunksArePageAligned) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 70000, .features = 16});  // default chunks: 1 MiB
  auto fs = FeatureSet::Open(path);
  auto v = fs->OpenVersion("v1");
  auto r = ChunkReader::Open(*v, v->features_dataset(), 16, "features", true);
  ASSERT_TRUE(r.ok());
  for (uint64_t row = 0; row < 70000; row += r->chunk_rows())
    EXPECT_EQ(r->FileOffset(row) % 4096, 0u) << row;
}

INSTANTIATE_TEST_SUITE_P(Codecs, ChunkReaderTest,
                         ::testing::Values("none", "deflate", "blosc-lz4", "blosc-zstd"),
                         [](const auto& p) {
                           std::string n = p.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(ChunkReader, OtherFiltersFallBackToHdf5) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  {
    // Features with a Fletcher-32 checksum filter, which the fast path does not decode.
    MakeVersion(path, {.rows = 10, .features = 2});
    h5::SilenceErrorPrinting();
    h5::File f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    H5Ldelete(f.get(), "/versions/v1/features", H5P_DEFAULT);
    hsize_t dims[2] = {10, 2}, chunk[2] = {4, 2};
    h5::Dataspace sp(H5Screate_simple(2, dims, nullptr));
    h5::PropList dcpl(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(dcpl.get(), 2, chunk);
    H5Pset_fletcher32(dcpl.get());
    h5::Dataset d(H5Dcreate2(f.get(), "/versions/v1/features", H5T_IEEE_F32LE, sp.get(),
                             H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
    std::vector<float> x(20);
    for (uint64_t r = 0; r < 10; ++r) {
      for (uint64_t j = 0; j < 2; ++j) x[r * 2 + j] = Value(r, j);
    }
    H5Dwrite(d.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x.data());
    ASSERT_TRUE(h5::WriteAttr(d.get(), "sha256", "not checked here").ok());
  }
  auto fs = FeatureSet::Open(path);
  auto v = fs->OpenVersion("v1");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  auto r = ChunkReader::Open(*v, v->features_dataset(), 2, "features", true);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->direct());
  ChunkScratch s;
  CheckRows(*r, 0, 10, 2, &s);
}

}  // namespace
}  // namespace hpcml::featurecache
