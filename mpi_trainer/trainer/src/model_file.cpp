#include "hpcml/trainer/model_file.hpp"

#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "hpcml/common/finite.hpp"
#include "hpcml/common/fs.hpp"
#include "hpcml/common/h5.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/sha256.hpp"

namespace hpcml::trainer {
namespace {

using nlohmann::json;

Status WriteTensor(hid_t file, const FullTensor& t) {
  const auto dot = t.name.find('.');
  const std::string group = "/" + t.name.substr(0, dot);
  const std::string dset = group + "/" + t.name.substr(dot + 1);
  if (H5Lexists(file, group.c_str(), H5P_DEFAULT) <= 0) {
    HPCML_ASSIGN_OR_RETURN(
        hid_t g,
        h5::Check(H5Gcreate2(file, group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), group));
    h5::Group owner(g);
  }
  std::vector<hsize_t> shape(t.shape.begin(), t.shape.end());
  HPCML_ASSIGN_OR_RETURN(
      hid_t s, h5::Check(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr),
                         "H5Screate_simple"));
  h5::Dataspace space(s);
  HPCML_ASSIGN_OR_RETURN(
      hid_t d, h5::Check(H5Dcreate2(file, dset.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                    H5P_DEFAULT, H5P_DEFAULT),
                         dset));
  h5::Dataset ds(d);
  return h5::CheckErr(
      H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data.data()), dset);
}

// Reads /<group>/<part> and checks its shape against the dims attribute
// (an embedding: against the encoding).
Result<FullTensor> ReadTensor(hid_t file, const std::string& path, const std::string& group,
                              const char* part, std::vector<std::int64_t> want) {
  const std::string dset = fmt::format("/{}/{}", group, part);
  HPCML_ASSIGN_OR_RETURN(hid_t d, h5::Check(H5Dopen2(file, dset.c_str(), H5P_DEFAULT),
                                            fmt::format("{}: {}", path, dset)));
  h5::Dataset ds(d);
  HPCML_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, h5::DatasetDims(ds.get(), dset));
  if (!std::equal(dims.begin(), dims.end(), want.begin(), want.end())) {
    return Corrupt("{}: {} has shape [{}], the dims attribute says [{}]", path, dset,
                   fmt::join(dims, ", "), fmt::join(want, ", "));
  }
  FullTensor t{fmt::format("{}.{}", group, part), std::move(want), {}};
  std::size_t n = 1;
  for (std::int64_t x : t.shape) n *= static_cast<std::size_t>(x);
  t.data.resize(n);
  HPCML_RETURN_IF_ERROR(h5::CheckErr(
      H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data.data()), dset));
  return t;
}

// activation, loss, dims -> the config; every width positive.
Result<ModelConfig> ReadConfig(hid_t file, const std::string& path) {
  ModelConfig c;
  c.seed = 0;
  HPCML_ASSIGN_OR_RETURN(std::string act, h5::ReadStringAttr(file, "activation"));
  HPCML_ASSIGN_OR_RETURN(c.activation, ParseActivation(act));
  HPCML_ASSIGN_OR_RETURN(std::string loss, h5::ReadStringAttr(file, "loss"));
  HPCML_ASSIGN_OR_RETURN(c.loss, ParseLoss(loss));
  HPCML_ASSIGN_OR_RETURN(std::vector<double> dims, h5::ReadDoubleListAttr(file, "dims"));
  if (dims.size() < 2)
    return Corrupt("{}: dims has {} entries, at least 2 needed", path, dims.size());
  for (double d : dims) {
    if (!(d >= 1 && d <= 1e9) || d != static_cast<double>(static_cast<std::int64_t>(d))) {
      return Corrupt("{}: dims holds {}, not a positive width", path, d);
    }
  }
  c.input_dim = static_cast<std::int64_t>(dims.front());
  c.output_dim = static_cast<std::int64_t>(dims.back());
  for (size_t i = 1; i + 1 < dims.size(); ++i)
    c.hidden.push_back(static_cast<std::int64_t>(dims[i]));
  return c;
}

template <class T>
T Get(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

}  // namespace

bool InputSchema::any_standardized() const {
  return std::find(standardized.begin(), standardized.end(), true) != standardized.end();
}

