// Device-side fills: seeded random values (bit-identical to the host generator), poison patterns, and the guard
// bands' pattern with its device-side comparison.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/check.h"
#include "labkit/guard.h"
#include "labkit/random.h"

namespace labkit {

// Outside the anonymous namespace, so that its name is labkit::stream_spin (is_stream_spin): spins on the device's
// global timer for `ns` nanoseconds.
__global__ void stream_spin(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

namespace {

template <class T>
__global__ void fill_random_kernel(T* out, std::size_t n, std::uint64_t seed, T lo, T hi) {
  // Grid-stride loop: any n with a fixed, modest grid.
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(T) == 4)
      out[i] = uniform_float(seed, i, lo, hi);
    else
      out[i] = uniform_double(seed, i, lo, hi);
  }
}

template <class W>
__global__ void fill_pattern_kernel(W* out, std::size_t n, W pattern) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = pattern;
}

// Word i of the allocation gets guard_word(key, i): the index is the absolute one, so that every position (and,
// through the key, every buffer) holds a different word.
template <class W>
__global__ void fill_guard_kernel(W* base, std::size_t begin, std::size_t end, std::uint64_t key) {
  for (std::size_t i = begin + blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < end;
       i += std::size_t(gridDim.x) * blockDim.x)
    base[i] = static_cast<W>(guard_word(key, i, sizeof(W)));
}

// out[0] += changed words, out[1] = min index, out[2] = max index. Each thread keeps its own tally and touches
// the summary only if it found something: an intact band (the common case) costs no atomics at all.
template <class W>
__global__ void scan_guard_kernel(const W* base, std::size_t begin, std::size_t end, std::uint64_t key,
                                  unsigned long long* out) {
  unsigned long long count = 0, lo = ~0ull, hi = 0;
  for (std::size_t i = begin + blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < end;
       i += std::size_t(gridDim.x) * blockDim.x)
    if (base[i] != static_cast<W>(guard_word(key, i, sizeof(W)))) {
      ++count;
      lo = lo < i ? lo : i;
      hi = hi > i ? hi : i;
    }
  if (count) {
    atomicAdd(&out[0], count);
    atomicMin(&out[1], lo);
    atomicMax(&out[2], hi);
  }
}

unsigned grid_for(std::size_t n) {
  std::size_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 65536 ? (blocks ? blocks : 1) : 65536);
}

}  // namespace

void fill_random_device(float* dev, std::size_t n, std::uint64_t seed, float lo, float hi) {
  if (!n) return;
  fill_random_kernel<<<grid_for(n), 256>>>(dev, n, seed, lo, hi);
  LABKIT_CHECK_LAUNCH();
}

void fill_random_device(double* dev, std::size_t n, std::uint64_t seed, double lo, double hi) {
  if (!n) return;
  fill_random_kernel<<<grid_for(n), 256>>>(dev, n, seed, lo, hi);
  LABKIT_CHECK_LAUNCH();
}

std::vector<float> random_floats_via_device(std::size_t n, std::uint64_t seed, float lo, float hi) {
  DeviceBuffer<float> scratch(n);
  fill_random_device(scratch.data(), n, seed, lo, hi);
  return scratch.download();
}

void fill_pattern_device(void* dev, std::size_t count, std::size_t elem_size, std::uint64_t pattern) {
  if (!count) return;
  if (elem_size == 4)
    fill_pattern_kernel<<<grid_for(count), 256>>>(static_cast<std::uint32_t*>(dev), count,
                                                  static_cast<std::uint32_t>(pattern));
  else
    fill_pattern_kernel<<<grid_for(count), 256>>>(static_cast<std::uint64_t*>(dev), count, pattern);
  LABKIT_CHECK_LAUNCH();
}

// Outside the anonymous namespace, so that its name is labkit::poison_shared (is_shared_poison). Volatile stores:
// nothing reads them in this kernel, and the compiler must not drop them.
__global__ void poison_shared(unsigned words) {
  extern __shared__ unsigned shared_words[];
  volatile unsigned* s = shared_words;
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) s[i] = 0xFFFFFFFFu;
}

