#include "hpcml/common/json.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hpcml {
namespace {

TEST(JsonText, WritesValidTextUnchanged) {
  nlohmann::json j = {{"user", "caf\xC3\xA9"}, {"n", 2}};
  EXPECT_EQ(JsonText(j), R"({"n":2,"user":"café"})");
  EXPECT_EQ(JsonText(nlohmann::json{{"a", 1}}, 2), "{\n  \"a\": 1\n}");
}

TEST(JsonText, ReplacesMalformedBytesInsteadOfThrowing) {
  nlohmann::json j = {{"comment", "job \xFF of \xE9t\xE9"}};
  // nlohmann's own dump() throws type_error 316 here.
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);
  const std::string text = JsonText(j);
  EXPECT_EQ(text, "{\"comment\":\"job \xEF\xBF\xBD of \xEF\xBF\xBDt\xEF\xBF\xBD\"}");
  EXPECT_EQ(nlohmann::json::parse(text).at("comment"), "job \uFFFD of \uFFFDt\uFFFD");
}

TEST(JsonText, OrderedJsonKeepsKeyOrderAndReplacesMalformedBytes) {
  nlohmann::ordered_json j;
  j["z"] = "a\xFF";
  j["a"] = 1;
  EXPECT_EQ(JsonText(j), "{\"z\":\"a\xEF\xBF\xBD\",\"a\":1}");
}

}  // namespace
}  // namespace hpcml
