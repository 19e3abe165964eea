#include "hpcml/featurecache/writer.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "hpcml/common/identity.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

NewVersion Spec(uint64_t f = 2) {
  NewVersion s;
  for (uint64_t j = 0; j < f; ++j) {
    s.feature_names.push_back("f" + std::to_string(j));
    s.feature_types.push_back("float");
  }
  s.operation = "ingest";
  s.transform = "{}";
  s.classification = "internal";
  return s;
}

std::vector<std::string> Leftovers(const TempDir& dir) {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
    std::string n = e.path().filename().string();
    if (n.find(".tmp-") != std::string::npos) out.push_back(n);
  }
  return out;
}

TEST(Writer, CreatesAndNumbersVersions) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  VersionInfo v1 = MakeVersion(path, {.rows = 100});
  VersionInfo v2 = MakeVersion(path, {.rows = 50});
  EXPECT_EQ(v1.name, "v1");
  EXPECT_EQ(v2.name, "v2");
  EXPECT_EQ(v1.rows, 100u);
  EXPECT_EQ(v1.data_sha256, DataDigest(v1, v1.digests));
  EXPECT_TRUE(v1.typed);
  EXPECT_NE(v1.created_by.find('@'), std::string::npos);
  EXPECT_EQ(v1.tool.rfind("hpcml-fcache ", 0), 0u);
  EXPECT_TRUE(Leftovers(dir).empty());
  auto fs = FeatureSet::Open(path);
  ASSERT_TRUE(fs.ok());
  EXPECT_EQ(fs->versions().size(), 2u);
}

// An int feature's exact values take 8 bytes a row: a chunk size the
// float32 matrix allows can be too large for int_values (HDF5: < 4 GiB).
TEST(Writer, ChunksOfIntValuesStayUnder4GiB) {
  TempDir dir;
  auto w = FeatureSetWriter::Begin(dir / "fs.h5", WriterOptions{"ae", 10});
  ASSERT_TRUE(w.ok());
  NewVersion s = Spec(1);
  s.chunk_rows = uint64_t{1} << 29;  // 2 GiB of float32, 4 GiB of int64
  s.feature_types = {"int"};
  auto started = w->StartVersion(s);
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.status().message().find("too large"), std::string::npos);
}

TEST(Writer, NewFileNeedsAValidZone) {
  TempDir dir;
  EXPECT_EQ(FeatureSetWriter::Begin(dir / "a.h5", {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(FeatureSetWriter::Begin(dir / "a.h5", {"bad zone"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir / "a.h5"));
}

TEST(Writer, ZoneCannotChange) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.zone = "ae"});
  auto w = FeatureSetWriter::Begin(path, {"eu"});
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("zone 'ae', not 'eu'"), std::string::npos);
  auto same = FeatureSetWriter::Begin(path, {""});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->zone(), "ae");
  EXPECT_FALSE(same->creating());
  EXPECT_EQ(same->existing_versions(), (std::vector<std::string>{"v1"}));
}

TEST(Writer, RefusesBadSchemasAndEmptyVersions) {
  TempDir dir;
  auto w = FeatureSetWriter::Begin(dir / "a.h5", {"ae"});
  ASSERT_TRUE(w.ok());
  NewVersion none = Spec(0);
  EXPECT_FALSE(w->StartVersion(none).ok());
  NewVersion dup = Spec(2);
  dup.feature_names[1] = "f0";
  EXPECT_FALSE(w->StartVersion(dup).ok());
  NewVersion cls = Spec(2);
  cls.classification = "secret";
  EXPECT_FALSE(w->StartVersion(cls).ok());
  ASSERT_TRUE(w->StartVersion(Spec(2)).ok());
  auto empty = w->Commit();
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  w->Abort();
  EXPECT_FALSE(std::filesystem::exists(dir / "a.h5"));
  EXPECT_TRUE(Leftovers(dir).empty());
}

TEST(Writer, AbortLeavesThePublishedFileUntouched) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 10});
  std::string before = ReadText(path);
  {
    auto w = FeatureSetWriter::Begin(path, {});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->StartVersion(Spec(2)).ok());
    float x[4] = {1, 2, 3, 4};
    int64_t e[2] = {1, 2}, t[2] = {3, 4};
    ASSERT_TRUE(w->Append(x, nullptr, e, t, 2).ok());
    // Dropped without Commit.
  }
  EXPECT_EQ(ReadText(path), before);
  EXPECT_TRUE(Leftovers(dir).empty());
  EXPECT_FALSE(std::filesystem::exists(path + ".d/v2.h5"));
}

