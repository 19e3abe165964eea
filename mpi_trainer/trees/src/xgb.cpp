#include "hpcml/trees/xgb.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace hpcml::trees {

Status XgbCheck(int rc, std::string_view what) {
  if (rc == 0) return Status::Ok();
  return Internal("XGBoost: {}: {}", what, XGBGetLastError());
}

Result<Booster> LoadBooster(const std::string& bytes) {
  BoosterHandle h = nullptr;
  HPCML_RETURN_IF_ERROR(XgbCheck(XGBoosterCreate(nullptr, 0, &h), "XGBoosterCreate"));
  Booster b(h);
  HPCML_RETURN_IF_ERROR(XgbCheck(XGBoosterLoadModelFromBuffer(b.get(), bytes.data(), bytes.size()),
                                 "loading the booster"));
  return b;
}

Result<std::string> SaveBooster(BoosterHandle booster) {
  bst_ulong n = 0;
  const char* p = nullptr;
  HPCML_RETURN_IF_ERROR(XgbCheck(
      XGBoosterSaveModelToBuffer(booster, R"({"format": "ubj"})", &n, &p), "saving the booster"));
  return std::string(p, n);
}

Result<Communicator> JoinCommunicator(const std::string& host, int port, int rank, int world) {
  const nlohmann::json config = {{"dmlc_communicator", "rabit"},
                                 {"DMLC_TRACKER_URI", host},
                                 {"DMLC_TRACKER_PORT", port},
                                 {"DMLC_TASK_ID", fmt::format("{:09d}", rank)},
                                 {"DMLC_NUM_WORKER", world}};
  HPCML_RETURN_IF_ERROR(XgbCheck(XGCommunicatorInit(config.dump().c_str()),
                                 fmt::format("joining the tracker at {}:{}", host, port)));
  Communicator joined(1);
  const int got = XGCommunicatorGetRank(), size = XGCommunicatorGetWorldSize();
  if (got != rank || size != world) {
    return Internal("XGBoost's collective made rank {} of {} rank {} of {}", rank, world, got,
                    size);
  }
  return joined;
}

}  // namespace hpcml::trees
