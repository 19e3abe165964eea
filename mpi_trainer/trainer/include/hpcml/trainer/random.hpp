// Counter-based random numbers: the value at (seed, counter) is a pure
// function, so any rank can produce any slice of a tensor or any sample of
// the synthetic data set without generating the rest. That is what makes the
// initial model and the data identical in every grid layout.
#pragma once

#include <cmath>
#include <cstdint>

namespace hpcml::trainer {

// SplitMix64 finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
inline std::uint64_t Mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A stream seed derived from a base seed and a purpose/index (layer, data).
inline std::uint64_t DeriveSeed(std::uint64_t seed, std::uint64_t index) {
  return Mix64(Mix64(seed) ^ (index * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull));
}

// Uniform in (0, 1), 53 random bits.
inline double UniformAt(std::uint64_t seed, std::uint64_t counter) {
  std::uint64_t bits = Mix64(seed ^ Mix64(counter));
  return (static_cast<double>(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal (Box-Muller on two counter-derived uniforms).
inline double GaussianAt(std::uint64_t seed, std::uint64_t counter) {
  double u1 = UniformAt(seed, 2 * counter);
  double u2 = UniformAt(seed, 2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace hpcml::trainer
