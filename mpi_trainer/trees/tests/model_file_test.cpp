// The GBDT model file: written and read back, and refused when its booster
// does not match its digest or is not a booster.
#include "hpcml/trees/model_file.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "hpcml/trees/xgb.hpp"

namespace hpcml::trees {
namespace {

// A one-round booster on four rows of one feature.
std::string TinyBooster() {
  const std::vector<float> x{0, 1, 2, 3}, y{0, 0, 1, 1};
  DMatrixHandle d = nullptr;
  EXPECT_EQ(XGDMatrixCreateFromMat(x.data(), 4, 1, NAN, &d), 0);
  DMatrix dm(d);
  EXPECT_EQ(XGDMatrixSetFloatInfo(dm.get(), "label", y.data(), 4), 0);
  BoosterHandle b = nullptr;
  DMatrixHandle cache[] = {dm.get()};
  EXPECT_EQ(XGBoosterCreate(cache, 1, &b), 0);
  Booster booster(b);
  EXPECT_EQ(XGBoosterSetParam(b, "objective", "binary:logistic"), 0);
  EXPECT_EQ(XGBoosterUpdateOneIter(b, 0, dm.get()), 0);
  auto bytes = SaveBooster(b);
  EXPECT_TRUE(bytes.ok());
  return *bytes;
}

GbdtModelFile Model() {
  GbdtModelFile m;
  m.objective = "binary:logistic";
  m.outputs = 2;
  m.rounds = 1;
  m.booster = TinyBooster();
  m.lineage.input.feature_names = {"x"};
  trainer::InputEncoding enc;
  enc.columns = {{"x", "float", 0, 1, false, {}, 0}};
  m.lineage.input.encoding = enc;
  m.lineage.input.label_classes = {"no", "yes"};
  return m;
}

TEST(GbdtModelFile, RoundTripAndTamper) {
  const std::string path =
      std::filesystem::temp_directory_path() / ("hpcml_gbdt_" + std::to_string(getpid()) + ".h5");
  const GbdtModelFile m = Model();
  ASSERT_TRUE(SaveGbdtModel(path, m).ok());
  EXPECT_TRUE(IsGbdtModelFile(path));
  auto back = LoadGbdtModel(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->booster, m.booster);
  EXPECT_EQ(back->rounds, 1);
  EXPECT_EQ(back->lineage.input.label_classes, m.lineage.input.label_classes);
  EXPECT_EQ(back->sha256.size(), 64u);

  // One byte of the booster changed: its digest no longer matches.
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "booster", H5P_DEFAULT);
    std::string bytes = m.booster;
    bytes[bytes.size() / 2] ^= 1;
    H5Dwrite(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
    H5Dclose(d);
    H5Fclose(f);
  }
  auto bad = LoadGbdtModel(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/booster does not match its booster_sha256"),
            std::string::npos)
      << bad.status().message();

  // Bytes that are not a booster, with a matching digest: XGBoost refuses them.
  GbdtModelFile junk = m;
  junk.booster = "not a booster";
  ASSERT_TRUE(SaveGbdtModel(path, junk).ok());
  bad = LoadGbdtModel(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("loading the booster"), std::string::npos)
      << bad.status().message();
  std::filesystem::remove(path);
  EXPECT_FALSE(IsGbdtModelFile(path));
}

}  // namespace
}  // namespace hpcml::trees
