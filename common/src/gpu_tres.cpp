#include "hpcml/common/gpu_tres.hpp"

#include "hpcml/common/strings.hpp"

#include <algorithm>

namespace hpcml {

double GpuTres::total() const {
  double typed_sum = 0;
  for (const auto& t : typed) typed_sum += t.second;
  return std::max(untyped.value_or(0), typed_sum);
}

double GpuTres::of_no_type() const {
  double typed_sum = 0;
  for (const auto& t : typed) typed_sum += t.second;
  return std::max(0.0, untyped.value_or(0) - typed_sum);
}

Result<bool> GpuTres::Add(std::string_view name, double count) {
  constexpr std::string_view kGpu = "gres/gpu";
  if (name == kGpu) {
    untyped = count;
    return true;
  }
  if (!name.starts_with(kGpu) || name.size() == kGpu.size() || name[kGpu.size()] != ':')
    return false;
  std::string_view type = name.substr(kGpu.size() + 1);
  if (type.empty()) return InvalidArgument("TRES entry '{}': empty GPU type", name);
  for (auto& t : typed) {
    if (t.first == type) {
      t.second = count;
      return true;
    }
  }
  typed.emplace_back(std::string(type), count);
  return true;
}

Result<GpuTres> ParseGpuTres(std::string_view tres) {
  GpuTres out;
  for (const std::string_view entry : SplitFields(tres, ',')) {
    const std::size_t eq = entry.find('=');
    const std::string_view name = entry.substr(0, eq);
    // Only gres/gpu and gres/gpu:TYPE (not, say, a later Slurm's gres/gpumem).
    if (name != "gres/gpu" && !name.starts_with("gres/gpu:")) continue;
    const std::string_view num =
        eq == std::string_view::npos ? std::string_view() : entry.substr(eq + 1);
    if (num.empty() || num.size() > 9 ||
        num.find_first_not_of("0123456789") != std::string_view::npos)
      return InvalidArgument("malformed GPU count in TRES entry '{}'", entry);
    double v = 0;
    for (char c : num) v = v * 10 + (c - '0');
    HPCML_RETURN_IF_ERROR(out.Add(name, v).status());
  }
  return out;
}

}  // namespace hpcml
