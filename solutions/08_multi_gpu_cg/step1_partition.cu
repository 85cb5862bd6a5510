// Lab 08 reference, step 1: row blocks balanced by nonzeros, uploaded to their devices on one stream each, and
// the per-part SpMV.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "labkit/not_implemented.h"
#include "multi_cg.h"

namespace lab08 {

namespace {

constexpr int kThreads = 256;

// One thread per row (the 5- and 7-point Laplacians have short rows; see lab 07 step 3). Column indices are
// global, so x is the whole vector.
__global__ void spmv_rows_kernel(int rows, const int* __restrict__ row_ptr, const int* __restrict__ col,
                                 const double* __restrict__ val, const double* __restrict__ x,
                                 double* __restrict__ y) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= std::size_t(rows)) return;
  const int end = row_ptr[i + 1];
  double sum = 0;
  for (int k = row_ptr[i]; k < end; ++k) sum = fma(val[k], __ldg(&x[col[k]]), sum);
  y[i] = sum;
}

}  // namespace

std::vector<int> partition_rows(const labkit::Csr& A, int parts) {
  if (parts < 1) throw std::invalid_argument("lab08: partition_rows: parts must be >= 1");
  A.validate();
  // C(i) = row_ptr[i] + i is non-decreasing in i, so the first row reaching each target is a binary search.
  const double total = double(A.nnz()) + A.rows;
  std::vector<int> bounds(std::size_t(parts) + 1, 0);
  bounds[std::size_t(parts)] = A.rows;
  int lo = 0;
  for (int k = 1; k < parts; ++k) {
    const double target = total * k / parts;
    int a = lo, b = A.rows;  // first i in [a, b] with C(i) >= target (C(rows) = total >= target)
    while (a < b) {
      const int mid = a + (b - a) / 2;
      if (double(A.row_ptr[std::size_t(mid)]) + mid >= target) b = mid;
      else a = mid + 1;
    }
    bounds[std::size_t(k)] = lo = a;
  }
  return bounds;
}

std::vector<PartCsr> distribute_rows(const Team& team, const labkit::Csr& A, const std::vector<int>& bounds) {
  if (int(bounds.size()) != team.parts() + 1 || bounds.front() != 0 || bounds.back() != A.rows)
    throw std::invalid_argument("lab08: distribute_rows: bounds must have parts + 1 entries from 0 to A.rows");
  std::vector<PartCsr> out(std::size_t(team.parts()));
  // Rebased row pointers are built on the host first; they must stay alive until the asynchronous copies finish.
  std::vector<std::vector<int>> rebased(out.size());
  for (int k = 0; k < team.parts(); ++k) {
    const int r0 = bounds[std::size_t(k)], r1 = bounds[std::size_t(k) + 1];
    if (r1 < r0) throw std::invalid_argument("lab08: distribute_rows: bounds must be non-decreasing");
    PartCsr& p = out[std::size_t(k)];
    p.device = team.device(k);
    p.row_begin = r0;
    p.rows = r1 - r0;
    p.cols = A.cols;
    const int e0 = A.row_ptr[std::size_t(r0)];
    p.nnz = A.row_ptr[std::size_t(r1)] - e0;
    auto& rp = rebased[std::size_t(k)];
    rp.assign(A.row_ptr.begin() + r0, A.row_ptr.begin() + r1 + 1);
    for (int& v : rp) v -= e0;
    // One allocation per part: values (8-byte aligned first), then row_ptr and col_idx.
    const std::size_t bytes = sizeof(double) * std::size_t(p.nnz) + sizeof(int) * (std::size_t(p.rows) + 1 + p.nnz);
    team.use(k);
    void* mem = nullptr;
    LABKIT_CUDA(cudaMalloc(&mem, std::max<std::size_t>(bytes, 8)));
    const int dev = p.device;
    p.storage = std::shared_ptr<void>(mem, [dev](void* q) {
      int cur = 0;
      cudaGetDevice(&cur);
      cudaSetDevice(dev);
      cudaFree(q);
      cudaSetDevice(cur);
    });
    auto* values = static_cast<double*>(mem);
    auto* row_ptr = reinterpret_cast<int*>(values + p.nnz);
    auto* col_idx = row_ptr + p.rows + 1;
    p.values = values;
    p.row_ptr = row_ptr;
    p.col_idx = col_idx;
    // Pageable host memory: the copies are staged, but each part's still proceeds on its own stream.
    LABKIT_CUDA(cudaMemcpyAsync(values, A.values.data() + e0, sizeof(double) * std::size_t(p.nnz),
                                cudaMemcpyHostToDevice, team.stream(k)));
    LABKIT_CUDA(cudaMemcpyAsync(row_ptr, rp.data(), sizeof(int) * rp.size(), cudaMemcpyHostToDevice, team.stream(k)));
    LABKIT_CUDA(cudaMemcpyAsync(col_idx, A.col_idx.data() + e0, sizeof(int) * std::size_t(p.nnz),
                                cudaMemcpyHostToDevice, team.stream(k)));
  }
  team.synchronize();
  return out;
}

void spmv_parts(const Team& team, const std::vector<PartCsr>& parts, const std::vector<const double*>& x,
                const std::vector<double*>& y) {
  if (int(parts.size()) != team.parts() || x.size() != parts.size() || y.size() != parts.size())
    throw std::invalid_argument("lab08: spmv_parts: one matrix block, x and y per part");
  for (int k = 0; k < team.parts(); ++k) {
    const PartCsr& p = parts[std::size_t(k)];
    if (p.rows == 0) continue;
    if (!x[std::size_t(k)] || !y[std::size_t(k)]) throw std::invalid_argument("lab08: spmv_parts: null vector");
    team.use(k);
    spmv_rows_kernel<<<(p.rows + kThreads - 1) / kThreads, kThreads, 0, team.stream(k)>>>(
        p.rows, p.row_ptr, p.col_idx, p.values, x[std::size_t(k)], y[std::size_t(k)]);
    LABKIT_CHECK_LAUNCH();
  }
  team.use(0);
}

}  // namespace lab08
