#include "hpcml/common/text_table.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace hpcml {

std::string TextTable::Format() const {
  std::vector<std::size_t> width(headers.size());
  for (std::size_t c = 0; c < headers.size(); ++c) width[c] = headers[c].size();
  for (const auto& row : rows) {
    if (row.size() > width.size()) width.resize(row.size());
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) out += "  ";
      const bool right = c < align.size() && align[c] == Align::kRight;
      out += right ? fmt::format("{:>{}}", cells[c], width[c])
                   : fmt::format("{:<{}}", cells[c], width[c]);
    }
    out.erase(out.find_last_not_of(' ') + 1);
    return out + "\n";
  };
  std::string out = line(headers);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (r == rule_before) {
      std::size_t total = 0;
      for (std::size_t w : width) total += w;
      out += std::string(total + 2 * (width.empty() ? 0 : width.size() - 1), '-') + "\n";
    }
    out += line(rows[r]);
  }
  return out;
}

}  // namespace hpcml
