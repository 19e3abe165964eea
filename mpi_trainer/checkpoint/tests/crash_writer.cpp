// Test helper: writes checkpoint sets in a loop until killed. Set `s` holds
// tensor "w" (2 shards of 128k floats) filled with the value s.
//   crash_writer DIR
#include <cstdio>
#include <vector>

#include "hpcml/checkpoint/store.hpp"

using namespace hpcml::checkpoint;

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto d = CheckpointDir::Open(argv[1], 2);
  if (!d.ok()) return 1;
  // Continue after the newest complete set, so steps only grow.
  std::int64_t step = 0;
  if (auto set = d->LoadLatest(false, nullptr); set.ok()) step = set->manifest().step;
  constexpr std::int64_t kN = 1 << 18;
  std::vector<float> data(kN / 2);
  for (;;) {
    ++step;
    std::fill(data.begin(), data.end(), static_cast<float>(step));
    Manifest m;
    m.step = step;
    for (int r = 0; r < 2; ++r) {
      auto info =
          d->WriteShard(step, r, {{"w", {kN}, *SplitAlong({kN}, 0, r, 2), data.data()}}, {});
      if (!info.ok()) {
        std::fprintf(stderr, "crash_writer: %s\n", info.status().message().c_str());
        return 1;
      }
      m.shards.push_back(*info);
    }
    if (!d->Commit(m).ok()) return 1;
  }
}
