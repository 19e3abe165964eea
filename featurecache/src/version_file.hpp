// VersionFile: the file of the version being written, <set>.d/.vN.h5.tmp-*
// until published as <set>.d/vN.h5 (writer.hpp): its temporary name
// (TempFile) and its HDF5 handles: the file, its root group, which is the
// version, and the row datasets (features, labels when the version has
// them, entity_ids, timestamps, int_values when it has int features),
// chunked and compressed as asked.
//
// Contract: Create() once, then Write() blocks in order, the attributes,
// and Publish(); handles are closed before the name is renamed or unlinked.
// Unless published, Discard() or destruction closes the handles (errors
// ignored) and unlinks the file. Errors name the set (`set_path`) and the
// dataset ("fs.h5: write v3/features"). Not movable; used by one thread.
#pragma once

#include <sys/stat.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpcml/common/h5.hpp"
#include "hpcml/common/status.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "hpcml/featurecache/format.hpp"
#include "row_block.hpp"
#include "temp_file.hpp"

namespace hpcml::featurecache {

// The file access properties of every file a writer writes: objects
// readable by HDF5 1.8 and later (h5py, h5dump), dense attribute storage
// (long feature-name lists fit), chunks aligned to 4 KiB pages.
Result<h5::PropList> WriteFapl();

class VersionFile {
 public:
  struct Layout {
    uint64_t features = 0;
    uint64_t int_features = 0;
    uint64_t chunk_rows = 0;
    CodecChoice codec;
    bool labels = false;
    bool available = false;  // availability times
  };

  VersionFile() = default;
  ~VersionFile() { Discard(); }
  VersionFile(const VersionFile&) = delete;
  VersionFile& operator=(const VersionFile&) = delete;

  // Creates the file at temp.path() (exclusively; owner and mode of the set
  // file `published` where there is one), and the version's empty datasets.
  // The name is owned from the start, so a failure leaves nothing behind
  // once discarded.
  Status Create(TempFile temp, const std::string& set_path, const std::string& version,
                const Layout& layout, const std::optional<struct stat>& published);

  bool has_labels() const { return dataset(Column::kY).valid(); }
  bool has_ints() const { return dataset(Column::kInt).valid(); }
  bool has_available() const { return dataset(Column::kAvailable).valid(); }
  hid_t group() const { return group_.get(); }

  // Writes column `c` of `block` as rows [first, first + block.rows()).
  Status Write(Column c, const RowBlock& block, uint64_t first);
  // Writes the string dataset `name` (entity_keys, categories), each key
  // null-padded to `width` bytes, in slabs; returns its digest, also stored
  // as its "sha256" attribute.
  Result<std::string> WriteStrings(const char* name, const std::vector<std::string>& keys,
                                   size_t width);
  // Starts writing the file's dirty pages to disk, without waiting: the
  // fsync at Publish then has little left to wait for. A hint: errors are
  // ignored.
  void StartWriteback() const;
  // The row datasets' "sha256" attributes.
  Status WriteDigests(const DatasetDigests& digests);

  // Closes every handle, reporting failures (lost data), syncs the file and
  // renames it to its final name. Syncing <set>.d is the caller's.
  Status Publish();
  // Closes the handles, errors ignored.
  void CloseHandles();
  // CloseHandles(), then unlinks the file unless published; idempotent.
  void Discard();

 private:
  const h5::Dataset& dataset(Column c) const { return datasets_[static_cast<size_t>(c)]; }
  h5::Dataset& dataset(Column c) { return datasets_[static_cast<size_t>(c)]; }
  Result<h5::Dataset> CreateDataset(Column c);
  // A matrix column's width.
  uint64_t Width(Column c) const {
    return c == Column::kInt ? layout_.int_features : layout_.features;
  }
  Status SetCodec(hid_t dcpl, const char* name) const;

  std::string set_path_, version_;
  Layout layout_;
  TempFile temp_;
  h5::File file_;
  h5::Group group_;
  std::array<h5::Dataset, kColumnCount> datasets_;  // by Column
  UniqueFd writeback_;                              // the file, read-only, for StartWriteback
};

}  // namespace hpcml::featurecache
