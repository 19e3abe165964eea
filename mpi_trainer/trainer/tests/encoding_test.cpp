// The input encoding: built from a training version's kinds and statistics,
// applied to rows, and kept as JSON in the model file.
#include "hpcml/trainer/encoding.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace hpcml::trainer {
namespace {

std::vector<TrainingColumn> Columns() {
  TrainingColumn income{"income", "float", 50.0, 10.0, 90, 10, {}, {}};
  TrainingColumn state{"state", "category", 0, 0, 100, 0, {"NY", "CA", "TX", "WA"}, {60, 30, 9, 1}};
  TrainingColumn age{"age", "int", 40.0, 0.0, 100, 0, {}, {}};  // constant: unit scale
  return {income, state, age};
}

TEST(Encoding, BuildKeepsFrequentValuesAndSizesTables) {
  EncodingOptions o;
  o.min_count = 5;
  auto enc = BuildEncoding(Columns(), o);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  const ColumnEncoding& state = enc->columns[1];
  EXPECT_EQ(state.vocabulary, (std::vector<std::string>{"NY", "CA", "TX"}));  // WA is rare
  EXPECT_EQ(state.unknown(), 3);
  EXPECT_EQ(state.embed_dim, DefaultEmbedDim(4));
  EXPECT_TRUE(enc->columns[0].indicator);
  EXPECT_FALSE(enc->columns[2].indicator);
  EXPECT_EQ(enc->columns[2].scale, 1.0);
  EXPECT_EQ(enc->numbers(), 2);
  EXPECT_EQ(enc->indicators(), 1);
  EXPECT_EQ(enc->width(), 3 + state.embed_dim);
  EXPECT_EQ(enc->embeddings(), (std::vector<EmbeddingShape>{{4, state.embed_dim}}));
  EXPECT_EQ(enc->embedding_offsets(), (std::vector<std::int64_t>{3}));
}

TEST(Encoding, SizeRuleAndOverrides) {
  EXPECT_EQ(DefaultEmbedDim(2), 2);
  EXPECT_EQ(DefaultEmbedDim(10), 6);
  EXPECT_EQ(DefaultEmbedDim(1000000), 32);
  EncodingOptions o;
  o.embed_dim = 7;
  EXPECT_EQ(BuildEncoding(Columns(), o)->columns[1].embed_dim, 7);
  o.embed_dims["state"] = 3;
  EXPECT_EQ(BuildEncoding(Columns(), o)->columns[1].embed_dim, 3);
  o.embed_dims["income"] = 3;
  auto bad = BuildEncoding(Columns(), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"income\" is not a category feature"), std::string::npos)
      << bad.status().message();
}

TEST(Encoding, EncodeStandardisesImputesAndCodes) {
  auto enc = BuildEncoding(Columns(), {});
  ASSERT_TRUE(enc.ok());
  const float nan = std::nanf("");
  // income, state (codes of the encoding), age.
  const std::vector<float> raw{70.0f, 1.0f, 41.0f, nan, nan, 39.0f, 50.0f, 3.0f, 40.0f};
  std::vector<float> out(static_cast<size_t>(3 * enc->width()), -1.0f);
  ASSERT_TRUE(Encode(*enc, raw.data(), 3, out.data()).ok());
  const std::int64_t w = enc->width();
  // [income, age, income missing, state slot...]
  EXPECT_FLOAT_EQ(out[0], 2.0f);
  EXPECT_FLOAT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 1.0f);
  EXPECT_EQ(out[4], 0.0f);                           // the slot's other floats are zero
  EXPECT_EQ(out[static_cast<size_t>(w) + 0], 0.0f);  // missing income: the mean
  EXPECT_EQ(out[static_cast<size_t>(w) + 2], 1.0f);  // and its indicator
  EXPECT_EQ(out[static_cast<size_t>(w) + 3], 3.0f);  // missing state: the unknown code
  EXPECT_EQ(out[static_cast<size_t>(2 * w) + 3], 3.0f);

  const std::vector<float> inf{INFINITY, 1.0f, 40.0f};
  Status st = Encode(*enc, inf.data(), 1, out.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("column 1 (\"income\") is inf"), std::string::npos) << st.message();
  const std::vector<float> code{1.0f, 4.0f, 40.0f};  // past the unknown code
  st = Encode(*enc, code.data(), 1, out.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("(\"state\"): 4 is not a code"), std::string::npos) << st.message();
}

TEST(Encoding, CodeMapGoesByValue) {
  auto enc = BuildEncoding(Columns(), {});
  const ColumnEncoding& state = enc->columns[1];
  // Another version's dictionary: other order, a rare value, an unseen one.
  EXPECT_EQ(CodeMap(state, {"TX", "WA", "NY", "OR", "CA"}),
            (std::vector<std::int32_t>{2, 3, 0, 3, 1}));
  EXPECT_EQ(CodeOf(state, "CA"), 1);
  EXPECT_EQ(CodeOf(state, "ca"), 3);
}

TEST(Encoding, JsonRoundTripAndDigestCheck) {
  auto enc = BuildEncoding(Columns(), {});
  ASSERT_TRUE(enc.ok());
  const std::string text = EncodingJson(*enc);
  auto back = ParseEncodingJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(EncodingJson(*back), text);
  EXPECT_EQ(back->columns[1].vocabulary, enc->columns[1].vocabulary);
  // A vocabulary edited without its digest is refused.
  std::string edited = text;
  edited.replace(edited.find("\"CA\""), 4, "\"OR\"");
  auto bad = ParseEncodingJson(edited);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not match its digest"), std::string::npos);
  EXPECT_FALSE(ParseEncodingJson("{\"min_count\": 1, \"columns\": []}").ok());
}

}  // namespace
}  // namespace hpcml::trainer