std::string LineageJson(const ModelLineage& l) {
  nlohmann::ordered_json j;
  j["data"] = {{"path", l.data.path},
               {"version", l.data.version},
               {"data_sha256", l.data.data_sha256},
               {"zone", l.data.zone},
               {"classification", l.data.classification},
               {"rows", l.data.rows}};
  if (!l.data.class_rows.empty()) j["data"]["class_rows"] = l.data.class_rows;
  j["input"] = {{"features", l.input.feature_names},
                {"label", l.input.label_name},
                {"standardized", l.input.standardized},
                {"mean", l.input.mean},
                {"scale", l.input.scale},
                {"standardized_by", l.input.standardized_by}};
  if (!l.input.label_classes.empty()) j["input"]["label_classes"] = l.input.label_classes;
  if (l.input.encoding) {
    j["input"]["encoding"] = nlohmann::ordered_json::parse(EncodingJson(*l.input.encoding));
  }
  if (l.input.stats) {
    const InputSchema::Stats& st = *l.input.stats;
    j["input"]["stats"] = {{"mean", st.mean},
                           {"std", st.std},
                           {"min", st.min},
                           {"max", st.max},
                           {"missing", st.missing}};
  }
  j["created_at"] = l.created_at;
  j["created_by"] = l.created_by;
  j["job_id"] = l.job_id;
  j["attempt"] = l.attempt;
  j["tool"] = l.tool;
  j["settings"] = l.settings.empty() ? nlohmann::ordered_json::object()
                                     : nlohmann::ordered_json::parse(l.settings, nullptr, false);
  j["steps"] = l.steps;
  j["first_loss"] = l.first_loss;
  j["final_loss"] = l.final_loss;
  if (l.validation) {
    const ValidationRecord& v = *l.validation;
    j["validation"] = {
        {"data",
         {{"path", v.data.path},
          {"version", v.data.version},
          {"data_sha256", v.data.data_sha256},
          {"rows", v.data.rows}}},
        {"rows", v.rows},
        {"step", v.step},
        {"selected", v.selected},
        {"monitor", v.monitor},
        {"metrics", v.metrics.empty() ? nlohmann::ordered_json::object()
                                      : nlohmann::ordered_json::parse(v.metrics, nullptr, false)}};
  }
  return JsonText(j);
}

Result<ModelLineage> ParseLineageJson(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return Corrupt("lineage is not a JSON object");
  try {
    ModelLineage l;
    const json& d = j.at("data");
    l.data = {d.at("path"),
              d.at("version"),
              d.at("data_sha256"),
              Get<std::string>(d, "zone", ""),
              Get<std::string>(d, "classification", ""),
              Get<std::uint64_t>(d, "rows", 0),
              Get<std::vector<std::uint64_t>>(d, "class_rows", {})};
    const json& in = j.at("input");
    l.input.feature_names = in.at("features").get<std::vector<std::string>>();
    l.input.label_name = Get<std::string>(in, "label", "");
    l.input.standardized = Get<std::vector<bool>>(in, "standardized", {});
    l.input.mean = Get<std::vector<double>>(in, "mean", {});
    l.input.scale = Get<std::vector<double>>(in, "scale", {});
    l.input.standardized_by = Get<std::string>(in, "standardized_by", "");
    l.input.label_classes = Get<std::vector<std::string>>(in, "label_classes", {});
    if (in.contains("encoding")) {
      HPCML_ASSIGN_OR_RETURN(InputEncoding enc, ParseEncodingJson(in.at("encoding").dump()));
      std::vector<std::string> names;
      for (const ColumnEncoding& c : enc.columns) names.push_back(c.name);
      if (names != l.input.feature_names) {
        return Corrupt("lineage: input.encoding's columns are not input.features");
      }
      l.input.encoding = std::move(enc);
    }
    if (in.contains("stats")) {
      const json& st = in.at("stats");
      // NaN (a feature without values) is written as null.
      auto numbers = [&](const char* key) {
        std::vector<double> v;
        for (const json& e : st.at(key)) v.push_back(e.is_null() ? NAN : e.get<double>());
        return v;
      };
      InputSchema::Stats x{numbers("mean"), numbers("std"), numbers("min"), numbers("max"),
                           numbers("missing")};
      const size_t f = l.input.feature_names.size();
      for (const auto* v : {&x.mean, &x.std, &x.min, &x.max, &x.missing}) {
        if (v->size() != f) return Corrupt("lineage: input.stats must have one entry per feature");
      }
      l.input.stats = std::move(x);
    }
    l.created_at = Get<std::string>(j, "created_at", "");
    l.created_by = Get<std::string>(j, "created_by", "");
    l.job_id = Get<std::string>(j, "job_id", "");
    l.attempt = Get<std::string>(j, "attempt", "");
    l.tool = Get<std::string>(j, "tool", "");
    l.settings = j.contains("settings") ? j["settings"].dump() : "{}";
    l.steps = Get<std::int64_t>(j, "steps", 0);
    l.first_loss = Get<double>(j, "first_loss", 0.0);
    l.final_loss = Get<double>(j, "final_loss", 0.0);
    if (j.contains("validation")) {
      const json& v = j.at("validation");
      const json& vd = v.at("data");
      ValidationRecord r;
      r.data.path = Get<std::string>(vd, "path", "");
      r.data.version = Get<std::string>(vd, "version", "");
      r.data.data_sha256 = Get<std::string>(vd, "data_sha256", "");
      r.data.rows = Get<std::uint64_t>(vd, "rows", 0);
      r.rows = Get<std::int64_t>(v, "rows", 0);
      r.step = Get<std::int64_t>(v, "step", 0);
      r.selected = Get<std::string>(v, "selected", "");
      r.monitor = Get<std::string>(v, "monitor", "");
      // In the order written (json sorts keys; ordered_json keeps them).
      const auto ordered = nlohmann::ordered_json::parse(text, nullptr, false);
      r.metrics = v.contains("metrics") ? ordered["validation"]["metrics"].dump() : "{}";
      l.validation = std::move(r);
    }
    const size_t n = l.input.standardized.size();
    if (n != 0 && (n != l.input.feature_names.size() || l.input.mean.size() != n ||
                   l.input.scale.size() != n)) {
      return Corrupt("lineage: input.standardized, mean and scale must have one entry per feature");
    }
    for (size_t f = 0; f < n; ++f) {
      if (l.input.standardized[f] && (!std::isfinite(l.input.mean[f]) || !(l.input.scale[f] > 0) ||
                                      !std::isfinite(l.input.scale[f]))) {
        return Corrupt(
            "lineage: feature {} has mean {} and scale {} (a finite mean and a positive "
            "scale are needed)",
            f + 1, l.input.mean[f], l.input.scale[f]);
      }
    }
    return l;
  } catch (const json::exception& e) {
    return Corrupt("lineage: {}", e.what());
  }
}

