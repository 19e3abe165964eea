#include "model_io.hpp"

#include <hdf5.h>
#include <mpi.h>

#include "hpcml/common/h5.hpp"

namespace hpcml::trainer {
namespace {

constexpr int kGatherTag = 7301;

// Copies an owned slice into the full row-major tensor.
void Place(const ParamInfo& p, const float* slice, std::vector<float>& full) {
  const std::int64_t cols = p.is_bias ? 1 : p.global_shape[1];
  const std::int64_t w = p.col_end - p.col_begin;
  for (std::int64_t r = p.row_begin; r < p.row_end; ++r) {
    for (std::int64_t c = p.col_begin; c < p.col_end; ++c) {
      full[static_cast<size_t>(r * cols + c)] = slice[(r - p.row_begin) * w + (c - p.col_begin)];
    }
  }
}

}  // namespace

Result<std::vector<FullTensor>> GatherModel(const Model& model, const ProcessGrid* grid,
                                            Backend& backend, WhichTensor which) {
  const float* base = which == WhichTensor::kParams ? model.param_data() : model.grad_data();
  std::vector<float> local(model.num_params());
  backend.ToHost(local.data(), base, local.size());
  const int rank = grid ? grid->rank() : 0;
  const GridShape shape = grid ? grid->shape() : GridShape{};
  const int dp_idx = grid ? grid->dp_idx() : 0, tp_idx = grid ? grid->tp_idx() : 0;

  // Everyone learns the global layout from the model config; senders send
  // their slices in layer order, rank 0 receives in the same order, so
  // blocking sends cannot deadlock.
  std::vector<FullTensor> out;
  if (rank != 0) {
    if (dp_idx == 0) {
      for (const ParamInfo& p : model.params()) {
        if ((p.tp_replicated && tp_idx != 0) || p.layer == -1) continue;
        MPI_Send(local.data() + p.offset, static_cast<int>(p.size), MPI_FLOAT, 0, kGatherTag,
                 grid->world());
      }
    }
    return out;
  }
  const ModelConfig& mc = model.config();
  HPCML_ASSIGN_OR_RETURN(ModelPartition plan, PartitionModel(mc, shape));
  std::vector<float> slice;
  for (const LayerPartition& lp : plan.layers) {
    for (int is_bias = 0; is_bias < 2; ++is_bias) {
      FullTensor t;
      t.name = fmt::format("layer{}.{}", lp.index, is_bias ? "bias" : "weight");
      t.shape =
          is_bias ? std::vector<std::int64_t>{lp.out} : std::vector<std::int64_t>{lp.out, lp.in};
      t.data.assign(static_cast<size_t>(is_bias ? lp.out : lp.out * lp.in), 0.0f);
      const bool replicated = is_bias ? lp.split != Split::kColumn : lp.split == Split::kReplicated;
      const int owners = replicated ? 1 : shape.tp;
      for (int tp = 0; tp < owners; ++tp) {
        // The owner's ParamInfo, rebuilt here from the plan (same rules as Model).
        ParamInfo p;
        p.is_bias = is_bias != 0;
        p.global_shape = t.shape;
        p.row_end = lp.out;
        p.col_end = is_bias ? 1 : lp.in;
        if (lp.split == Split::kColumn) {
          const std::int64_t w = lp.out / shape.tp;
          p.row_begin = w * tp;
          p.row_end = p.row_begin + w;
        } else if (lp.split == Split::kRow && !is_bias) {
          const std::int64_t w = lp.in / shape.tp;
          p.col_begin = w * tp;
          p.col_end = p.col_begin + w;
        }
        const auto n = static_cast<size_t>((p.row_end - p.row_begin) * (p.col_end - p.col_begin));
        const int src = grid ? RankOf(shape, 0, lp.stage, tp) : 0;
        if (src == 0) {
          const ParamInfo* mine = nullptr;
          for (const ParamInfo& q : model.params()) {
            if (q.name == t.name) mine = &q;
          }
          if (mine == nullptr) return Internal("rank 0 lacks {}", t.name);
          Place(p, local.data() + mine->offset, t.data);
        } else {
          slice.resize(n);
          MPI_Recv(slice.data(), static_cast<int>(n), MPI_FLOAT, src, kGatherTag, grid->world(),
                   MPI_STATUS_IGNORE);
          Place(p, slice.data(), t.data);
        }
      }
      out.push_back(std::move(t));
    }
  }
  // The embedding tables: whole on every first-stage rank, so rank 0's.
  for (const ParamInfo& p : model.params()) {
    if (p.layer != -1) continue;
    const float* b = local.data() + p.offset;
    out.push_back(FullTensor{p.name, p.global_shape, std::vector<float>(b, b + p.size)});
  }
  return out;
}

}  // namespace hpcml::trainer
