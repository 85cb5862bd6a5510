#include "thrust_sort.h"

#include <cub/device/device_radix_sort.cuh>
#include <cuda/std/tuple>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/sort.h>

#include <cstddef>
#include <map>
#include <stdexcept>

#include "device_check.h"
#include "labkit/buffer.h"
#include "labkit/check.h"
#include "labkit/ref_sort.h"

namespace lab04::baseline {

namespace {
// Thrust asks for temporary blocks (the radix sort's second key buffer and CUB's scratch, alive at the same
// time) and gives them back after each call; keeping them avoids a cudaMalloc/cudaFree pair per sort.
class CachingAllocator {
 public:
  using value_type = char;
  CachingAllocator() = default;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator() {  // at exit; errors are ignored (the runtime may already be shutting down)
    for (auto& [bytes, p] : free_) cudaFree(p);
    for (auto& [p, bytes] : used_) cudaFree(p);
  }
  char* allocate(std::ptrdiff_t bytes) {
    const std::size_t want = static_cast<std::size_t>(bytes);
    char* p = nullptr;
    auto it = free_.lower_bound(want);  // the smallest cached block that is large enough
    if (it != free_.end()) {
      p = it->second;
      used_[p] = it->first;
      free_.erase(it);
      return p;
    }
    LABKIT_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), want ? want : 1));
    used_[p] = want;
    return p;
  }
  void deallocate(char* p, std::size_t) {
    auto it = used_.find(p);
    if (it == used_.end()) return;
    free_.emplace(it->second, p);
    used_.erase(it);
  }

 private:
  std::multimap<std::size_t, char*> free_;
  std::map<char*, std::size_t> used_;
};

// The one cache of the process (the gates' checks borrow from it too: device_check.h).
CachingAllocator& allocator() {
  static CachingAllocator a;
  return a;
}
}  // namespace

void thrust_sort(float* keys, std::size_t n) {
  if (n < 2) return;
  thrust::device_ptr<float> k(keys);
  thrust::sort(thrust::cuda::par(allocator()), k, k + n);
  LABKIT_CHECK_LAUNCH();
}

void thrust_sort_by_key(float* keys, std::uint32_t* values, std::size_t n) {
  if (n < 2) return;
  thrust::device_ptr<float> k(keys);
  thrust::device_ptr<std::uint32_t> v(values);
  thrust::sort_by_key(thrust::cuda::par(allocator()), k, k + n, v);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab04::baseline

// ---------------------------------------------------------------------------------------------------------
// The gates' checks on the GPU (device_check.h).
namespace lab04_gates::on_device {

namespace {
using u32 = std::uint32_t;
using lab04::baseline::allocator;

// A float's bit pattern as a key type of this file alone: CUB's radix sort instantiated on it (with the
// decomposer below) has internal linkage, so a student's object cannot supply a definition the linker would
// prefer. The order it sorts in (plain unsigned bits) does not matter: it only brings equal multisets to equal
// sequences.
struct Bits {
  u32 b;
};
struct BitsDecomposer {
  __host__ __device__ ::cuda::std::tuple<u32&> operator()(Bits& k) const { return {k.b}; }
};

constexpr int kThreads = 256;
unsigned blocks_for(std::size_t n) {  // grid-stride loops: enough blocks to fill any GPU, never more than needed
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 4096 ? (b ? b : 1) : 4096);
}

__device__ u32 bits_of(float x) { return __float_as_uint(x); }

__global__ void find_descent(const float* keys, std::size_t n, bool desc, u32* found) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x + 1; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    if (labkit::float_order_key(keys[i - 1], desc) > labkit::float_order_key(keys[i], desc)) *found = 1;
}

__global__ void find_difference(const u32* a, const u32* b, std::size_t words, u32* found) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < words;
       i += std::size_t(gridDim.x) * blockDim.x)
    if (a[i] != b[i]) *found = 1;
}

// `seen` starts zeroed: a value out of range, a value met twice, or a key that is not its value's input key is
// a difference from what check_pairs accepts.
__global__ void find_broken_pair(const float* keys, const u32* values, const float* in, std::size_t n, u32 mask,
                                 u32* seen, u32* found) {
  for (std::size_t p = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; p < n;
       p += std::size_t(gridDim.x) * blockDim.x) {
    const u32 v = values[p] ^ mask;  // the index of the key this value started beside
    if (v >= n || atomicAdd(&seen[v], 1u) != 0 || bits_of(keys[p]) != bits_of(in[v])) *found = 1;
  }
}

