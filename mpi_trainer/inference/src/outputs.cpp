#include "outputs.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/sha256.hpp"
#include "hpcml/common/time.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "hpcml/featurecache/access.hpp"
#include "hpcml/featurecache/csv.hpp"
#include "hpcml/featurecache/writer.hpp"

namespace hpcml::inference {
namespace {

namespace fc = hpcml::featurecache;

bool Classifier(const trainer::ModelFile& m) {
  return m.config.loss == trainer::LossKind::kCrossEntropy;
}

// A classifier's class names by index (the lineage's label_classes, one per
// output), or null: the classes are the indices.
const std::vector<std::string>* ClassNames(const trainer::ModelFile& m) {
  if (!Classifier(m) || !m.lineage) return nullptr;
  const std::vector<std::string>& c = m.lineage->input.label_classes;
  return !c.empty() && static_cast<std::int64_t>(c.size()) == m.config.output_dim ? &c : nullptr;
}

// One output row: the predictions, and for a classifier the argmax class.
void OutputRow(const trainer::ModelFile& m, const float* p, float* row) {
  const auto k = static_cast<size_t>(m.config.output_dim);
  std::copy_n(p, k, row);
  if (Classifier(m)) row[k] = static_cast<float>(std::max_element(p, p + k) - p);
}

std::string Canonical(const std::string& path) {
  std::error_code ec;
  auto c = std::filesystem::canonical(path, ec);
  return ec ? path : c.string();
}

// What an output records: the input and its digest, the model and its
// digest, and the model's own training data.
nlohmann::ordered_json InferTransform(const InputData& in, const trainer::ModelFile& m,
                                      const OutputOptions& o) {
  nlohmann::ordered_json j = {{"op", "infer"}, {"precision", Name(o.precision)}};
  j["input"] = {{"uri", in.uri()}, {"sha256", in.digest()}};
  j["model"] = {{"path", Canonical(m.path)}, {"sha256", m.sha256}, {"format", m.format}};
  if (m.lineage) {
    j["model"]["trained_on"] = {{"path", m.lineage->data.path},
                                {"version", m.lineage->data.version},
                                {"data_sha256", m.lineage->data.data_sha256}};
    j["model"]["job_id"] = m.lineage->job_id;
  }
  return j;
}

class VersionOutput final : public Output {
 public:
  VersionOutput(fc::FeatureSetWriter w, const InputData& input, const trainer::ModelFile& m,
                const OutputOptions& o)
      : writer_(std::move(w)), input_(input), in_(*input.version()), m_(m), o_(o) {}

  Status Start(const std::string& classification) {
    const fc::VersionInfo& vi = in_.info();
    fc::NewVersion spec;
    spec.feature_names = OutputNames(m_);
    spec.feature_types.assign(spec.feature_names.size(), "float");
    if (Classifier(m_)) spec.feature_types.back() = "int";  // the class, exact in int_values
    spec.label_name = vi.label_name;
    spec.label_classes = vi.label_classes;
    spec.entity_name = vi.entity_name;
    spec.timestamp_name = vi.timestamp_name;
    spec.operation = "infer";
    spec.transform = JsonText(InferTransform(input_, m_, o_));
    spec.sources = {{input_.uri(), input_.digest()},
                    {fmt::format("file://{}", Canonical(m_.path)), m_.sha256}};
    spec.classification = classification;
    spec.expected_rows = vi.rows;
    HPCML_RETURN_IF_ERROR(fc::InheritEntities(in_, &spec));
    return writer_.StartVersion(spec).status();
  }

  Status Append(std::uint64_t first, std::uint64_t n, const float* p) override {
    const size_t width = OutputNames(m_).size(), k = static_cast<size_t>(m_.config.output_dim);
    std::vector<float> x(n * width), y(in_.info().has_labels() ? n : 0);
    std::vector<std::int64_t> e(n), t(n);
    HPCML_RETURN_IF_ERROR(
        in_.Read(first, n, nullptr, y.empty() ? nullptr : y.data(), e.data(), t.data()));
    for (std::uint64_t r = 0; r < n; ++r) OutputRow(m_, p + r * k, x.data() + r * width);
    std::vector<std::int64_t> classes;
    if (Classifier(m_)) {
      for (std::uint64_t r = 0; r < n; ++r)
        classes.push_back(static_cast<std::int64_t>(x[r * width + width - 1]));
    }
    return writer_.Append(x.data(), y.empty() ? nullptr : y.data(), e.data(), t.data(), n,
                          classes.empty() ? nullptr : classes.data());
  }

  Result<std::string> Finish() override {
    HPCML_ASSIGN_OR_RETURN(fc::VersionInfo v, writer_.Commit());
    return fmt::format("{} {}", writer_.path(), v.name);
  }

 private:
  fc::FeatureSetWriter writer_;
  const InputData& input_;
  const fc::VersionReader& in_;
  const trainer::ModelFile& m_;
  OutputOptions o_;
};

class CsvOutput final : public Output {
 public:
  CsvOutput(std::string path, const InputData& in, const trainer::ModelFile& m,
            const OutputOptions& o)
      : path_(std::move(path)), in_(in), m_(m), o_(o) {
    tmp_ = fmt::format("{}.tmp-{}", path_, ::getpid());
  }
  ~CsvOutput() override {
    f_.reset();
    if (!done_) std::remove(tmp_.c_str());
  }

