#include "hpcml/trees/model_file.hpp"

#include <hdf5.h>

#include "booster_file.hpp"
#include "hpcml/common/fs.hpp"
#include "hpcml/common/h5.hpp"
#include "hpcml/common/sha256.hpp"
#include "hpcml/trees/xgb.hpp"

namespace hpcml::trees {
namespace {

bool KnownObjective(std::string_view o) {
  return o == "binary:logistic" || o == "multi:softprob" || o == "reg:squarederror";
}

}  // namespace

bool IsGbdtModelFile(const std::string& path) {
  h5::SilenceErrorPrinting();
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return false;
  h5::File file(f);
  auto format = h5::ReadStringAttr(file.get(), "format");
  return format.ok() && *format == kGbdtModelFormat;
}

Status SaveGbdtModel(const std::string& path, const GbdtModelFile& m) {
  if (!KnownObjective(m.objective)) return Internal("objective {}", m.objective);
  if (!m.lineage.input.encoding) return Internal("a GBDT model needs its input encoding");
  return WriteBoosterFile(path, kGbdtModelFormat, m.booster, [&](hid_t g) -> Status {
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "objective", m.objective, h5::StringStorage::kFixed));
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "outputs", m.outputs));
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "rounds", m.rounds));
    return h5::WriteAttr(g, "lineage", trainer::LineageJson(m.lineage));
  });
}

Result<GbdtModelFile> LoadGbdtModel(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(BoosterFile file, OpenBoosterFile(path));
  if (file.format != kGbdtModelFormat) {
    return InvalidArgument("{}: not an hpcml GBDT model (format {})", path,
                           file.format.empty() ? std::string("missing") : file.format);
  }
  const hid_t g = file.file.get();
  GbdtModelFile m;
  m.path = path;
  HPCML_ASSIGN_OR_RETURN(m.objective, h5::ReadStringAttr(g, "objective"));
  if (!KnownObjective(m.objective)) {
    return Corrupt("{}: objective \"{}\" is not one hpcml writes", path, m.objective);
  }
  HPCML_ASSIGN_OR_RETURN(m.outputs, h5::ReadIntAttr(g, "outputs"));
  HPCML_ASSIGN_OR_RETURN(m.rounds, h5::ReadIntAttr(g, "rounds"));
  HPCML_ASSIGN_OR_RETURN(m.booster, ReadBooster(g, path));
  HPCML_ASSIGN_OR_RETURN(std::string text, h5::ReadStringAttr(g, "lineage"));
  auto lineage = trainer::ParseLineageJson(text);
  if (!lineage.ok()) return lineage.status().WithContext(path);
  m.lineage = std::move(*lineage);
  if (!m.lineage.input.encoding) return Corrupt("{}: the lineage has no input encoding", path);
  const bool classifier = m.objective != "reg:squarederror";
  if (m.outputs < 1 || (classifier && m.outputs < 2) || (!classifier && m.outputs != 1)) {
    return Corrupt("{}: {} outputs for objective {}", path, m.outputs, m.objective);
  }
  HPCML_RETURN_IF_ERROR(LoadBooster(m.booster).status().WithContext(path));
  HPCML_ASSIGN_OR_RETURN(m.sha256, Sha256File(path));
  return m;
}

}  // namespace hpcml::trees
