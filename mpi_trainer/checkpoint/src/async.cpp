#include "hpcml/checkpoint/async.hpp"

#include <chrono>

namespace hpcml::checkpoint {

AsyncWriter::~AsyncWriter() {
  if (future_.valid()) future_.wait();
}

Status AsyncWriter::Start(std::int64_t step, int rank, const std::vector<TensorRef>& tensors,
                          nlohmann::json rank_state) {
  if (future_.valid()) return FailedPrecondition("a checkpoint write is still in flight");
  auto t0 = std::chrono::steady_clock::now();
  std::vector<OwnedTensor> copies;
  for (const auto& t : tensors) {
    const auto n = static_cast<size_t>(t.slice.elements());
    copies.push_back(
        OwnedTensor{t.name, t.global_shape, t.slice, std::vector<float>(t.data, t.data + n)});
  }
  snapshot_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  owned_ = std::move(copies);
  return Launch(step, rank, std::move(rank_state));
}

Status AsyncWriter::StartOwned(std::int64_t step, int rank, std::vector<OwnedTensor> tensors,
                               nlohmann::json rank_state) {
  if (future_.valid()) return FailedPrecondition("a checkpoint write is still in flight");
  snapshot_s_ = 0;
  owned_ = std::move(tensors);
  return Launch(step, rank, std::move(rank_state));
}

Status AsyncWriter::Launch(std::int64_t step, int rank, nlohmann::json rank_state) {
  std::vector<TensorRef> refs;
  for (const auto& t : owned_)
    refs.push_back(TensorRef{t.name, t.global_shape, t.slice, t.data.data()});
  future_ = std::async(std::launch::async,
                       [this, step, rank, refs = std::move(refs),
                        state = std::move(rank_state)]() -> Result<ShardInfo> {
                         return dir_.WriteShard(step, rank, refs, state);
                       });
  return Status::Ok();
}

bool AsyncWriter::ready() const {
  return future_.valid() && future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

Result<ShardInfo> AsyncWriter::Wait() {
  if (!future_.valid()) return FailedPrecondition("no checkpoint write in flight");
  return future_.get();
}

}  // namespace hpcml::checkpoint
