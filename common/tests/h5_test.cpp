#include "hpcml/common/h5.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

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

}  // namespace
}  // namespace hpcml::h5
