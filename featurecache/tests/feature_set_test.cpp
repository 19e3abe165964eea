#include "hpcml/featurecache/feature_set.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

TEST(FeatureSet, OpensListsAndReads) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 1000, .features = 3});
  MakeVersion(path, {.rows = 10, .features = 2, .labels = false, .classification = "confidential"});
  auto fs = FeatureSet::Open(path);
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  EXPECT_EQ(fs->versions(), (std::vector<std::string>{"v1", "v2"}));
  EXPECT_EQ(fs->latest(), "v2");
  EXPECT_EQ(fs->zone(), "ae");
  EXPECT_EQ(fs->classification(), "confidential");  // the highest of any version
  EXPECT_EQ(*fs->Resolve(""), "v2");
  EXPECT_EQ(*fs->Resolve("latest"), "v2");
  EXPECT_EQ(*fs->Resolve("1"), "v1");
  EXPECT_EQ(fs->Resolve("v3").status().code(), StatusCode::kNotFound);
  EXPECT_NE(fs->Resolve("v3").status().message().find("version v3 not found (have v1, v2)"),
            std::string::npos);
  EXPECT_EQ(fs->Resolve("bogus").status().code(), StatusCode::kInvalidArgument);

  auto v1 = fs->OpenVersion("v1");
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(v1->rows(), 1000u);
  EXPECT_EQ(v1->features(), 3u);
  EXPECT_EQ(v1->info().classification, "internal");
  std::vector<float> x(5 * 3), y(5);
  std::vector<int64_t> e(5), t(5);
  ASSERT_TRUE(v1->Read(995, 5, x.data(), y.data(), e.data(), t.data()).ok());
  for (uint64_t r = 0; r < 5; ++r) {
    for (uint64_t j = 0; j < 3; ++j) EXPECT_EQ(x[r * 3 + j], Value(995 + r, j));
    EXPECT_EQ(y[r], Label(995 + r));
    EXPECT_EQ(e[r], Entity(995 + r));
    EXPECT_EQ(t[r], Time(995 + r));
  }
  EXPECT_EQ(v1->Read(996, 5, x.data(), nullptr, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  auto v2 = fs->OpenVersion("v2");
  ASSERT_TRUE(v2.ok());
  EXPECT_FALSE(v2->info().has_labels());
  EXPECT_EQ(v2->Read(0, 1, nullptr, y.data(), nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(VerifyVersion(*v1).ok());
  EXPECT_TRUE(VerifyVersion(*v2).ok());
}

TEST(FeatureSet, BadFilesAreClearErrors) {
  TempDir dir;
  auto missing = FeatureSet::Open(dir / "missing.h5");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.h5"), std::string::npos);

  WriteText(dir / "text.h5", "not hdf5 at all");
  auto text = FeatureSet::Open(dir / "text.h5");
  EXPECT_EQ(text.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(text.status().message().find("not an HDF5 file"), std::string::npos);

  std::string good = dir / "good.h5";
  MakeVersion(good, {.rows = 5000, .features = 8});
  std::string all = ReadText(good);
  WriteText(dir / "trunc.h5", all.substr(0, all.size() / 2));
  auto trunc = FeatureSet::Open(dir / "trunc.h5");
  EXPECT_EQ(trunc.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(trunc.status().message().find("truncated"), std::string::npos)
      << trunc.status().message();

  h5::SilenceErrorPrinting();
  { h5::File f(H5Fcreate((dir / "plain.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)); }
  auto plain = FeatureSet::Open(dir / "plain.h5");
  EXPECT_EQ(plain.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(plain.status().message().find("not an hpcml feature set"), std::string::npos);
}

// Overwrites 8 bytes of the first features chunk, inside the rows written.
void CorruptFeatures(const std::string& path, const VersionInfo& info) {
  auto fs = FeatureSet::Open(path);
  ASSERT_TRUE(fs.ok());
  auto v = fs->OpenVersion(info.name);
  ASSERT_TRUE(v.ok());
  hsize_t coord[2] = {0, 0};
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  ASSERT_GE(H5Dget_chunk_info_by_coord(v->features_dataset(), coord, &mask, &addr, &size), 0);
  int fd = ::open((path + ".d/" + info.name + ".h5").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const char junk[8] = {'c', 'o', 'r', 'r', 'u', 'p', 't', '!'};
  ASSERT_EQ(::pwrite(fd, junk, sizeof junk, static_cast<off_t>(addr + 100)), 8);
  ::close(fd);
}

TEST(FeatureSet, VerifyFindsCorruptData) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  VersionInfo info = MakeVersion(path, {.rows = 3000, .features = 4});
  CorruptFeatures(path, info);
  auto fs = FeatureSet::Open(path);
  ASSERT_TRUE(fs.ok());
  auto v = fs->OpenVersion("v1");
  ASSERT_TRUE(v.ok());
  Status st = VerifyVersion(*v);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt);
  EXPECT_NE(st.message().find("dataset features: SHA-256 mismatch"), std::string::npos)
      << st.message();
}

// Each version is its own file, <set>.d/vN.h5, linked from the set file.
// The attacks: point the link elsewhere, or swap the directory or the file for
// a symbolic link to another zone's set, or steer HDF5's own link resolution
// with HDF5_EXT_PREFIX. Each is refused or has no effect.
void Relink(const std::string& set, const std::string& version, const std::string& target) {
  hid_t f = H5Fopen(set.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  std::string link = "/versions/" + version;
  ASSERT_GE(H5Ldelete(f, link.c_str(), H5P_DEFAULT), 0);
  ASSERT_GE(H5Lcreate_external(target.c_str(), "/", f, link.c_str(), H5P_DEFAULT, H5P_DEFAULT), 0);
  H5Fclose(f);
}

TEST(FeatureSetVersionFiles, LinkToAnyOtherFileIsRefused) {
  TempDir dir;
  std::filesystem::create_directories(dir / "ae");
  std::filesystem::create_directories(dir / "eu");
  MakeVersion(dir / "ae/fs.h5", {.rows = 100, .zone = "ae"});
  MakeVersion(dir / "eu/fs.h5", {.rows = 200, .zone = "eu"});
  for (const std::string& target :
       {dir / "eu/fs.h5.d/v1.h5", std::string("../eu/fs.h5.d/v1.h5"), std::string("fs.h5.d/v1.h5/"),
        std::string("other.h5.d/v1.h5")}) {
    Relink(dir / "ae/fs.h5", "v1", target);
    auto fs = FeatureSet::Open(dir / "ae/fs.h5");
    ASSERT_TRUE(fs.ok()) << fs.status().ToString();
    auto v = fs->OpenVersion("v1");
    EXPECT_EQ(v.status().code(), StatusCode::kCorrupt) << target;
    EXPECT_NE(v.status().message().find("(refused)"), std::string::npos) << v.status().message();
  }
  Relink(dir / "ae/fs.h5", "v1", "fs.h5.d/v1.h5");
  EXPECT_TRUE(FeatureSet::Open(dir / "ae/fs.h5")->OpenVersion("v1").ok());
}

TEST(FeatureSetVersionFiles, SymbolicLinksAreNotFollowed) {
  TempDir dir;
  std::filesystem::create_directories(dir / "ae");
  std::filesystem::create_directories(dir / "eu");
  MakeVersion(dir / "ae/fs.h5", {.rows = 100, .zone = "ae"});
  MakeVersion(dir / "eu/fs.h5", {.rows = 200, .zone = "eu"});
  // The version file swapped for a link to the other zone's.
  std::filesystem::rename(dir / "ae/fs.h5.d/v1.h5", dir / "ae/keep.h5");
  std::filesystem::create_symlink(dir / "eu/fs.h5.d/v1.h5", dir / "ae/fs.h5.d/v1.h5");
  auto v = FeatureSet::Open(dir / "ae/fs.h5")->OpenVersion("v1");
  EXPECT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("fs.h5.d/v1.h5"), std::string::npos) << v.status().message();
  // The directory swapped for a link.
  std::filesystem::remove(dir / "ae/fs.h5.d/v1.h5");
  std::filesystem::rename(dir / "ae/fs.h5.d", dir / "ae/kept.d");
  std::filesystem::create_directory_symlink(dir / "eu/fs.h5.d", dir / "ae/fs.h5.d");
  v = FeatureSet::Open(dir / "ae/fs.h5")->OpenVersion("v1");
  EXPECT_FALSE(v.ok());
  // A hard link or copy of the other zone's file: its zone attribute says so.
  std::filesystem::remove(dir / "ae/fs.h5.d");
  std::filesystem::create_directories(dir / "ae/fs.h5.d");
  std::filesystem::copy_file(dir / "eu/fs.h5.d/v1.h5", dir / "ae/fs.h5.d/v1.h5");
  auto info = FeatureSet::Open(dir / "ae/fs.h5")->Info("v1");
  EXPECT_EQ(info.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(info.status().message().find("is in zone 'eu' but the feature set is in zone 'ae'"),
            std::string::npos)
      << info.status().message();
}

TEST(FeatureSetVersionFiles, Hdf5ExtPrefixChangesNothing) {
  TempDir dir;
  std::filesystem::create_directories(dir / "ae");
  std::filesystem::create_directories(dir / "other");
  MakeVersion(dir / "ae/fs.h5", {.rows = 100, .zone = "ae"});
  MakeVersion(dir / "other/fs.h5", {.rows = 300, .zone = "ae"});
  ::setenv("HDF5_EXT_PREFIX", (dir / "other").c_str(), 1);
  auto v = FeatureSet::Open(dir / "ae/fs.h5")->OpenVersion("v1");
  ::unsetenv("HDF5_EXT_PREFIX");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->rows(), 100u);
  hsize_t dims = 0;
  hid_t space = H5Dget_space(v->features_dataset());
  H5Sget_simple_extent_dims(space, &dims, nullptr);
  H5Sclose(space);
  EXPECT_EQ(dims, 100u) << "the data is the set's own version file";
}

TEST(FeatureSet, SchemaMismatchIsCorrupt) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 100, .features = 4});
  {
    h5::SilenceErrorPrinting();
    h5::File f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    h5::Group g(H5Gopen2(f.get(), "/versions/v1", H5P_DEFAULT));
    ASSERT_TRUE(h5::WriteAttr(g.get(), "rows", int64_t{101}).ok());
  }
  auto fs = FeatureSet::Open(path);
  ASSERT_TRUE(fs.ok());
  auto v = fs->OpenVersion("v1");
  EXPECT_EQ(v.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(v.status().message().find("schema mismatch"), std::string::npos)
      << v.status().message();
}

TEST(FeatureSet, AccessControlInsideAGuardedJob) {
  TempDir dir;
  std::string path = dir / "fs.h5";
  MakeVersion(path, {.rows = 10, .features = 2, .zone = "ae", .classification = "confidential"});
  std::string canonical = *CanonicalPath(path, true);
  {
    ScopedEnv z("HPCML_ZONE", "ae");
    ScopedEnv d("HPCML_DATASETS", canonical);
    EXPECT_TRUE(FeatureSet::Open(path).ok());
  }
  {
    ScopedEnv z("HPCML_ZONE", "ae");
    ScopedEnv d("HPCML_DATASETS", std::filesystem::path(canonical).parent_path().string());
    EXPECT_TRUE(FeatureSet::Open(path).ok()) << "a listed directory covers its files";
  }
  {
    ScopedEnv z("HPCML_ZONE", "ae");
    ScopedEnv d("HPCML_DATASETS", "/somewhere/else.h5");
    auto r = FeatureSet::Open(path);
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(r.status().message().find("not among the datasets approved"), std::string::npos);
  }
  {
    ScopedEnv z("HPCML_ZONE", "eu");
    ScopedEnv d("HPCML_DATASETS", canonical);
    auto r = FeatureSet::Open(path);
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(r.status().message().find("zone 'ae' but this job runs in zone 'eu'"),
              std::string::npos);
  }
  {
    ScopedEnv z("HPCML_ZONE", "ae");
    ScopedEnv d("HPCML_DATASETS", canonical);
    ScopedEnv c("HPCML_CLASSIFICATIONS", "public,internal");
    auto r = FeatureSet::Open(path);
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(r.status().message().find("classification 'confidential'"), std::string::npos);
  }
  {
    // A symlink does not get around the list: the canonical path is checked.
    std::filesystem::create_symlink(path, dir / "alias.h5");
    ScopedEnv z("HPCML_ZONE", "ae");
    ScopedEnv d("HPCML_DATASETS", (dir / "alias.h5") + "x");
    EXPECT_EQ(FeatureSet::Open(dir / "alias.h5").status().code(), StatusCode::kPermissionDenied);
  }
}

}  // namespace
}  // namespace hpcml::featurecache
