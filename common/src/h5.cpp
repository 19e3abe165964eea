#include "hpcml/common/h5.hpp"

namespace hpcml::h5 {
namespace {

herr_t CollectMessage(unsigned n, const H5E_error2_t* err, void* out) {
  auto* text = static_cast<std::string*>(out);
  // The innermost (n == 0) entry is the most specific; keep the first two.
  if (n < 2 && err->desc != nullptr) {
    if (!text->empty()) text->append(": ");
    text->append(err->desc);
  }
  return 0;
}

}  // namespace

void SilenceErrorPrinting() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

std::string LastErrorText() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, CollectMessage, &text);
  return text.empty() ? "HDF5 error" : text;
}

Result<hid_t> Check(hid_t id, std::string_view what) {
  if (id >= 0) return id;
  return IoError("{}: {}", what, LastErrorText());
}

Status CheckErr(herr_t err, std::string_view what) {
  if (err >= 0) return Status::Ok();
  return IoError("{}: {}", what, LastErrorText());
}

}  // namespace hpcml::h5
