#include "hpcml/common/text_table.hpp"

#include <gtest/gtest.h>

namespace hpcml {
namespace {

TEST(TextTable, PadsEachColumnToItsWidestCell) {
  TextTable t;
  t.headers = {"user", "reason"};
  t.rows = {{"alice", "ok"}, {"bo", "a longer reason"}};
  EXPECT_EQ(t.Format(),
            "user   reason\n"
            "alice  ok\n"
            "bo     a longer reason\n");
}

TEST(TextTable, AlignsNumbersRightAndRulesBeforeATotal) {
  TextTable t;
  t.headers = {"account", "cost"};
  t.align = {Align::kLeft, Align::kRight};
  t.rows = {{"ml", "12.50"}, {"finance", "3.00"}, {"TOTAL", "15.50"}};
  t.rule_before = 2;
  EXPECT_EQ(t.Format(),
            "account   cost\n"
            "ml       12.50\n"
            "finance   3.00\n"
            "--------------\n"
            "TOTAL    15.50\n");
}

TEST(TextTable, AnEmptyTableIsItsHeader) {
  TextTable t;
  t.headers = {"a", "b"};
  EXPECT_EQ(t.Format(), "a  b\n");
}

}  // namespace
}  // namespace hpcml
