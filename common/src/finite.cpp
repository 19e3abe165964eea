#include "hpcml/common/finite.hpp"

#include <cmath>
#include <cstddef>

namespace hpcml {

Status CheckFinite(std::span<const float> values, std::string_view what) {
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    if (bad++ == 0) first = i;
  }
  if (bad == 0) return Status::Ok();
  return FailedPrecondition("{} holds {} non-finite values of {} (the first, at index {}, is {})",
                            what, bad, values.size(), first, values[first]);
}

}  // namespace hpcml
