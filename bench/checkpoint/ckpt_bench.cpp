// Checkpoint write throughput against a raw write of the same bytes, in the
// same run and the same directory: 4 shards of a float tensor. Target >= 0.8x.
// Also: the snapshot time an async save costs training, against the full save.
//   hpcml-bench-ckpt DIR [MiB]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "hpcml/checkpoint/async.hpp"
#include "hpcml/checkpoint/store.hpp"

using namespace hpcml::checkpoint;
using Clock = std::chrono::steady_clock;

static double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [MiB]\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  const std::int64_t mib = argc > 2 ? std::atoll(argv[2]) : 512;
  const int shards = 4;
  const std::int64_t n = mib * (1 << 20) / 4;
  std::vector<float> data(static_cast<size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    data[static_cast<size_t>(i)] = static_cast<float>(i % 1000) * 0.5f;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/raw");
  const double bytes = static_cast<double>(n) * 4;

  double best_raw = 1e30, best_ckpt = 1e30, best_snap = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    // Raw: the same bytes, one file per shard, write + fsync.
    auto t0 = Clock::now();
    for (int s = 0; s < shards; ++s) {
      std::string p = dir + "/raw/shard" + std::to_string(s);
      int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const char* src =
          reinterpret_cast<const char*>(data.data()) + static_cast<size_t>(bytes / shards) * s;
      size_t left = static_cast<size_t>(bytes / shards);
      while (left > 0) {
        ssize_t w = ::write(fd, src, left);
        if (w <= 0) return 1;
        src += w;
        left -= static_cast<size_t>(w);
      }
      ::fsync(fd);
      ::close(fd);
    }
    best_raw = std::min(best_raw, Since(t0));

    auto d = CheckpointDir::Open(dir + "/ckpt", 1);
    if (!d.ok()) return 1;
    t0 = Clock::now();
    Manifest m;
    m.step = rep + 1;
    for (int s = 0; s < shards; ++s) {
      Slice sl = *SplitAlong({n}, 0, s, shards);
      auto info = d->WriteShard(m.step, s, {{"w", {n}, sl, data.data() + sl.offset[0]}}, {});
      if (!info.ok()) {
        std::fprintf(stderr, "%s\n", info.status().message().c_str());
        return 1;
      }
      m.shards.push_back(*info);
    }
    if (!d->Commit(m).ok()) return 1;
    best_ckpt = std::min(best_ckpt, Since(t0));

    AsyncWriter writer(*d);
    Slice sl = *SplitAlong({n}, 0, 0, shards);
    if (!writer.Start(100 + rep, 0, {{"w", {n}, sl, data.data()}}, {}).ok()) return 1;
    best_snap = std::min(best_snap, writer.last_snapshot_s() * shards);
    if (!writer.Wait().ok()) return 1;
  }
  std::printf("ckpt-bench: %lld MiB in %d shards\n", static_cast<long long>(mib), shards);
  std::printf("ckpt-bench: raw write+fsync   %7.3f s  %8.1f MB/s\n", best_raw,
              bytes / best_raw / 1e6);
  std::printf(
      "ckpt-bench: checkpoint set    %7.3f s  %8.1f MB/s  (HDF5, fsync, XXH3 checksum, manifest)\n",
      best_ckpt, bytes / best_ckpt / 1e6);
  std::printf("ckpt-bench: throughput ratio checkpoint/raw = %.2fx (target >= 0.8x)\n",
              best_raw / best_ckpt);
  std::printf(
      "ckpt-bench: async snapshot %.3f s = %.1f%% of a full save (what training waits for)\n",
      best_snap, 100 * best_snap / best_ckpt);
  std::filesystem::remove_all(dir);
  return 0;
}
