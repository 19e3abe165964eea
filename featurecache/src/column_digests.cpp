#include "column_digests.hpp"

namespace hpcml::featurecache {

void ColumnDigests::Update(Column c, const RowBlock& block) {
  sha(c).Update(block.data(c), block.bytes(c));
}

DatasetDigests ColumnDigests::Finish(bool has_labels) {
  DatasetDigests d;
  d.features = sha(Column::kX).FinishHex();
  if (has_labels) d.labels = sha(Column::kY).FinishHex();
  d.entity_ids = sha(Column::kEntity).FinishHex();
  d.timestamps = sha(Column::kTime).FinishHex();
  return d;
}

}  // namespace hpcml::featurecache
