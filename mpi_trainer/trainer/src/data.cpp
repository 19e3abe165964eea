#include "hpcml/trainer/data.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "hpcml/trainer/random.hpp"

namespace hpcml::trainer {
namespace {

constexpr std::uint64_t kTeacherStream = 0x7EAC4E5ull;
constexpr std::uint64_t kHeldOutStream = 0x4E1D0u;

// The data set's rule: the teacher and sample i's features and targets.
class Teacher {
 public:
  explicit Teacher(const SyntheticConfig& c)
      : c_(c), xseed_(DeriveSeed(c.seed, c.held_out ? kHeldOutStream : 0)) {
    const std::uint64_t tseed = DeriveSeed(c.seed, kTeacherStream);
    teacher_.resize(static_cast<size_t>(c.outputs * c.features));
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.features));
    for (size_t i = 0; i < teacher_.size(); ++i) {
      teacher_[i] = GaussianAt(tseed, i) * scale;
    }
    x_.resize(static_cast<size_t>(c.features));
  }

  // Sample i: features and targets (either may be null).
  void Generate(std::int64_t i, float* features, float* targets) {
    std::vector<double>& x = x_;
    for (std::int64_t f = 0; f < c_.features; ++f) {
      x[static_cast<size_t>(f)] =
          GaussianAt(xseed_, static_cast<std::uint64_t>(i * c_.features + f));
      if (features != nullptr) features[f] = static_cast<float>(x[static_cast<size_t>(f)]);
    }
    if (targets == nullptr) return;
    std::int64_t best = 0;
    double best_v = -1e300;
    for (std::int64_t k = 0; k < c_.outputs; ++k) {
      double v = 0.0;
      for (std::int64_t f = 0; f < c_.features; ++f) {
        v += teacher_[static_cast<size_t>(k * c_.features + f)] * x[static_cast<size_t>(f)];
      }
      if (c_.classification) {
        if (v > best_v) {
          best_v = v;
          best = k;
        }
      } else {
        targets[k] = static_cast<float>(std::tanh(v));
      }
    }
    if (c_.classification) targets[0] = static_cast<float>(best);
  }

 private:
  SyntheticConfig c_;
  std::uint64_t xseed_;
  std::vector<double> teacher_;
  std::vector<double> x_;  // one sample's features in double (Generate's scratch)
};

class SyntheticSource final : public BatchSource {
 public:
  SyntheticSource(const SyntheticConfig& c, std::int64_t global_batch, int replica, int replicas)
      : c_(c), teacher_(c), batch_(global_batch), replica_(replica), replicas_(replicas) {
    // Cache a repeating set when it is small enough (at most 256 MiB).
    const std::int64_t per_sample = c.features + (c.classification ? 1 : c.outputs);
    if (c.samples > 0 && c.samples * per_sample <= (std::int64_t{64} << 20)) {
      const auto n = static_cast<std::size_t>(c.samples);
      cached_.assign(n, 0);
      cache_features_.resize(n * static_cast<std::size_t>(c.features));
      cache_targets_.resize(n * static_cast<std::size_t>(per_sample - c.features));
    }
  }

  std::int64_t feature_dim() const override { return c_.features; }
  std::int64_t target_dim() const override { return c_.classification ? 1 : c_.outputs; }
  std::int64_t num_classes() const override { return c_.classification ? c_.outputs : 0; }

  Status Next(std::int64_t rows, float* features, float* targets) override {
    if (rows * replicas_ > batch_) {
      return InvalidArgument("synthetic data: {} rows per replica exceed the global batch {}", rows,
                             batch_);
    }
    const std::int64_t tdim = target_dim();
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t i = step_ * batch_ + replica_ * (batch_ / replicas_) + r;
      if (c_.samples > 0) i %= c_.samples;
      float* f = features != nullptr ? features + r * c_.features : nullptr;
      float* t = targets != nullptr ? targets + r * tdim : nullptr;
      if (cached_.empty()) {
        teacher_.Generate(i, f, t);
        continue;
      }
      // A repeating set (--synthetic-samples) is generated once per sample:
      // later epochs copy it (the Box-Muller draws cost more than a small
      // model's training step).
      const auto k = static_cast<std::size_t>(i);
      float* cf = cache_features_.data() + k * static_cast<std::size_t>(c_.features);
      float* ct = cache_targets_.data() + k * static_cast<std::size_t>(tdim);
      if (!cached_[k]) {
        teacher_.Generate(i, cf, ct);
        cached_[k] = 1;
      }
      if (f != nullptr) std::copy(cf, cf + c_.features, f);
      if (t != nullptr) std::copy(ct, ct + tdim, t);
    }
    ++step_;
    return Status::Ok();
  }

  std::string SavePosition() const override { return std::to_string(step_); }

  Status RestorePosition(std::string_view position) override {
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(position.data(), position.data() + position.size(), v);
    if (ec != std::errc() || end != position.data() + position.size() || v < 0) {
      return InvalidArgument("synthetic data: bad position '{}'", position);
    }
    step_ = v;
    return Status::Ok();
  }

 private:
  SyntheticConfig c_;
  Teacher teacher_;
  std::int64_t batch_;
  int replica_, replicas_;
  std::int64_t step_ = 0;
  // Per-sample cache of a repeating set; empty when off.
  std::vector<char> cached_;
  std::vector<float> cache_features_, cache_targets_;
};

