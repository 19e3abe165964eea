// Writes the ONNX tests' cases for onnx_ort_check.py, one folder each:
//   model.onnx        the export
//   model.json        dims, activation, loss, standardisation (doubles)
//   layer<i>.weight.f32, layer<i>.bias.f32   the tensors, raw float32
//   rows.f32          raw input rows, float32 [rows, inputs]
// and for an encoded model (format 3) its raw inputs as the graph takes them:
//   numbers.f32       the number features, float32 [rows, numbers] (NaN: missing)
//   strings.json      {"<graph input>": [value per row], ...} per category
//                     ("": missing; "never kept": a value the model did not keep)
//   model.h5          the model file itself (the export and the engine read it)
//   rows.csv          the same rows for hpcml-infer score --csv: an id column,
//                     the features in reverse order, categories as text,
//                     missing cells empty or NA, bools as true/false
// model.json then also has the encoding, the graph's inputs and the class
// names. rows.f32 holds the engine's raw rows: category codes, NaN.
// The checker scores the inputs in ONNX Runtime and compares every
// scores.<source>.f32 it finds with its numpy reference: a scorer added
// here (the C++ Engine) writes its own scores.<name>.f32 beside them.
//
//   inference_onnx_fixture OUT_DIR [ROWS]
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

#include "hpcml/common/fs.hpp"
#include "hpcml/featurecache/csv.hpp"
#include "hpcml/inference/engine.hpp"
#include "onnx_export.hpp"
#include "test_models.hpp"

namespace hpcml::inference {
namespace {

namespace fc = hpcml::featurecache;

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
  if (model.lineage && model.lineage->input.encoding) {
    j["encoding"] = nlohmann::json::parse(trainer::EncodingJson(*model.lineage->input.encoding));
    j["label_classes"] = model.lineage->input.label_classes;
    j["inputs"] = nlohmann::json::array();
    for (const OnnxInput& i : OnnxInputs(model)) {
      j["inputs"].push_back({{"name", i.name}, {"features", i.features}, {"text", i.text}});
    }
  }
  return j;
}

// The encoded model's raw rows `x` as the graph's inputs and as a CSV.
Status WriteRawInputs(const trainer::ModelFile& model, const std::vector<float>& x,
                      std::int64_t rows, const std::string& dir) {
  const trainer::InputEncoding& enc = *model.lineage->input.encoding;
  const size_t f = enc.columns.size();
  std::vector<float> numbers;
  nlohmann::json strings = nlohmann::json::object();
  const std::vector<OnnxInput> inputs = OnnxInputs(model);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < f; ++j) {
      const float v = x[static_cast<size_t>(r) * f + j];
      if (!enc.columns[j].category()) {
        numbers.push_back(v);
        continue;
      }
      for (const OnnxInput& i : inputs)
        if (i.text && i.features.front() == enc.columns[j].name)
          strings[i.name].push_back(testing::CategoryText(enc.columns[j], v));
    }
  }
  if (!numbers.empty()) HPCML_RETURN_IF_ERROR(WriteFloats(dir + "/numbers.f32", numbers));
  HPCML_RETURN_IF_ERROR(WriteFileAtomic(dir + "/strings.json", strings.dump() + "\n"));
  std::string csv;
  for (size_t k = 0; k < f; ++k) {
    csv += fc::CsvQuote(enc.columns[f - 1 - k].name) + ",";
    if (k == 0) csv += "id,";
  }
  csv.back() = '\n';
  for (std::int64_t r = 0; r < rows; ++r) {
    for (size_t k = 0; k < f; ++k) {
      const trainer::ColumnEncoding& c = enc.columns[f - 1 - k];
      const float v = x[static_cast<size_t>(r) * f + (f - 1 - k)];
      if (c.category()) {
        csv += fc::CsvQuote(testing::CategoryText(c, v));
      } else if (std::isnan(v)) {
        csv += r % 2 == 0 ? "" : "NA";
      } else if (c.kind == "bool") {
        csv += v != 0.0f ? "true" : "false";
      } else {
        csv += fmt::format("{:.9g}", v);
      }
      csv += ",";
      if (k == 0) csv += fmt::format("{},", r);
    }
    csv.back() = '\n';
  }
  return WriteFileAtomic(dir + "/rows.csv", csv);
}

Status WriteCase(const testing::TestCase& tc, const std::string& root, std::int64_t rows) {
  const std::string dir = root + "/" + tc.name;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("{}: {}", dir, ec.message());
  trainer::ModelFile model;
  if (tc.encoding) {
    HPCML_ASSIGN_OR_RETURN(model, testing::WriteModel(tc, dir + "/model.h5"));
  } else {
    model = testing::MakeModel(tc);
  }
  HPCML_RETURN_IF_ERROR(ExportOnnx(model, dir + "/model.onnx"));
  for (const trainer::FullTensor& t : model.tensors)
    HPCML_RETURN_IF_ERROR(WriteFloats(dir + "/" + t.name + ".f32", t.data));
  const std::vector<float> x = testing::MakeRows(model, rows, 7);
  HPCML_RETURN_IF_ERROR(WriteFloats(dir + "/rows.f32", x));
  if (tc.encoding) HPCML_RETURN_IF_ERROR(WriteRawInputs(model, x, rows, dir));
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
