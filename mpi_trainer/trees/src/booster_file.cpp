#include "booster_file.hpp"

#include <hdf5.h>

#include "hpcml/common/sha256.hpp"

namespace hpcml::trees {

Status WriteBoosterFile(const std::string& path, const char* format, const std::string& booster,
                        const std::function<Status(hid_t)>& attrs) {
  return h5::WriteFileWhole(path, [&](hid_t g) -> Status {
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "format", format, h5::StringStorage::kFixed));
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "booster_sha256", Sha256::Hex(booster)));
    HPCML_RETURN_IF_ERROR(h5::WriteBytes(g, "booster", booster, path + ": /booster"));
    return attrs(g);
  });
}

Result<BoosterFile> OpenBoosterFile(const std::string& path) {
  h5::SilenceErrorPrinting();
  HPCML_ASSIGN_OR_RETURN(hid_t f, h5::Check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                            fmt::format("{}: cannot open", path)));
  BoosterFile b{h5::File(f), ""};
  auto format = h5::ReadStringAttr(b.file.get(), "format");
  if (format.ok()) b.format = std::move(*format);
  return b;
}

Result<std::string> ReadBooster(hid_t file, const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(std::string booster, h5::ReadBytes(file, "booster", path + ": /booster"));
  HPCML_ASSIGN_OR_RETURN(std::string digest, h5::ReadStringAttr(file, "booster_sha256"));
  if (digest != Sha256::Hex(booster)) {
    return Corrupt("{}: /booster does not match its booster_sha256", path);
  }
  return booster;
}

}  // namespace hpcml::trees
