#include "hpcml/trees/xgb.hpp"

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

}  // namespace hpcml::trees
