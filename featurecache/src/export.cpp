#include "export.hpp"

#include <unistd.h>

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
  const uint64_t step = std::max<uint64_t>(256, (4u << 20) / (4 * nf));
  std::vector<float> x(step * nf), y(info.has_labels() ? step : 0);
  std::vector<int64_t> e(step), t(step);
  char buf[32];
  for (uint64_t first = 0; first < total; first += step) {
    uint64_t n = std::min(step, total - first);
    HPCML_RETURN_IF_ERROR(
        v.Read(first, n, x.data(), info.has_labels() ? y.data() : nullptr, e.data(), t.data()));
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
        AppendFloat(&out, y[r]);
      }
      for (uint64_t j = 0; j < nf; ++j) {
        out.push_back(',');
        AppendFloat(&out, x[r * nf + j]);
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
