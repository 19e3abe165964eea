#include "hpcml/featurecache/entity_keys.hpp"

#include <fmt/format.h>

namespace hpcml::featurecache {

Status ValidateEntityKey(std::string_view key) {
  if (key.empty()) return InvalidArgument("empty key");
  if (key.size() > kMaxEntityKeyBytes)
    return InvalidArgument("\"{}...\" is {} bytes (keys and categories: at most {})",
                           key.substr(0, 32), key.size(), kMaxEntityKeyBytes);
  if (key.find('\0') != std::string_view::npos)
    return InvalidArgument("a NUL byte in a key or category");
  return Status::Ok();
}

StringDictionary::StringDictionary(std::vector<std::string> keys) : keys_(std::move(keys)) {
  index_.reserve(keys_.size());
  for (size_t i = 0; i < keys_.size(); ++i) index_.emplace(keys_[i], static_cast<int64_t>(i));
}

Result<int64_t> StringDictionary::Encode(std::string_view key) {
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  HPCML_RETURN_IF_ERROR(ValidateEntityKey(key));
  const auto code = static_cast<int64_t>(keys_.size());
  keys_.emplace_back(key);
  index_.emplace(keys_.back(), code);
  return code;
}

int64_t StringDictionary::Find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? -1 : it->second;
}

std::string EntityText(int64_t id, const std::vector<std::string>& keys) {
  if (keys.empty()) return std::to_string(id);
  if (id < 0 || static_cast<uint64_t>(id) >= keys.size()) return fmt::format("<bad code {}>", id);
  return keys[static_cast<size_t>(id)];
}

}  // namespace hpcml::featurecache
