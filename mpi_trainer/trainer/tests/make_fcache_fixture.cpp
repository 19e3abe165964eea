// make_fcache_fixture <path> [rows] [classes] [seed] [names] [poison]: writes
// a feature set for the trainer's end-to-end tests with hpcml::featurecache's
// writer: 4 N(0,1) features drawn from `seed` (default 5) and label = argmax
// of the first `classes` (2 or 3, default 3) rows of a fixed linear map, zone
// "ae"; `names` (default a,b,c,d) are the comma-separated feature names. An
// existing file gets the rows as its next version (v2, v3, ...). `poison`
// puts one bad cell in row R: nan@R or inf@R in the third feature, label@R
// a NaN label (the ingest CSV path refuses infinities; the writer does not).
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "hpcml/featurecache/writer.hpp"
#include "hpcml/trainer/random.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_fcache_fixture <path> [rows] [classes] [seed] [names]\n");
    return 2;
  }
  namespace fc = hpcml::featurecache;
  const std::uint64_t rows = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 512;
  const int classes = argc > 3 ? std::atoi(argv[3]) : 3;
  const std::uint64_t seed = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 5;
  std::vector<std::string> names;
  std::stringstream list(argc > 5 ? argv[5] : "a,b,c,d");
  for (std::string n; std::getline(list, n, ',');) names.push_back(n);
  const std::string poison = argc > 6 ? argv[6] : "";
  const auto at = poison.find('@');
  const std::string kind = poison.substr(0, at);
  const std::uint64_t bad_row =
      at == std::string::npos ? 0 : std::strtoull(poison.c_str() + at + 1, nullptr, 10);
  if (classes < 2 || classes > 3 || names.size() != 4 ||
      (!poison.empty() && (at == std::string::npos || bad_row >= rows ||
                           (kind != "nan" && kind != "inf" && kind != "label")))) {
    std::fprintf(stderr,
                 "make_fcache_fixture: 2 or 3 classes, 4 names, poison nan|inf|label@ROW\n");
    return 2;
  }
  auto w = fc::FeatureSetWriter::Begin(argv[1], fc::WriterOptions{"ae", 30});
  if (!w.ok()) {
    std::fprintf(stderr, "make_fcache_fixture: %s\n", w.status().ToString().c_str());
    return 1;
  }
  fc::NewVersion spec;
  spec.feature_names = names;
  spec.feature_types = {"float", "float", "float", "float"};
  spec.label_name = "label";
  spec.operation = "ingest";
  spec.transform = "{\"op\":\"trainer-fixture\"}";
  spec.classification = "internal";
  if (auto v = w->StartVersion(spec); !v.ok()) {
    std::fprintf(stderr, "make_fcache_fixture: %s\n", v.status().ToString().c_str());
    return 1;
  }
  const double W[3][4] = {{1.0, -0.5, 0.3, 0.0}, {-0.2, 1.0, 0.0, 0.4}, {0.1, 0.2, -1.0, 0.8}};
  std::vector<float> x, y;
  std::vector<std::int64_t> e, t;
  for (std::uint64_t r = 0; r < rows; ++r) {
    double v[4];
    for (int j = 0; j < 4; ++j) {
      v[j] = hpcml::trainer::GaussianAt(seed, r * 4 + static_cast<std::uint64_t>(j));
      x.push_back(static_cast<float>(v[j]));
    }
    int best = 0;
    double best_s = -1e300;
    for (int k = 0; k < classes; ++k) {
      double s = 0;
      for (int j = 0; j < 4; ++j) s += W[k][j] * v[j];
      if (s > best_s) {
        best_s = s;
        best = k;
      }
    }
    y.push_back(static_cast<float>(best));
    e.push_back(static_cast<std::int64_t>(r));
    t.push_back(1700000000 + static_cast<std::int64_t>(r));
  }
  if (!poison.empty()) {
    const float bad = kind == "inf" ? std::numeric_limits<float>::infinity()
                                    : std::numeric_limits<float>::quiet_NaN();
    if (kind == "label") {
      y[bad_row] = bad;
    } else {
      x[bad_row * 4 + 2] = bad;
    }
  }
  hpcml::Status st = w->Append(x.data(), y.data(), e.data(), t.data(), rows);
  if (st.ok()) st = w->Commit().status();
  if (!st.ok()) {
    std::fprintf(stderr, "make_fcache_fixture: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