  Status Start() {
    f_.reset(std::fopen(tmp_.c_str(), "w"));
    if (!f_) return ErrnoError(fmt::format("{}: cannot create", tmp_), errno);
    std::vector<std::string> header;
    for (const std::string& n : in_.id_names()) header.push_back(fc::CsvQuote(n));
    for (const std::string& n : OutputNames(m_)) header.push_back(fc::CsvQuote(n));
    return Write(fmt::format("{}\n", fmt::join(header, ",")));
  }

  Status Append(std::uint64_t first, std::uint64_t n, const float* p) override {
    std::vector<std::string> ids;
    HPCML_RETURN_IF_ERROR(in_.Ids(first, n, &ids));
    const size_t width = OutputNames(m_).size(), k = static_cast<size_t>(m_.config.output_dim);
    const size_t id_cols = in_.id_names().size();
    const std::vector<std::string>* names = ClassNames(m_);
    std::vector<float> row(width);
    std::string text;
    for (std::uint64_t r = 0; r < n; ++r) {
      OutputRow(m_, p + r * k, row.data());
      for (size_t c = 0; c < id_cols; ++c) text += ids[r * id_cols + c] + ",";
      for (size_t c = 0; c < width; ++c) {
        if (!Classifier(m_) || c + 1 < width) {
          text += fmt::format("{:.9g}", row[c]);
        } else if (names != nullptr) {  // the class by name
          text += fc::CsvQuote((*names)[static_cast<size_t>(row[c])]);
        } else {
          text += fmt::format("{}", static_cast<int>(row[c]));
        }
        text += c + 1 == width ? '\n' : ',';
      }
    }
    rows_ += n;
    return Write(text);
  }

  // The CSV, then "<csv>.lineage.json" beside it: the transform, the
  // CSV's SHA-256 and its rows (a CSV has no attributes of its own).
  Result<std::string> Finish() override {
    if (std::fflush(f_.get()) != 0) return ErrnoError(fmt::format("{}: write", tmp_), errno);
    HPCML_RETURN_IF_ERROR(SyncFile(tmp_));
    f_.reset();
    std::error_code ec;
    std::filesystem::rename(tmp_, path_, ec);
    if (ec) return IoError("{}: cannot rename to {}: {}", tmp_, path_, ec.message());
    done_ = true;
    nlohmann::ordered_json j = {{"output",
                                 {{"uri", "file://" + path_},
                                  {"sha256", digest_.FinishHex()},
                                  {"rows", rows_},
                                  {"columns", OutputNames(m_)}}}};
    j.update(InferTransform(in_, m_, o_));
    j["created_at"] = UtcNow();
    j["created_by"] = CurrentPrincipal();
    j["tool"] = fmt::format("hpcml-infer {}", Version());
    HPCML_RETURN_IF_ERROR(WriteFileAtomic(path_ + ".lineage.json", JsonText(j, 2) + "\n"));
    return path_ + " (lineage in " + path_ + ".lineage.json)";
  }

 private:
  Status Write(const std::string& text) {
    if (std::fwrite(text.data(), 1, text.size(), f_.get()) != text.size()) {
      return ErrnoError(fmt::format("{}: write", tmp_), errno);
    }
    digest_.Update(text);
    return Status::Ok();
  }

  std::string path_, tmp_;
  const InputData& in_;
  const trainer::ModelFile& m_;
  OutputOptions o_;
  UniqueFile f_;
  Sha256 digest_;
  std::uint64_t rows_ = 0;
  bool done_ = false;
};

}  // namespace

std::vector<std::string> OutputNames(const trainer::ModelFile& m) {
  std::vector<std::string> names;
  const std::int64_t k = m.config.output_dim;
  const std::string label = m.lineage ? m.lineage->input.label_name : "";
  const std::vector<std::string>* classes = ClassNames(m);
  for (std::int64_t i = 0; i < k; ++i) {
    if (Classifier(m)) {
      names.push_back(classes != nullptr ? "p_" + (*classes)[static_cast<size_t>(i)]
                                         : fmt::format("p_{}", i));
    } else {
      names.push_back(k == 1 && !label.empty() ? label + "_pred" : fmt::format("pred_{}", i));
    }
  }
  if (Classifier(m)) names.push_back("class");
  return names;
}

Result<std::unique_ptr<Output>> OpenOutput(const std::string& path, const InputData& input,
                                           const trainer::ModelFile& model,
                                           const OutputOptions& options) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0) {
    // Like the trainer's checkpoints and model: in a guarded job the data
    // roots are read-only in the step's view, so predictions go to the
    // job's own directories, and no approval applies to them.
    HPCML_ASSIGN_OR_RETURN(std::string canonical, fc::CanonicalPath(path, /*must_exist=*/false));
    auto out = std::make_unique<CsvOutput>(canonical, input, model, options);
    HPCML_RETURN_IF_ERROR(out->Start());
    return std::unique_ptr<Output>(std::move(out));
  }
  const fc::VersionReader* in = input.version();
  if (in == nullptr) {
    return InvalidArgument(
        "--output {}: a feature-set output needs a feature-set input (entity ids and timestamps); "
        "ingest {} first with hpcml-fcache ingest, or write a .csv",
        path, input.what());
  }
  HPCML_ASSIGN_OR_RETURN(
      std::string cls, fc::ChildClassification(in->info().classification, options.classification));
  HPCML_ASSIGN_OR_RETURN(fc::FeatureSetWriter w,
                         fc::FeatureSetWriter::Begin(path, fc::WriterOptions{in->info().zone}));
  auto out = std::make_unique<VersionOutput>(std::move(w), input, model, options);
  HPCML_RETURN_IF_ERROR(out->Start(cls));
  return std::unique_ptr<Output>(std::move(out));
}

}  // namespace hpcml::inference
