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
// Thread-safe: no shared state.
#pragma once

#include <string>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/model_file.hpp"

namespace hpcml::inference {

inline constexpr int kOnnxOpset = 17;

// Builds the graph, checks it with onnx::checker, and writes it to `path`
// atomically (temporary beside it, fsync, rename). InvalidArgument when the
// model's tensors do not match its config; errors name `path`.
Status ExportOnnx(const trainer::ModelFile& model, const std::string& path);

}  // namespace hpcml::inference
