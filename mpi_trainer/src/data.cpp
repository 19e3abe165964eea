#include "hpcml/trainer/data.hpp"

#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "hpcml/trainer/random.hpp"

namespace hpcml::trainer {
namespace {

constexpr std::uint64_t kTeacherStream = 0x7EAC4E5ull;

class SyntheticSource final : public BatchSource {
 public:
  SyntheticSource(const SyntheticConfig& c, std::int64_t global_batch, int replica, int replicas)
      : c_(c), batch_(global_batch), replica_(replica), replicas_(replicas) {
    const std::uint64_t tseed = DeriveSeed(c.seed, kTeacherStream);
    teacher_.resize(static_cast<size_t>(c.outputs * c.features));
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.features));
    for (size_t i = 0; i < teacher_.size(); ++i) {
      teacher_[i] = GaussianAt(tseed, i) * scale;
    }
    x_.resize(static_cast<size_t>(c.features));
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
        Generate(i, f, t);
        continue;
      }
      // A repeating set (--synthetic-samples) is generated once per sample:
      // later epochs copy it (the Box-Muller draws cost more than a small
      // model's training step).
      const auto k = static_cast<std::size_t>(i);
      float* cf = cache_features_.data() + k * static_cast<std::size_t>(c_.features);
      float* ct = cache_targets_.data() + k * static_cast<std::size_t>(tdim);
      if (!cached_[k]) {
        Generate(i, cf, ct);
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
  // Sample i: features and targets (either may be null).
  void Generate(std::int64_t i, float* features, float* targets) {
    const std::uint64_t xseed = DeriveSeed(c_.seed, 0);
    std::vector<double>& x = x_;
    for (std::int64_t f = 0; f < c_.features; ++f) {
      x[static_cast<size_t>(f)] =
          GaussianAt(xseed, static_cast<std::uint64_t>(i * c_.features + f));
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

  SyntheticConfig c_;
  std::int64_t batch_;
  int replica_, replicas_;
  std::int64_t step_ = 0;
  std::vector<double> teacher_;
  std::vector<double> x_;  // one sample's features in double (Generate's scratch)
  // Per-sample cache of a repeating set; empty when off.
  std::vector<char> cached_;
  std::vector<float> cache_features_, cache_targets_;
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

}  // namespace hpcml::trainer
