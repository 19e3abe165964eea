// XGBoost's C API (Debian's libxgboost-dev 1.7.4) as hpcml holds it: one
// owner per handle kind, and its error codes as Status.
#pragma once

#include <xgboost/c_api.h>

#include <string>
#include <string_view>

#include "hpcml/common/owner.hpp"
#include "hpcml/common/status.hpp"

namespace hpcml::trees {

using DMatrix = Owner<CloseWith<DMatrixHandle, XGDMatrixFree, nullptr>>;
using Booster = Owner<CloseWith<BoosterHandle, XGBoosterFree, nullptr>>;

// OK for 0; otherwise an Internal status naming `what` and XGBoost's last
// error (thread-local in the library).
Status XgbCheck(int rc, std::string_view what);

// A booster loaded from the bytes XGBoosterSaveModelToBuffer wrote (UBJSON).
Result<Booster> LoadBooster(const std::string& bytes);
// The booster as UBJSON bytes (what the model file stores).
Result<std::string> SaveBooster(BoosterHandle booster);

}  // namespace hpcml::trees
