// Batch scoring of a trained MLP or GBDT model on the CPU (hpcml-infer's
// core).
//
//   auto model = trainer::LoadModelFile("run/model.h5");       // Result<ModelFile>
//   auto engine = Engine::Create(*model, {.threads = 2});      // Result<unique_ptr<Engine>>
//   engine->Score(x, rows, out, Input::kRaw);  // x [rows, inputs], out [rows, outputs]
//   auto gbdt = trees::LoadGbdtModel("run/gbdt.h5");           // Result<GbdtModelFile>
//   auto trees = Engine::Create(*gbdt, {.threads = 2});        // the same interface
//
// One oneDNN matmul per layer with bias and activation fused, as the
// trainer's CPU backend runs the forward pass, but with the weights
// reordered once into oneDNN's blocked layout at creation (inference never
// changes them). Cross-entropy models give softmax probabilities, MSE models
// their values. Rows are scored independently: a row's result does not
// depend on the other rows of its batch beyond float rounding of the GEMM
// kernels. Memory: the packed weights (about the model's size) and two
// activation buffers of max_batch x the widest layer.
//
// A model with an input encoding (format hpcml-mlp-3, trainer/encoding.hpp)
// takes raw rows, one float per feature in the lineage's order: a number
// cell is its value or NaN (missing: the encoding imputes it), a category
// cell the model's code (0 to the unknown code) or NaN (missing: the unknown
// code). Score applies the recorded derive standardisation (Input::kRaw),
// then Encode, then each category's embedding row, then the layers; int8
// concerns the layers only. Other models take the first layer's input.
//
// A GBDT model (trees/model_file.hpp, src/gbdt_engine.cpp) takes the same
// raw rows as an encoded MLP; a category's unknown code and NaN are both
// missing for XGBoost, which sends them its learned default way. Its
// outputs: binary:logistic [1 - p, p], multi:softprob the class
// probabilities, reg:squarederror the value. float32 only.
//
// Not thread-safe: one thread calls Score; it runs `threads` OpenMP threads
// (set for the process when Score runs; a GBDT engine sets its booster's
// nthread instead).
#pragma once

#include <cstdint>
#include <memory>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/model_file.hpp"
#include "hpcml/trees/model_file.hpp"

namespace hpcml::inference {

// kInt8: weights quantised per output channel and activations per call to
// int8, int32 accumulation (engine.cpp), for layers of at least 65,536
// weights (smaller ones stay float32: int8 is slower there); about 1e-2
// from float32 on probabilities (docs/inference.md has the measured change).
enum class Precision { kFloat32, kInt8 };
std::string_view Name(Precision p);  // "fp32", "int8"

struct EngineOptions {
  int threads = 1;
  // Rows per internal pass; larger inputs are scored in slices of this size.
  std::int64_t max_batch = 4096;
  Precision precision = Precision::kFloat32;
};

// What the input columns hold: raw values (the model's standardisation is
// applied first, as the training derive did) or values already standardised
// exactly as the model's training version was.
enum class Input { kRaw, kStandardized };

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> Create(const trainer::ModelFile& model,
                                                const EngineOptions& options);
  // Precision::kInt8 is InvalidArgument (int8 quantises an MLP's layers).
  // The booster must take one input per feature of the encoding, and the
  // encoding's numbers must be as they are (center 0, scale 1, no
  // indicator).
  static Result<std::unique_ptr<Engine>> Create(const trees::GbdtModelFile& model,
                                                const EngineOptions& options);
  virtual ~Engine() = default;

  // Floats per input row: features for an encoded MLP or a GBDT model,
  // else the first layer's width.
  std::int64_t inputs() const { return inputs_; }
  // Layers that run in int8 (0 for Precision::kFloat32).
  virtual int int8_layers() const = 0;
  std::int64_t outputs() const { return outputs_; }

  // x: rows x inputs(), row-major; out: rows x outputs(). An encoded MLP's
  // or a GBDT model's cell that is not a code of its column, or an
  // infinite number, is InvalidArgument naming the row and column.
  virtual Status Score(const float* x, std::int64_t rows, float* out, Input input) = 0;

 protected:
  Engine(std::int64_t inputs, std::int64_t outputs) : inputs_(inputs), outputs_(outputs) {}

 private:
  std::int64_t inputs_, outputs_;
};

}  // namespace hpcml::inference
