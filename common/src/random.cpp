#include "labkit/random.h"

namespace labkit {

std::uint64_t derive_seed(std::uint64_t base, std::string_view label) {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a over the label, then mixed with the base
  for (unsigned char c : label) h = (h ^ c) * 0x100000001B3ull;
  return mix64(base ^ mix64(h));
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo, float hi) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = uniform_float(seed, i, lo, hi);
  return v;
}

std::vector<double> random_doubles(std::size_t n, std::uint64_t seed, double lo, double hi) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = uniform_double(seed, i, lo, hi);
  return v;
}

}  // namespace labkit
