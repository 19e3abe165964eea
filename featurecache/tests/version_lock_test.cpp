#include "version_lock.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

TEST(VersionLock, OneHolderAtATime) {
  TempDir dir;
  const std::string lock_file = dir / ".fs.h5.lock";
  auto first = VersionLock::Acquire(lock_file, "fs.h5", 0);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(first->held());

  // flock(2) locks are per open file description: a second open in this
  // process waits like another process would.
  auto second = VersionLock::Acquire(lock_file, "fs.h5", 0.05);
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(second.status().message(),
            "fs.h5: another writer holds " + lock_file + " (waited 0 s)");

  first->Release();
  EXPECT_FALSE(first->held());
  auto third = VersionLock::Acquire(lock_file, "fs.h5", 0);
  EXPECT_TRUE(third.ok());
  EXPECT_TRUE(std::filesystem::exists(lock_file)) << "the lock file is never deleted";
}

TEST(VersionLock, TheErrorNamesAnUnopenableLockFile) {
  TempDir dir;
  auto lock = VersionLock::Acquire(dir / "missing/.fs.h5.lock", "fs.h5", 0);
  ASSERT_FALSE(lock.ok());
  EXPECT_NE(lock.status().message().find("missing/.fs.h5.lock"), std::string::npos)
      << lock.status().message();
}

}  // namespace
}  // namespace hpcml::featurecache
