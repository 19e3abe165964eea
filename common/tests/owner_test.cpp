#include "hpcml/common/owner.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace hpcml {
namespace {

std::vector<int> closed;
int CloseInt(int h) {
  closed.push_back(h);
  return 0;
}
using IntOwner = Owner<CloseWith<int, CloseInt, -1>>;

TEST(Owner, ClosesItsHandleOnceOnDestruction) {
  closed.clear();
  {
    IntOwner a(3);
    EXPECT_TRUE(a.valid());
    EXPECT_EQ(a.get(), 3);
  }
  EXPECT_EQ(closed, std::vector<int>{3});
  {
    IntOwner none;
    EXPECT_FALSE(none);
  }
  EXPECT_EQ(closed, std::vector<int>{3});  // the null value is never closed
}

TEST(Owner, MovesOwnershipAndResetsClosesTheOldHandle) {
  closed.clear();
  IntOwner a(4);
  IntOwner b(std::move(a));
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(b.get(), 4);
  IntOwner c(5);
  c = std::move(b);  // closes 5, takes 4
  EXPECT_EQ(closed, std::vector<int>{5});
  c.reset(6);  // closes 4
  c.reset(6);  // the same handle again: not closed
  EXPECT_EQ(closed, (std::vector<int>{5, 4}));
  EXPECT_EQ(c.release(), 6);
  EXPECT_FALSE(c.valid());
  EXPECT_EQ(closed, (std::vector<int>{5, 4}));  // released: not closed
}

}  // namespace
}  // namespace hpcml
