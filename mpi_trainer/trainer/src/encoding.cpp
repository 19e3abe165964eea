#include "hpcml/trainer/encoding.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "hpcml/common/json.hpp"
#include "hpcml/common/sha256.hpp"

namespace hpcml::trainer {
namespace {

// Codes travel as float32 (encoding.hpp): every code up to 2^24 is exact.
constexpr std::int64_t kMaxVocabulary = (std::int64_t{1} << 24) - 1;
constexpr std::int64_t kMaxEmbedDim = 32;

bool KnownKind(std::string_view k) {
  return k == "float" || k == "int" || k == "bool" || k == "category";
}

}  // namespace

std::string ColumnEncoding::vocabulary_sha256() const {
  Sha256 h;
  for (const std::string& v : vocabulary) {
    h.Update(v);
    h.Update("\n");
  }
  return h.FinishHex();
}

std::int64_t InputEncoding::numbers() const {
  return std::count_if(columns.begin(), columns.end(),
                       [](const ColumnEncoding& c) { return !c.category(); });
}

std::int64_t InputEncoding::indicators() const {
  return std::count_if(columns.begin(), columns.end(),
                       [](const ColumnEncoding& c) { return !c.category() && c.indicator; });
}

std::int64_t InputEncoding::width() const {
  std::int64_t w = numbers() + indicators();
  for (const EmbeddingShape& e : embeddings()) w += e.dim;
  return w;
}

std::vector<EmbeddingShape> InputEncoding::embeddings() const {
  std::vector<EmbeddingShape> out;
  for (const ColumnEncoding& c : columns)
    if (c.category()) out.push_back({c.unknown() + 1, c.embed_dim});
  return out;
}

std::vector<std::int64_t> InputEncoding::embedding_offsets() const {
  std::vector<std::int64_t> out;
  std::int64_t at = numbers() + indicators();
  for (const EmbeddingShape& e : embeddings()) {
    out.push_back(at);
    at += e.dim;
  }
  return out;
}

Status InputEncoding::Validate(std::string_view what) const {
  if (columns.empty()) return InvalidArgument("{}: no columns", what);
  std::unordered_set<std::string> names;
  for (size_t j = 0; j < columns.size(); ++j) {
    const ColumnEncoding& c = columns[j];
    if (!names.insert(c.name).second) {
      return InvalidArgument("{}: column \"{}\" appears twice", what, c.name);
    }
    if (!KnownKind(c.kind)) {
      return InvalidArgument("{}: column \"{}\" has kind \"{}\" (float, int, bool or category)",
                             what, c.name, c.kind);
    }
    if (c.category()) {
      if (c.unknown() > kMaxVocabulary) {
        return InvalidArgument("{}: column \"{}\" keeps {} values, more than {}", what, c.name,
                               c.unknown(), kMaxVocabulary);
      }
      if (c.embed_dim < 1 || c.embed_dim > 4096) {
        return InvalidArgument("{}: column \"{}\" has embedding width {} (1 to 4096)", what, c.name,
                               c.embed_dim);
      }
      std::unordered_set<std::string_view> seen;
      for (const std::string& v : c.vocabulary) {
        if (!seen.insert(v).second) {
          return InvalidArgument("{}: column \"{}\" has the value \"{}\" twice", what, c.name, v);
        }
      }
    } else if (!std::isfinite(c.center) || !std::isfinite(c.scale) || !(c.scale > 0)) {
      return InvalidArgument(
          "{}: column \"{}\" has center {} and scale {} (finite, and a positive scale)", what,
          c.name, c.center, c.scale);
    }
  }
  return Status::Ok();
}

std::int64_t DefaultEmbedDim(std::int64_t rows) {
  const auto d = static_cast<std::int64_t>(
      std::lround(1.6 * std::pow(static_cast<double>(std::max<std::int64_t>(rows, 1)), 0.56)));
  return std::clamp<std::int64_t>(d, 2, kMaxEmbedDim);
}

Result<InputEncoding> BuildEncoding(const std::vector<TrainingColumn>& columns,
                                    const EncodingOptions& options) {
  InputEncoding enc;
  enc.min_count = std::max<std::uint64_t>(options.min_count, 1);
  for (const auto& [name, dim] : options.embed_dims) {
    auto it = std::find_if(columns.begin(), columns.end(),
                           [&](const TrainingColumn& c) { return c.name == name; });
    if (it == columns.end() || it->kind != "category") {
      return InvalidArgument("--embed-dim {}={}: \"{}\" is not a category feature of the data",
                             name, dim, name);
    }
  }
  for (const TrainingColumn& t : columns) {
    ColumnEncoding c;
    c.name = t.name;
    c.kind = t.kind;
    if (t.kind == "category") {
      if (t.frequencies.size() != t.categories.size()) {
        return InvalidArgument("column \"{}\": {} category counts for {} categories", t.name,
                               t.frequencies.size(), t.categories.size());
      }
      for (size_t i = 0; i < t.categories.size(); ++i)
        if (t.frequencies[i] >= enc.min_count) c.vocabulary.push_back(t.categories[i]);
      auto it = options.embed_dims.find(t.name);
      c.embed_dim = it != options.embed_dims.end() ? it->second
                    : options.embed_dim > 0        ? options.embed_dim
                                                   : DefaultEmbedDim(c.unknown() + 1);
    } else {
      // A column with no present value, or a constant one, keeps unit scale.
      const bool valued = t.count > 0 && std::isfinite(t.mean);
      c.center = valued ? t.mean : 0.0;
      c.scale = valued && std::isfinite(t.std) && t.std > 0 ? t.std : 1.0;
      c.indicator = t.missing > 0;
    }
    enc.columns.push_back(std::move(c));
  }
  HPCML_RETURN_IF_ERROR(enc.Validate("the input encoding"));
  return enc;
}

std::vector<std::int32_t> CodeMap(const ColumnEncoding& column,
                                  const std::vector<std::string>& dictionary) {
  std::unordered_map<std::string_view, std::int32_t> kept;
  for (size_t i = 0; i < column.vocabulary.size(); ++i)
    kept.emplace(column.vocabulary[i], static_cast<std::int32_t>(i));
  std::vector<std::int32_t> out;
  out.reserve(dictionary.size());
  for (const std::string& v : dictionary) {
    auto it = kept.find(v);
    out.push_back(it == kept.end() ? static_cast<std::int32_t>(column.unknown()) : it->second);
  }
  return out;
}

std::int64_t CodeOf(const ColumnEncoding& column, std::string_view value) {
  auto it = std::find(column.vocabulary.begin(), column.vocabulary.end(), value);
  return it == column.vocabulary.end() ? column.unknown() : it - column.vocabulary.begin();
}

Status Encode(const InputEncoding& enc, const float* raw, std::int64_t rows, float* out,
              const std::uint64_t* row_ids) {
  const auto ncols = static_cast<std::int64_t>(enc.columns.size());
  const std::int64_t width = enc.width();
  // Where each column's number, indicator and code go in an encoded row.
  struct Slot {
    std::int64_t value = -1, indicator = -1;
  };
  std::vector<Slot> slots(enc.columns.size());
  std::int64_t num = 0, ind = enc.numbers(), emb = enc.numbers() + enc.indicators();
  for (size_t j = 0; j < enc.columns.size(); ++j) {
    const ColumnEncoding& c = enc.columns[j];
    if (c.category()) {
      slots[j].value = emb;
      emb += c.embed_dim;
    } else {
      slots[j].value = num++;
      if (c.indicator) slots[j].indicator = ind++;
    }
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = raw + r * ncols;
    float* y = out + r * width;
    std::fill(y, y + width, 0.0f);
    for (std::int64_t j = 0; j < ncols; ++j) {
      const ColumnEncoding& c = enc.columns[static_cast<size_t>(j)];
      const Slot& s = slots[static_cast<size_t>(j)];
      const float v = x[j];
      if (c.category()) {
        if (std::isnan(v)) {
          y[s.value] = static_cast<float>(c.unknown());
        } else if (!(v >= 0.0f) || v > static_cast<float>(c.unknown()) || v != std::floor(v)) {
          return InvalidArgument("row {}, column {} (\"{}\"): {} is not a code of the column",
                                 row_ids ? row_ids[r] : static_cast<std::uint64_t>(r), j + 1,
                                 c.name, v);
        } else {
          y[s.value] = v;
        }
      } else if (std::isnan(v)) {
        if (s.indicator >= 0) y[s.indicator] = 1.0f;
      } else if (!std::isfinite(v)) {
        return InvalidArgument("row {}, column {} (\"{}\") is {}: a number or a missing cell",
                               row_ids ? row_ids[r] : static_cast<std::uint64_t>(r), j + 1, c.name,
                               v);
      } else {
        y[s.value] = static_cast<float>((static_cast<double>(v) - c.center) / c.scale);
      }
    }
  }
  return Status::Ok();
}

std::string EncodingJson(const InputEncoding& enc) {
  nlohmann::ordered_json cols = nlohmann::ordered_json::array();
  for (const ColumnEncoding& c : enc.columns) {
    nlohmann::ordered_json j = {{"name", c.name}, {"kind", c.kind}};
    if (c.category()) {
      j["embed_dim"] = c.embed_dim;
      j["vocabulary"] = c.vocabulary;
      j["vocabulary_sha256"] = c.vocabulary_sha256();
    } else {
      j["center"] = c.center;
      j["scale"] = c.scale;
      j["indicator"] = c.indicator;
    }
    cols.push_back(std::move(j));
  }
  nlohmann::ordered_json j = {{"min_count", enc.min_count}, {"columns", std::move(cols)}};
  return JsonText(j);
}

Result<InputEncoding> ParseEncodingJson(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return Corrupt("input encoding: not a JSON object");
  InputEncoding enc;
  try {
    enc.min_count = j.at("min_count").get<std::uint64_t>();
    for (const auto& e : j.at("columns")) {
      ColumnEncoding c;
      c.name = e.at("name").get<std::string>();
      c.kind = e.at("kind").get<std::string>();
      if (c.category()) {
        c.embed_dim = e.at("embed_dim").get<std::int64_t>();
        c.vocabulary = e.at("vocabulary").get<std::vector<std::string>>();
        if (e.at("vocabulary_sha256").get<std::string>() != c.vocabulary_sha256()) {
          return Corrupt("input encoding: column \"{}\": its vocabulary does not match its digest",
                         c.name);
        }
      } else {
        c.center = e.at("center").get<double>();
        c.scale = e.at("scale").get<double>();
        c.indicator = e.at("indicator").get<bool>();
      }
      enc.columns.push_back(std::move(c));
    }
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("input encoding: {}", e.what());
  }
  Status ok = enc.Validate("input encoding");
  if (!ok.ok()) return Corrupt("{}", ok.message());
  return enc;
}

}  // namespace hpcml::trainer
