#include "labkit/random.h"

#include "labkit/reference.h"  // parallel_for

namespace labkit {

std::uint64_t derive_seed(std::uint64_t base, std::string_view label) {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a over the label, then mixed with the base
  for (unsigned char c : label) h = (h ^ c) * 0x100000001B3ull;
  return mix64(base ^ mix64(h));
}

namespace {
// Element i depends on (seed, i) alone, so the split among threads never changes a value. The speed gates' inputs
// (2^24-2^26 elements, 0.1-0.3 s each on one core) are filled on every core.
template <class Set>
void fill_indexed(std::size_t n, const Set& set) {
  parallel_for(
      n,
      [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) set(i);
      },
      kElementGrain);
}
}  // namespace

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo, float hi) {
  std::vector<float> v(n);
  fill_indexed(n, [&](std::size_t i) { v[i] = uniform_float(seed, i, lo, hi); });
  return v;
}

void fill_random(std::vector<double>& v, std::uint64_t seed, double lo, double hi) {
  fill_indexed(v.size(), [&](std::size_t i) { v[i] = uniform_double(seed, i, lo, hi); });
}

std::vector<double> random_doubles(std::size_t n, std::uint64_t seed, double lo, double hi) {
  std::vector<double> v(n);
  fill_random(v, seed, lo, hi);
  return v;
}

}  // namespace labkit
