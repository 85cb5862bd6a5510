// See baseline_cg.h. One stream (the legacy default stream), host scalars: what lab 07 step 4 does.
#include <algorithm>
#include <cmath>
#include <vector>

#include "baseline_cg.h"
#include "labkit/buffer.h"
#include "labkit/check.h"

namespace lab08_baseline {

namespace {

constexpr int kThreads = 256;
constexpr int kReduceBlocks = 1024;

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}
__device__ double block_sum(double v) {
  __shared__ double warp_sums[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = (threadIdx.x < (blockDim.x >> 5)) ? warp_sums[threadIdx.x] : 0.0;
  if (warp == 0) v = warp_sum(v);
  __syncthreads();
  return v;
}
__global__ void base_spmv_kernel(int rows, const int* __restrict__ row_ptr, const int* __restrict__ col,
                                 const double* __restrict__ val, const double* __restrict__ x, double* __restrict__ y) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= std::size_t(rows)) return;
  const int end = row_ptr[i + 1];
  double sum = 0;
  for (int k = row_ptr[i]; k < end; ++k) sum = fma(val[k], __ldg(&x[col[k]]), sum);
  y[i] = sum;
}
__global__ void base_dot_kernel(int n, const double* __restrict__ x, const double* __restrict__ y,
                                double* __restrict__ partials) {
  double sum = 0;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < std::size_t(n); i += stride)
    sum = fma(x[i], y[i], sum);
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
__global__ void base_sum_kernel(int count, const double* __restrict__ partials, double* __restrict__ out) {
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) *out = sum;
}
__global__ void base_update_xr_kernel(int n, double alpha, const double* __restrict__ p, const double* __restrict__ Ap,
                                      double* __restrict__ x, double* __restrict__ r, double* __restrict__ partials) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  double sum = 0;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < std::size_t(n); i += stride) {
    x[i] = fma(alpha, p[i], x[i]);
    const double ri = fma(-alpha, Ap[i], r[i]);
    r[i] = ri;
    sum = fma(ri, ri, sum);
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
__global__ void base_xpby_kernel(int n, const double* __restrict__ x, double b, double* __restrict__ y) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < std::size_t(n)) y[i] = fma(b, y[i], x[i]);
}

}  // namespace

struct OneGpuCg::Impl {
  int n = 0;
  labkit::DeviceBuffer<int> row_ptr, col_idx;
  labkit::DeviceBuffer<double> values, b, x, r, p, Ap, partials, scalar;
  labkit::PinnedBuffer<double> host{1};

  double dot(const double* u, const double* v) {
    const int g = int(std::min<long long>(kReduceBlocks, std::max(1, (n + kThreads - 1) / kThreads)));
    base_dot_kernel<<<g, kThreads>>>(n, u, v, partials.data());
    LABKIT_CHECK_LAUNCH();
    base_sum_kernel<<<1, kThreads>>>(g, partials.data(), scalar.data());
    LABKIT_CHECK_LAUNCH();
    LABKIT_CUDA(cudaMemcpy(host.data(), scalar.data(), sizeof(double), cudaMemcpyDeviceToHost));
    return host[0];
  }
};

OneGpuCg::OneGpuCg(const labkit::Csr& A) : impl_(std::make_unique<Impl>()) {
  A.validate();
  Impl& s = *impl_;
  s.n = A.rows;
  const std::size_t n = std::max<std::size_t>(1, std::size_t(A.rows));
  s.row_ptr = labkit::DeviceBuffer<int>(A.row_ptr);
  s.col_idx = labkit::DeviceBuffer<int>(A.col_idx.empty() ? std::vector<int>{0} : A.col_idx);
  s.values = labkit::DeviceBuffer<double>(A.values.empty() ? std::vector<double>{0} : A.values);
  for (auto* v : {&s.b, &s.x, &s.r, &s.p, &s.Ap}) *v = labkit::DeviceBuffer<double>(n);
  s.partials = labkit::DeviceBuffer<double>(kReduceBlocks);
  s.scalar = labkit::DeviceBuffer<double>(1);
  LABKIT_CUDA(cudaMemset(s.b.data(), 0, sizeof(double) * n));
}
OneGpuCg::~OneGpuCg() = default;

void OneGpuCg::set_b(const std::vector<double>& b) { impl_->b.upload(b); }
std::vector<double> OneGpuCg::x() const {
  auto all = impl_->x.download();
  all.resize(std::size_t(impl_->n));
  return all;
}

void OneGpuCg::run(int iters) {
  Impl& s = *impl_;
  const int n = s.n;
  if (n == 0) return;
  const std::size_t bytes = sizeof(double) * std::size_t(n);
  const unsigned grid = unsigned((n + kThreads - 1) / kThreads);
  const int g = int(std::min<long long>(kReduceBlocks, grid));
  LABKIT_CUDA(cudaMemset(s.x.data(), 0, bytes));
  LABKIT_CUDA(cudaMemcpy(s.r.data(), s.b.data(), bytes, cudaMemcpyDeviceToDevice));
  LABKIT_CUDA(cudaMemcpy(s.p.data(), s.b.data(), bytes, cudaMemcpyDeviceToDevice));
  double rr = s.dot(s.b.data(), s.b.data());
  for (int it = 0; it < iters && rr > 0; ++it) {
    base_spmv_kernel<<<grid, kThreads>>>(n, s.row_ptr.data(), s.col_idx.data(), s.values.data(), s.p.data(),
                                         s.Ap.data());
    LABKIT_CHECK_LAUNCH();
    const double alpha = rr / s.dot(s.p.data(), s.Ap.data());
    base_update_xr_kernel<<<g, kThreads>>>(n, alpha, s.p.data(), s.Ap.data(), s.x.data(), s.r.data(),
                                           s.partials.data());
    LABKIT_CHECK_LAUNCH();
    base_sum_kernel<<<1, kThreads>>>(g, s.partials.data(), s.scalar.data());
    LABKIT_CHECK_LAUNCH();
    LABKIT_CUDA(cudaMemcpy(s.host.data(), s.scalar.data(), sizeof(double), cudaMemcpyDeviceToHost));
    const double rr_new = s.host[0];
    base_xpby_kernel<<<grid, kThreads>>>(n, s.r.data(), rr_new / rr, s.p.data());
    LABKIT_CHECK_LAUNCH();
    rr = rr_new;
  }
  LABKIT_CUDA(cudaDeviceSynchronize());
}

}  // namespace lab08_baseline
