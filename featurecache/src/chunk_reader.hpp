// Reads row ranges of one float32 dataset of a version (features: rows x F;
// labels: rows) for the loader.
//
// Direct mode, the fast path: at open, the chunk index is read once through
// HDF5 (H5Dget_chunk_info_by_coord: file address, stored size, filter mask of
// every chunk); afterwards rows are read with pread(2) on a duplicate of
// HDF5's own descriptor (so it is the same inode the version was opened
// from), without taking HDF5's global lock. Uncompressed chunks are read
// straight into the destination; deflate (+ byte shuffle) chunks are read
// raw and decoded with zlib by the calling thread, so several loader threads
// decode in parallel. Versions are immutable and a writer never modifies a
// published file, so the index cannot go stale.
//
// HDF5 mode (any other filter pipeline, a non-sec2 driver, unallocated
// chunks, or when asked): H5Dread of the row range.
//
// Read() is thread-safe; each thread passes its own Scratch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "hpcml/featurecache/feature_set.hpp"

namespace hpcml::featurecache {

struct ChunkScratch {
  std::vector<uint8_t> raw;
  std::vector<uint8_t> inflated;
  std::vector<uint8_t> decoded;
  const void* owner = nullptr;  // reader whose chunk `decoded` holds
  int64_t chunk = -1;
};

class ChunkReader {
 public:
  // `width` = features per row (1 for labels). allow_direct=false forces HDF5 mode.
  static Result<ChunkReader> Open(const VersionReader& version, hid_t dset, uint64_t width,
                                  const char* name, bool allow_direct);

  bool direct() const { return direct_; }
  bool compressed() const { return filtered_; }
  uint64_t chunk_rows() const { return chunk_rows_; }
  uint64_t width() const { return width_; }
  // File offset of `row` for uncompressed direct reads (0 otherwise): lets
  // the loader align its buffers with the file (faster copies).
  uint64_t FileOffset(uint64_t row) const;

  // Rows [row, row + count) into dst (count * width floats, contiguous).
  Status Read(uint64_t row, uint64_t count, float* dst, ChunkScratch* scratch) const;

 private:
  struct Loc {
    uint64_t addr;
    uint64_t size;
    uint32_t mask;
  };
  // Steps of Open towards direct reads; each false (or an error) when this
  // reader must stay in HDF5 mode.
  bool ReadFilters(hid_t dcpl);
  Result<bool> DupFileDescriptor(const VersionReader& version);
  Result<bool> LocateChunks(hid_t file);
  Status CheckDirectReads();

  Status ReadHdf5(uint64_t row, uint64_t count, float* dst) const;
  Status PreadAll(void* dst, uint64_t size, uint64_t offset) const;
  // Decodes chunk `chunk` into s->decoded (kept: the next read of the same
  // chunk is free), or straight into `dst` (chunk_rows x width values).
  Status Decode(uint64_t chunk, ChunkScratch* s) const;
  Status DecodeInto(uint64_t chunk, uint8_t* dst, ChunkScratch* s) const;

  const VersionReader* version_ = nullptr;
  hid_t dset_ = -1;
  std::string what_;
  uint64_t rows_ = 0, width_ = 1, chunk_rows_ = 1, row_bytes_ = 4;
  int rank_ = 1;
  bool direct_ = false;
  bool filtered_ = false;
  bool shuffle_ = false;  // byte shuffle in the pipeline
  int shuffle_index_ = -1, deflate_index_ = -1, blosc_index_ = -1;
  std::vector<Loc> locs_;
  UniqueFd fd_;
};

}  // namespace hpcml::featurecache