void poison_shared_memory() {
  int dev = 0, sms = 0, optin = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  LABKIT_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  LABKIT_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  // The largest block's shared memory, with the carveout at its maximum: one block fills an SM's shared memory, and
  // a grid of one block per SM reaches every SM (each block needs a whole SM, so no SM takes two while one is idle).
  LABKIT_CUDA(cudaFuncSetAttribute(poison_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  LABKIT_CUDA(cudaFuncSetAttribute(poison_shared, cudaFuncAttributePreferredSharedMemoryCarveout,
                                   cudaSharedmemCarveoutMaxShared));
  poison_shared<<<sms, 1024, std::size_t(optin)>>>(unsigned(optin / 4));
  LABKIT_CHECK_LAUNCH();
  LABKIT_CUDA(cudaDeviceSynchronize());
}

void fill_guard_device(void* base, std::size_t begin, std::size_t end, unsigned elem_size, std::uint64_t key) {
  if (end <= begin) return;
  const unsigned grid = grid_for(end - begin);
  if (elem_size == 4)
    fill_guard_kernel<<<grid, 256>>>(static_cast<std::uint32_t*>(base), begin, end, key);
  else
    fill_guard_kernel<<<grid, 256>>>(static_cast<std::uint64_t*>(base), begin, end, key);
  LABKIT_CHECK_LAUNCH();
}

GuardScan scan_guard_device(const void* base, std::size_t begin, std::size_t end, unsigned elem_size,
                            std::uint64_t key) {
  GuardScan s;
  if (end <= begin) return s;
  const unsigned long long init[3] = {0, ~0ull, 0};
  unsigned long long summary[3];
  DeviceBuffer<unsigned long long> out(3);
  LABKIT_CUDA(cudaMemcpy(out.data(), init, sizeof init, cudaMemcpyHostToDevice));
  const unsigned grid = grid_for(end - begin);
  if (elem_size == 4)
    scan_guard_kernel<<<grid, 256>>>(static_cast<const std::uint32_t*>(base), begin, end, key, out.data());
  else
    scan_guard_kernel<<<grid, 256>>>(static_cast<const std::uint64_t*>(base), begin, end, key, out.data());
  LABKIT_CHECK_LAUNCH();
  LABKIT_CUDA(cudaMemcpy(summary, out.data(), sizeof summary, cudaMemcpyDeviceToHost));
  s.count = summary[0];
  if (!s.count) return s;
  s.first = summary[1];
  s.last = summary[2];
  // The first changed word itself (one word, not the band): its contents tell a copy from a computed value.
  std::uint64_t w = 0;
  LABKIT_CUDA(cudaMemcpy(&w, static_cast<const unsigned char*>(base) + s.first * elem_size, elem_size,
                         cudaMemcpyDeviceToHost));
  s.first_word = w;  // little-endian: a 4-byte word lands in the low half
  return s;
}

void spin_on_streams(const std::vector<std::pair<int, cudaStream_t>>& where, double ms) {
  int current = 0;
  LABKIT_CUDA(cudaGetDevice(&current));
  for (const auto& [device, stream] : where) {
    LABKIT_CUDA(cudaSetDevice(device));
    stream_spin<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(ms * 1e6));
    LABKIT_CHECK_LAUNCH();
  }
  LABKIT_CUDA(cudaSetDevice(current));
}

namespace {
// Whether a kernel record names one of labkit's kernels: by the mangled name CUPTI reports, or that name demangled.
// No demangling and no allocation here: lab 04 records some 31 000 kernels a call.
bool is_labkit_kernel(std::string_view kernel_name, std::string_view mangled_prefix, std::string_view plain_prefix) {
  const std::string_view prefix = kernel_name.substr(0, 2) == "_Z" ? mangled_prefix : plain_prefix;
  return kernel_name.substr(0, prefix.size()) == prefix;
}
}  // namespace

bool is_shared_poison(const std::string& kernel_name) {
  return is_labkit_kernel(kernel_name, "_ZN6labkit13poison_sharedE", "labkit::poison_shared(");
}

bool is_stream_spin(const std::string& kernel_name) {
  return is_labkit_kernel(kernel_name, "_ZN6labkit11stream_spinE", "labkit::stream_spin(");
}

}  // namespace labkit
