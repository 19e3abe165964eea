// TOML files read by hpcml (the guard's policy, the feature store's rules,
// the accounting's prices): toml++'s parse with its syntax error in the one
// shape every hpcml error has, "<source>:<line>: ...". Header-only, so each
// user links toml++ as it already does (the guard's plugin header-only, the
// tools the shared library).
#pragma once

#include <string_view>

#include <toml++/toml.h>

#include "hpcml/common/status.hpp"

namespace hpcml {

inline Result<toml::table> ParseToml(std::string_view text, std::string_view source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return InvalidArgument("{}:{}: TOML syntax error: {}", source, e.source().begin.line,
                           e.description());
  }
}

}  // namespace hpcml
