#include "tres.hpp"

#include <cmath>

#include "hpcml/common/gpu_tres.hpp"
#include "hpcml/common/strings.hpp"
#include "numbers.hpp"

namespace hpcml::accounting {

namespace {

bool ParseNumber(std::string_view text, double* out) {
  return ParseFiniteDouble(text, out) && *out >= 0;
}

}  // namespace

double Tres::gpu_total() const {
  double total = 0;
  for (const auto& g : gpus) total += g.second;
  return total;
}

double Tres::gpus_of(std::string_view type) const {
  for (const auto& g : gpus) {
    if (g.first == type) return g.second;
  }
  return 0;
}

Result<double> ParseMemoryMiB(std::string_view text) {
  if (text.empty()) return InvalidArgument("empty memory amount");
  double scale = 1;  // MiB
  std::string_view number = text;
  switch (text.back()) {
    case 'K':
    case 'k':
      scale = 1.0 / 1024;
      break;
    case 'M':
    case 'm':
      scale = 1;
      break;
    case 'G':
    case 'g':
      scale = 1024;
      break;
    case 'T':
    case 't':
      scale = 1024.0 * 1024;
      break;
    case 'P':
    case 'p':
      scale = 1024.0 * 1024 * 1024;
      break;
    default:
      if (text.back() < '0' || text.back() > '9') {
        return InvalidArgument("memory amount '{}': unknown unit '{}' (expected K, M, G, T or P)",
                               text, text.back());
      }
      break;
  }
  if (text.back() < '0' || text.back() > '9') number.remove_suffix(1);
  double value = 0;
  if (!ParseNumber(number, &value))
    return InvalidArgument("memory amount '{}' is not a number", text);
  return value * scale;
}

Result<Tres> ParseTres(std::string_view text) {
  Tres tres;
  GpuTres gpus;
  for (const std::string& item : SplitList(text)) {
    std::string_view entry = item;
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return InvalidArgument("TRES entry '{}' is not name=count", entry);
    }
    std::string_view name = entry.substr(0, eq);
    std::string_view value = entry.substr(eq + 1);
    if (name == "mem") {
      Result<double> mib = ParseMemoryMiB(value);
      if (!mib.ok()) return InvalidArgument("TRES entry '{}': {}", entry, mib.status().message());
      tres.mem_mib = *mib;
      continue;
    }
    double count = 0;
    if (!ParseNumber(value, &count)) {
      return InvalidArgument("TRES entry '{}': count '{}' is not a non-negative number", entry,
                             value);
    }
    if (name == "cpu") {
      tres.cpus = count;
    } else if (name == "billing") {
      tres.billing = count;
    } else if (name == "node") {
      tres.nodes = count;
    } else {
      // GPU entries; others (energy, licenses, other GRES) are not priced.
      HPCML_RETURN_IF_ERROR(gpus.Add(name, count).status());
    }
  }
  // GpuTres's rule (shared with the guard): each type, then the GPUs the
  // types do not account for, under the empty type.
  tres.gpus = gpus.typed;
  if (gpus.of_no_type() > 0) tres.gpus.emplace_back(std::string(), gpus.of_no_type());
  return tres;
}

}  // namespace hpcml::accounting
