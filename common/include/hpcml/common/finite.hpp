// The one check that no NaN or infinity goes into a model: before a model
// file or a checkpoint is written, and before a model file is used.
#pragma once

#include <span>
#include <string_view>

#include "hpcml/common/status.hpp"

namespace hpcml {

// OK when every value is finite; else FailedPrecondition "<what> holds N
// non-finite values of M (the first, at index i, is nan)".
Status CheckFinite(std::span<const float> values, std::string_view what);

}  // namespace hpcml
