// libFuzzer target: the parsers of untrusted option values (--dataset,
// --data-zone, --ml-role), plugin arguments and TRES strings. The input is
// split at NUL bytes into arguments.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> args;
  for (std::size_t pos = 0; pos <= in.size();) {
    std::size_t nul = in.find('\0', pos);
    if (nul == std::string_view::npos) nul = in.size();
    args.push_back(in.substr(pos, nul - pos));
    pos = nul + 1;
  }
  (void)hpcml::guard::ParsePluginArgs(args);
  std::vector<std::string> datasets;
  for (std::string_view a : args) {
    (void)hpcml::guard::ValidateName("--ml-role", a);
    (void)hpcml::guard::AppendDatasets(a, std::nullopt, &datasets);
    (void)hpcml::guard::AppendDatasets(a, std::string("/home/u"), &datasets);
    (void)hpcml::guard::GpusFromTres(a);
  }
  (void)hpcml::guard::JoinDatasets(datasets);
  return 0;
}
