// Helpers shared by the featurecache tests: a temporary directory, files,
// environment overrides, and feature sets with known contents.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "hpcml/featurecache/access.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/ingest.hpp"
#include "hpcml/featurecache/writer.hpp"

namespace hpcml::featurecache::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fcache-test-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    if (p == nullptr) std::abort();
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

inline std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Sets (or with nullopt unsets) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The value every generated feature set holds at (row, feature): exact in
// float32 for the row counts the tests use, so reads can be checked exactly.
inline float Value(uint64_t row, uint64_t feature) {
  return static_cast<float>(row % (1u << 22)) * 0.25f + static_cast<float>(feature);
}
inline float Label(uint64_t row) {
  return static_cast<float>(row % 7);
}
inline int64_t Entity(uint64_t row) {
  return static_cast<int64_t>(row % 97);
}
inline int64_t Time(uint64_t row) {
  return 1'700'000'000'000'000 + static_cast<int64_t>(row) * 1'000'000;
}

struct GenOptions {
  uint64_t rows = 1000;
  uint64_t features = 4;
  bool labels = true;
  uint64_t chunk_rows = 0;
  int compression = 0;
  std::string codec = {};  // empty: deflate when compression > 0
  std::string zone = "ae";
  std::string classification = "internal";
  // (row, column) cells written as NaN; column `features` is the label.
  std::vector<std::pair<uint64_t, uint64_t>> nan_cells = {};
};

// Adds one version with the contents above; fails the test on error.
inline VersionInfo MakeVersion(const std::string& path, const GenOptions& o = {}) {
  auto w = FeatureSetWriter::Begin(path, WriterOptions{o.zone, 30});
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return {};
  NewVersion spec;
  for (uint64_t j = 0; j < o.features; ++j) {
    spec.feature_names.push_back("f" + std::to_string(j));
    spec.feature_types.push_back("float");
  }
  spec.label_name = o.labels ? "y" : "";
  spec.operation = "ingest";
  spec.transform = "{\"op\":\"test\"}";
  spec.classification = o.classification;
  spec.chunk_rows = o.chunk_rows;
  spec.compression = o.compression;
  spec.codec = o.codec;
  auto name = w->StartVersion(spec);
  EXPECT_TRUE(name.ok()) << name.status().ToString();
  const uint64_t block = 4096;
  std::vector<float> x(block * o.features), y(block);
  std::vector<int64_t> e(block), t(block);
  for (uint64_t first = 0; first < o.rows; first += block) {
    uint64_t n = std::min(block, o.rows - first);
    for (uint64_t r = 0; r < n; ++r) {
      for (uint64_t j = 0; j < o.features; ++j) x[r * o.features + j] = Value(first + r, j);
      y[r] = Label(first + r);
      e[r] = Entity(first + r);
      t[r] = Time(first + r);
    }
    for (auto [row, col] : o.nan_cells) {
      if (row < first || row >= first + n) continue;
      (col == o.features ? y[row - first] : x[(row - first) * o.features + col]) =
          std::numeric_limits<float>::quiet_NaN();
    }
    Status st = w->Append(x.data(), o.labels ? y.data() : nullptr, e.data(), t.data(), n);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  auto info = w->Commit();
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  return info.ok() ? *info : VersionInfo{};
}

// Runs a command through /bin/sh; returns the exit status and the combined
// output.
struct CommandResult {
  int status = -1;
  std::string output;
};
inline CommandResult RunCommand(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// Ingest options for a test CSV with columns id (entity), ts (time) and,
// unless `label` is empty, a label; zone ae, classification internal.
inline IngestOptions CsvIngest(const std::string& csv, const std::string& label = "y") {
  IngestOptions o;
  o.csv_path = csv;
  o.entity_column = "id";
  o.timestamp_column = "ts";
  o.label_column = label;
  o.zone = "ae";
  o.classification = "internal";
  return o;
}

}  // namespace hpcml::featurecache::testing
