// make_fcache_fixture <path> [rows]: writes a feature set for the trainer's
// end-to-end test with hpcml::featurecache's writer: 4 N(0,1) features and
// label = argmax of a fixed linear map (3 classes), zone "ae".
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hpcml/featurecache/writer.hpp"
#include "hpcml/trainer/random.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_fcache_fixture <path> [rows]\n");
    return 2;
  }
  namespace fc = hpcml::featurecache;
  const std::uint64_t rows = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 512;
  auto w = fc::FeatureSetWriter::Begin(argv[1], fc::WriterOptions{"ae", 30});
  if (!w.ok()) {
    std::fprintf(stderr, "make_fcache_fixture: %s\n", w.status().ToString().c_str());
    return 1;
  }
  fc::NewVersion spec;
  spec.feature_names = {"a", "b", "c", "d"};
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
      v[j] = hpcml::trainer::GaussianAt(5, r * 4 + static_cast<std::uint64_t>(j));
      x.push_back(static_cast<float>(v[j]));
    }
    int best = 0;
    double best_s = -1e300;
    for (int k = 0; k < 3; ++k) {
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
  hpcml::Status st = w->Append(x.data(), y.data(), e.data(), t.data(), rows);
  if (st.ok()) st = w->Commit().status();
  if (!st.ok()) {
    std::fprintf(stderr, "make_fcache_fixture: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