Status SaveModelFile(const std::string& path, const ModelConfig& config,
                     const std::vector<FullTensor>& tensors, const ModelLineage& lineage) {
  // A model with a NaN or infinite weight is never written: nothing is.
  for (const FullTensor& t : tensors) {
    Status finite = CheckFinite(t.data, t.name);
    if (!finite.ok()) return std::move(finite).WithContext(path + ": not written");
  }
  return h5::WriteFileWhole(path, [&](hid_t file) -> Status {
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(file, "format",
                                        lineage.input.encoding ? kEncodedModelFormat : kModelFormat,
                                        h5::StringStorage::kFixed));
    HPCML_RETURN_IF_ERROR(
        h5::WriteAttr(file, "activation", Name(config.activation), h5::StringStorage::kFixed));
    HPCML_RETURN_IF_ERROR(
        h5::WriteAttr(file, "loss", Name(config.loss), h5::StringStorage::kFixed));
    std::vector<std::int64_t> dims{config.input_dim};
    dims.insert(dims.end(), config.hidden.begin(), config.hidden.end());
    dims.push_back(config.output_dim);
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(file, "dims", dims));
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(file, "lineage", LineageJson(lineage)));
    for (const FullTensor& t : tensors) HPCML_RETURN_IF_ERROR(WriteTensor(file, t));
    return Status::Ok();
  });
}

