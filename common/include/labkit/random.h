// Seeded, counter-based random numbers: value i of stream `seed` is a pure function of (seed, i), computed the
// same, bit for bit, on the host and on the device. A CPU reference can therefore regenerate any input element
// without copying it back, and a failing seed reproduces the exact inputs.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#ifdef __CUDACC__
#define LABKIT_HD __host__ __device__
#else
#define LABKIT_HD
#endif

namespace labkit {

LABKIT_HD inline std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
LABKIT_HD inline std::uint64_t random_bits(std::uint64_t seed, std::uint64_t i) { return mix64(mix64(seed) ^ i); }

// Uniform in [lo, hi). The 24 (53) random bits make an exact float (double) in [0,1); fma rounds once, the same
// on both sides.
LABKIT_HD inline float uniform_float(std::uint64_t seed, std::uint64_t i, float lo, float hi) {
  float u = static_cast<float>(random_bits(seed, i) >> 40) * 0x1.0p-24f;
  return fmaf(u, hi - lo, lo);
}
LABKIT_HD inline double uniform_double(std::uint64_t seed, std::uint64_t i, double lo, double hi) {
  double u = static_cast<double>(random_bits(seed, i) >> 11) * 0x1.0p-53;
  return fma(u, hi - lo, lo);
}
// Uniform integer in [lo, hi] (inclusive); the modulo bias is below 2^-32 for ranges under 2^32.
LABKIT_HD inline std::int64_t uniform_int(std::uint64_t seed, std::uint64_t i, std::int64_t lo, std::int64_t hi) {
  std::uint64_t range = static_cast<std::uint64_t>(hi - lo) + 1;
  return lo + static_cast<std::int64_t>(range ? random_bits(seed, i) % range : random_bits(seed, i));
}

// A seed for one purpose ("A", "size 33x65") derived from a base seed, so that inputs differ between arrays.
std::uint64_t derive_seed(std::uint64_t base, std::string_view label);

// Host-side fills (identical to the device fills below).
std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo = -1.f, float hi = 1.f);
std::vector<double> random_doubles(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0);
// The same values written into an existing vector (all v.size() of them): a gate that draws a large input per case
// keeps one vector instead of page-faulting a fresh one each time.
void fill_random(std::vector<double>& v, std::uint64_t seed, double lo = -1.0, double hi = 1.0);

// Device-side fills of an existing allocation (no host round trip for large inputs).
void fill_random_device(float* dev, std::size_t n, std::uint64_t seed, float lo = -1.f, float hi = 1.f);
void fill_random_device(double* dev, std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0);
// The values fill_random_device writes, brought to the host: filled on the device into a scratch allocation and
// downloaded. The same values as random_floats, for the large inputs of speed gates, where the host's generation
// costs far more than the copy (2^24 floats: about 0.1 s on the grading machine's cores, 10 ms this way).
std::vector<float> random_floats_via_device(std::size_t n, std::uint64_t seed, float lo = -1.f, float hi = 1.f);

}  // namespace labkit
