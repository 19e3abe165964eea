// hpcml._hpcml: the C++ side of `import hpcml` (python/hpcml/__init__.py is
// the public face). Each function calls the library the C++ tools use, so
// every check (the guard's zone, approval and classification, the version's
// shapes) is the one hpcml-fcache and hpcml-train make. Importing it starts
// nothing: no threads, no MPI, no signal handlers (a Loader starts its
// reader threads when it is made).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hpcml/accounting/attempt.hpp"
#include "hpcml/checkpoint/triggers.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/log.hpp"
#include "hpcml/common/status.hpp"
#include "hpcml/common/time.hpp"
#include "hpcml/featurecache/asof.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/ingest.hpp"
#include "hpcml/featurecache/loader.hpp"
#include "hpcml/featurecache/report.hpp"
#include "hpcml/trainer/model_file.hpp"

namespace py = pybind11;
namespace fc = hpcml::featurecache;
namespace ck = hpcml::checkpoint;

namespace {

// A failed Status on its way to Python: hpcml.Error(message), its `code`
// the status's kind ("PermissionDenied", "NotFound", ...).
struct StatusError {
  hpcml::Status status;
};

std::string_view CodeName(hpcml::StatusCode c) {
  switch (c) {
    case hpcml::StatusCode::kOk:
      return "Ok";
    case hpcml::StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case hpcml::StatusCode::kNotFound:
      return "NotFound";
    case hpcml::StatusCode::kAlreadyExists:
      return "AlreadyExists";
    case hpcml::StatusCode::kPermissionDenied:
      return "PermissionDenied";
    case hpcml::StatusCode::kIoError:
      return "IoError";
    case hpcml::StatusCode::kCorrupt:
      return "Corrupt";
    case hpcml::StatusCode::kUnavailable:
      return "Unavailable";
    case hpcml::StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case hpcml::StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

void Check(const hpcml::Status& st) {
  if (!st.ok()) throw StatusError{st};
}

template <typename T>
T Take(hpcml::Result<T> r) {
  Check(r.status());
  return std::move(*r);
}

// The row range [first, first + count) of a version of `rows` rows, from
// Python's optional (start, stop); an empty or reversed range is refused.
std::pair<uint64_t, uint64_t> Range(std::optional<std::pair<int64_t, int64_t>> rows,
                                    uint64_t total) {
  if (!rows) return {0, total};
  const auto [start, stop] = *rows;
  if (start < 0 || stop < start || static_cast<uint64_t>(stop) > total) {
    Check(
        hpcml::InvalidArgument("rows=({}, {}): the version has {} rows; give 0 <= start <= stop "
                               "<= {}",
                               start, stop, total, total));
  }
  return {static_cast<uint64_t>(start), static_cast<uint64_t>(stop - start)};
}

// The version's columns as arrays: "features" (rows x k float32, the
// selected columns in the given order), "labels" (float32, or None),
// "entity_ids" and "timestamps" (int64), "ints" (rows x k int64, the exact
// values of the selected int columns in a typed version, others 0; None
// without any), and "columns" (the selected names). Read without the GIL,
// straight into the arrays (one copy for a column selection).
py::dict Read(const fc::FeatureSet& fs, const std::string& version,
              std::optional<std::vector<std::string>> columns,
              std::optional<std::pair<int64_t, int64_t>> rows) {
  fc::VersionReader r = Take(fs.OpenVersion(version));
  const fc::VersionInfo& v = r.info();
  std::vector<size_t> pick;
  if (columns) {
    for (const std::string& c : *columns) {
      size_t j = 0;
      while (j < v.features() && v.feature_names[j] != c) ++j;
      if (j == v.features()) {
        Check(hpcml::NotFound("{} {}: no feature column \"{}\" (it has {})", fs.path(), v.name, c,
                              fmt::format("{}", fmt::join(v.feature_names, ", "))));
      }
      pick.push_back(j);
    }
  } else {
    for (size_t j = 0; j < v.features(); ++j) pick.push_back(j);
  }
  const auto [first, count] = Range(rows, v.rows);
  const size_t nf = v.features(), k = pick.size();
  const bool all = !columns;
  py::array_t<float> x({static_cast<py::ssize_t>(count), static_cast<py::ssize_t>(k)});
  py::object y = py::none();
  py::array_t<float> labels;
  if (v.has_labels()) {
    labels = py::array_t<float>(static_cast<py::ssize_t>(count));
    y = labels;
  }
  py::array_t<int64_t> ids(static_cast<py::ssize_t>(count)), ts(static_cast<py::ssize_t>(count));
  // The typed int columns among the selected ones: their exact values.
  std::vector<size_t> int_col(nf, SIZE_MAX);
  size_t n_ints = 0;
  if (v.typed) {
    for (size_t j = 0; j < nf; ++j)
      if (v.feature_types[j] == "int") int_col[j] = n_ints++;
  }
  bool any_int = false;
  for (size_t j : pick) any_int = any_int || int_col[j] != SIZE_MAX;
  py::object ints_out = py::none();
  py::array_t<int64_t> ints;
  if (any_int) {
    ints = py::array_t<int64_t>({static_cast<py::ssize_t>(count), static_cast<py::ssize_t>(k)});
    ints_out = ints;
  }
  {
    float* xp = x.mutable_data();
    float* yp = v.has_labels() ? labels.mutable_data() : nullptr;
    int64_t* ip = ids.mutable_data();
    int64_t* tp = ts.mutable_data();
    int64_t* intp = any_int ? ints.mutable_data() : nullptr;
    hpcml::Status st;
    {
      py::gil_scoped_release unlocked;
      std::vector<float> whole;
      if (!all) whole.resize(count * nf);
      st = r.Read(first, count, all ? xp : whole.data(), yp, ip, tp);
      if (st.ok() && !all) {
        for (uint64_t i = 0; i < count; ++i)
          for (size_t c = 0; c < k; ++c) xp[i * k + c] = whole[i * nf + pick[c]];
      }
      if (st.ok() && any_int) {
        std::vector<int64_t> exact(count * n_ints);
        st = r.ReadInts(first, count, exact.data());
        for (uint64_t i = 0; st.ok() && i < count; ++i)
          for (size_t c = 0; c < k; ++c)
            intp[i * k + c] =
                int_col[pick[c]] == SIZE_MAX ? 0 : exact[i * n_ints + int_col[pick[c]]];
      }
    }
    Check(st);
  }
  py::list names;
  for (size_t j : pick) names.append(v.feature_names[j]);
  py::dict out;
  out["features"] = x;
  out["labels"] = y;
  out["entity_ids"] = ids;
  out["timestamps"] = ts;
  out["ints"] = ints_out;
  out["columns"] = names;
  return out;
}

// A batch's arrays without a copy: the capsule owns the Batch (its buffer),
// and both arrays keep the capsule alive.
py::tuple BatchArrays(fc::Batch batch) {
  auto* held = new fc::Batch(std::move(batch));
  py::capsule owner(held, [](void* p) { delete static_cast<fc::Batch*>(p); });
  const auto rows = static_cast<py::ssize_t>(held->rows());
  const auto nf = static_cast<py::ssize_t>(held->features());
  py::array_t<float> x({rows, nf}, held->mutable_x().data(), owner);
  py::object y = py::none();
  if (!held->y().empty()) {
    // The labels are read-only in the loader; numpy sees them as writable
    // memory it does not own (torch.from_numpy wants that): a job writing
    // into them changes only its own batch.
    y = py::array_t<float>({rows}, const_cast<float*>(held->y().data()), owner);
  }
  py::array_t<uint64_t> ids({rows}, held->row_ids().data(), owner);
  return py::make_tuple(x, y, ids, held->epoch(), held->step());
}

}  // namespace

// The spot-notice poller of hpcml-train (its own thread, started here only
// when asked), behind a small owner Python holds.
class SpotPoller {
 public:
  SpotPoller(const std::string& url, const std::string& kind, int interval_ms) {
    if (kind != "aws" && kind != "gcp") {
      Check(hpcml::InvalidArgument("spot kind \"{}\": aws or gcp", kind));
    }
    poller_ = Take(ck::SpotNoticePoller::Start(
        url, kind == "aws" ? ck::SpotNoticePoller::Kind::kAws : ck::SpotNoticePoller::Kind::kGcp,
        std::chrono::milliseconds(interval_ms)));
  }
  bool noticed() const { return poller_ && poller_->noticed(); }
  int polls() const { return poller_ ? poller_->polls() : 0; }
  std::string last_error() const { return poller_ ? poller_->last_error() : ""; }
  void stop() {
    py::gil_scoped_release unlocked;
    poller_.reset();
  }

 private:
  std::unique_ptr<ck::SpotNoticePoller> poller_;
};

PYBIND11_MODULE(_hpcml, m) {
  m.doc() = "hpcml's C++ libraries for Python; use the hpcml package.";
  m.attr("__version__") = HPCML_VERSION;
  static py::exception<StatusError> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object instance = py::reinterpret_borrow<py::object>(error.ptr())(e.status.message());
      instance.attr("code") = std::string(CodeName(e.status.code()));
      PyErr_SetObject(error.ptr(), instance.ptr());
    }
  });

  py::class_<fc::FeatureSet>(m, "FeatureSet")
      .def(py::init([](const std::string& path) { return Take(fc::FeatureSet::Open(path)); }),
           py::arg("path"))
      .def_property_readonly("path", &fc::FeatureSet::path)
      .def_property_readonly("canonical_path", &fc::FeatureSet::canonical_path)
      .def_property_readonly("zone", &fc::FeatureSet::zone)
      .def_property_readonly("classification", &fc::FeatureSet::classification)
      .def_property_readonly("versions", &fc::FeatureSet::versions)
      .def_property_readonly("latest", &fc::FeatureSet::latest)
      .def(
          "resolve",
          [](const fc::FeatureSet& fs, const std::string& spec) { return Take(fs.Resolve(spec)); },
          py::arg("version"))
      .def(
          "info_json",
          [](const fc::FeatureSet& fs, const std::string& spec) {
            return fc::FormatInfoJson(fs.path(), Take(fs.Info(spec)));
          },
          py::arg("version"))
      .def(
          "stats_json",
          [](const fc::FeatureSet& fs, const std::string& spec) {
            const std::string name = Take(fs.Resolve(spec));
            return fc::FormatStatsJson(fs.path(), name, Take(fs.Stats(name)));
          },
          py::arg("version"))
      .def(
          "categories",
          [](const fc::FeatureSet& fs, const std::string& spec) {
            return Take(Take(fs.OpenVersion(spec)).Categories());
          },
          py::arg("version"))
      .def(
          "entity_keys",
          [](const fc::FeatureSet& fs, const std::string& spec) {
            return Take(Take(fs.OpenVersion(spec)).EntityKeys());
          },
          py::arg("version"))
      .def("read", &Read, py::arg("version"), py::arg("columns") = py::none(),
           py::arg("rows") = py::none());

  py::class_<SpotPoller>(m, "SpotPoller")
      .def(py::init<const std::string&, const std::string&, int>(), py::arg("url"), py::arg("kind"),
           py::arg("interval_ms"))
      .def_property_readonly("noticed", &SpotPoller::noticed)
      .def_property_readonly("polls", &SpotPoller::polls)
      .def_property_readonly("last_error", &SpotPoller::last_error)
      .def("stop", &SpotPoller::stop);

  // hpcml-fcache ingest of a CSV the package rendered (its checks, lineage
  // and atomic publication); returns the new version's record as JSON.
  m.def(
      "ingest",
      [](const std::string& set_path, const std::string& csv, const std::string& source_uri,
         const std::string& entity, const std::string& timestamp, const std::string& label,
         const std::string& zone, const std::string& classification,
         const std::map<std::string, std::string>& kinds) {
        fc::IngestOptions o;
        o.csv_path = csv;
        o.source_uri = source_uri;
        o.entity_column = entity;
        o.timestamp_column = timestamp;
        o.label_column = label;
        o.zone = zone;
        o.classification = classification;
        o.column_kinds = kinds;
        o.na_values = Take(fc::NaValues::Parse(""));  // only empty cells: "NA" may be a category
        hpcml::Result<fc::VersionInfo> v = [&] {
          py::gil_scoped_release unlocked;
          return fc::Ingest(set_path, o);
        }();
        return fc::FormatInfoJson(set_path, Take(std::move(v)));
      },
      py::arg("set_path"), py::arg("csv"), py::arg("source_uri"), py::arg("entity"),
      py::arg("timestamp"), py::arg("label"), py::arg("zone"), py::arg("classification"),
      py::arg("kinds"));

  // hpcml-fcache asof of a requests CSV the package rendered: a new version
  // of the set (its record as JSON) and the join's counts.
  m.def(
      "asof",
      [](const std::string& set_path, const std::string& csv, const std::string& source_uri,
         const std::string& from, const std::string& entity, const std::string& time,
         const std::string& label, std::optional<int64_t> max_age_us, bool known_at,
         const std::string& missing) {
        fc::AsofOptions o;
        o.from = from;
        o.requests_csv = csv;
        o.source_uri = source_uri;
        o.entity_column = entity;
        o.time_column = time;
        o.label_column = label;
        o.max_age = max_age_us;
        o.known_at = known_at;
        if (missing == "nan") {
          o.missing = fc::AsofMissing::kNan;
        } else if (missing == "drop") {
          o.missing = fc::AsofMissing::kDrop;
        } else if (missing == "error") {
          o.missing = fc::AsofMissing::kError;
        } else {
          Check(hpcml::InvalidArgument("missing=\"{}\": nan, drop or error", missing));
        }
        fc::AsofStats stats;
        hpcml::Result<fc::VersionInfo> v = [&] {
          py::gil_scoped_release unlocked;
          return fc::Asof(set_path, o, &stats);
        }();
        const std::string info = fc::FormatInfoJson(set_path, Take(std::move(v)));
        py::dict counts;
        counts["requests"] = stats.requests;
        counts["matched"] = stats.matched;
        counts["missing"] = stats.missing;
        counts["written"] = stats.written;
        return py::make_tuple(info, counts);
      },
      py::arg("set_path"), py::arg("csv"), py::arg("source_uri"), py::arg("from_version"),
      py::arg("entity"), py::arg("time"), py::arg("label"), py::arg("max_age_us"),
      py::arg("known_at"), py::arg("missing"));

  // The lineage record of a model file written by the job (model_file.hpp):
  // the training version as hpcml-train records it, who, when, which job.
  m.def(
      "record_lineage",
      [](const std::string& model_path, const std::string& framework, const std::string& set_path,
         const std::string& version, const std::string& settings_json, int64_t steps,
         double first_loss, double final_loss, const std::string& validation_json) {
        hpcml::trainer::ModelLineage l = Take(hpcml::trainer::LineageOfVersion(set_path, version));
        l.created_at = hpcml::UtcNow();
        l.created_by = hpcml::CurrentPrincipal();
        const char* job = std::getenv("SLURM_JOB_ID");
        const char* restarts = std::getenv("SLURM_RESTART_COUNT");
        l.job_id = job ? job : "";
        l.attempt = job ? (restarts ? restarts : "0") : "";
        l.tool = fmt::format("hpcml {} (Python)", HPCML_VERSION);
        l.settings = settings_json;
        l.steps = steps;
        l.first_loss = first_loss;
        l.final_loss = final_loss;
        if (!validation_json.empty()) {
          hpcml::trainer::ValidationRecord v;
          v.metrics = validation_json;
          v.step = steps;
          v.selected = "final";
          l.validation = v;
        }
        Check(hpcml::trainer::SaveLineageRecord(model_path, framework, l));
        return hpcml::trainer::LineageRecordPath(model_path);
      },
      py::arg("model_path"), py::arg("framework"), py::arg("set_path"), py::arg("version"),
      py::arg("settings_json"), py::arg("steps"), py::arg("first_loss"), py::arg("final_loss"),
      py::arg("validation_json"));

  m.def(
      "slurm_seconds_left",
      [](uint32_t job_id) {
        py::gil_scoped_release unlocked;
        return ck::SlurmSecondsLeft(job_id);
      },
      py::arg("job_id"), "Seconds before Slurm ends the job, or -1 when unknown.");

  // The attempt's usage record, as hpcml-train writes it (accounting/attempt.hpp):
  // a JSON file in `dir` and the job's Comment, inside a Slurm job only.
  m.def(
      "publish_usage",
      [](const std::string& dir, int64_t start_time, int64_t written_at, double wall_s,
         int64_t steps_done, int64_t batch, const std::string& gpu_type,
         std::optional<int64_t> steps_since_checkpoint, double checkpoint_seconds,
         bool no_comment) {
        hpcml::accounting::AttemptUsage a;
        a.start_time = start_time;
        a.written_at = written_at;
        a.wall_s = wall_s;
        a.steps_done = steps_done;
        a.batch = batch;
        a.gpu_type = gpu_type;
        a.steps_since_checkpoint = steps_since_checkpoint;
        a.checkpoint_seconds = checkpoint_seconds;
        hpcml::Logger log("hpcml");
        py::gil_scoped_release unlocked;
        hpcml::accounting::PublishAttemptUsage(dir, a, no_comment, log);
      },
      py::arg("dir"), py::arg("start_time"), py::arg("written_at"), py::arg("wall_s"),
      py::arg("steps_done"), py::arg("batch"), py::arg("gpu_type"),
      py::arg("steps_since_checkpoint"), py::arg("checkpoint_seconds"), py::arg("no_comment"));

  py::class_<fc::Loader>(m, "Loader")
      .def(py::init([](const std::string& path, const std::string& version, uint32_t rank,
                       uint32_t world, uint64_t batch_rows, uint64_t seed, bool shuffle,
                       bool drop_last, uint64_t epochs, uint32_t threads, uint32_t prefetch) {
             fc::LoaderOptions o;
             o.rank = rank;
             o.world = world;
             o.batch_rows = batch_rows;
             o.seed = seed;
             o.shuffle = shuffle;
             o.drop_last = drop_last;
             o.epochs = epochs;
             o.threads = threads;
             o.prefetch_depth = prefetch;
             return Take(fc::Loader::Open(path, version, o));
           }),
           py::arg("path"), py::arg("version"), py::arg("rank"), py::arg("world"),
           py::arg("batch_rows"), py::arg("seed"), py::arg("shuffle"), py::arg("drop_last"),
           py::arg("epochs"), py::arg("threads"), py::arg("prefetch"))
      .def("next",
           [](fc::Loader& l) {
             hpcml::Result<fc::Batch> b = [&] {
               py::gil_scoped_release unlocked;
               return l.Next();
             }();
             return BatchArrays(Take(std::move(b)));
           })
      .def("next_xy",
           [](fc::Loader& l) {
             hpcml::Result<fc::Batch> b = [&] {
               py::gil_scoped_release unlocked;
               return l.Next();
             }();
             py::tuple t = BatchArrays(Take(std::move(b)));
             return py::make_tuple(t[0], t[1]);
           })
      .def_property_readonly("done", &fc::Loader::done)
      .def_property_readonly("epoch", &fc::Loader::epoch)
      .def_property_readonly("step", &fc::Loader::step)
      .def_property_readonly("batches_per_epoch", &fc::Loader::batches_per_epoch)
      .def_property_readonly("rows", &fc::Loader::rows)
      .def_property_readonly("features", &fc::Loader::features)
      .def("position", [](const fc::Loader& l) { return l.Save().ToString(); })
      .def(
          "restore",
          [](fc::Loader& l, const std::string& text) {
            Check(l.Restore(Take(fc::Position::Parse(text))));
          },
          py::arg("position"));
}
