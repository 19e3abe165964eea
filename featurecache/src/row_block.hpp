// RowBlock: the rows appended to a new version since they were last written,
// held by column until they fill a block of whole chunks, about 4 MiB of
// features: the writer writes whole chunks, and each column in one call.
// Column names a version's row datasets (format.hpp) for the block, the
// version file (VersionFile) and the digests (ColumnDigests).
// Not thread-safe; one writer uses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hpcml::featurecache {

// The row datasets by the names of Append's arguments: x (features, rows x
// features), y (labels), entity ids, timestamps, and the exact values of
// the int features (rows x int features; format.hpp).
enum class Column { kX, kY, kEntity, kTime, kInt, kAvailable };
inline constexpr size_t kColumnCount = 6;

class RowBlock {
 public:
  RowBlock() = default;
  // `features` per row, `int_features` of them with exact values, chunks of
  // `chunk_rows`; labels when `labels`.
  RowBlock(uint64_t features, uint64_t int_features, uint64_t chunk_rows, bool labels,
           bool available = false);

  // Copies rows [from, from + n) of the caller's arrays (x: rows x features,
  // row-major; y null without labels; ints: rows x int features, null
  // without them) up to the room left; returns how many rows it took.
  uint64_t Take(const float* x, const float* y, const int64_t* entity_ids,
                const int64_t* timestamps, const int64_t* ints, const int64_t* available,
                uint64_t from, uint64_t n);

  uint64_t rows() const { return rows_; }
  bool empty() const { return rows_ == 0; }
  bool full() const { return rows_ == block_rows_; }
  void Clear() { rows_ = 0; }

  const float* features() const { return x_.data(); }
  const float* labels() const { return has_labels_ ? y_.data() : nullptr; }
  const int64_t* entity_ids() const { return e_.data(); }
  // The held rows of column `c` and their size in bytes (labels: only
  // with labels).
  const void* data(Column c) const;
  size_t bytes(Column c) const;

 private:
  uint64_t features_ = 0;
  uint64_t int_features_ = 0;
  uint64_t block_rows_ = 0;
  bool has_labels_ = false;
  bool has_available_ = false;
  uint64_t rows_ = 0;
  std::vector<float> x_, y_;
  std::vector<int64_t> e_, t_, i_, a_;
};

}  // namespace hpcml::featurecache
