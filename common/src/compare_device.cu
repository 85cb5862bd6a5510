// The device passes behind compare_device.h: one read of the arrays, a few numbers copied back.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "labkit/buffer.h"
#include "labkit/check.h"
#include "labkit/compare_device.h"
#include "labkit/guard.h"
#include "labkit/random.h"

namespace labkit {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kWarp = 32;

// Enough blocks to keep every SM of a large GPU streaming, few enough that the per-warp atomics stay negligible.
unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<std::size_t>(std::max<std::size_t>(b, 1), 4096));
}

__device__ inline std::uint32_t bits_of(float v) { return __float_as_uint(v); }
__device__ inline std::uint64_t bits_of(double v) { return static_cast<std::uint64_t>(__double_as_longlong(v)); }

template <class T>
__device__ inline T generated(std::uint64_t seed, std::size_t i, T lo, T hi) {
  if constexpr (sizeof(T) == 4)
    return uniform_float(seed, i, lo, hi);
  else
    return uniform_double(seed, i, lo, hi);
}

// Warp-wide sum, minimum and maximum (every lane ends with the result). The loops in the kernels below are
// grid-stride, so every lane of a warp reaches these calls.
__device__ inline unsigned long long warp_sum(unsigned long long v) {
  for (unsigned o = kWarp / 2; o; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline unsigned long long warp_min(unsigned long long v) {
  for (unsigned o = kWarp / 2; o; o /= 2) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ inline double warp_max(double v) {
  for (unsigned o = kWarp / 2; o; o /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// A maximum of non-negative doubles through their bit patterns, which order the same way as the values (+Inf
// included), so that an integer atomicMax does it.
__device__ inline void atomic_max_nonneg(unsigned long long* at, double v) {
  if (v > 0) atomicMax(at, static_cast<unsigned long long>(__double_as_longlong(v)));
}

// What check_close's two passes reduce to, in one: out[0] = the largest finite |expected| (as bits), out[1] = the
// largest |got - expected| over elements where both are finite (as bits), out[2] = the elements wrong whatever the
// tolerance (a non-finite expected value not reproduced exactly, NaN matching NaN; a non-finite got where a finite
// value was expected).
template <class T>
__global__ void close_scan_kernel(const T* got, const T* expected, std::size_t n, unsigned long long* out) {
  double norm = 0, err = 0;
  unsigned long long bad = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const double g = got[i], e = expected[i];
    if (!isfinite(e)) {
      bad += !(isnan(e) ? isnan(g) : g == e);
    } else {
      norm = fmax(norm, fabs(e));
      if (!isfinite(g))
        ++bad;
      else
        err = fmax(err, fabs(__dsub_rn(g, e)));  // the host's g - e, never fused with anything
    }
  }
  norm = warp_max(norm);
  err = warp_max(err);
  bad = warp_sum(bad);
  if (threadIdx.x % kWarp == 0) {
    atomic_max_nonneg(&out[0], norm);
    atomic_max_nonneg(&out[1], err);
    if (bad) atomicAdd(&out[2], bad);
  }
}

// out[0] += elements holding the poison pattern (never written).
template <class T>
__global__ void poison_count_kernel(const T* got, std::size_t n, T poison, unsigned long long* out) {
  unsigned long long count = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    count += bits_of(got[i]) == bits_of(poison);
  count = warp_sum(count);
  if (threadIdx.x % kWarp == 0 && count) atomicAdd(&out[0], count);
}

template <class T>
__global__ void gather_kernel(const T* src, const std::size_t* where, std::size_t k, T* out) {
  for (std::size_t s = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; s < k;
       s += std::size_t(gridDim.x) * blockDim.x)
    out[s] = src[where[s]];
}

// out[0] += elements whose bits differ from the generator's value, out[1] = the smallest such index.
template <class T>
__global__ void unmodified_kernel(const T* dev, std::size_t n, std::uint64_t seed, T lo, T hi,
                                  unsigned long long* out) {
  unsigned long long count = 0, first = ~0ull;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    if (bits_of(dev[i]) != bits_of(generated<T>(seed, i, lo, hi))) {
      ++count;
      first = min(first, static_cast<unsigned long long>(i));
    }
  count = warp_sum(count);
  first = warp_min(first);
  if (threadIdx.x % kWarp == 0 && count) {
    atomicAdd(&out[0], count);
    atomicMin(&out[1], first);
  }
}

// A small device summary, zero- (or otherwise) initialised, read back after the kernel that fills it.
struct Summary {
  DeviceBuffer<unsigned long long> dev;
  explicit Summary(std::vector<unsigned long long> init) : dev(init) {}
  std::vector<unsigned long long> read() const { return dev.download(); }
};

double as_double(unsigned long long bits) {
  double d;
  static_assert(sizeof d == sizeof bits);
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

template <class T>
std::size_t poison_count(const T* got, std::size_t n) {
  if (!n) return 0;
  Summary s({0});
  poison_count_kernel<<<blocks_for(n), kThreads>>>(got, n, poison_value<T>(), s.dev.data());
  LABKIT_CHECK_LAUNCH();
  return s.read()[0];
}

template <class T>
Verdict unmodified_device(const T* dev, std::size_t n, std::uint64_t seed, const std::string& name, T lo, T hi) {
  Verdict v;
  v.checked = n;
  if (!n) return v;
  Summary s({0, ~0ull});
  unmodified_kernel<<<blocks_for(n), kThreads>>>(dev, n, seed, lo, hi, s.dev.data());
  LABKIT_CHECK_LAUNCH();
  const auto r = s.read();
  v.wrong = r[0];
  v.ok = v.wrong == 0;
  if (!v.ok) v.message = unmodified_message(name, r[1]);
  return v;
}

}  // namespace

template <class T>
std::optional<Verdict> check_close_device(const T* got, const T* expected, std::size_t n, const CheckOptions& opt) {
  double norm = 0, max_err = 0;
  if (n) {
    Summary s({0, 0, 0});
    close_scan_kernel<<<blocks_for(n), kThreads>>>(got, expected, n, s.dev.data());
    LABKIT_CHECK_LAUNCH();
    const auto r = s.read();
    if (r[2]) return std::nullopt;  // a non-finite element is wrong at any tolerance
    norm = as_double(r[0]);
    max_err = as_double(r[1]);
  }
  // check_close's tolerance, computed as it computes it.
  norm = std::max(norm, opt.scale);
  const double allowed = opt.tolerance * (norm > 0 ? norm : 1.0);
  if (!(max_err <= allowed)) return std::nullopt;
  Verdict v;
  v.tolerance = opt.tolerance;
  v.checked = n;
  v.rel_error = norm > 0 ? max_err / norm : max_err;
  return v;
}

template <class T>
std::optional<Verdict> check_close_at_device(const T* got, std::size_t n,
                                             const std::vector<std::pair<std::size_t, double>>& samples,
                                             const CheckOptions& opt) {
  // The sampled values, at positions 0..k-1 of a compact array, and the samples renumbered to match.
  std::vector<std::size_t> where;
  std::vector<std::pair<std::size_t, double>> renumbered;
  where.reserve(samples.size());
  renumbered.reserve(samples.size());
  for (const auto& [i, e] : samples) {
    if (i >= n) return std::nullopt;
    renumbered.emplace_back(where.size(), e);
    where.push_back(i);
  }
  if (poison_count(got, n)) return std::nullopt;  // never-written elements: the host check says where
  std::vector<T> values;
  if (!where.empty()) {
    DeviceBuffer<std::size_t> dwhere(where);
    DeviceBuffer<T> dvalues(where.size());
    gather_kernel<<<blocks_for(where.size()), kThreads>>>(got, dwhere.data(), where.size(), dvalues.data());
    LABKIT_CHECK_LAUNCH();
    values = dvalues.download();
  }
  Verdict v = check_close_at(values, renumbered, opt);
  if (!v.ok) return std::nullopt;  // the message must name the real indices: the host check writes it
  return v;
}

Verdict check_unmodified_device(const float* dev, std::size_t n, std::uint64_t seed, const std::string& name,
                                float lo, float hi) {
  return unmodified_device(dev, n, seed, name, lo, hi);
}
Verdict check_unmodified_device(const double* dev, std::size_t n, std::uint64_t seed, const std::string& name,
                                double lo, double hi) {
  return unmodified_device(dev, n, seed, name, lo, hi);
}

#define LABKIT_INSTANTIATE(T)                                                                                 \
  template std::optional<Verdict> check_close_device<T>(const T*, const T*, std::size_t, const CheckOptions&); \
  template std::optional<Verdict> check_close_at_device<T>(                                                   \
      const T*, std::size_t, const std::vector<std::pair<std::size_t, double>>&, const CheckOptions&);
LABKIT_INSTANTIATE(float)
LABKIT_INSTANTIATE(double)
#undef LABKIT_INSTANTIATE

}  // namespace labkit
