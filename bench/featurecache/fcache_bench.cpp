// featurecache benchmarks. Every figure is printed with the baseline it is
// compared against, measured in the same run on the same machine.
//
//   fcache_bench loader [--gib 1] [--dir D] [--window ROWS]   loader vs plain sequential read
//   fcache_bench codec [--gib 1]    shuffled loading of each codec vs uncompressed
//   fcache_bench version [--gib 10] cost of adding a 1% version, before/after version files
//   fcache_bench quality [--rows 10000000]   stats, validate, drift on a large set (CLI)
//   fcache_bench ingest [--rows 1000000]      CSV ingest MB/s, cost of a copy
//   fcache_bench asof   [--rows 10000000]     point-in-time join: time, peak RSS
//   fcache_bench typed  [--rows 10000000]     ingest of 10 categorical + 20 numeric columns
//                                             vs the same table all numeric: time, size
//   fcache_bench epoch --file SET [--batch 4096] [--repeat 3]   one shuffled epoch of
//                                             v1 through the loader (for bench/python)
//   fcache_bench all                          all of them (default sizes)
//   fcache_bench smoke                        all of them, tiny (ctest)
// Files go to --dir (default /tmp/hpcml-fcache-bench) and are deleted at the end.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/h5.hpp"
#include "hpcml/featurecache/format.hpp"
#include "hpcml/featurecache/ingest.hpp"
#include "hpcml/featurecache/loader.hpp"
#include "hpcml/featurecache/writer.hpp"

using namespace hpcml;
using namespace hpcml::featurecache;
using Clock = std::chrono::steady_clock;

