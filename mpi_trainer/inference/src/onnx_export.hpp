// ONNX export of a trained MLP, for scoring outside hpcml (ONNX Runtime,
// OpenVINO). docs/inference.md describes the graph.
//
// The graph takes raw feature rows, "features" float [batch, inputs]: when
// the model's lineage standardised columns, (x - mean) / scale comes first,
// in double and rounded to float as the training derive did (Cast, Sub, Div,
// Cast; identity 0/1 for the other columns). Then one Gemm per layer, the
// model's activation between layers, and for cross-entropy models a Softmax:
// output "probabilities" [batch, classes]; MSE models output "predictions"
// [batch, targets]. Opset 17, IR version 8 (ONNX 1.12). The lineage JSON and
// the model file's SHA-256 are in the metadata.
//
// A model with an input encoding (trainer/encoding.hpp) takes raw inputs
// instead (OnnxInputs): "numbers" float [batch, number features] (NaN:
// missing) and one string input [batch, 1] per category feature. Inside:
// the derive's standardisation of the numbers as above, then the encoding's
// (x - center) / scale in double, 0 where IsNaN, the missing indicators;
// each category's value to its code with ai.onnx.ml's LabelEncoder (opset
// 3, the newest ONNX 1.12 knows; any value not kept is the unknown code, so
// "" stands for a missing cell) and its embedding row by Gather; Concat in
// the encoded row's order; then the layers as above. The metadata's "hpcml.inputs"
// lists the inputs and their features.
//
// Thread-safe: no shared state.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/encoding.hpp"
#include "hpcml/trainer/model_file.hpp"
#include "hpcml/trees/model_file.hpp"

namespace hpcml::inference {

inline constexpr int kOnnxOpset = 17;
inline constexpr const char* kOnnxMlDomain = "ai.onnx.ml";
inline constexpr int kOnnxMlOpset = 3;

// One graph input and the model features it carries.
struct OnnxInput {
  std::string name;
  std::vector<std::string> features;  // in order (empty: a model without names)
  bool text = false;                  // string [batch, 1]; else float [batch, features]
};

// The inputs of a model whose rows are encoded (trainer/encoding.hpp):
// "numbers" float [batch, number features] (when it has any), then one
// string [batch, 1] per category feature, named after it: each character
// outside [A-Za-z0-9_] becomes '_', a leading digit (or an empty name) gets
// a '_' in front, and a name in `taken` (the graph's own values) or of an
// earlier input gets _2, _3, ...
std::vector<OnnxInput> EncodedInputs(const trainer::InputEncoding& enc,
                                     std::set<std::string> taken);

// The graph's inputs, in order: "features" for a model without an encoding;
// for an encoded one "numbers" (when it has number features), then one per
// category feature, named after it: each character outside [A-Za-z0-9_]
// becomes '_', a leading digit (or an empty name) gets a '_' in front, and
// a name already taken (by an earlier input or one of the graph's own
// values: features, numbers, standardized, one, half, ...) gets _2, _3, ...
std::vector<OnnxInput> OnnxInputs(const trainer::ModelFile& model);

// Builds the graph, checks it with onnx::checker, and writes it to `path`
// atomically (temporary beside it, fsync, rename). InvalidArgument when the
// model's tensors do not match its config; errors name `path`.
Status ExportOnnx(const trainer::ModelFile& model, const std::string& path);

// A GBDT model (trees/model_file.hpp) as ai.onnx.ml's tree ensemble
// (gbdt_onnx.cpp; docs/inference.md describes the graph): the same inputs
// as an encoded MLP ("numbers", one string input per category feature,
// GbdtOnnxInputs), each category's value to its vocabulary index by
// LabelEncoder (anything else, "" included, missing), Concat and Gather into
// XGBoost's feature order, then TreeEnsembleClassifier ("label" int64,
// "probabilities" float [batch, classes]) or TreeEnsembleRegressor
// ("predictions" [batch, 1]). XGBoost's categorical splits become chains of
// BRANCH_EQ nodes (ONNX 1.12 has no set membership), the subtree they lead
// to repeated for each category of the set.
std::vector<OnnxInput> GbdtOnnxInputs(const trees::GbdtModelFile& model);
Status ExportGbdtOnnx(const trees::GbdtModelFile& model, const std::string& path);

}  // namespace hpcml::inference
