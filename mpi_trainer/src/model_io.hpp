// Gathering the distributed model to one rank and writing it as HDF5.
//
// File layout (all float32, row-major):
//   /layer<i>/weight [out, in]     /layer<i>/bias [out]
//   root attributes: format = "hpcml-mlp-1", activation, loss,
//                    dims (int64 [layers + 1]: input, hidden..., output)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/backend.hpp"
#include "hpcml/trainer/grid.hpp"
#include "hpcml/trainer/model.hpp"

namespace hpcml::trainer {

struct FullTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

enum class WhichTensor { kParams, kGrads };

// Collective over the grid's world (grid may be null for a single process).
// World rank 0 receives every parameter (or gradient) of the whole model in
// layer order, weight then bias; other ranks get an empty vector. Uses the
// first data-parallel replica; a replicated tensor comes from tensor rank 0.
Result<std::vector<FullTensor>> GatherModel(const Model& model, const ProcessGrid* grid,
                                            Backend& backend, WhichTensor which);

// Writes gathered tensors (from GatherModel) to `path`, replacing it.
Status SaveModelHdf5(const std::string& path, const ModelConfig& config,
                     const std::vector<FullTensor>& tensors);

// Reads a file written by SaveModelHdf5 (for tests and evaluation).
Result<std::vector<FullTensor>> LoadModelHdf5(const std::string& path);

}  // namespace hpcml::trainer