namespace {

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU seconds (user + system) of this process, all threads.
double CpuSeconds() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Wall-clock and CPU-time throughput of one measurement, in GB/s.
struct Rate {
  double wall = 0;
  double cpu = 0;
};

[[noreturn]] void Die(const Status& st) {
  std::fprintf(stderr, "fcache_bench: %s\n", st.ToString().c_str());
  std::exit(1);
}

template <typename T>
T Must(Result<T> r) {
  if (!r.ok()) Die(r.status());
  return std::move(r).value();
}

void MustOk(const Status& st) {
  if (!st.ok()) Die(st);
}

// Removes a feature set: its file and its version files.
void RemoveSet(const std::string& path) {
  std::filesystem::remove(path);
  std::filesystem::remove_all(path + ".d");
}

// The file holding a one-version set's data (its version file).
std::string DataFile(const std::string& set) {
  return set + ".d/v1.h5";
}

// A version of `nf` float features f0..f<nf-1>, as the benchmarks write them.
NewVersion FloatVersion(uint64_t nf, std::string transform) {
  NewVersion s;
  for (uint64_t j = 0; j < nf; ++j) {
    s.feature_names.push_back("f" + std::to_string(j));
    s.feature_types.push_back("float");
  }
  s.operation = "ingest";
  s.transform = std::move(transform);
  s.classification = "internal";
  return s;
}

// Writes `rows` x `nf` features (+ labels) with `codec` at `level` (format.hpp's
// ResolveCodec); the values are compressible when `compressible`.
void MakeSet(const std::string& path, uint64_t rows, uint64_t nf, const std::string& codec,
             int level, bool compressible) {
  RemoveSet(path);
  auto w = Must(FeatureSetWriter::Begin(path, WriterOptions{"bench", 60}));
  NewVersion s = FloatVersion(nf, "{\"op\":\"bench\"}");
  s.label_name = "y";
  s.codec = codec;
  s.compression = level;
  MustOk(w.StartVersion(s).status());
  const uint64_t block = 16384;
  std::vector<float> x(block * nf), y(block);
  std::vector<int64_t> e(block), t(block);
  for (uint64_t first = 0; first < rows; first += block) {
    uint64_t n = std::min(block, rows - first);
    for (uint64_t r = 0; r < n; ++r) {
      uint64_t row = first + r;
      for (uint64_t j = 0; j < nf; ++j) {
        // Compressed case: 16 bits of entropy per value (about 2x with
        // deflate + shuffle), like quantised sensor data.
        uint64_t h = (row * 0x9E3779B97F4A7C15ull + j * 0xBF58476D1CE4E5B9ull) >> 48;
        x[r * nf + j] = compressible ? static_cast<float>(h) / 16.0f
                                     : static_cast<float>(row) * 0.001f + static_cast<float>(j);
      }
      y[r] = static_cast<float>(row % 2);
      e[r] = static_cast<int64_t>(row % 100000);
      t[r] = static_cast<int64_t>(row) * 1000000;
    }
    MustOk(w.Append(x.data(), y.data(), e.data(), t.data(), n));
  }
  MustOk(w.Commit().status());
}

// The baseline: read(2) of `bytes` from the start of the file into a
// page-aligned 1 MiB buffer. Best of three.
Rate SequentialRead(const std::string& path, uint64_t bytes) {
  Rate best;
  void* mem = nullptr;
  if (::posix_memalign(&mem, 4096, 1 << 20) != 0) std::abort();
  std::memset(mem, 0, 1 << 20);
  for (int rep = 0; rep < 3; ++rep) {
    int fd = ::open(path.c_str(), O_RDONLY);
    auto t0 = Clock::now();
    double c0 = CpuSeconds();
    uint64_t done = 0;
    while (done < bytes) {
      ssize_t n = ::read(fd, mem, std::min<uint64_t>(1 << 20, bytes - done));
      if (n <= 0) break;
      done += static_cast<uint64_t>(n);
    }
    double gbs = static_cast<double>(done) / Since(t0) / 1e9;
    double cpu = static_cast<double>(done) / std::max(1e-9, CpuSeconds() - c0) / 1e9;
    ::close(fd);
    best.wall = std::max(best.wall, gbs);
    best.cpu = std::max(best.cpu, cpu);
  }
  std::free(mem);
  return best;
}

// Loader throughput (features + labels delivered) over whole epochs; best of three.
uint64_t g_window = 0;  // --window: shuffle window rows (0: the loader's default)

// Drops `path` from the page cache, so the next read comes from the disk.
void DropCache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// `cold`: each epoch starts with the file out of the page cache.
Rate LoaderRate(const std::string& path, bool shuffle, uint32_t threads, uint64_t* batches_out,
                bool cold = false) {
  LoaderOptions o;
  o.shuffle_window_rows = g_window;
  o.batch_rows = 1024;
  o.seed = 1;
  o.shuffle = shuffle;
  o.threads = threads;
  auto l = Must(Loader::Open(path, "", o));
  Rate best;
  volatile float sink = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    if (cold) DropCache(DataFile(path));
    auto t0 = Clock::now();
    double c0 = CpuSeconds();
    uint64_t bytes = 0;
    for (uint64_t s = 0; s < l.batches_per_epoch(); ++s) {
      auto b = Must(l.Next());
      sink = sink + b.x()[0];
      bytes += b.rows() * (b.features() + 1) * sizeof(float);
    }
    best.wall = std::max(best.wall, static_cast<double>(bytes) / Since(t0) / 1e9);
    best.cpu =
        std::max(best.cpu, static_cast<double>(bytes) / std::max(1e-9, CpuSeconds() - c0) / 1e9);
  }
  *batches_out = l.batches_per_epoch();
  return best;
}

void WarmCache(const std::string& path) {
  std::vector<char> buf(1 << 20);
  int fd = ::open(path.c_str(), O_RDONLY);
  while (::read(fd, buf.data(), buf.size()) > 0) {
  }
  ::close(fd);
}

