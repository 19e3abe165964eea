// What `ls`, `info`, `lineage` and `diff` print. Pure formatting over
// VersionInfo, so it is tested without files. Public for the Python
// package, which hands the same JSON to Python (python/).
#pragma once

#include <string>
#include <vector>

#include "hpcml/featurecache/format.hpp"
#include "hpcml/featurecache/stats.hpp"

namespace hpcml::featurecache {

// One line per version, newest last, the latest marked with '*'.
std::string FormatVersionList(const std::vector<VersionInfo>& versions, const std::string& latest);

// Human-readable description of a version.
std::string FormatInfo(const std::string& path, const VersionInfo& v);
// The same as a JSON object.
std::string FormatInfoJson(const std::string& path, const VersionInfo& v);

// `hpcml-fcache stats`: per column count, missing, min, max, mean, std and
// the 1st, 50th and 99th percentiles of the stored sample.
std::string FormatStats(const std::string& path, const std::string& version, const VersionStats& s);
std::string FormatStatsJson(const std::string& path, const std::string& version,
                            const VersionStats& s);

// Lineage of `version` as an indented tree down to the sources. `all` holds
// every version of the file (by name); a parent missing from it, or whose
// digest differs from what the child recorded, is flagged.
std::string FormatLineageText(const std::vector<VersionInfo>& all, const std::string& version);
// Graphviz DOT: versions (boxes) and sources (notes), edges from inputs to
// outputs labelled with the operation. Only `version`'s ancestry, or every
// version when it is empty.
std::string FormatLineageDot(const std::vector<VersionInfo>& all, const std::string& version);

struct DiffReport {
  bool same_schema = true;
  bool same_data = true;  // data_sha256 equal
  std::string text;
};
// Schema (features added, removed, reordered, retyped; label, entity and
// timestamp columns), row counts, zone and classification, digests.
DiffReport DiffVersions(const VersionInfo& a, const VersionInfo& b);

}  // namespace hpcml::featurecache