__global__ void write_index(u32* values, std::size_t n, u32 mask) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    values[i] = u32(i) ^ mask;
}

// A flag in device memory that kernels set to 1 on a finding; raised() waits for them. One word for the whole
// process (the gates run one check at a time), outside the cache, so that it never holds one of the cache's large
// blocks while a sort asks for a new one.
class Flag {
 public:
  Flag() { LABKIT_CUDA(cudaMemset(ptr(), 0, sizeof(u32))); }
  u32* ptr() const {
    static labkit::DeviceBuffer<u32> word(1);
    return word.data();
  }
  bool raised() const {
    LABKIT_CHECK_LAUNCH();
    u32 v = 0;
    LABKIT_CUDA(cudaMemcpy(&v, ptr(), sizeof v, cudaMemcpyDeviceToHost));
    return v != 0;
  }
};

bool in_order(const float* keys, std::size_t n, bool descending) {
  if (n < 2) return true;
  Flag descent;
  find_descent<<<blocks_for(n), kThreads>>>(keys, n, descending, descent.ptr());
  return !descent.raised();
}

// The bit patterns of `keys`, sorted (into `out`, n elements).
void sorted_bits(const float* keys, Bits* out, std::size_t n) {
  const auto* in = reinterpret_cast<const Bits*>(keys);
  std::size_t temp_bytes = 0;
  LABKIT_CUDA(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, in, out, n, BitsDecomposer{}));
  ScratchBytes temp(temp_bytes);
  LABKIT_CUDA(cub::DeviceRadixSort::SortKeys(temp.get(), temp_bytes, in, out, n, BitsDecomposer{}));
  LABKIT_CHECK_LAUNCH();
}

bool same_multiset(const float* a, const float* b, std::size_t n) {
  if (n == 0) return true;
  Scratch<Bits> sa(n), sb(n);
  sorted_bits(a, sa.data(), n);
  sorted_bits(b, sb.data(), n);
  return same_bits(sa.data(), sb.data(), n * sizeof(Bits));
}
}  // namespace

ScratchBytes::ScratchBytes(std::size_t bytes) : ptr_(allocator().allocate(std::ptrdiff_t(bytes))) {}
ScratchBytes::~ScratchBytes() { allocator().deallocate(ptr_, 0); }

void copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes) LABKIT_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
  LABKIT_CUDA(cudaDeviceSynchronize());
}

bool sorted_permutation(const float* got, const float* in, std::size_t n, bool descending) {
  return in_order(got, n, descending) && same_multiset(got, in, n);
}

bool pairs_kept(const float* keys, const std::uint32_t* values, const float* in, std::size_t n, bool descending,
                std::uint32_t mask) {
  if (!in_order(keys, n, descending)) return false;
  if (n == 0) return true;
  Scratch<u32> seen(n);
  LABKIT_CUDA(cudaMemset(seen.data(), 0, n * sizeof(u32)));
  Flag broken;
  find_broken_pair<<<blocks_for(n), kThreads>>>(keys, values, in, n, mask, seen.data(), broken.ptr());
  return !broken.raised();
}

bool same_bits(const void* a, const void* b, std::size_t bytes) {
  if (bytes % sizeof(u32)) throw std::invalid_argument("on_device::same_bits: whole 4-byte words only");
  const std::size_t words = bytes / sizeof(u32);
  if (words == 0) return true;
  Flag differ;
  find_difference<<<blocks_for(words), kThreads>>>(static_cast<const u32*>(a), static_cast<const u32*>(b), words,
                                                   differ.ptr());
  return !differ.raised();
}

void fill_index(std::uint32_t* values, std::size_t n, std::uint32_t mask) {
  if (n == 0) return;
  write_index<<<blocks_for(n), kThreads>>>(values, n, mask);
  LABKIT_CHECK_LAUNCH();
  LABKIT_CUDA(cudaDeviceSynchronize());
}

}  // namespace lab04_gates::on_device
