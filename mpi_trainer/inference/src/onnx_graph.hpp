// Building ONNX graphs with Debian's libonnx (1.12) protobuf messages: the
// pieces both exporters (onnx_export.cpp for MLPs, gbdt_onnx.cpp for tree
// ensembles) use. IR version 8: what ONNX 1.12's checker knows.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "hpcml/common/status.hpp"
#include "onnx_export.hpp"

namespace hpcml::inference {

// A model with the standard opset (and ai.onnx.ml's when `ml`), hpcml as
// producer, and `doc`.
onnx::ModelProto NewOnnxModel(const std::string& doc, bool ml);
void AddMetadata(onnx::ModelProto& m, const std::string& key, const std::string& value);
// The "hpcml.inputs" metadata: each input's name, type and features.
void AddInputsMetadata(onnx::ModelProto& m, const std::vector<OnnxInput>& inputs);
// onnx::checker, then the bytes to `path` atomically (temporary beside it,
// fsync, rename). Errors say `context`.
Status CheckAndWrite(const onnx::ModelProto& m, const std::string& path,
                     const std::string& context);

// raw_data is little-endian by the ONNX spec; so is every host hpcml builds
// for (x86-64).
template <typename T>
void AddInitializer(onnx::GraphProto& g, const std::string& name,
                    const std::vector<std::int64_t>& dims, const std::vector<T>& data) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> ||
                std::is_same_v<T, std::int64_t>);
  onnx::TensorProto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(std::is_same_v<T, float>    ? onnx::TensorProto::FLOAT
                   : std::is_same_v<T, double> ? onnx::TensorProto::DOUBLE
                                               : onnx::TensorProto::INT64);
  for (std::int64_t d : dims) t->add_dims(d);
  t->set_raw_data(data.data(), data.size() * sizeof(T));
}
void AddScalar(onnx::GraphProto& g, const std::string& name, float value);
onnx::NodeProto* AddNode(onnx::GraphProto& g, const std::string& op,
                         std::initializer_list<std::string> inputs, const std::string& output);
void SetIntAttr(onnx::NodeProto* n, const std::string& name, std::int64_t v);
void SetStringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v);
void SetStringsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<std::string>& v);
void SetIntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<std::int64_t>& v);
void SetFloatAttr(onnx::NodeProto* n, const std::string& name, float v);
void SetFloatsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<float>& v);
// A [batch, cols] tensor's type on `v` (a graph input or output).
void SetMatrixType(onnx::ValueInfoProto* v, const std::string& name, std::int64_t cols,
                   onnx::TensorProto::DataType type = onnx::TensorProto::FLOAT);

}  // namespace hpcml::inference