uint64_t FileSize(const std::string& p) {
  return std::filesystem::file_size(p);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void BenchLoader(const std::string& dir, double gib) {
  const uint64_t nf = 64;
  const uint64_t rows = static_cast<uint64_t>(gib * (1ull << 30) / (nf * 4));
  const uint64_t bytes = rows * (nf + 1) * 4;  // what the loader delivers
  std::printf(
      "\n== loader: %llu rows x %llu features + label = %.2f GiB delivered per epoch, batch 1024 "
      "rows\n",
      static_cast<unsigned long long>(rows), static_cast<unsigned long long>(nf),
      static_cast<double>(bytes) / (1ull << 30));
  for (int level : {0, 1}) {
    std::string path = dir + (level ? "/loader-deflate.h5" : "/loader.h5");
    auto t0 = Clock::now();
    MakeSet(path, rows, nf, "", level, level > 0);
    std::printf("%s file: %.2f GiB on disk, written in %.1f s\n",
                level ? "compressed (deflate 1 + shuffle)" : "uncompressed",
                static_cast<double>(FileSize(DataFile(path))) / (1ull << 30), Since(t0));
    WarmCache(DataFile(path));
    uint64_t raw_bytes = level ? std::min<uint64_t>(FileSize(DataFile(path)), bytes) : bytes;
    // This machine is shared (2 cores): each loader figure is bracketed by
    // baseline reads, and the median of three such ratios is reported.
    for (bool shuffle : {false, true}) {
      for (uint32_t threads : {1u, 2u}) {
        std::vector<double> ratios, rates, bases, cpu_ratios;
        for (int rep = 0; rep < 3; ++rep) {
          Rate b0 = SequentialRead(DataFile(path), raw_bytes);
          uint64_t batches = 0;
          Rate rate = LoaderRate(path, shuffle, threads, &batches);
          Rate b1 = SequentialRead(DataFile(path), raw_bytes);
          rates.push_back(rate.wall);
          bases.push_back((b0.wall + b1.wall) / 2);
          ratios.push_back(rate.wall / ((b0.wall + b1.wall) / 2));
          cpu_ratios.push_back(rate.cpu / std::max(b0.cpu, b1.cpu));
        }
        std::printf(
            "  loader %-8s threads=%u: %6.2f GB/s vs sequential read %6.2f GB/s: wall ratio %.2f "
            "(runs %.2f %.2f %.2f),"
            " CPU-time ratio %.2f%s\n",
            shuffle ? "shuffled" : "in order", threads, Median(rates), Median(bases),
            Median(ratios), ratios[0], ratios[1], ratios[2], Median(cpu_ratios),
            level ? " [decoded bytes vs raw read of the compressed file]" : "");
      }
    }
    RemoveSet(path);
  }
}

// The same compressible data (16 bits of entropy per value) stored with each
// codec; shuffled loading of each against the uncompressed file, measured
// alternately in the same run (median of three ratios).
void BenchCodecs(const std::string& dir, double gib) {
  const uint64_t nf = 64;
  const uint64_t rows = static_cast<uint64_t>(gib * (1ull << 30) / (nf * 4));
  std::printf("\n== codecs: %llu rows x %llu features, shuffled loading, batch 1024 rows\n",
              static_cast<unsigned long long>(rows), static_cast<unsigned long long>(nf));
  const std::vector<std::pair<std::string, int>> codecs = {
      {"none", 0}, {"deflate", 1}, {"blosc-lz4", 1}, {"blosc-lz4", 5}, {"blosc-zstd", 1}};
  std::vector<std::string> paths;
  for (const auto& [codec, level] : codecs) {
    std::string path = fmt::format("{}/codec-{}-{}.h5", dir, codec, level);
    auto t0 = Clock::now();
    MakeSet(path, rows, nf, codec, level, true);
    std::printf("  %-10s level %d: %.3f GiB on disk (%.2fx smaller), written in %.1f s\n",
                codec.c_str(), level, static_cast<double>(FileSize(DataFile(path))) / (1ull << 30),
                paths.empty() ? 1.0
                              : static_cast<double>(FileSize(DataFile(paths[0]))) /
                                    static_cast<double>(FileSize(DataFile(path))),
                Since(t0));
    WarmCache(DataFile(path));
    paths.push_back(path);
  }
  // threads 1 and 2 from the page cache; then 2 threads from the disk.
  for (uint32_t run : {1u, 2u, 3u}) {
    const uint32_t threads = run == 1 ? 1 : 2;
    const bool cold = run == 3;
    for (size_t c = 1; c < codecs.size(); ++c) {
      std::vector<double> ratios, rates, bases;
      uint64_t batches = 0;
      for (int rep = 0; rep < 3; ++rep) {
        Rate base = LoaderRate(paths[0], true, threads, &batches, cold);
        Rate rate = LoaderRate(paths[c], true, threads, &batches, cold);
        rates.push_back(rate.wall);
        bases.push_back(base.wall);
        ratios.push_back(rate.wall / base.wall);
      }
      std::printf(
          "  shuffled %s threads=%u %-10s %d %6.2f GB/s vs uncompressed %6.2f GB/s: ratio %.2f "
          "(runs %.2f %.2f %.2f)\n",
          cold ? "from disk " : "page cache", threads, codecs[c].first.c_str(), codecs[c].second,
          Median(rates), Median(bases), Median(ratios), ratios[0], ratios[1], ratios[2]);
    }
  }
  for (const auto& p : paths) RemoveSet(p);
}

// A copy of the one-version set `split` in format 1, the layout before
// version files: the version's group inside the set file (what the writer
// then copied whole to add a version).
void MakeFormat1Copy(const std::string& split, const std::string& out) {
  h5::SilenceErrorPrinting();
  std::filesystem::remove(out);
  const std::string vpath = split + ".d/v1.h5";
  h5::File src(H5Fopen(vpath.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  h5::File dst(H5Fcreate(out.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT));
  if (!src.valid() || !dst.valid()) Die(Internal("format 1 copy of {}", split));
  h5::Group root(H5Gopen2(src.get(), "/", H5P_DEFAULT));
  VersionInfo info = Must(ReadVersionAttrs(root.get(), "v1"));
  h5::Group versions(H5Gcreate2(dst.get(), "versions", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  h5::Group v1(H5Gcreate2(versions.get(), "v1", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  for (const char* name : {kFeatures, kLabels, kEntityIds, kTimestamps, "stats"}) {
    if (H5Ocopy(src.get(), name, v1.get(), name, H5P_DEFAULT, H5P_DEFAULT) < 0)
      Die(h5::Error(StatusCode::kInternal, name));
  }
  MustOk(WriteVersionAttrs(v1.get(), info));
  MustOk(h5::WriteAttr(dst.get(), "hpcml_format", kFormatName));
  MustOk(h5::WriteAttr(dst.get(), "format_version", int64_t{1}));
  MustOk(h5::WriteAttr(dst.get(), "zone", info.zone));
  MustOk(h5::WriteAttr(dst.get(), "classification", info.classification));
  MustOk(h5::WriteAttr(dst.get(), "latest", std::string("v1")));
}

// Adds a version of `rows` rows; returns the seconds it took (durable).
double AddVersion(const std::string& path, uint64_t rows, uint64_t nf) {
  auto t0 = Clock::now();
  auto w = Must(FeatureSetWriter::Begin(path, WriterOptions{"", 60}));
  NewVersion s = FloatVersion(nf, "{\"op\":\"bench\"}");
  s.label_name = "y";
  s.expected_rows = rows;
  MustOk(w.StartVersion(s).status());
  const uint64_t block = 16384;
  std::vector<float> x(block * nf, 1.5f), y(block, 1.0f);
  std::vector<int64_t> e(block, 7), t(block, 9);
  for (uint64_t first = 0; first < rows; first += block) {
    uint64_t n = std::min(block, rows - first);
    MustOk(w.Append(x.data(), y.data(), e.data(), t.data(), n));
  }
  MustOk(w.Commit().status());
  return Since(t0);
}

// The cost of a daily 1% version of a large set: this layout (one file per
// version) against format 1, whose writer copied the whole set file, in the
// same run. The format 1 file is made from the same data; the writer of
// this build still copies it whole (that is how it upgrades one).
void BenchVersionCost(const std::string& dir, double gib) {
  const uint64_t nf = 64;
  const uint64_t rows = static_cast<uint64_t>(gib * (1ull << 30) / (nf * 4));
  const uint64_t small = std::max<uint64_t>(rows / 100, 1);
  std::printf("\n== adding a 1%% version (%llu rows) to a set of %llu rows x %llu features\n",
              static_cast<unsigned long long>(small), static_cast<unsigned long long>(rows),
              static_cast<unsigned long long>(nf));
  const std::string split = dir + "/big.h5", old = dir + "/big-format1.h5";
  RemoveSet(split);
  auto t0 = Clock::now();
  MakeSet(split, rows, nf, "none", 0, false);
  std::printf("  set written in %.1f s: %.2f GiB\n", Since(t0),
              static_cast<double>(FileSize(split + ".d/v1.h5")) / (1ull << 30));
  t0 = Clock::now();
  MakeFormat1Copy(split, old);
  std::printf("  format 1 copy made in %.1f s: %.2f GiB\n", Since(t0),
              static_cast<double>(FileSize(old)) / (1ull << 30));
  double before = AddVersion(old, small, nf);
  double after = AddVersion(split, small, nf);
  std::printf(
      "  format 1 (copy the set, add, rename): %.2f s\n"
      "  version files (write the version, relink): %.2f s\n"
      "  ratio before/after: %.1fx; set file now %.1f KiB, the new version %.1f MiB\n",
      before, after, before / after, static_cast<double>(FileSize(split)) / 1024,
      static_cast<double>(FileSize(split + ".d/v2.h5")) / (1 << 20));
  RemoveSet(split);
  RemoveSet(old);
}

std::string MakeCsv(const std::string& path, uint64_t rows, uint64_t nf) {
  FILE* f = std::fopen(path.c_str(), "w");
  std::fprintf(f, "id,ts,y");
  for (uint64_t j = 0; j < nf; ++j) std::fprintf(f, ",f%llu", static_cast<unsigned long long>(j));
  std::fprintf(f, "\n");
  for (uint64_t r = 0; r < rows; ++r) {
    std::fprintf(f, "%llu,%llu,%llu", static_cast<unsigned long long>(r % 100000),
                 static_cast<unsigned long long>(1700000000 + r),
                 static_cast<unsigned long long>(r % 2));
    for (uint64_t j = 0; j < nf; ++j)
      std::fprintf(f, ",%.4f", static_cast<double>((r * 31 + j * 7) % 10000) * 0.0137);
    std::fprintf(f, "\n");
  }
  std::fclose(f);
  return path;
}

// Runs `hpcml-fcache <args>` (output to `log`); returns its exit status and
// sets *seconds.
int Fcache(const std::string& args, const std::string& log, double* seconds) {
  const std::string cmd = fmt::format("{} {} > {} 2>&1", HPCML_FCACHE_BIN, args, log);
  auto t0 = Clock::now();
  int st = std::system(cmd.c_str());
  *seconds = Since(t0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

// Feature quality on a large set, through the command line as a user runs
// it: ingest (with statistics), ingest again with validation rules, a
// standardised derive (a shifted distribution), stats, validate, and drift
// from the stored samples and --exact. Each command's time and exit status.
void BenchQuality(const std::string& dir, uint64_t rows) {
  const uint64_t nf = 16;
  std::printf("\n== feature quality on %llu rows x %llu features (through hpcml-fcache)\n",
              static_cast<unsigned long long>(rows), static_cast<unsigned long long>(nf));
  auto t0 = Clock::now();
  const std::string csv = MakeCsv(dir + "/quality.csv", rows, nf);
  std::printf("  CSV %.2f GB made in %.1f s\n", static_cast<double>(FileSize(csv)) / 1e9,
              Since(t0));
  const std::string h5 = dir + "/quality.h5", rules = dir + "/rules.toml", log = dir + "/log";
  RemoveSet(h5);
  MustOk(WriteFileAtomic(rules,
                         fmt::format("[rows]\nmin = {}\nmax = {}\n[features.f0]\nmin = 0.0\n"
                                     "max = 137.0\nmax_missing = 0.0\n[label]\nmin_share = 0.4\n",
                                     rows / 2, rows * 2)));
  const std::string ingest = fmt::format(
      "ingest {} --csv {} --entity id --timestamp ts --label y --zone bench "
      "--classification internal",
      h5, csv);
  struct Step {
    std::string what, args;
    int expect;
  };
  const std::vector<Step> steps = {
      {"ingest v1 (statistics while writing)", ingest, 0},
      {"ingest v2 with --rules (checked before publishing)", ingest + " --rules " + rules, 0},
      {"derive v3 --standardize (a shifted distribution)",
       "derive " + h5 + " --from v1 --standardize", 0},
      {"stats v1", "stats " + h5 + " v1", 0},
      {"stats v1 --json", "stats " + h5 + " v1 --json", 0},
      {"validate v1 --rules", "validate " + h5 + " v1 --rules " + rules, 0},
      {"validate v3 --rules (breaks f0's range)", "validate " + h5 + " v3 --rules " + rules, 3},
      {"drift v1 v2 (same data: none)", "drift " + h5 + " v1 v2", 0},
      {"drift v1 v3 (stored samples)", "drift " + h5 + " v1 v3", 3},
      {"drift v1 v3 --exact (reads both versions)", "drift " + h5 + " v1 v3 --exact", 3},
  };
  for (const Step& st : steps) {
    double secs = 0;
    int rc = Fcache(st.args, log, &secs);
    std::printf("  %-52s %7.2f s  exit %d%s\n", st.what.c_str(), secs, rc,
                rc == st.expect ? "" : fmt::format(" (expected {})", st.expect).c_str());
    if (rc != st.expect) {
      auto text = ReadFile(log);
      std::printf("%s\n", text.ok() ? text->c_str() : "");
      std::exit(1);
    }
  }
  std::filesystem::remove(csv);
  RemoveSet(h5);
}

// Ingest of a bench CSV (id, ts, label y, then features) into zone "bench".
IngestOptions BenchIngestOptions(const std::string& csv) {
  IngestOptions o;
  o.csv_path = csv;
  o.entity_column = "id";
  o.timestamp_column = "ts";
  o.label_column = "y";
  o.zone = "bench";
  o.classification = "internal";
  return o;
}

void BenchIngest(const std::string& dir, uint64_t rows) {
  const uint64_t nf = 16;
  std::string csv = MakeCsv(dir + "/ingest.csv", rows, nf);
  uint64_t size = FileSize(csv);
  WarmCache(csv);
  std::string h5 = dir + "/ingest.h5";
  RemoveSet(h5);
  IngestOptions o = BenchIngestOptions(csv);
  // With and without the per-column statistics, alternating, best of two
  // each: what the statistics add to an ingest.
  double s = 1e30, bare = 1e30;
  VersionInfo v;
  for (int round = 0; round < 2; ++round) {
    for (bool stats : {false, true}) {
      RemoveSet(h5);
      o.statistics = stats;
      auto t0 = Clock::now();
      v = Must(Ingest(h5, o));
      (stats ? s : bare) = std::min(stats ? s : bare, Since(t0));
    }
  }
  // Baseline in the same run: just reading the CSV bytes.
  auto t1 = Clock::now();
  WarmCache(csv);
  double read_s = Since(t1);
  std::printf("\n== ingest: %llu rows x %llu features, CSV %.1f MB\n",
              static_cast<unsigned long long>(v.rows), static_cast<unsigned long long>(nf),
              static_cast<double>(size) / 1e6);
  std::printf(
      "  ingest (parse, SHA-256, write, fsync, publish): %.2f s = %.1f MB/s of CSV (reading the "
      "CSV alone: %.0f MB/s)\n",
      s, static_cast<double>(size) / s / 1e6, static_cast<double>(size) / read_s / 1e6);
  std::printf(
      "  statistics (count, missing, min, max, mean, std, a 4096-row sample per column): ingest "
      "%.3f s with, %.3f s without, ratio %.3f (goal <= 1.10)\n",
      s, bare, s / bare);
  // The price of atomic publication: adding a version copies the set file
  // (since format 2 only its links; the versions are files of their own).
  uint64_t h5size = FileSize(h5);
  auto t2 = Clock::now();
  { auto w = Must(FeatureSetWriter::Begin(h5, WriterOptions{"", 60})); }
  std::printf("  copy-before-write of the %.3f MB set file when adding a version: %.3f s\n",
              static_cast<double>(h5size) / 1e6, Since(t2));
  std::filesystem::remove(csv);
  RemoveSet(h5);
}

// A table of 10 categorical columns (cardinalities 2 to 5000, quoted as R
// writes them, 1% NA) and 20 numeric ones, or, with `categorical` false,
// the same table with each categorical cell a number of similar width.
std::string MakeTypedCsv(const std::string& path, uint64_t rows, bool categorical) {
  static constexpr uint64_t kCard[10] = {2, 3, 5, 12, 50, 100, 400, 1000, 2500, 5000};
  FILE* f = std::fopen(path.c_str(), "w");
  std::fprintf(f, "id,ts,y");
  for (int j = 0; j < 10; ++j) std::fprintf(f, ",c%d", j);
  for (int j = 0; j < 20; ++j) std::fprintf(f, ",n%d", j);
  std::fprintf(f, "\n");
  uint64_t state = 42;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  for (uint64_t r = 0; r < rows; ++r) {
    std::fprintf(f, "%llu,%llu,%llu", static_cast<unsigned long long>(r % 100000),
                 static_cast<unsigned long long>(1700000000 + r),
                 static_cast<unsigned long long>(r % 2));
    for (int j = 0; j < 10; ++j) {
      const uint64_t v = next() % kCard[j];
      if (next() % 100 == 0) {
        std::fprintf(f, ",NA");
      } else if (categorical) {
        std::fprintf(f, ",\"k%llu\"", static_cast<unsigned long long>(v));
      } else {
        std::fprintf(f, ",%llu.5", static_cast<unsigned long long>(v));
      }
    }
    for (int j = 0; j < 20; ++j)
      std::fprintf(f, ",%.4f",
                   static_cast<double>((r * 31 + static_cast<uint64_t>(j) * 7) % 10000) * 0.0137);
    std::fprintf(f, "\n");
  }
  std::fclose(f);
  return path;
}

// The bytes of a set: its file and its version files.
uint64_t SetBytes(const std::string& h5) {
  uint64_t total = FileSize(h5);
  for (const auto& e : std::filesystem::directory_iterator(h5 + ".d")) total += e.file_size();
  return total;
}

void BenchTyped(const std::string& dir, uint64_t rows) {
  struct Result {
    double secs = 1e30;
    uint64_t csv_bytes = 0, set_bytes = 0;
    std::string kinds;
  };
  Result res[2];  // [0] all numeric, [1] with categorical columns
  for (int categorical = 0; categorical < 2; ++categorical) {
    const std::string csv =
        MakeTypedCsv(dir + fmt::format("/typed{}.csv", categorical), rows, categorical == 1);
    res[categorical].csv_bytes = FileSize(csv);
  }
  IngestOptions o = BenchIngestOptions("");
  const std::string h5 = dir + "/typed.h5";
  // Alternating, best of two each, the CSV in the page cache.
  for (int round = 0; round < 2; ++round) {
    for (int categorical = 0; categorical < 2; ++categorical) {
      o.csv_path = dir + fmt::format("/typed{}.csv", categorical);
      WarmCache(o.csv_path);
      RemoveSet(h5);
      auto t0 = Clock::now();
      VersionInfo v = Must(Ingest(h5, o));
      Result& r = res[categorical];
      r.secs = std::min(r.secs, Since(t0));
      r.set_bytes = SetBytes(h5);
      std::map<std::string, int> kinds;
      for (const auto& k : v.feature_types) ++kinds[k];
      r.kinds.clear();
      for (const auto& [k, n] : kinds)
        r.kinds += fmt::format("{}{} {}", r.kinds.empty() ? "" : ", ", n, k);
    }
  }
  std::printf(
      "\n== typed ingest: %llu rows, 10 categorical + 20 numeric columns vs the same table "
      "all numeric (uncompressed)\n",
      static_cast<unsigned long long>(rows));
  for (int categorical = 0; categorical < 2; ++categorical) {
    const Result& r = res[categorical];
    std::printf("  %-18s CSV %7.1f MB  ingest %6.2f s (%5.1f MB/s)  on disk %7.1f MB  kinds: %s\n",
                categorical ? "categorical" : "all numeric", static_cast<double>(r.csv_bytes) / 1e6,
                r.secs, static_cast<double>(r.csv_bytes) / r.secs / 1e6,
                static_cast<double>(r.set_bytes) / 1e6, r.kinds.c_str());
  }
  std::printf("  time ratio categorical / all numeric: %.3f (goal <= 1.30); size ratio %.3f\n",
              res[1].secs / res[0].secs,
              static_cast<double>(res[1].set_bytes) / static_cast<double>(res[0].set_bytes));
  for (int categorical = 0; categorical < 2; ++categorical)
    std::filesystem::remove(dir + fmt::format("/typed{}.csv", categorical));
  RemoveSet(h5);
}

void BenchAsof(const std::string& dir, uint64_t rows) {
  const uint64_t nf = 8;
  std::string h5 = dir + "/asof.h5";
  auto t0 = Clock::now();
  {
    RemoveSet(h5);
    auto w = Must(FeatureSetWriter::Begin(h5, WriterOptions{"bench", 60}));
    MustOk(w.StartVersion(FloatVersion(nf, "{}")).status());
    const uint64_t block = 65536, entities = rows / 10 + 1;
    std::vector<float> x(block * nf);
    std::vector<int64_t> e(block), t(block);
    uint64_t state = 88172645463325252ull;
    for (uint64_t first = 0; first < rows; first += block) {
      uint64_t n = std::min(block, rows - first);
      for (uint64_t r = 0; r < n; ++r) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        e[r] = static_cast<int64_t>(state % entities);
        t[r] = static_cast<int64_t>((state >> 20) % 100000000) * 1000000;
        for (uint64_t j = 0; j < nf; ++j)
          x[r * nf + j] = static_cast<float>(first + r) + static_cast<float>(j);
      }
      MustOk(w.Append(x.data(), nullptr, e.data(), t.data(), n));
    }
    MustOk(w.Commit().status());
    FILE* f = std::fopen((dir + "/requests.csv").c_str(), "w");
    std::fprintf(f, "entity,time,label\n");
    for (uint64_t r = 0; r < rows; ++r) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      std::fprintf(f, "%llu,%llu,%llu\n", static_cast<unsigned long long>(state % entities),
                   static_cast<unsigned long long>((state >> 20) % 110000000),
                   static_cast<unsigned long long>(r % 2));
    }
    std::fclose(f);
  }
  std::printf("\n== asof: %llu feature rows x %llu features, %llu requests (made in %.1f s)\n",
              static_cast<unsigned long long>(rows), static_cast<unsigned long long>(nf),
              static_cast<unsigned long long>(rows), Since(t0));
  std::string req = dir + "/requests.csv";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(HPCML_FCACHE_BIN, HPCML_FCACHE_BIN, "asof", h5.c_str(), "--requests", req.c_str(),
            "--entity", "entity", "--time", "time", "--label", "label", "--memory", "256M",
            "--tmpdir", dir.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto t1 = Clock::now();
  int status = 0;
  struct rusage ru;
  ::wait4(pid, &status, 0, &ru);
  double s = Since(t1);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Die(Internal("hpcml-fcache asof failed"));
  std::printf(
      "  hpcml-fcache asof --memory 256M: %.1f s, peak RSS %.0f MiB (feature data %.0f MiB, "
      "requests CSV %.0f MiB)\n",
      s, static_cast<double>(ru.ru_maxrss) / 1024,
      static_cast<double>(rows * (nf * 4 + 16)) / (1 << 20),
      static_cast<double>(FileSize(req)) / (1 << 20));
  RemoveSet(h5);
  std::filesystem::remove(req);
}

}  // namespace

// One shuffled epoch of `file`'s v1 (batch rows, one reader thread), each
// batch touched; the best of `repeat`, in seconds, on one line.
void BenchEpoch(const std::string& file, uint64_t batch, int repeat) {
  double best = 1e300;
  for (int r = 0; r < repeat; ++r) {
    LoaderOptions o;
    o.batch_rows = batch;
    o.seed = 3;
    o.epochs = 1;
    const auto t0 = std::chrono::steady_clock::now();
    Result<Loader> l = Loader::Open(file, "v1", o);
    if (!l.ok()) Die(l.status());
    double sum = 0;
    while (!l->done()) {
      Result<Batch> b = l->Next();
      if (!b.ok()) Die(b.status());
      sum += b->rows() > 0 ? b->x()[0] : 0.0f;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s + 0.0 * sum);
  }
  std::printf("epoch_seconds=%.6f\n", best);
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "all";
  if (mode == "epoch") {
    std::string file;
    uint64_t batch = 4096;
    int repeat = 3;
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string k = argv[i], v = argv[i + 1];
      if (k == "--file")
        file = v;
      else if (k == "--batch")
        batch = std::stoull(v);
      else if (k == "--repeat")
        repeat = std::stoi(v);
      else
        Die(InvalidArgument("epoch: unknown option {}", k));
    }
    if (file.empty()) Die(InvalidArgument("epoch: --file SET is required"));
    BenchEpoch(file, batch, repeat);
    return 0;
  }
  std::string dir = "/tmp/hpcml-fcache-bench";
  double gib = 1.0;
  uint64_t ingest_rows = 1000000, asof_rows = 10000000, quality_rows = 10000000;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--dir")
      dir = v;
    else if (k == "--gib")
      gib = std::stod(v);
    else if (k == "--rows")
      ingest_rows = asof_rows = quality_rows = std::stoull(v);
    else if (k == "--window")
      g_window = std::stoull(v);
    else
      Die(InvalidArgument("unknown option {}", k));
  }
  if (mode == "smoke") {
    gib = 0.01;
    ingest_rows = 2000;
    asof_rows = 5000;
    quality_rows = 5000;
  }
  std::filesystem::create_directories(dir);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (mode == "loader" || mode == "all" || mode == "smoke") BenchLoader(dir, gib);
  if (mode == "codec" || mode == "all" || mode == "smoke") BenchCodecs(dir, gib);
  if (mode == "version" || mode == "all" || mode == "smoke") BenchVersionCost(dir, gib);
  if (mode == "quality" || mode == "all" || mode == "smoke") BenchQuality(dir, quality_rows);
  if (mode == "ingest" || mode == "all" || mode == "smoke") BenchIngest(dir, ingest_rows);
  if (mode == "asof" || mode == "all" || mode == "smoke") BenchAsof(dir, asof_rows);
  if (mode == "typed" || mode == "all" || mode == "smoke") BenchTyped(dir, asof_rows);
  std::filesystem::remove_all(dir);
  return 0;
}
