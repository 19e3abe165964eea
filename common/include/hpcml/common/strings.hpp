// Text helpers every library shares: one rule for blanks, lists and UTF-8.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpcml {

// `s` without leading and trailing spaces and tabs.
std::string_view TrimBlanks(std::string_view s);

// The items of a `sep`-separated list, each trimmed of blanks; empty items are
// dropped ("a, ,b," -> {"a", "b"}). For option values and lists in files,
// where an empty item carries no meaning.
std::vector<std::string> SplitList(std::string_view s, char sep = ',');

// Every `sep`-separated field as it stands, empty ones included ("a,,b" ->
// {"a", "", "b"}; "" -> {""}). For formats where a field's position matters.
std::vector<std::string_view> SplitFields(std::string_view s, char sep);

// Whether the canonical path `path` is `dir` or below it, component-wise
// ("/data/ae/x" is within "/data/ae", "/data/aex" is not; all is within "/").
// The one rule the guard and the feature cache apply to approved datasets.
bool IsWithin(std::string_view path, std::string_view dir);

// One CSV field (RFC 4180): as it is, or in double quotes (inner ones
// doubled) when it holds a comma, a double quote or a line break.
std::string CsvField(std::string_view s);

// Offset of the first byte of `s` that does not belong to a well-formed UTF-8
// sequence (overlong forms, surrogates and code points above U+10FFFF count
// as malformed); nullopt when all of `s` is valid UTF-8.
std::optional<std::size_t> FindInvalidUtf8(std::string_view s);

}  // namespace hpcml
