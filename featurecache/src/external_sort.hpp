// External merge sort of fixed-size records, for joins over more rows than
// memory should hold. A record is `key_words` uint64 keys (compared
// lexicographically, unsigned) followed by `payload_bytes` opaque bytes.
// Records are buffered up to the memory budget, sorted, and spilled as runs to
// anonymous temporary files (O_TMPFILE: nothing is left behind, even after a
// crash); Finish() then merges the runs on the fly. Memory use is about the
// budget while adding and at most the budget while merging, independent of the
// number of records. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::featurecache {

// Maps int64 to uint64 preserving order (flip the sign bit).
inline uint64_t OrderedKey(int64_t v) {
  return static_cast<uint64_t>(v) ^ (uint64_t{1} << 63);
}
inline int64_t FromOrderedKey(uint64_t k) {
  return static_cast<int64_t>(k ^ (uint64_t{1} << 63));
}

class ExternalSorter {
 public:
  ExternalSorter(size_t key_words, size_t payload_bytes, uint64_t memory_bytes, std::string tmpdir);
  ~ExternalSorter();
  ExternalSorter(const ExternalSorter&) = delete;
  ExternalSorter& operator=(const ExternalSorter&) = delete;

  Status Add(const uint64_t* key, const void* payload);
  // Ends the adding phase.
  Status Finish();
  // The next record in key order; false at the end. Pointers stay valid
  // until the next call.
  Result<bool> Next(const uint64_t** key, const uint8_t** payload);

  uint64_t count() const { return count_; }
  size_t runs() const { return runs_.size(); }
  size_t record_bytes() const { return rec_; }

 private:
  __extension__ typedef unsigned __int128 U128;  // SortBuffer's packed keys
  struct Run;
  bool Less(const uint8_t* a, const uint8_t* b) const;
  Status SortBuffer();
  Status Spill();
  Result<bool> Advance(Run& r) const;
  void Emit(const uint8_t* rec, const uint64_t** key, const uint8_t** payload);

  size_t kw_, pb_, rec_;
  uint64_t budget_;
  std::string tmpdir_;
  std::vector<uint8_t> buf_;
  std::vector<uint32_t> order_;
  size_t capacity_ = 0;  // records per in-memory run
  size_t n_ = 0;         // records in buf_
  uint64_t count_ = 0;
  bool finished_ = false;
  size_t pos_ = 0;  // iteration over the in-memory run when nothing spilled
  std::vector<std::unique_ptr<Run>> runs_;
  std::vector<size_t> heap_;
  bool heap_started_ = false;
  std::vector<uint64_t> current_;  // the record returned last, word-aligned
  // Bits set in any / in every key of the buffered records, per key word.
  std::vector<uint64_t> or_, and_;
};

}  // namespace hpcml::featurecache