// A version costs its own size: adding one leaves the files of the others
// alone (same inode, same bytes) and the set file stays small.
TEST(Writer, AddingAVersionWritesOnlyThatVersion) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 200000, .features = 8});
  struct stat before;
  ASSERT_EQ(::stat((path + ".d/v1.h5").c_str(), &before), 0);
  const std::string v1_bytes = ReadText(path + ".d/v1.h5");
  MakeVersion(path, {.rows = 100, .features = 8, .chunk_rows = 100});
  struct stat after;
  ASSERT_EQ(::stat((path + ".d/v1.h5").c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(ReadText(path + ".d/v1.h5"), v1_bytes);
  EXPECT_LT(std::filesystem::file_size(path), 64u * 1024) << "the set file holds only links";
  EXPECT_LT(std::filesystem::file_size(path + ".d/v2.h5"), 256u * 1024);
  EXPECT_GT(std::filesystem::file_size(path + ".d/v1.h5"), 200000u * 8 * 4);
}

TEST(Writer, OneWriterAtATime) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 10});
  auto first = FeatureSetWriter::Begin(path, {});
  ASSERT_TRUE(first.ok());
  auto second = FeatureSetWriter::Begin(path, WriterOptions{"", 0.2});
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("another writer"), std::string::npos);
  first->Abort();
  auto third = FeatureSetWriter::Begin(path, WriterOptions{"", 0.2});
  EXPECT_TRUE(third.ok());
}

TEST(Writer, WaitingWriterProceedsWhenTheLockIsFreed) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 10});
  auto first = FeatureSetWriter::Begin(path, {});
  ASSERT_TRUE(first.ok());
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    first->Abort();
  });
  auto second = FeatureSetWriter::Begin(path, WriterOptions{"", 10});
  t.join();
  EXPECT_TRUE(second.ok());
}

TEST(Writer, RemovesTemporaryFilesOfKilledWriters) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 10});
  WriteText(dir / ".fs.h5.tmp-999-deadbeef", "half a file");
  WriteText(dir / ".other.h5.tmp-1-1", "not ours");
  WriteText(dir / "fs.h5.d/.v2.h5.tmp-999-deadbeef", "half a version");
  MakeVersion(path, {.rows = 10});
  EXPECT_FALSE(std::filesystem::exists(dir / ".fs.h5.tmp-999-deadbeef"));
  EXPECT_FALSE(std::filesystem::exists(dir / "fs.h5.d/.v2.h5.tmp-999-deadbeef"));
  EXPECT_TRUE(std::filesystem::exists(dir / ".other.h5.tmp-1-1"));
}

TEST(Writer, ReadersKeepTheirSnapshot) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 2000, .features = 3});
  auto fs = FeatureSet::Open(path);
  ASSERT_TRUE(fs.ok());
  auto v1 = fs->OpenVersion("v1");
  ASSERT_TRUE(v1.ok());
  // A writer adds v2 while the reader holds v1 open.
  MakeVersion(path, {.rows = 100, .features = 3});
  std::vector<float> x(2000 * 3);
  ASSERT_TRUE(v1->Read(0, 2000, x.data(), nullptr, nullptr, nullptr).ok());
  for (uint64_t r = 0; r < 2000; r += 111) EXPECT_EQ(x[r * 3 + 2], Value(r, 2));
  EXPECT_TRUE(VerifyVersion(*v1).ok());
  EXPECT_EQ(fs->versions().size(), 1u) << "an open FeatureSet is a snapshot";
  auto fresh = FeatureSet::Open(path);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->versions().size(), 2u);
}

TEST(Writer, RefusesToOverwriteSomethingElse) {
  TempDir dir;
  WriteText(dir / "notes.h5", "precious");
  auto w = FeatureSetWriter::Begin(dir / "notes.h5", {"ae"});
  EXPECT_EQ(w.status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(ReadText(dir / "notes.h5"), "precious");
}

TEST(Writer, GuardedJobChecksPathZoneAndClassification) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  std::string canonical = *CanonicalPath(path, false);
  {
    ScopedEnv z("HPCML_ZONE", "ae");
    ScopedEnv d("HPCML_DATASETS", "/elsewhere");
    EXPECT_EQ(FeatureSetWriter::Begin(path, {"ae"}).status().code(), StatusCode::kPermissionDenied);
  }
  {
    ScopedEnv z("HPCML_ZONE", "ae");
    ScopedEnv d("HPCML_DATASETS", canonical);
    EXPECT_EQ(FeatureSetWriter::Begin(path, {"eu"}).status().code(), StatusCode::kPermissionDenied);
  }
  {
    ScopedEnv z("HPCML_ZONE", "ae");
    ScopedEnv d("HPCML_DATASETS", canonical);
    ScopedEnv c("HPCML_CLASSIFICATIONS", "public");
    auto w = FeatureSetWriter::Begin(path, {"ae"});
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(w->StartVersion(Spec()).status().code(),
              StatusCode::kPermissionDenied);  // "internal"
  }
}

TEST(Writer, CompressedAndChunked) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  VersionInfo v =
      MakeVersion(path, {.rows = 5000, .features = 5, .chunk_rows = 256, .compression = 6});
  EXPECT_EQ(v.chunk_rows, 256u);
  EXPECT_EQ(v.compression, 6);
  auto fs = FeatureSet::Open(path);
  auto r = fs->OpenVersion("v1");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(VerifyVersion(*r).ok());
}

TEST(Principal, NamesUserHostJobAndRole) {
  ScopedEnv j("SLURM_JOB_ID", "1234");
  ScopedEnv r("HPCML_ROLE", "ml-engineer");
  std::string p = CurrentPrincipal();
  EXPECT_NE(p.find('@'), std::string::npos);
  EXPECT_NE(p.find("job 1234"), std::string::npos);
  EXPECT_NE(p.find("role ml-engineer"), std::string::npos);
}

}  // namespace
}  // namespace hpcml::featurecache