Result<ModelFile> LoadModelFile(const std::string& path) {
  h5::SilenceErrorPrinting();
  HPCML_ASSIGN_OR_RETURN(hid_t f, h5::Check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                            fmt::format("{}: cannot open", path)));
  h5::File file(f);
  ModelFile m;
  m.path = path;
  auto format = h5::ReadStringAttr(file.get(), "format");
  if (!format.ok()) return Corrupt("{}: not an hpcml model file (no format attribute)", path);
  m.format = *format;
  if (m.format != kEncodedModelFormat && m.format != kModelFormat && m.format != "hpcml-mlp-1") {
    return InvalidArgument("{}: format \"{}\" is not one this build reads ({}, {} or hpcml-mlp-1)",
                           path, m.format, kEncodedModelFormat, kModelFormat);
  }
  auto config = ReadConfig(file.get(), path);
  if (!config.ok()) return config.status().WithContext(path);
  m.config = *config;
  for (int l = 0; l < m.config.num_layers(); ++l) {
    const std::int64_t in = m.config.in_dim(l), out = m.config.out_dim(l);
    const std::string group = fmt::format("layer{}", l);
    HPCML_ASSIGN_OR_RETURN(FullTensor w, ReadTensor(file.get(), path, group, "weight", {out, in}));
    HPCML_ASSIGN_OR_RETURN(FullTensor b, ReadTensor(file.get(), path, group, "bias", {out}));
    m.tensors.push_back(std::move(w));
    m.tensors.push_back(std::move(b));
  }
  if (m.format != "hpcml-mlp-1") {
    HPCML_ASSIGN_OR_RETURN(std::string text, h5::ReadStringAttr(file.get(), "lineage"));
    auto lineage = ParseLineageJson(text);
    if (!lineage.ok()) return lineage.status().WithContext(path);
    m.lineage = std::move(*lineage);
  }
  // Format 3 has an encoding and its tables; format 2 has neither.
  const InputSchema* in = m.lineage ? &m.lineage->input : nullptr;
  if ((m.format == kEncodedModelFormat) != (in != nullptr && in->encoding.has_value())) {
    return Corrupt("{}: format {} {} an input encoding in its lineage", path, m.format,
                   m.format == kEncodedModelFormat ? "needs" : "cannot have");
  }
  if (m.format == kEncodedModelFormat) {
    const InputEncoding& enc = *in->encoding;
    if (enc.width() != m.config.input_dim) {
      return Corrupt("{}: the input encoding is {} wide, the first layer takes {}", path,
                     enc.width(), m.config.input_dim);
    }
    m.config.embeddings = enc.embeddings();
    for (size_t j = 0; j < m.config.embeddings.size(); ++j) {
      const EmbeddingShape& e = m.config.embeddings[j];
      HPCML_ASSIGN_OR_RETURN(FullTensor t, ReadTensor(file.get(), path, fmt::format("embed{}", j),
                                                      "weight", {e.rows, e.dim}));
      m.tensors.push_back(std::move(t));
    }
  }
  // Nothing scores or exports a model that holds a NaN or an infinity.
  for (const FullTensor& t : m.tensors) {
    Status finite = CheckFinite(t.data, t.name);
    if (!finite.ok()) {
      return std::move(finite).WithContext(path + ": a model with non-finite weights is not used");
    }
  }
  if (m.format == kModelFormat) {
    const size_t names = in->feature_names.size();
    if (names != 0 && names != static_cast<size_t>(m.config.input_dim)) {
      return Corrupt("{}: lineage names {} input features, the model has {}", path, names,
                     m.config.input_dim);
    }
  }
  HPCML_ASSIGN_OR_RETURN(m.sha256, Sha256File(path));
  return m;
}

std::string LineageRecordPath(const std::string& model_path) {
  return model_path + ".lineage.json";
}

Status SaveLineageRecord(const std::string& model_path, const std::string& framework,
                         const ModelLineage& lineage) {
  HPCML_ASSIGN_OR_RETURN(std::string sha, Sha256File(model_path));
  const nlohmann::ordered_json record = {
      {"format", kLineageRecordFormat},
      {"model", std::filesystem::path(model_path).filename().string()},
      {"model_sha256", sha},
      {"framework", framework},
      {"lineage", nlohmann::ordered_json::parse(LineageJson(lineage))}};
  return WriteFileAtomic(LineageRecordPath(model_path), JsonText(record, 2) + "\n");
}

Result<LineageRecord> LoadLineageRecord(const std::string& model_path) {
  const std::string path = LineageRecordPath(model_path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFound("{}: no lineage record", path);
  HPCML_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object() || j.value("format", "") != kLineageRecordFormat || !j.contains("lineage") ||
      !j["model_sha256"].is_string()) {
    return Corrupt("{}: not a lineage record ({})", path, kLineageRecordFormat);
  }
  LineageRecord r;
  r.model_path = model_path;
  r.framework = j.value("framework", "");
  HPCML_ASSIGN_OR_RETURN(r.model_sha256, Sha256File(model_path));
  if (r.model_sha256 != j["model_sha256"].get<std::string>()) {
    return Corrupt(
        "{}: SHA-256 {} differs from the {} its lineage record names ({}): the model "
        "changed after its lineage was recorded",
        model_path, r.model_sha256, j["model_sha256"].get<std::string>(), path);
  }
  auto lineage = ParseLineageJson(j["lineage"].dump());
  if (!lineage.ok()) return lineage.status().WithContext(path);
  r.lineage = std::move(*lineage);
  return r;
}

}  // namespace hpcml::trainer
