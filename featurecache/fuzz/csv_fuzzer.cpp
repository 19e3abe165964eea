// libFuzzer target: the streaming CSV reader over arbitrary bytes, and the
// cell parsers (float, int, bool, time) and the kind inference over every
// field it returns: a cell inference calls an integer, a boolean or missing
// must parse as one, since ingest's second pass relies on it. The first
// byte picks the delimiter. Any crash, sanitizer report or exception escaping
// is a bug; so is a returned field that is not valid UTF-8, a digest missing
// after the end, or a record line that goes backwards.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "hpcml/common/strings.hpp"
#include "hpcml/common/time.hpp"
#include "hpcml/featurecache/csv.hpp"
#include "hpcml/featurecache/timeutil.hpp"

namespace {

using hpcml::featurecache::CsvReader;

// The input as a file CsvReader can open: an in-memory file, reached by its
// /proc/self/fd path.
std::string InputFile(const std::uint8_t* data, std::size_t size) {
  static const int fd = memfd_create("csv_fuzz", 0);
  if (fd < 0) std::abort();
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) {
    std::abort();
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

void ParseCells(const CsvReader& csv) {
  for (std::string_view f : csv.fields()) {
    if (hpcml::FindInvalidUtf8(f)) std::abort();  // the reader must refuse it
    bool integral = false;
    (void)hpcml::featurecache::ParseFloatCell(f, &integral);
    static const auto na = hpcml::featurecache::NaValues::Default();
    bool missing = false;
    (void)hpcml::featurecache::ParseFloatCell(f, &integral, &na, &missing);
    (void)hpcml::featurecache::ParseIntCell(f);
    (void)hpcml::featurecache::ParseBoolCell(f);
    using hpcml::featurecache::CellShape;
    switch (hpcml::featurecache::ClassifyCell(f, na)) {
      case CellShape::kInt:
        if (!hpcml::featurecache::ParseIntCell(f).ok()) std::abort();
        break;
      case CellShape::kBool:
        if (!hpcml::featurecache::ParseBoolCell(f).ok()) std::abort();
        break;
      case CellShape::kMissing:
        if (!hpcml::featurecache::ParseFloatCell(f, nullptr, &na, &missing).ok() || !missing)
          std::abort();
        break;
      default:
        break;
    }
    (void)hpcml::featurecache::ParseTimestamp(f);
    (void)hpcml::ParseDurationMicros(f);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const char delimiter = static_cast<char>(data[0]);
  auto csv = CsvReader::Open(InputFile(data + 1, size - 1), delimiter);
  if (!csv.ok()) return 0;  // an unusable delimiter
  std::uint64_t last_line = 0;
  for (;;) {
    auto more = csv->Next();
    if (!more.ok() || !*more) {
      if (more.ok() && !csv->Sha256Hex().ok()) std::abort();
      return 0;
    }
    if (csv->line() < last_line || csv->line() == 0) std::abort();
    last_line = csv->line();
    ParseCells(*csv);
  }
}
