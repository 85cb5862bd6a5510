// Kernels of the labkit tests' own (test_kernels.h).
#include "labkit/check.h"
#include "test_kernels.h"

namespace labkit_test {
namespace {
__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
__global__ void gather_scatter_kernel(const float* src, float* dst, const unsigned long long* at, float* out,
                                      int count) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= count) return;
  out[k] = src[at[k]];
  dst[at[k]] = k + 0.5f;
}
__global__ void count_unwritten_shared_nans_kernel(int words, int* out) {
  extern __shared__ float tile[];
  int nans = 0;
  for (int i = threadIdx.x; i < words; i += blockDim.x) nans += isnan(static_cast<volatile float*>(tile)[i]) ? 1 : 0;
  atomicAdd(&out[blockIdx.x], nans);
}
__global__ void write_shared_ones_kernel(int words) {
  extern __shared__ float tile[];
  for (int i = threadIdx.x; i < words; i += blockDim.x) static_cast<volatile float*>(tile)[i] = 1.0f;
}
}  // namespace

void launch_count_unwritten_shared_nans(int blocks, int words, int* out) {
  count_unwritten_shared_nans_kernel<<<blocks, 256, std::size_t(words) * 4>>>(words, out);
  LABKIT_CHECK_LAUNCH();
}

void launch_write_shared_ones(int blocks, int words) {
  write_shared_ones_kernel<<<blocks, 256, std::size_t(words) * 4>>>(words);
  LABKIT_CHECK_LAUNCH();
}

void launch_gather_scatter(const float* src, float* dst, const unsigned long long* at, float* out, int count) {
  gather_scatter_kernel<<<(count + 127) / 128, 128>>>(src, dst, at, out, count);
  LABKIT_CHECK_LAUNCH();
}

namespace {
__global__ void copy_kernel(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}
}  // namespace

void launch_copy_on(const float* in, float* out, int n, cudaStream_t stream) {
  copy_kernel<<<(n + 255) / 256, 256, 0, stream>>>(in, out, n);
  LABKIT_CHECK_LAUNCH();
}

void launch_spin(long long cycles) {
  spin_kernel<<<1, 32>>>(cycles);
  LABKIT_CHECK_LAUNCH();
}
}  // namespace labkit_test
