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
  buffers_.resize(tensors.size());
  std::vector<TensorRef> copies = tensors;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto n = static_cast<size_t>(tensors[i].slice.elements());
    buffers_[i].assign(tensors[i].data, tensors[i].data + n);
    copies[i].data = buffers_[i].data();
  }
  snapshot_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  future_ = std::async(std::launch::async,
                       [this, step, rank, copies = std::move(copies),
                        state = std::move(rank_state)]() -> Result<ShardInfo> {
                         return dir_.WriteShard(step, rank, copies, state);
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
