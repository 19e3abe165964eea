#include "hpcml/common/strings.hpp"

#include <gtest/gtest.h>

namespace hpcml {
namespace {

TEST(TrimBlanks, RemovesSpacesAndTabsAtBothEnds) {
  EXPECT_EQ(TrimBlanks(" \ta b\t "), "a b");
  EXPECT_EQ(TrimBlanks(" \t "), "");
  EXPECT_EQ(TrimBlanks("x\n"), "x\n");  // only blanks, not newlines
}

TEST(SplitList, TrimsItemsAndDropsEmptyOnes) {
  EXPECT_EQ(SplitList("a, ,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(SplitList(" gpu:h100 "), (std::vector<std::string>{"gpu:h100"}));
  EXPECT_TRUE(SplitList("").empty());
  EXPECT_TRUE(SplitList(",,").empty());
  EXPECT_EQ(SplitList("a|b", '|'), (std::vector<std::string>{"a", "b"}));
}

TEST(SplitFields, KeepsEveryFieldInPlace) {
  EXPECT_EQ(SplitFields("a,,b", ','), (std::vector<std::string_view>{"a", "", "b"}));
  EXPECT_EQ(SplitFields("", ','), (std::vector<std::string_view>{""}));
  EXPECT_EQ(SplitFields("a|", '|'), (std::vector<std::string_view>{"a", ""}));
}

TEST(IsWithin, IsComponentWise) {
  EXPECT_TRUE(IsWithin("/data/ae", "/data/ae"));
  EXPECT_TRUE(IsWithin("/data/ae/x.h5", "/data/ae"));
  EXPECT_TRUE(IsWithin("/data/ae/x/y", "/data"));
  EXPECT_FALSE(IsWithin("/data/aex", "/data/ae"));
  EXPECT_FALSE(IsWithin("/data", "/data/ae"));
  EXPECT_TRUE(IsWithin("/", "/"));
  EXPECT_TRUE(IsWithin("/etc/shadow", "/"));
}

TEST(FindInvalidUtf8, AcceptsWellFormedText) {
  EXPECT_EQ(FindInvalidUtf8(""), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("plain ascii"), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("\xF4\x8F\xBF\xBF"), std::nullopt);  // U+10FFFF
}

TEST(FindInvalidUtf8, NamesTheFirstMalformedByte) {
  EXPECT_EQ(FindInvalidUtf8("caf\xE9"), 3u);             // Latin-1 e-acute
  EXPECT_EQ(FindInvalidUtf8("ab\xC3"), 2u);              // truncated sequence
  EXPECT_EQ(FindInvalidUtf8("\xC0\xAF"), 0u);            // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("x\xE0\x80\xAF"), 1u);       // overlong 3-byte
  EXPECT_EQ(FindInvalidUtf8("\xED\xA0\x80"), 0u);        // surrogate U+D800
  EXPECT_EQ(FindInvalidUtf8("ok\xF4\x90\x80\x80"), 2u);  // above U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("\xE2\x82\x41"), 0u);        // bad continuation
  EXPECT_EQ(FindInvalidUtf8("\x80"), 0u);                // lone continuation
}

TEST(CsvField, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField(""), "");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
}

}  // namespace
}  // namespace hpcml
