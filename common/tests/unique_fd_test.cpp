#include "hpcml/common/unique_fd.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace hpcml {
namespace {

bool IsOpen(int fd) {
  return ::fcntl(fd, F_GETFD) != -1;
}

TEST(UniqueFd, ClosesOnDestruction) {
  int raw = -1;
  {
    auto fd = OpenFd("/dev/null", O_RDONLY);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    raw = fd->get();
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFd, MoveTransfersOwnership) {
  auto opened = OpenFd("/dev/null", O_RDONLY);
  ASSERT_TRUE(opened.ok());
  UniqueFd a = std::move(opened).value();
  int raw = a.get();
  UniqueFd b = std::move(a);
  EXPECT_FALSE(a.valid());  // NOLINT: checking moved-from state on purpose
  EXPECT_EQ(b.get(), raw);
  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(IsOpen(raw));
}

TEST(UniqueFd, ReleaseDoesNotClose) {
  auto opened = OpenFd("/dev/null", O_RDONLY);
  ASSERT_TRUE(opened.ok());
  int raw = opened->release();
  EXPECT_TRUE(IsOpen(raw));
  ::close(raw);
}

TEST(UniqueFd, CloseReportsAndInvalidates) {
  auto opened = OpenFd("/dev/null", O_RDONLY);
  ASSERT_TRUE(opened.ok());
  EXPECT_TRUE(opened->Close().ok());
  EXPECT_FALSE(opened->valid());
  EXPECT_TRUE(opened->Close().ok());  // closing an empty owner is fine
}

TEST(UniqueFd, OpenErrorNamesPath) {
  auto r = OpenFd("/nonexistent/hpcml", O_RDONLY);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/hpcml"), std::string::npos);
}

TEST(UniqueFd, OpenedWithCloexec) {
  auto r = OpenFd("/dev/null", O_RDONLY);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(::fcntl(r->get(), F_GETFD) & FD_CLOEXEC);
}

}  // namespace
}  // namespace hpcml
