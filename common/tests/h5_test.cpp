#include "hpcml/common/h5.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace hpcml::h5 {
namespace {

TEST(H5Owner, ClosesOnDestruction) {
  SilenceErrorPrinting();
  std::string path = fmt::format("{}/hpcml_h5_test_{}.h5",
                                 std::filesystem::temp_directory_path().string(), ::getpid());
  hid_t raw = H5I_INVALID_HID;
  {
    File f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(f.valid());
    raw = f.get();
    EXPECT_GT(H5Iis_valid(raw), 0);
    File moved = std::move(f);
    EXPECT_FALSE(f.valid());  // NOLINT: moved-from state checked on purpose
    EXPECT_EQ(moved.get(), raw);
  }
  EXPECT_LE(H5Iis_valid(raw), 0);
  std::filesystem::remove(path);
}

TEST(H5Check, ErrorNamesObjectAndCause) {
  SilenceErrorPrinting();
  hid_t bad = H5Fopen("/nonexistent/hpcml.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
  auto r = Check(bad, "/nonexistent/hpcml.h5");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_NE(r.status().message().find("/nonexistent/hpcml.h5: "), std::string::npos);
  EXPECT_GT(r.status().message().size(), std::string("/nonexistent/hpcml.h5: ").size());
}

TEST(H5Check, PassesGoodIds) {
  auto r = Check(H5P_DEFAULT, "default plist");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(CheckErr(0, "x").ok());
  EXPECT_FALSE(CheckErr(-1, "x").ok());
}

// A fresh directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "h5-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

h5::File NewFile(const std::string& path) {
  h5::SilenceErrorPrinting();
  return h5::File(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
}

TEST(H5Handle, ClosesOnceAndMoves) {
  TempDir dir;
  h5::File f = NewFile(dir / "a.h5");
  ASSERT_TRUE(f.valid());
  hid_t id = f.get();
  h5::File g(std::move(f));
  EXPECT_FALSE(f.valid());  // NOLINT: moved-from state is specified
  EXPECT_EQ(g.get(), id);
  h5::File h;
  h = std::move(g);
  EXPECT_EQ(h.get(), id);
  EXPECT_TRUE(h5::Close(h, "a.h5").ok());
  EXPECT_FALSE(h.valid());
  EXPECT_TRUE(h5::Close(h, "a.h5").ok());  // closing nothing is fine
}

TEST(H5Attr, RoundTripsEveryKind) {
  TempDir dir;
  h5::File f = NewFile(dir / "a.h5");
  ASSERT_TRUE(h5::WriteAttr(f.get(), "s", "zone-ä").ok());
  ASSERT_TRUE(h5::WriteAttr(f.get(), "l", std::vector<std::string>{"a", "", "ccc"}).ok());
  ASSERT_TRUE(h5::WriteAttr(f.get(), "e", std::vector<std::string>{}).ok());
  ASSERT_TRUE(h5::WriteAttr(f.get(), "i", int64_t{-42}).ok());
  ASSERT_TRUE(h5::WriteAttr(f.get(), "d", std::vector<double>{1.5, -2.25}).ok());
  // Replacing an attribute is allowed.
  ASSERT_TRUE(h5::WriteAttr(f.get(), "i", int64_t{7}).ok());

  EXPECT_EQ(*h5::ReadStringAttr(f.get(), "s"), "zone-ä");
  EXPECT_EQ(*h5::ReadStringListAttr(f.get(), "l"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_TRUE(h5::ReadStringListAttr(f.get(), "e")->empty());
  EXPECT_EQ(*h5::ReadIntAttr(f.get(), "i"), 7);
  EXPECT_EQ(*h5::ReadDoubleListAttr(f.get(), "d"), (std::vector<double>{1.5, -2.25}));
  EXPECT_TRUE(h5::HasAttr(f.get(), "s"));
  EXPECT_FALSE(h5::HasAttr(f.get(), "nope"));
}

TEST(H5Attr, ReadsFixedLengthStrings) {
  // h5py and other writers may use fixed-length strings.
  TempDir dir;
  h5::File f = NewFile(dir / "a.h5");
  h5::Datatype t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), 8);
  h5::Dataspace sp(H5Screate(H5S_SCALAR));
  h5::Attribute a(H5Acreate2(f.get(), "fixed", t.get(), sp.get(), H5P_DEFAULT, H5P_DEFAULT));
  char buf[8] = {'a', 'b', 'c', 0, 0, 0, 0, 0};
  ASSERT_GE(H5Awrite(a.get(), t.get(), buf), 0);
  a.reset();
  EXPECT_EQ(*h5::ReadStringAttr(f.get(), "fixed"), "abc");
}

TEST(H5Attr, WrongKindOrMissingIsAnError) {
  TempDir dir;
  h5::File f = NewFile(dir / "a.h5");
  ASSERT_TRUE(h5::WriteAttr(f.get(), "i", int64_t{1}).ok());
  auto s = h5::ReadStringAttr(f.get(), "i");
  EXPECT_EQ(s.status().code(), StatusCode::kCorrupt);
  auto m = h5::ReadIntAttr(f.get(), "missing");
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("missing"), std::string::npos);
}

TEST(H5Error, NamesContextAndHdf5Reason) {
  h5::SilenceErrorPrinting();
  hid_t id = H5Fopen("/nonexistent/dir/x.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_LT(id, 0);
  Status st = h5::Error(StatusCode::kNotFound, "/nonexistent/dir/x.h5");
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("/nonexistent/dir/x.h5: "), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("unable to open file"), std::string::npos) << st.message();
  // The stack was cleared: a second conversion has nothing to report.
  EXPECT_EQ(h5::Error(StatusCode::kInternal, "").message(), "HDF5 call failed");
}

TEST(H5Dims, OfADataset) {
  TempDir dir;
  h5::File f = NewFile(dir / "a.h5");
  hsize_t dims[2] = {3, 5};
  h5::Dataspace sp(H5Screate_simple(2, dims, nullptr));
  h5::Dataset d(
      H5Dcreate2(f.get(), "m", H5T_NATIVE_FLOAT, sp.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  auto got = h5::DatasetDims(d.get(), "m");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, (std::vector<hsize_t>{3, 5}));
}

}  // namespace
}  // namespace hpcml::h5
