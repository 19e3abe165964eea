// External merge sort of fixed-size records, for joins over more rows than
// memory should hold. A record is `key_words` uint64 keys (compared
// lexicographically, unsigned) followed by `payload_bytes` opaque bytes.
// Records are buffered up to the memory budget, sorted, and spilled as runs to
// anonymous temporary files (O_TMPFILE: nothing is left behind, even after a
// crash); Finish() then merges the runs on the fly. Memory use is about the
// budget while adding and at most the budget while merging, independent of the
// number of records. Not thread-safe.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
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

// The order of n records by keys of kw uint64 words (compared
// lexicographically, unsigned; equal keys keep their index order), with
// key(i, words) writing record i's key. Comparisons through an order array
// cost a cache miss each, so the keys are packed into 128 bits instead,
// least significant end first: the record's index, then of each key word
// only the bits between its lowest and highest bit that differ between
// records (the others are equal in every record, so they do not change the
// order). An LSD radix sort of those, a byte a pass, skipping bytes every
// record shares, gives the order: about 13 passes for (entity, time, index)
// keys of 2 million records. Returns false, leaving `order` empty, when
// the varying bits and the index need more than 128 bits.
// Memory while it runs: 2 x 16 bytes per record, besides `order`.
template <typename KeyFn>
bool RadixOrder(size_t n, size_t kw, KeyFn key, std::vector<uint32_t>* order);

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
};

template <typename KeyFn>
bool RadixOrder(size_t n, size_t kw, KeyFn key, std::vector<uint32_t>* order) {
  __extension__ typedef unsigned __int128 U128;
  order->clear();
  if (n < 2) {
    order->assign(n, 0);
    return true;
  }
  std::vector<uint64_t> words(kw), any(kw, 0), all(kw, ~uint64_t{0});
  for (size_t i = 0; i < n; ++i) {
    key(i, words.data());
    for (size_t w = 0; w < kw; ++w) {
      any[w] |= words[w];
      all[w] &= words[w];
    }
  }
  // Each word's varying bit range [low, low + width).
  std::vector<unsigned> low(kw), width(kw);
  const auto index_bits = static_cast<unsigned>(std::bit_width(n - 1));
  unsigned bits = index_bits;
  for (size_t w = 0; w < kw; ++w) {
    const uint64_t vary = any[w] ^ all[w];
    low[w] = vary == 0 ? 0 : static_cast<unsigned>(std::countr_zero(vary));
    width[w] = vary == 0 ? 0 : static_cast<unsigned>(std::bit_width(vary)) - low[w];
    bits += width[w];
  }
  if (bits > 128) return false;
  std::vector<U128> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    key(i, words.data());
    U128 k = 0;
    for (size_t w = 0; w < kw; ++w) {
      if (width[w] == 0) continue;
      uint64_t x = words[w] >> low[w];
      if (width[w] < 64) x &= (uint64_t{1} << width[w]) - 1;
      k = (k << width[w]) | x;
    }
    a[i] = (k << index_bits) | i;
  }
  for (unsigned p = 0; p < (bits + 7) / 8; ++p) {
    std::array<uint32_t, 256> h{};
    const unsigned shift = 8 * p;
    for (const U128& k : a) ++h[static_cast<uint8_t>(k >> shift)];
    if (std::find(h.begin(), h.end(), static_cast<uint32_t>(n)) != h.end()) continue;
    uint32_t at = 0;
    for (uint32_t& c : h) at += std::exchange(c, at);  // counts -> first positions
    for (const U128& k : a) b[h[static_cast<uint8_t>(k >> shift)]++] = k;
    a.swap(b);
  }
  const U128 index_mask = (U128{1} << index_bits) - 1;
  order->resize(n);
  for (size_t i = 0; i < n; ++i) (*order)[i] = static_cast<uint32_t>(a[i] & index_mask);
  return true;
}

}  // namespace hpcml::featurecache
