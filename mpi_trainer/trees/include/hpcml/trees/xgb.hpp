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

// XGBoost's collective (rabit, the only one Debian's 1.7 has) in this
// process: held while a distributed run trains, left (XGCommunicatorFinalize:
// the tracker hears "shutdown") when the owner goes. The handle is a token.
struct CommunicatorTraits {
  using Handle = int;
  static Handle Null() noexcept { return 0; }
  static void Close(Handle) noexcept { XGCommunicatorFinalize(); }
};
using Communicator = Owner<CommunicatorTraits>;

// Joins the collective as `rank` of `world` through the tracker at
// host:port (xgboost.tracker sorting by task id: the task id is the rank,
// zero-padded, so rabit's ranks are the caller's). Blocks until every
// worker has joined, or fails when the tracker goes away.
Result<Communicator> JoinCommunicator(const std::string& host, int port, int rank, int world);

}  // namespace hpcml::trees
