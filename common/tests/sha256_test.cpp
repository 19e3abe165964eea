#include "hpcml/common/sha256.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace hpcml {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(Sha256::Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256::Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, IncrementalEqualsOneShotAndResets) {
  Sha256 h;
  h.Update("a");
  h.Update("bc");
  EXPECT_EQ(h.FinishHex(), Sha256::Hex("abc"));
  h.Update("abc");
  EXPECT_EQ(h.FinishHex(), Sha256::Hex("abc"));
}

TEST(Sha256, File) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("hpcml_sha256_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string big(3 << 20, 'x');  // more than one read buffer
  std::ofstream(dir / "f", std::ios::binary) << big;
  auto d = Sha256File(dir / "f");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, Sha256::Hex(big));
  EXPECT_EQ(Sha256File(dir / "missing").status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hpcml
