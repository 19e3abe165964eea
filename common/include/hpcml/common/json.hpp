// JSON text: the one way hpcml writes JSON.
//
// Contract: never throws. A string that is not valid UTF-8 is written with
// each malformed byte replaced by U+FFFD, so one bad byte in a record of
// others' text (a job comment from sacct, a user's --dataset) cannot stop a
// report or an audit line. Text from the user's own input (a CSV header, a
// policy file) should be checked where it is read (FindInvalidUtf8 in
// strings.hpp) and refused with an error naming its place, so nothing is
// replaced silently in data the user owns.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace hpcml {

// `indent` < 0: one line; otherwise pretty-printed with that many spaces.
std::string JsonText(const nlohmann::json& j, int indent = -1);
// The same for ordered_json (keys in insertion order), as reports write.
std::string JsonText(const nlohmann::ordered_json& j, int indent = -1);

}  // namespace hpcml
