// The policy's [[datasets]] entries as one flat block of bytes: the entries
// sorted by path, an open-addressing index of the exact paths, one of the
// directories holding prefix entries, and the strings. The block has no
// pointers, so a compiled policy (policy_cache.hpp) is used where it lies,
// mapped from its file: a lookup touches a few pages and nothing is built
// per entry, so a job step's cost does not grow with the policy.
//
// Lookups return DatasetEntry views into the block; a view is valid while
// the table (or a copy of it: copies share the block) lives. Immutable and
// safe to share between threads.
#pragma once

#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::guard {

// One entry as parsed, before it enters a table.
struct DatasetSpec {
  // Normalised absolute path; for a prefix entry ("/data/ae/fraud-*" in the
  // file) the path without the '*', matched as a string prefix.
  std::string path;
  bool string_prefix = false;
  std::string zone;
  std::string classification;
  int line = 0;
};

// One entry of a table.
struct DatasetEntry {
  // For a prefix entry the path without its '*', matched as a string prefix;
  // otherwise matched as the path itself or anything below it.
  std::string_view path;
  bool string_prefix = false;
  std::string_view zone;
  std::string_view classification;
  int line = 0;             // in the policy file, for messages
  std::uint32_t index = 0;  // position in the table (path order)

  friend bool operator==(const DatasetEntry&, const DatasetEntry&) = default;
};

class DatasetTable;

// Entries [lo, hi) of a table, in path order.
class DatasetRange {
 public:
  class Iterator {
   public:
    using value_type = DatasetEntry;
    using reference = DatasetEntry;
    using pointer = void;
    using difference_type = std::ptrdiff_t;
    using iterator_category = std::input_iterator_tag;
    Iterator() = default;
    Iterator(const DatasetTable* t, std::uint32_t i) : t_(t), i_(i) {}
    DatasetEntry operator*() const;
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++i_;
      return old;
    }
    friend bool operator==(const Iterator& a, const Iterator& b) { return a.i_ == b.i_; }

   private:
    const DatasetTable* t_ = nullptr;
    std::uint32_t i_ = 0;
  };

  DatasetRange() = default;
  DatasetRange(const DatasetTable* t, std::uint32_t lo, std::uint32_t hi)
      : t_(t), lo_(lo), hi_(hi) {}
  std::size_t size() const { return hi_ - lo_; }
  bool empty() const { return hi_ == lo_; }
  DatasetEntry operator[](std::size_t i) const;
  Iterator begin() const { return {t_, lo_}; }
  Iterator end() const { return {t_, hi_}; }
  // The table positions [first(), first() + size()).
  std::uint32_t first() const { return lo_; }
  // Entry by entry.
  friend bool operator==(const DatasetRange& a, const DatasetRange& b);

 private:
  const DatasetTable* t_ = nullptr;
  std::uint32_t lo_ = 0, hi_ = 0;
};

class DatasetTable {
 public:
  DatasetTable() = default;  // no entries

  // The block for `entries` (any order; paths unique per kind, as the parser
  // checks). At most 2^31 bytes.
  static std::string Build(std::vector<DatasetSpec> entries);
  // The table in `bytes`, which `keep` keeps alive (and valid: nothing may
  // change them). Checks the head: that every section fits the block (an
  // error says what did not). Each accessor then checks what it reads (an
  // index within its section, a string within the arena), so a damaged
  // block can give wrong answers (an empty string, no entry) but never reads
  // outside it; and opening costs nothing per entry (a fresh slurmstepd opens
  // the table at every step: checking 10,000 entries up front was 0.1 ms).
  static Result<DatasetTable> Open(std::string_view bytes, std::shared_ptr<const void> keep);
  // A table over its own copy of Build(entries).
  static DatasetTable FromSpecs(std::vector<DatasetSpec> entries);

  // The block (for the compiled cache).
  std::string_view bytes() const { return bytes_; }
  std::size_t size() const { return count_; }
  DatasetRange all() const { return {this, 0, count_}; }
  DatasetEntry at(std::uint32_t i) const;
  // The path of entry i, without building the entry.
  std::string_view PathAt(std::uint32_t i) const;

  // The exact (not prefix) entry whose path is `path`.
  std::optional<DatasetEntry> Exact(std::string_view path) const;
  // The longest prefix entry in directory `dir` whose path is a string
  // prefix of `path` (a name in `dir`, or below one).
  std::optional<DatasetEntry> LongestPrefixIn(std::string_view dir, std::string_view path) const;
  // The first position whose path is not less than `path`.
  std::uint32_t LowerBound(std::string_view path) const;

  // The zones of the entries, numbered [0, zone_count()) in no set order.
  std::uint32_t zone_count() const { return zones_; }
  std::string_view ZoneName(std::uint32_t k) const;
  // The first position at or after `from` holding an entry of zone k, or
  // size(). Cost: O(log n).
  std::uint32_t NextInZone(std::uint32_t k, std::uint32_t from) const;

 private:
  // The arena's bytes [off, off + len), cut to the arena.
  std::string_view Str(std::uint32_t off, std::uint32_t len) const;

  std::shared_ptr<const void> keep_;
  std::string_view bytes_;
  std::uint32_t count_ = 0, exact_slots_ = 0, dir_slots_ = 0, dirs_ = 0, prefix_list_ = 0,
                zones_ = 0;
  std::size_t records_at_ = 0, exact_at_ = 0, dir_slots_at_ = 0, dirs_at_ = 0, prefix_list_at_ = 0,
              zones_at_ = 0, zone_list_at_ = 0, arena_at_ = 0, arena_size_ = 0;
};

}  // namespace hpcml::guard
