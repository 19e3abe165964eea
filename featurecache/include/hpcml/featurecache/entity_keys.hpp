// String entity keys (account numbers, UUIDs), and the values of categorical
// columns (format.hpp), dictionary-encoded: for entities so that
// every join, sort and reader keeps working on int64 entities: a version with
// entity_type "string" stores in entity_ids the code of each row's key (0 to
// K-1, in order of first appearance) and the K keys in entity_keys, fixed-
// length null-padded UTF-8: row i's key is entity_keys[entity_ids[i]] (with
// h5py: keys[ids]). Codes mean something only beside their version's keys.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::featurecache {

// A key or category: 1 to kMaxEntityKeyBytes bytes, no NUL (the padding).
inline constexpr size_t kMaxEntityKeyBytes = 256;
Status ValidateEntityKey(std::string_view key);

// Strings <-> codes 0..K-1 in order of first appearance: entity keys, and
// each categorical column's categories.
class StringDictionary {
 public:
  StringDictionary() = default;
  explicit StringDictionary(std::vector<std::string> keys);  // codes 0..K-1 as given

  // The code of `key`, which is added when new; InvalidArgument when it is
  // not a valid key.
  Result<int64_t> Encode(std::string_view key);
  // The code of `key`, or -1.
  int64_t Find(std::string_view key) const;
  const std::vector<std::string>& keys() const { return keys_; }
  size_t size() const { return keys_.size(); }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> keys_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> index_;
};

// The text of entity `id`: keys[id] for a string-keyed version (`keys` not
// empty), else the integer.
std::string EntityText(int64_t id, const std::vector<std::string>& keys);

}  // namespace hpcml::featurecache
