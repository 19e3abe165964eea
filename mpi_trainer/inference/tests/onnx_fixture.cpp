// Writes the ONNX tests' cases for onnx_ort_check.py, one folder each:
//   model.onnx        the export
//   model.json        dims, activation, loss, standardisation (doubles)
//   layer<i>.weight.f32, layer<i>.bias.f32   the tensors, raw float32
//   rows.f32          raw input rows, float32 [rows, inputs]
// The checker scores rows.f32 in ONNX Runtime and compares every
// scores.<source>.f32 it finds with its numpy reference: a scorer added
// here (the C++ Engine) writes its own scores.<name>.f32 beside them.
//
//   inference_onnx_fixture OUT_DIR [ROWS]
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

#include "hpcml/common/fs.hpp"
#include "hpcml/inference/engine.hpp"
#include "onnx_export.hpp"
#include "test_models.hpp"

namespace hpcml::inference {
namespace {

Status WriteFloats(const std::string& path, const std::vector<float>& v) {
  return WriteFileAtomic(
      path, std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

nlohmann::json Describe(const trainer::ModelFile& model, std::int64_t rows) {
  const trainer::ModelConfig& c = model.config;
  nlohmann::json j;
  j["activation"] = Name(c.activation);
  j["loss"] = Name(c.loss);
  std::vector<std::int64_t> dims{c.input_dim};
  dims.insert(dims.end(), c.hidden.begin(), c.hidden.end());
  dims.push_back(c.output_dim);
  j["dims"] = dims;
  j["rows"] = rows;
  j["standardized"] = nlohmann::json::array();
  if (model.lineage && model.lineage->input.any_standardized()) {
    const trainer::InputSchema& in = model.lineage->input;
    j["standardized"] = std::vector<bool>(in.standardized.begin(), in.standardized.end());
    j["mean"] = in.mean;
    j["scale"] = in.scale;
  }
  return j;
}

Status WriteCase(const testing::TestCase& tc, const std::string& root, std::int64_t rows) {
  const std::string dir = root + "/" + tc.name;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("{}: {}", dir, ec.message());
  const trainer::ModelFile model = testing::MakeModel(tc);
  HPCML_RETURN_IF_ERROR(ExportOnnx(model, dir + "/model.onnx"));
  for (const trainer::FullTensor& t : model.tensors)
    HPCML_RETURN_IF_ERROR(WriteFloats(dir + "/" + t.name + ".f32", t.data));
  const std::vector<float> x = testing::MakeRows(model, rows, 7);
  HPCML_RETURN_IF_ERROR(WriteFloats(dir + "/rows.f32", x));
  // hpcml-infer's engine on the same rows, in slices of 128 as ORT gets them.
  HPCML_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, {1, 128}));
  std::vector<float> scores(static_cast<size_t>(rows * model.config.output_dim));
  HPCML_RETURN_IF_ERROR(engine->Score(x.data(), rows, scores.data(), Input::kRaw));
  HPCML_RETURN_IF_ERROR(WriteFloats(dir + "/scores.engine.f32", scores));
  return WriteFileAtomic(dir + "/model.json", Describe(model, rows).dump(2) + "\n");
}

}  // namespace
}  // namespace hpcml::inference

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR [ROWS]\n", argv[0]);
    return 2;
  }
  const std::int64_t rows = argc == 3 ? std::stoll(argv[2]) : 1000;
  for (const auto& tc : hpcml::inference::testing::Cases()) {
    hpcml::Status st = hpcml::inference::WriteCase(tc, argv[1], rows);
    if (!st.ok()) {
      std::fprintf(stderr, "%s: %s\n", tc.name.c_str(), st.Debug().c_str());
      return 1;
    }
  }
  return 0;
}
