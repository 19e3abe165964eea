// ColumnDigests: the SHA-256 of each row dataset of a new version
// (DatasetDigests, format.hpp), fed each block as it is written, so the
// digests cost no second read. Not thread-safe; one writer uses it.
#pragma once

#include <array>

#include "hpcml/common/sha256.hpp"
#include "hpcml/featurecache/format.hpp"
#include "row_block.hpp"

namespace hpcml::featurecache {

class ColumnDigests {
 public:
  // Adds column `c` of `block`, the rows that follow those added before.
  void Update(Column c, const RowBlock& block);
  // The hex digests of the rows added, the labels' only when `has_labels`,
  // int_values' only when `has_ints` (entity_keys and categories are left
  // to the caller); resets the hashes.
  DatasetDigests Finish(bool has_labels, bool has_ints = false, bool has_available = false);

 private:
  Sha256& sha(Column c) { return sha_[static_cast<size_t>(c)]; }
  std::array<Sha256, kColumnCount> sha_;  // by Column
};

}  // namespace hpcml::featurecache
