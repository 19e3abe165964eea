// A table for people to read in a terminal: each column as wide as its
// widest cell (in bytes), columns two spaces apart, no trailing blanks.
// Used by every report that prints one (hpcml-audit report, hpcml-cost).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace hpcml {

enum class Align { kLeft, kRight };

struct TextTable {
  std::vector<std::string> headers;
  std::vector<Align> align;  // per column; missing columns: kLeft
  std::vector<std::vector<std::string>> rows;
  // A rule of '-' across the table before this row (a total), if any.
  std::size_t rule_before = static_cast<std::size_t>(-1);

  // The header line, then a line per row, each ending in '\n'.
  std::string Format() const;
};

}  // namespace hpcml
