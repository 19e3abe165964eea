// Asynchronous checkpoint writes: the tensors are copied to host memory
// (the snapshot, the only part training waits for) and written on a
// background thread while training goes on.
#pragma once

#include <future>
#include <nlohmann/json.hpp>
#include <vector>

#include "hpcml/checkpoint/store.hpp"

namespace hpcml::checkpoint {

// A tensor slice whose data the writer owns (no second copy).
struct OwnedTensor {
  std::string name;
  Shape global_shape;
  Slice slice;
  std::vector<float> data;
};

// One write in flight at a time. Not thread-safe: one owner (the training loop).
class AsyncWriter {
 public:
  explicit AsyncWriter(const CheckpointDir& dir) : dir_(dir) {}
  ~AsyncWriter();  // waits for a write in flight
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  // Copies `tensors` and starts writing shard `rank` of set `step`. The
  // caller's buffers may change as soon as this returns. FailedPrecondition
  // when a write is still in flight (Wait first).
  Status Start(std::int64_t step, int rank, const std::vector<TensorRef>& tensors,
               nlohmann::json rank_state);
  // Same, taking the snapshot the caller already made (for example copied
  // from device memory): training pays for that one copy only.
  Status StartOwned(std::int64_t step, int rank, std::vector<OwnedTensor> tensors,
                    nlohmann::json rank_state);
  bool in_flight() const { return future_.valid(); }
  // Finished without blocking? (false when nothing is in flight)
  bool ready() const;
  // Blocks until the write in flight ends; its result. FailedPrecondition when none.
  Result<ShardInfo> Wait();
  // Seconds spent copying the last snapshot (what training paid).
  double last_snapshot_s() const { return snapshot_s_; }

 private:
  const CheckpointDir& dir_;
  Status Launch(std::int64_t step, int rank, nlohmann::json rank_state);
  std::vector<OwnedTensor> owned_;
  std::future<Result<ShardInfo>> future_;
  double snapshot_s_ = 0;
};

}  // namespace hpcml::checkpoint
