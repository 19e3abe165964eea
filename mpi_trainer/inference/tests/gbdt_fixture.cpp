// Writes gbdt_score_e2e.sh's GBDT models (tests/gbdt_models.hpp) and their
// rows:
//   <kind>/model.h5   binary, multi and regression, trained on the same rows
//   rows.csv          those rows for hpcml-infer score --csv and for
//                     hpcml-fcache ingest: id, event_time, then the features
//                     in another order than the model's (visits, colour,
//                     spend, age); colour as text ("purple", a value never
//                     seen in training, in every 23rd row), missing cells
//                     empty or NA, numbers with 9 significant digits (exact
//                     in float32)
//
//   inference_gbdt_fixture OUT_DIR [ROWS]
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "gbdt_models.hpp"
#include "hpcml/common/fs.hpp"

namespace hpcml::inference {
namespace {

using testing::GbdtKind;

// A number cell: 9 significant digits, or a missing word.
std::string Number(float v, std::int64_t row) {
  if (std::isnan(v)) return row % 2 == 0 ? "" : "NA";
  return fmt::format("{:.9g}", v);
}

std::string Colour(float v, std::int64_t row) {
  if (std::isnan(v)) return "";
  if (row % 23 == 5) return "purple";
  return testing::GbdtColours()[static_cast<size_t>(v)];
}

Status WriteRows(const std::string& path, const std::vector<float>& rows, std::int64_t n) {
  std::string csv = "id,event_time,visits,colour,spend,age\n";
  for (std::int64_t r = 0; r < n; ++r) {
    const float* x = rows.data() + r * testing::kGbdtFeatures;  // age, colour, spend, visits
    csv += fmt::format("{},{},{},{},{},{}\n", 1000 + r, 1700000000 + 60 * r, Number(x[3], r),
                       Colour(x[1], r), Number(x[2], r), Number(x[0], r));
  }
  return WriteFileAtomic(path, csv);
}

Status WriteAll(const std::string& dir, std::int64_t n) {
  std::vector<float> rows;
  for (GbdtKind kind : {GbdtKind::kBinary, GbdtKind::kMulti, GbdtKind::kRegression}) {
    const std::string sub = dir + "/" + testing::Name(kind);
    std::error_code ec;
    std::filesystem::create_directories(sub, ec);
    if (ec) return IoError("{}: {}", sub, ec.message());
    HPCML_ASSIGN_OR_RETURN(testing::GbdtCase c, testing::TrainGbdtCase(kind, n, sub + "/model.h5"));
    rows = std::move(c.rows);  // the same seed: the same rows for every kind
  }
  return WriteRows(dir + "/rows.csv", rows, n);
}

}  // namespace
}  // namespace hpcml::inference

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR [ROWS]\n", argv[0]);
    return 2;
  }
  const std::int64_t rows = argc == 3 ? std::stoll(argv[2]) : 500;
  const hpcml::Status st = hpcml::inference::WriteAll(argv[1], rows);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.Debug().c_str());
    return 1;
  }
  return 0;
}
