// File helpers whose contract is durability: what they report written is on
// disk, and readers never see a half-written file.
#pragma once

#include <string>
#include <string_view>

#include "hpcml/common/status.hpp"

namespace hpcml {

// Writes `data` to `path` atomically and durably: a temporary file in the
// same directory, fsync, rename over `path`, fsync of the directory. A crash
// at any point leaves either the old file or the new one, never a mix.
Status WriteFileAtomic(const std::string& path, std::string_view data, unsigned mode = 0644);

// fsync of a directory, so a rename or create inside it is durable.
Status SyncDirectory(const std::string& dir);

// fsync of a file written through another descriptor (HDF5's, a copy's).
Status SyncFile(const std::string& path);

// Makes a file written under a temporary name (by HDF5, say) durable at
// `path`: fsync of `tmp`, rename over `path`, fsync of the directory.
Status CommitFile(const std::string& tmp, const std::string& path);

// Whole file into a string; the error names the path.
Result<std::string> ReadFile(const std::string& path);

}  // namespace hpcml
