#include "export.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>

#include "hpcml/featurecache/csv.hpp"
#include "hpcml/featurecache/entity_keys.hpp"
#include "hpcml/featurecache/timeutil.hpp"

namespace hpcml::featurecache {
namespace {

Status WriteAll(int fd, const std::string& data, const std::string& name) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(name, errno);
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

void AppendFloat(std::string* out, float v) {
  if (std::isnan(v)) {
    out->append("nan");
    return;
  }
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, static_cast<size_t>(p - buf));
}

// How each feature is written: by its kind (format.hpp), from the float
// view or, for exact integers, from int_values; a missing cell of a float
// is "nan", of any other kind an empty field.
class CellWriter {
 public:
  static Result<CellWriter> For(const VersionReader& v) {
    CellWriter w;
    const VersionInfo& info = v.info();
    HPCML_ASSIGN_OR_RETURN(w.categories_, v.Categories());
    int slot = 0;
    for (size_t j = 0; j < info.features(); ++j) {
      w.kinds_.emplace_back(info.kind(j));
      w.int_slot_.push_back(info.kind(j) == "int" ? slot++ : -1);
    }
    w.classes_ = info.label_classes;
    return w;
  }
  uint64_t int_features() const {
    return static_cast<uint64_t>(
        std::count_if(int_slot_.begin(), int_slot_.end(), [](int s) { return s >= 0; }));
  }

  void Feature(std::string* out, size_t j, float x, const int64_t* ints) const {
    const std::string& kind = kinds_[j];
    if (kind == "float") return AppendFloat(out, x);
    if (std::isnan(x)) return;
    if (kind == "int") {
      char buf[32];
      auto [p, ec] = std::to_chars(buf, buf + sizeof buf, ints[int_slot_[j]]);
      out->append(buf, static_cast<size_t>(p - buf));
    } else if (kind == "bool") {
      out->append(x != 0 ? "true" : "false");
    } else {
      out->append(CsvQuote(categories_[j][static_cast<size_t>(x)]));
    }
  }
  void Label(std::string* out, float y) const {
    if (classes_.empty()) return AppendFloat(out, y);
    out->append(CsvQuote(classes_[static_cast<size_t>(y)]));
  }

 private:
  std::vector<std::string> kinds_;
  std::vector<int> int_slot_;
  std::vector<std::vector<std::string>> categories_;
  std::vector<std::string> classes_;
};

}  // namespace

Status ExportCsv(const FeatureSet& fs, const ExportOptions& o, int fd, const std::string& fd_name) {
  HPCML_ASSIGN_OR_RETURN(VersionReader v, fs.OpenVersion(o.version));
  const VersionInfo& info = v.info();
  const uint64_t nf = info.features();
  const uint64_t total = o.limit > 0 ? std::min(o.limit, info.rows) : info.rows;
  std::string out = CsvQuote(info.entity_name) + "," + CsvQuote(info.timestamp_name);
  if (info.has_labels()) out += "," + CsvQuote(info.label_name);
  for (const auto& n : info.feature_names) out += "," + CsvQuote(n);
  out += "\n";
  HPCML_ASSIGN_OR_RETURN(std::vector<std::string> keys, v.EntityKeys());
  HPCML_ASSIGN_OR_RETURN(CellWriter cells, CellWriter::For(v));
  const uint64_t ni = cells.int_features();
  const uint64_t step = std::max<uint64_t>(256, (4u << 20) / (4 * nf));
  std::vector<float> x(step * nf), y(info.has_labels() ? step : 0);
  std::vector<int64_t> e(step), t(step), ints(step * ni);
  char buf[32];
  for (uint64_t first = 0; first < total; first += step) {
    uint64_t n = std::min(step, total - first);
    HPCML_RETURN_IF_ERROR(
        v.Read(first, n, x.data(), info.has_labels() ? y.data() : nullptr, e.data(), t.data()));
    if (ni > 0) HPCML_RETURN_IF_ERROR(v.ReadInts(first, n, ints.data()));
    for (uint64_t r = 0; r < n; ++r) {
      if (keys.empty()) {
        auto [p, ec] = std::to_chars(buf, buf + sizeof buf, e[r]);
        out.append(buf, static_cast<size_t>(p - buf));
      } else {
        out += CsvQuote(EntityText(e[r], keys));
      }
      out.push_back(',');
      out += FormatTimestamp(t[r]);
      if (info.has_labels()) {
        out.push_back(',');
        cells.Label(&out, y[r]);
      }
      for (uint64_t j = 0; j < nf; ++j) {
        out.push_back(',');
        cells.Feature(&out, j, x[r * nf + j], ints.data() + r * ni);
      }
      out.push_back('\n');
    }
    if (out.size() > (1u << 20)) {
      HPCML_RETURN_IF_ERROR(WriteAll(fd, out, fd_name));
      out.clear();
    }
  }
  return WriteAll(fd, out, fd_name);
}

}  // namespace hpcml::featurecache
