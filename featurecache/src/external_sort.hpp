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
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hpcml/common/parallel.hpp"
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

// The bits of a set of uint64 values that are not the same in all of them:
// [low, low + width) holds them (bits outside are equal in every value, so
// they do not change the values' order).
class VaryingBits {
 public:
  void Add(uint64_t v) {
    any_ |= v;
    all_ &= v;
  }
  unsigned low() const { return vary() == 0 ? 0 : static_cast<unsigned>(std::countr_zero(vary())); }
  unsigned width() const {
    return vary() == 0 ? 0 : static_cast<unsigned>(std::bit_width(vary())) - low();
  }
  // v's varying bits, shifted down to bit 0.
  uint64_t Bits(uint64_t v) const {
    const unsigned w = width();
    return w == 0 ? 0 : (v >> low()) & (w == 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1);
  }

 private:
  uint64_t vary() const { return any_ ^ all_; }
  uint64_t any_ = 0, all_ = ~uint64_t{0};
};

// Sorts `keys` (unsigned integers: uint64_t or unsigned __int128) in
// ascending order; only their low `bits` bits may be set. One pass on the
// most significant byte splits them into 256 buckets (threads count and
// scatter their parts); the threads then finish the buckets, which are
// small enough to stay in cache, with LSD passes on the lower bytes,
// skipping bytes that every key of a bucket shares. Memory while it runs:
// a second array as large as `keys`.
template <typename K>
void RadixSort(std::vector<K>& keys, unsigned bits, unsigned threads = 1);

// The order of n records by keys of kw uint64 words (compared
// lexicographically, unsigned; equal keys keep their index order), with
// key(i, words) writing record i's key. Comparisons through an order array
// cost a cache miss each, so the keys are packed into 128 bits instead,
// least significant end first: the record's index, then of each key word
// only the bits between its lowest and highest bit that differ between
// records (the others are equal in every record, so they do not change the
// order). RadixSort of those gives the order. Returns false, leaving `order` empty, when
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

namespace radix_detail {

template <typename K>
inline uint8_t Digit(K k, unsigned shift) {
  return static_cast<uint8_t>(k >> shift);
}

// Sorts src[0, m) by its low `bytes` bytes into dst (src is scratch).
template <typename K>
void Lsd(K* src, K* dst, size_t m, unsigned bytes) {
  std::vector<std::array<size_t, 256>> h(bytes);
  for (auto& c : h) c.fill(0);
  for (size_t i = 0; i < m; ++i)
    for (unsigned p = 0; p < bytes; ++p) ++h[p][Digit(src[i], 8 * p)];
  K* from = src;
  K* to = dst;
  for (unsigned p = 0; p < bytes; ++p) {
    if (std::find(h[p].begin(), h[p].end(), m) != h[p].end()) continue;
    size_t at = 0;
    for (size_t& c : h[p]) at += std::exchange(c, at);  // counts -> first positions
    for (size_t i = 0; i < m; ++i) to[h[p][Digit(from[i], 8 * p)]++] = from[i];
    std::swap(from, to);
  }
  if (from != dst) std::memcpy(dst, from, m * sizeof(K));
}

}  // namespace radix_detail

template <typename K>
void RadixSort(std::vector<K>& keys, unsigned bits, unsigned threads) {
  const size_t n = keys.size();
  if (n < 2 || bits == 0) return;
  const unsigned bytes = (bits + 7) / 8, top = 8 * (bytes - 1);
  // Small inputs are not worth a thread.
  threads = static_cast<unsigned>(std::clamp<size_t>(n / (1 << 16), 1, std::max(1u, threads)));
  std::vector<K> tmp(n);
  std::vector<std::array<size_t, 256>> pos(threads);
  ParallelFor(threads, n, [&](unsigned t, size_t b, size_t e) {
    pos[t].fill(0);
    for (size_t i = b; i < e; ++i) ++pos[t][radix_detail::Digit(keys[i], top)];
  });
  std::array<size_t, 257> start{};
  size_t at = 0;
  for (unsigned d = 0; d < 256; ++d) {
    start[d] = at;
    for (auto& c : pos) at += std::exchange(c[d], at);  // bucket-major, then by part
  }
  start[256] = n;
  ParallelFor(threads, n, [&](unsigned t, size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) tmp[pos[t][radix_detail::Digit(keys[i], top)]++] = keys[i];
  });
  std::atomic<unsigned> next{0};
  ParallelFor(threads, threads, [&](unsigned, size_t, size_t) {
    for (unsigned d; (d = next++) < 256;) {
      const size_t m = start[d + 1] - start[d];
      if (m > 0) radix_detail::Lsd(tmp.data() + start[d], keys.data() + start[d], m, bytes - 1);
    }
  });
}

template <typename KeyFn>
bool RadixOrder(size_t n, size_t kw, KeyFn key, std::vector<uint32_t>* order) {
  __extension__ typedef unsigned __int128 U128;
  order->clear();
  if (n < 2) {
    order->assign(n, 0);
    return true;
  }
  std::vector<uint64_t> words(kw);
  std::vector<VaryingBits> vary(kw);
  for (size_t i = 0; i < n; ++i) {
    key(i, words.data());
    for (size_t w = 0; w < kw; ++w) vary[w].Add(words[w]);
  }
  const auto index_bits = static_cast<unsigned>(std::bit_width(n - 1));
  unsigned bits = index_bits;
  for (const VaryingBits& v : vary) bits += v.width();
  if (bits > 128) return false;
  std::vector<U128> a(n);
  for (size_t i = 0; i < n; ++i) {
    key(i, words.data());
    U128 k = 0;
    for (size_t w = 0; w < kw; ++w) k = (k << vary[w].width()) | vary[w].Bits(words[w]);
    a[i] = (k << index_bits) | i;
  }
  RadixSort(a, bits);
  const U128 index_mask = (U128{1} << index_bits) - 1;
  order->resize(n);
  for (size_t i = 0; i < n; ++i) (*order)[i] = static_cast<uint32_t>(a[i] & index_mask);
  return true;
}

}  // namespace hpcml::featurecache
