#include "column_digests.hpp"

namespace hpcml::featurecache {

void ColumnDigests::Update(Column c, const RowBlock& block) {
  sha(c).Update(block.data(c), block.bytes(c));
}

DatasetDigests ColumnDigests::Finish(bool has_labels, bool has_ints, bool has_available) {
  DatasetDigests d;
  d.features = sha(Column::kX).FinishHex();
  if (has_labels) d.labels = sha(Column::kY).FinishHex();
  d.entity_ids = sha(Column::kEntity).FinishHex();
  d.timestamps = sha(Column::kTime).FinishHex();
  if (has_ints) d.int_values = sha(Column::kInt).FinishHex();
  if (has_available) d.available_times = sha(Column::kAvailable).FinishHex();
  return d;
}

}  // namespace hpcml::featurecache
