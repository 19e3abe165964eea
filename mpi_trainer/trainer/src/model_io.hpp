// Gathering the distributed model to one rank (for the model file,
// hpcml/trainer/model_file.hpp, and the tests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/backend.hpp"
#include "hpcml/trainer/grid.hpp"
#include "hpcml/trainer/model.hpp"
#include "hpcml/trainer/model_file.hpp"

namespace hpcml::trainer {

enum class WhichTensor { kParams, kGrads };

// Collective over the grid's world (grid may be null for a single process).
// World rank 0 receives every parameter (or gradient) of the whole model in
// layer order, weight then bias, then the embedding tables; other ranks get
// an empty vector. Uses the first data-parallel replica; a replicated tensor
// comes from tensor rank 0.
Result<std::vector<FullTensor>> GatherModel(const Model& model, const ProcessGrid* grid,
                                            Backend& backend, WhichTensor which);

}  // namespace hpcml::trainer