// Samples [0, N) split into contiguous replica parts (the feature cache's
// shard rule without shuffling), read in batches of `rows`, pass after pass.
class SyntheticEvalSource final : public EvalSource {
 public:
  SyntheticEvalSource(const SyntheticConfig& c, std::int64_t rows, int replica, int replicas)
      : c_(c), teacher_(c), rows_(rows) {
    const std::int64_t q = c.samples / replicas, e = c.samples % replicas;
    begin_ = replica * q + std::min<std::int64_t>(replica, e);
    len_ = q + (replica < e ? 1 : 0);
    const std::int64_t longest = q + (e > 0 ? 1 : 0);
    batches_ = (longest + rows - 1) / rows;
  }

  std::int64_t feature_dim() const override { return c_.features; }
  std::int64_t target_dim() const override { return c_.classification ? 1 : c_.outputs; }
  std::int64_t num_classes() const override { return c_.classification ? c_.outputs : 0; }
  std::int64_t rows() const override { return c_.samples; }
  std::int64_t batches() const override { return batches_; }

  Result<std::int64_t> Next(std::int64_t max_rows, float* features, float* targets) override {
    if (max_rows < rows_) {
      return InvalidArgument("synthetic validation data: batches of {} rows, room for {}", rows_,
                             max_rows);
    }
    const std::int64_t first = step_ * rows_;
    const std::int64_t n = std::clamp<std::int64_t>(len_ - first, 0, rows_);
    const std::int64_t tdim = target_dim();
    for (std::int64_t r = 0; r < n; ++r) {
      teacher_.Generate(begin_ + first + r,
                        features != nullptr ? features + r * c_.features : nullptr,
                        targets != nullptr ? targets + r * tdim : nullptr);
    }
    step_ = (step_ + 1) % batches_;
    return n;
  }

 private:
  SyntheticConfig c_;
  Teacher teacher_;
  std::int64_t rows_, begin_ = 0, len_ = 0, batches_ = 0, step_ = 0;
};

}  // namespace

Result<std::unique_ptr<BatchSource>> MakeSyntheticSource(const SyntheticConfig& config,
                                                         std::int64_t global_batch, int replica,
                                                         int replicas) {
  if (config.features < 1) return InvalidArgument("synthetic data: --input-dim must be >= 1");
  if (config.outputs < (config.classification ? 2 : 1)) {
    return InvalidArgument("synthetic data: {} outputs are too few", config.outputs);
  }
  if (replicas < 1 || replica < 0 || replica >= replicas || global_batch % replicas != 0) {
    return InvalidArgument("synthetic data: global batch {} cannot be split over {} replicas",
                           global_batch, replicas);
  }
  return std::unique_ptr<BatchSource>(
      std::make_unique<SyntheticSource>(config, global_batch, replica, replicas));
}

Result<std::unique_ptr<EvalSource>> MakeSyntheticEvalSource(const SyntheticConfig& config,
                                                            std::int64_t rows, int replica,
                                                            int replicas) {
  if (config.samples < 1) {
    return InvalidArgument("synthetic validation data: --val-samples must be >= 1, got {}",
                           config.samples);
  }
  if (config.features < 1) return InvalidArgument("synthetic data: --input-dim must be >= 1");
  if (config.outputs < (config.classification ? 2 : 1)) {
    return InvalidArgument("synthetic data: {} outputs are too few", config.outputs);
  }
  if (rows < 1 || replicas < 1 || replica < 0 || replica >= replicas) {
    return InvalidArgument("synthetic validation data: {} rows per batch on replica {} of {}", rows,
                           replica, replicas);
  }
  return std::unique_ptr<EvalSource>(
      std::make_unique<SyntheticEvalSource>(config, rows, replica, replicas));
}

}  // namespace hpcml::trainer
