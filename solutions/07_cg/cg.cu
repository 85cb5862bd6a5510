// Lab 07 reference solution: conjugate gradient in double precision from reductions, updates and CSR SpMV.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>  // getpid: a temporary file name per process

#include "cg.h"
#include "labkit/labkit.h"
#include "labkit/timing.h"

namespace lab07 {

namespace {

constexpr int kThreads = 256;  // every kernel here: 8 warps, a multiple of 32 (the shuffle reductions need it)

int sm_count() {
  static const int count = [] {
    int dev = 0, v = 0;
    LABKIT_CUDA(cudaGetDevice(&dev));
    LABKIT_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  return count;
}

void check_n(int n, const char* what) {
  if (n < 0) throw std::invalid_argument(std::string("lab07: ") + what + ": n must be >= 0");
}
void check_ptr(const void* p, int n, const char* what) {
  if (n > 0 && !p) throw std::invalid_argument(std::string("lab07: ") + what + ": null pointer for a non-empty array");
}
void check_bps(int bps) {
  if (bps < 1 || bps > kMaxBlocksPerSm)
    throw std::invalid_argument("lab07: blocks_per_sm must be in [1, " + std::to_string(kMaxBlocksPerSm) + "]");
}

// Blocks of the first reduction pass: enough to keep every SM busy (bps per SM), never more than there is work
// for, and never more partials than the caller's array holds.
int reduce_grid(int n, int bps) {
  const long long work_blocks = std::max<long long>(1, (static_cast<long long>(n) + kThreads - 1) / kThreads);
  return static_cast<int>(std::min<long long>({static_cast<long long>(bps) * sm_count(), work_blocks, kMaxPartials}));
}
unsigned elementwise_grid(long long threads) { return static_cast<unsigned>((threads + kThreads - 1) / kThreads); }

// ---- reductions inside a block ----------------------------------------------------------------------------------
// Tree in shared memory: each level halves the active threads; the barrier after each level makes the sums of
// that level visible before the next reads them. Result in thread 0.
__device__ double block_sum_shared(double v) {
  __shared__ double s[kThreads];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  return s[0];
}

// Warp shuffles: the 32 lanes of a warp exchange registers directly, no shared memory and no barrier. The full
// mask is correct because every caller reaches this with all 32 lanes of the warp.
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;  // complete in lane 0
}
// One shuffle tree per warp, the warps' sums through 32 shared slots, a last shuffle tree in warp 0. Result in
// thread 0. Must be reached by every thread of the block (it has barriers).
__device__ double block_sum_shuffle(double v) {
  __shared__ double warp_sums[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();  // all warps' sums are written before warp 0 reads them
  v = (threadIdx.x < (blockDim.x >> 5)) ? warp_sums[threadIdx.x] : 0.0;
  if (warp == 0) v = warp_sum(v);
  __syncthreads();  // nobody rewrites warp_sums (a second call) before warp 0 has read them
  return v;
}

// ---------------------------------------------------------------------------------------------------------------
// Step 1a: two-pass dot product with a shared-memory tree. Grid-stride loop: consecutive threads read
// consecutive elements (each warp: one 256-byte segment per array per trip), and a fixed grid does all of n.
__global__ void dot_partial_shared_kernel(int n, const double* __restrict__ x, const double* __restrict__ y,
                                          double* __restrict__ partials) {
  double sum = 0;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < std::size_t(n); i += stride)
    sum = fma(x[i], y[i], sum);
  sum = block_sum_shared(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
__global__ void sum_partials_shared_kernel(int count, const double* __restrict__ partials,
                                           double* __restrict__ result) {
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum_shared(sum);
  if (threadIdx.x == 0) *result = sum;
}

// Step 1b: the same with shuffles, and two independent accumulators per thread so that each trip of the loop has
// four loads in flight instead of two (more bytes in flight per SM is what a bandwidth-bound loop needs).
__global__ void dot_partial_shuffle_kernel(int n, const double* __restrict__ x, const double* __restrict__ y,
                                           double* __restrict__ partials) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x, N = std::size_t(n);
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double a0 = 0, a1 = 0;
  for (; i + stride < N; i += 2 * stride) {
    a0 = fma(x[i], y[i], a0);
    a1 = fma(x[i + stride], y[i + stride], a1);
  }
  if (i < N) a0 = fma(x[i], y[i], a0);
  const double sum = block_sum_shuffle(a0 + a1);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
__global__ void sum_partials_shuffle_kernel(int count, const double* __restrict__ partials,
                                            double* __restrict__ result) {
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum_shuffle(sum);
  if (threadIdx.x == 0) *result = sum;
}

// ---------------------------------------------------------------------------------------------------------------
// Step 2: updates. One thread per element, coalesced: a warp reads and writes 256 contiguous bytes per array.
__global__ void axpy_kernel(int n, double a, const double* __restrict__ x, double* __restrict__ y) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < std::size_t(n)) y[i] = fma(a, x[i], y[i]);
}
__global__ void xpby_kernel(int n, const double* __restrict__ x, double b, double* __restrict__ y) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < std::size_t(n)) y[i] = fma(b, y[i], x[i]);
}
// Fused x/r update: one pass reads p, Ap, x, r and writes x, r (48 bytes per element) and sums the new r^T r on
// the way, where separate axpy, axpy, dot kernels would move 64 bytes per element in three launches.
__global__ void update_xr_partial_kernel(int n, double alpha, const double* __restrict__ p,
                                         const double* __restrict__ Ap, double* __restrict__ x,
                                         double* __restrict__ r, double* __restrict__ partials) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  double sum = 0;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < std::size_t(n); i += stride) {
    x[i] = fma(alpha, p[i], x[i]);
    const double ri = fma(-alpha, Ap[i], r[i]);
    r[i] = ri;
    sum = fma(ri, ri, sum);
  }
  sum = block_sum_shuffle(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// ---------------------------------------------------------------------------------------------------------------
// Step 3a: one thread per row. Good when rows are short (the 5- and 7-point Laplacians): a warp covers 32
// consecutive rows, whose entries are contiguous, so the warp's loads of values/col_idx fall in a few cache
// lines that the L1 keeps for the next k. Long rows make the warp's lanes wait for the longest one.
__global__ void spmv_thread_per_row_kernel(int rows, const int* __restrict__ row_ptr, const int* __restrict__ col,
                                           const double* __restrict__ val, const double* __restrict__ x,
                                           double* __restrict__ y) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= std::size_t(rows)) return;
  const int end = row_ptr[i + 1];
  double sum = 0;
  for (int k = row_ptr[i]; k < end; ++k) sum = fma(val[k], __ldg(&x[col[k]]), sum);
  y[i] = sum;
}

// Step 3b: one warp per row. The 32 lanes read 32 consecutive entries of the row (coalesced), and a shuffle
// tree adds the lanes' sums. Good for long rows; for 5 entries per row 27 lanes idle.
__global__ void spmv_warp_per_row_kernel(int rows, const int* __restrict__ row_ptr, const int* __restrict__ col,
                                         const double* __restrict__ val, const double* __restrict__ x,
                                         double* __restrict__ y) {
  const std::size_t row = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= std::size_t(rows)) return;  // the whole warp leaves together: the row index is the same for all lanes
  const int begin = row_ptr[row], end = row_ptr[row + 1];
  double sum = 0;
  for (int k = begin + lane; k < end; k += 32) sum = fma(val[k], __ldg(&x[col[k]]), sum);
  sum = warp_sum(sum);
  if (lane == 0) y[row] = sum;
}

void check_csr(const DeviceCsr& A, const char* what) {
  if (A.rows < 0 || A.cols < 0 || A.nnz < 0)
    throw std::invalid_argument(std::string("lab07: ") + what + ": negative matrix size");
  if (!A.row_ptr) throw std::invalid_argument(std::string("lab07: ") + what + ": row_ptr is null");
  check_ptr(A.col_idx, A.nnz, what);
  check_ptr(A.values, A.nnz, what);
}

}  // namespace

// ---- Step 1 -------------------------------------------------------------------------------------------------------
void dot_twopass(int n, const double* x, const double* y, double* partials, double* result, int blocks_per_sm) {
  check_n(n, "dot_twopass");
  check_bps(blocks_per_sm);
  check_ptr(x, n, "dot_twopass");
  check_ptr(y, n, "dot_twopass");
  if (!partials || !result) throw std::invalid_argument("lab07: dot_twopass: partials and result must not be null");
  const int grid = reduce_grid(n, blocks_per_sm);
  dot_partial_shared_kernel<<<grid, kThreads>>>(n, x, y, partials);
  LABKIT_CHECK_LAUNCH();
  sum_partials_shared_kernel<<<1, kThreads>>>(grid, partials, result);
  LABKIT_CHECK_LAUNCH();
}

void dot_shuffle(int n, const double* x, const double* y, double* partials, double* result, int blocks_per_sm) {
  check_n(n, "dot_shuffle");
  check_bps(blocks_per_sm);
  check_ptr(x, n, "dot_shuffle");
  check_ptr(y, n, "dot_shuffle");
  if (!partials || !result) throw std::invalid_argument("lab07: dot_shuffle: partials and result must not be null");
  const int grid = reduce_grid(n, blocks_per_sm);
  dot_partial_shuffle_kernel<<<grid, kThreads>>>(n, x, y, partials);
  LABKIT_CHECK_LAUNCH();
  sum_partials_shuffle_kernel<<<1, kThreads>>>(grid, partials, result);
  LABKIT_CHECK_LAUNCH();
}

// ---- Step 2 -------------------------------------------------------------------------------------------------------
void axpy(int n, double a, const double* x, double* y) {
  check_n(n, "axpy");
  check_ptr(x, n, "axpy");
  check_ptr(y, n, "axpy");
  if (n == 0) return;
  axpy_kernel<<<elementwise_grid(n), kThreads>>>(n, a, x, y);
  LABKIT_CHECK_LAUNCH();
}

void xpby(int n, const double* x, double b, double* y) {
  check_n(n, "xpby");
  check_ptr(x, n, "xpby");
  check_ptr(y, n, "xpby");
  if (n == 0) return;
  xpby_kernel<<<elementwise_grid(n), kThreads>>>(n, x, b, y);
  LABKIT_CHECK_LAUNCH();
}

void update_xr(int n, double alpha, const double* p, const double* Ap, double* x, double* r, double* partials,
               double* rr, int blocks_per_sm) {
  check_n(n, "update_xr");
  check_bps(blocks_per_sm);
  for (const void* v : {static_cast<const void*>(p), static_cast<const void*>(Ap), static_cast<const void*>(x),
                        static_cast<const void*>(r)})
    check_ptr(v, n, "update_xr");
  if (!partials || !rr) throw std::invalid_argument("lab07: update_xr: partials and rr must not be null");
  const int grid = reduce_grid(n, blocks_per_sm);
  update_xr_partial_kernel<<<grid, kThreads>>>(n, alpha, p, Ap, x, r, partials);
  LABKIT_CHECK_LAUNCH();
  sum_partials_shuffle_kernel<<<1, kThreads>>>(grid, partials, rr);
  LABKIT_CHECK_LAUNCH();
}

// ---- Step 3 -------------------------------------------------------------------------------------------------------
void spmv_thread_per_row(const DeviceCsr& A, const double* x, double* y) {
  check_csr(A, "spmv_thread_per_row");
  check_ptr(x, A.cols, "spmv_thread_per_row");
  check_ptr(y, A.rows, "spmv_thread_per_row");
  if (A.rows == 0) return;
  spmv_thread_per_row_kernel<<<elementwise_grid(A.rows), kThreads>>>(A.rows, A.row_ptr, A.col_idx, A.values, x, y);
  LABKIT_CHECK_LAUNCH();
}

void spmv_warp_per_row(const DeviceCsr& A, const double* x, double* y) {
  check_csr(A, "spmv_warp_per_row");
  check_ptr(x, A.cols, "spmv_warp_per_row");
  check_ptr(y, A.rows, "spmv_warp_per_row");
  if (A.rows == 0) return;
  spmv_warp_per_row_kernel<<<elementwise_grid(32ll * A.rows), kThreads>>>(A.rows, A.row_ptr, A.col_idx, A.values,
                                                                          x, y);
  LABKIT_CHECK_LAUNCH();
}

// ---- shared by the two solvers ------------------------------------------------------------------------------------
namespace {

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

void check_solver_args(const DeviceCsr& A, const double* b, double* x, const CgOptions& opt, const char* what) {
  check_csr(A, what);
  if (A.rows != A.cols)
    throw std::invalid_argument(std::string("lab07: ") + what + ": the matrix is " + std::to_string(A.rows) + " x " +
                                std::to_string(A.cols) + ", CG needs a square one");
  check_ptr(b, A.rows, what);
  check_ptr(x, A.rows, what);
  if (!(opt.rel_tol >= 0)) throw std::invalid_argument(std::string("lab07: ") + what + ": rel_tol must be >= 0");
  if (opt.max_iter < 0) throw std::invalid_argument(std::string("lab07: ") + what + ": max_iter must be >= 0");
  check_bps(opt.blocks_per_sm);
  if (opt.graph_iterations < 1)
    throw std::invalid_argument(std::string("lab07: ") + what + ": graph_iterations must be >= 1");
}

// The solvers' work vectors and scalars.
struct Work {
  labkit::DeviceBuffer<double> r, p, Ap, partials, scalar;
  explicit Work(int n) : r(n), p(n), Ap(n), partials(kMaxPartials), scalar(1) {}
};

// A solver's host side: dot products that come back to the host, the true residual, and the ending.
struct Host {
  const DeviceCsr& A;
  const double* b;
  double* x;
  const CgOptions& opt;
  Work& w;
  int n;
  double bnorm = 0;
  CgResult res;
  std::string note;  // appended to the message (x reset after an overflow)

  // A matrix with long rows (on average 16 entries or more) gets a warp per row; short rows a thread per row.
  void spmv(const double* in, double* out) {
    if (A.rows > 0 && A.nnz >= 16ll * A.rows) spmv_warp_per_row(A, in, out);
    else spmv_thread_per_row(A, in, out);
  }
  double dot(const double* u, const double* v) {
    dot_shuffle(n, u, v, w.partials.data(), w.scalar.data(), opt.blocks_per_sm);
    double h = 0;
    LABKIT_CUDA(cudaMemcpy(&h, w.scalar.data(), sizeof h, cudaMemcpyDeviceToHost));
    return h;
  }
  // out = b - A x; returns ||out|| / ||b||.
  double true_residual(double* out) {
    spmv(x, out);
    xpby(n, b, -1.0, out);
    return std::sqrt(dot(out, out)) / bnorm;
  }
  CgResult finish(labkit::CgStatus status, const std::string& cause) {
    res.status = status;
    if (status != labkit::CgStatus::converged && bnorm > 0) {
      // x must be finite on return: after an overflow it may not be, and then x = 0 (a finite iterate) is returned.
      const double xx = dot(x, x);
      if (!std::isfinite(xx)) {
        LABKIT_CUDA(cudaMemset(x, 0, sizeof(double) * std::size_t(n)));
        note = "; x overflowed and was reset to 0";
      }
    }
    if (bnorm > 0) res.relative_residual = true_residual(w.Ap.data());
    res.message = std::string("cg: ") + labkit::to_string(status) + " after " + std::to_string(res.iterations) +
                  " iterations, ||b - Ax|| / ||b|| = " + fmt(res.relative_residual) + " (tolerance " +
                  fmt(opt.rel_tol) + ")" + (cause.empty() ? "" : ": " + cause) + note;
    return res;
  }
  // Stage 0 of both solvers: x = 0, ||b||; returns true when the answer is already known (b == 0, max_iter == 0,
  // b not finite).
  bool start(CgResult* early) {
    if (n > 0) LABKIT_CUDA(cudaMemset(x, 0, sizeof(double) * std::size_t(n)));
    const double bb = n > 0 ? dot(b, b) : 0.0;
    bnorm = std::sqrt(bb);
    if (bnorm == 0) {
      *early = finish(labkit::CgStatus::converged, "b = 0, so x = 0 is exact");
      return true;
    }
    if (!std::isfinite(bnorm)) {
      *early = finish(labkit::CgStatus::breakdown, "||b|| is not finite");
      return true;
    }
    res.updated_residual = 1.0;
    if (opt.max_iter == 0) {
      *early = finish(labkit::CgStatus::max_iterations, "max_iter = 0");
      return true;
    }
    LABKIT_CUDA(cudaMemcpy(w.r.data(), b, sizeof(double) * std::size_t(n), cudaMemcpyDeviceToDevice));
    LABKIT_CUDA(cudaMemcpy(w.p.data(), b, sizeof(double) * std::size_t(n), cudaMemcpyDeviceToDevice));
    return false;
  }

  // The updated residual met the tolerance: only the true one decides. Returns true when the solve is over
  // (converged or stagnation, written to *out); otherwise r = b - A x, p = r and the new r^T r is in *rr.
  int checks = 0;
  double last_true = std::numeric_limits<double>::infinity();
  bool confirm(double* rr, CgResult* out) {
    const double truth = true_residual(w.r.data());
    if (truth <= opt.rel_tol) {
      *out = finish(labkit::CgStatus::converged, "");
      return true;
    }
    if (++checks >= 10 || truth > 0.9 * last_true) {
      *out = finish(labkit::CgStatus::stagnation,
                    "the true residual " + fmt(truth) +
                        " no longer improves while the updated residual met the tolerance (tolerance too tight for "
                        "double precision on this matrix?)");
      return true;
    }
    last_true = truth;
    // Residual replacement: restart from x with the true residual.
    *rr = dot(w.r.data(), w.r.data());
    LABKIT_CUDA(cudaMemcpy(w.p.data(), w.r.data(), sizeof(double) * std::size_t(n), cudaMemcpyDeviceToDevice));
    return false;
  }
};

}  // namespace

// ---- Step 4: the CG loop with host-side scalars -------------------------------------------------------------------
CgResult cg_solve(const DeviceCsr& A, const double* b, double* x, const CgOptions& opt) {
  check_solver_args(A, b, x, opt, "cg_solve");
  const int n = A.rows;
  Work w(n);
  Host h{A, b, x, opt, w, n};
  CgResult early;
  if (h.start(&early)) return early;

  double rr = h.bnorm * h.bnorm;
  CgResult& res = h.res;
  while (res.iterations < opt.max_iter) {
    h.spmv(w.p.data(), w.Ap.data());
    const double pAp = h.dot(w.p.data(), w.Ap.data());
    if (!std::isfinite(pAp)) return h.finish(labkit::CgStatus::breakdown, "p^T A p is not finite (overflow)");
    if (pAp <= 0)
      return h.finish(labkit::CgStatus::not_spd, "p^T A p = " + fmt(pAp) + " <= 0 at iteration " +
                                                     std::to_string(res.iterations + 1) +
                                                     ": A is not symmetric positive definite (indefinite or singular)");
    const double alpha = rr / pAp;
    if (!std::isfinite(alpha)) return h.finish(labkit::CgStatus::breakdown, "step length alpha is not finite");
    update_xr(n, alpha, w.p.data(), w.Ap.data(), x, w.r.data(), w.partials.data(), w.scalar.data(),
              opt.blocks_per_sm);
    double rr_new = 0;
    LABKIT_CUDA(cudaMemcpy(&rr_new, w.scalar.data(), sizeof rr_new, cudaMemcpyDeviceToHost));
    ++res.iterations;
    if (!std::isfinite(rr_new)) return h.finish(labkit::CgStatus::breakdown, "the residual overflowed");
    res.updated_residual = std::sqrt(rr_new) / h.bnorm;
    if (opt.progress) opt.progress(res.iterations, res.updated_residual);
    if (res.updated_residual <= opt.rel_tol) {
      CgResult out;
      if (h.confirm(&rr, &out)) return out;
      continue;
    }
    const double beta = rr_new / rr;
    rr = rr_new;
    xpby(n, w.r.data(), beta, w.p.data());
  }
  return h.finish(labkit::CgStatus::max_iterations, "");
}

// ---- Step 5: blocks per SM by timing, cached ----------------------------------------------------------------------
std::string default_tuning_cache() {
  namespace fs = std::filesystem;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  fs::path base;
  if (xdg && *xdg) base = fs::path(xdg);
  else if (home && *home) base = fs::path(home) / ".cache";
  else return "";
  return (base / "cuda-labs" / "lab07_blocks_per_sm.tsv").string();
}

namespace {

std::string tuning_key(int n) {
  int dev = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  LABKIT_CUDA(cudaGetDeviceProperties(&prop, dev));
  int size_class = 0;  // floor(log2 n): sizes within a factor of 2 share a choice
  while ((n >> size_class) > 1) ++size_class;
  return std::string(prop.name) + "|2^" + std::to_string(size_class);
}

// Lines "<key>\t<blocks_per_sm>"; anything else is ignored.
int cache_lookup(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (in && std::getline(in, line)) {
    const auto tab = line.rfind('\t');
    if (tab == std::string::npos || line.compare(0, tab, key) != 0 || tab != key.size()) continue;
    const std::string value = line.substr(tab + 1);
    char* end = nullptr;
    const long v = std::strtol(value.c_str(), &end, 10);
    if (end != value.c_str() && *end == '\0' && v >= 1 && v <= kMaxBlocksPerSm) return static_cast<int>(v);
  }
  return 0;
}

void cache_store(const std::string& path, const std::string& key, int bps) {
  namespace fs = std::filesystem;
  try {
    const fs::path p(path);
    if (p.has_parent_path()) fs::create_directories(p.parent_path());
    std::vector<std::string> keep;
    {
      std::ifstream in(path);
      std::string line;
      while (in && std::getline(in, line))
        if (!line.empty() && line.rfind(key + "\t", 0) != 0) keep.push_back(line);
    }
    // Write a temporary file and rename it over the cache: a reader never sees half a file.
    const std::string tmp = path + ".tmp" + std::to_string(static_cast<long long>(::getpid()));
    {
      std::ofstream out(tmp, std::ios::trunc);
      for (const auto& l : keep) out << l << "\n";
      out << key << "\t" << bps << "\n";
      if (!out) throw std::runtime_error("cannot write " + tmp);
    }
    fs::rename(tmp, p);
  } catch (const std::exception& e) {
    std::cerr << "lab07: note: the tuning cache " << path << " was not updated (" << e.what() << ")\n";
  }
}

}  // namespace

TuneResult tune_blocks_per_sm(int n, const std::string& cache_path) {
  if (n < 1) throw std::invalid_argument("lab07: tune_blocks_per_sm: n must be >= 1");
  TuneResult res;
  res.cache_key = tuning_key(n);
  if (!cache_path.empty()) {
    if (const int cached = cache_lookup(cache_path, res.cache_key)) {
      res.blocks_per_sm = cached;
      res.from_cache = true;
      return res;
    }
  }
  // The work being tuned: one dot product and one fused update, the two reductions of a CG iteration.
  labkit::DeviceBuffer<double> u(n), v(n), xs(n), rs(n), partials(kMaxPartials), out(1);
  labkit::fill_random_device(u.data(), n, 1);
  labkit::fill_random_device(v.data(), n, 2);
  labkit::fill_random_device(xs.data(), n, 3);
  labkit::fill_random_device(rs.data(), n, 4);
  labkit::TimingOptions topt;
  topt.warmup = 2;
  topt.min_repeats = 5;
  topt.max_repeats = 50;
  topt.budget_ms = 10;
  res.blocks_per_sm = kMaxBlocksPerSm;
  for (int bps = 1; bps <= kMaxBlocksPerSm; ++bps) {
    const double ms = labkit::time_gpu(
                          [&](int) {
                            dot_shuffle(n, u.data(), v.data(), partials.data(), out.data(), bps);
                            // alpha = 0: the same memory traffic as a real update, and x, r stay as they are.
                            update_xr(n, 0.0, u.data(), v.data(), xs.data(), rs.data(), partials.data(), out.data(),
                                      bps);
                          },
                          topt)
                          .median_ms;
    res.ms.push_back(ms);
    if (bps >= 2 && ms >= res.ms[bps - 2]) {  // first local minimum: the previous count
      res.blocks_per_sm = bps - 1;
      break;
    }
  }
  if (!cache_path.empty()) cache_store(cache_path, res.cache_key, res.blocks_per_sm);
  return res;
}

// ---- Step 6: scalars on the device, iterations replayed as a CUDA graph -------------------------------------------
namespace {

enum StopReason : int { kRunning = 0, kMetTolerance = 1, kNotSpd = 2, kBreakdown = 3, kMaxIter = 4 };

struct DeviceState {
  double rr;       // r^T r of the current residual
  double pAp;      // p^T A p of the current iteration
  double alpha, beta;
  double rr_new;   // r^T r after the update
  double stop_rr;  // rel_tol^2 * ||b||^2: the updated residual meets the tolerance when rr_new <= stop_rr
  int iterations;
  int max_iter;
  int stop;        // StopReason; once set, every later kernel of the graph returns at once
};

// SpMV (thread per row, grid-stride over rows) fused with the partial sums of p^T A p: the Ap just computed is
// still in a register, so the dot product costs no extra pass over p and Ap.
__global__ void spmv_dot_partial_kernel(const DeviceState* __restrict__ st, int rows,
                                        const int* __restrict__ row_ptr, const int* __restrict__ col,
                                        const double* __restrict__ val, const double* __restrict__ p,
                                        double* __restrict__ Ap, double* __restrict__ partials) {
  if (st->stop) return;  // the same value for every thread (written by an earlier kernel): no divergent barrier
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  double sum = 0;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < std::size_t(rows); i += stride) {
    const int end = row_ptr[i + 1];
    double y = 0;
    for (int k = row_ptr[i]; k < end; ++k) y = fma(val[k], __ldg(&p[col[k]]), y);
    Ap[i] = y;
    sum = fma(p[i], y, sum);
  }
  sum = block_sum_shuffle(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// One block: p^T A p from the partials, then alpha, or the reason to stop.
__global__ void finish_pap_kernel(DeviceState* __restrict__ st, int count, const double* __restrict__ partials) {
  if (st->stop) return;
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum_shuffle(sum);
  if (threadIdx.x == 0) {
    st->pAp = sum;
    if (!isfinite(sum)) {
      st->stop = kBreakdown;
    } else if (sum <= 0) {
      st->stop = kNotSpd;
    } else {
      const double alpha = st->rr / sum;
      if (!isfinite(alpha)) st->stop = kBreakdown;
      else st->alpha = alpha;
    }
  }
}

// x += alpha p, r -= alpha Ap with alpha read from the device state, partial sums of the new r^T r.
__global__ void update_xr_device_kernel(const DeviceState* __restrict__ st, int n, const double* __restrict__ p,
                                        const double* __restrict__ Ap, double* __restrict__ x,
                                        double* __restrict__ r, double* __restrict__ partials) {
  if (st->stop) return;
  const double alpha = st->alpha;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  double sum = 0;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < std::size_t(n); i += stride) {
    x[i] = fma(alpha, p[i], x[i]);
    const double ri = fma(-alpha, Ap[i], r[i]);
    r[i] = ri;
    sum = fma(ri, ri, sum);
  }
  sum = block_sum_shuffle(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// One block: the new r^T r, the iteration count, beta, and whether to stop (tolerance met, overflow, max_iter).
__global__ void finish_rr_kernel(DeviceState* __restrict__ st, int count, const double* __restrict__ partials) {
  if (st->stop) return;
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum_shuffle(sum);
  if (threadIdx.x == 0) {
    st->rr_new = sum;
    st->iterations += 1;
    if (!isfinite(sum)) {
      st->stop = kBreakdown;
    } else if (sum <= st->stop_rr) {
      st->stop = kMetTolerance;
    } else {
      st->beta = sum / st->rr;
      st->rr = sum;
      if (st->iterations >= st->max_iter) st->stop = kMaxIter;
    }
  }
}

// p = r + beta p with beta from the device state.
__global__ void update_p_device_kernel(const DeviceState* __restrict__ st, int n, const double* __restrict__ r,
                                       double* __restrict__ p) {
  if (st->stop) return;
  const double beta = st->beta;
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < std::size_t(n)) p[i] = fma(beta, p[i], r[i]);
}

// RAII for the stream, graph and executable graph.
struct GraphResources {
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~GraphResources() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (stream) cudaStreamDestroy(stream);
  }
};

}  // namespace

CgResult cg_solve_graph(const DeviceCsr& A, const double* b, double* x, const CgOptions& opt) {
  check_solver_args(A, b, x, opt, "cg_solve_graph");
  const int n = A.rows;
  Work w(n);
  Host h{A, b, x, opt, w, n};
  CgResult early;
  if (h.start(&early)) return early;
  CgResult& res = h.res;

  labkit::DeviceBuffer<DeviceState> d_state(1);
  DeviceState st{};
  st.rr = h.bnorm * h.bnorm;
  st.stop_rr = opt.rel_tol * opt.rel_tol * st.rr;
  st.max_iter = opt.max_iter;
  LABKIT_CUDA(cudaMemcpy(d_state.data(), &st, sizeof st, cudaMemcpyHostToDevice));

  const int grid = reduce_grid(n, opt.blocks_per_sm);
  GraphResources g;
  // A blocking stream: it waits for the legacy default stream's earlier work (the copies above) and vice versa.
  LABKIT_CUDA(cudaStreamCreate(&g.stream));
  LABKIT_CUDA(cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeThreadLocal));
  try {
    for (int k = 0; k < opt.graph_iterations; ++k) {
      spmv_dot_partial_kernel<<<grid, kThreads, 0, g.stream>>>(d_state.data(), n, A.row_ptr, A.col_idx, A.values,
                                                               w.p.data(), w.Ap.data(), w.partials.data());
      LABKIT_CHECK_LAUNCH();
      finish_pap_kernel<<<1, kThreads, 0, g.stream>>>(d_state.data(), grid, w.partials.data());
      LABKIT_CHECK_LAUNCH();
      update_xr_device_kernel<<<grid, kThreads, 0, g.stream>>>(d_state.data(), n, w.p.data(), w.Ap.data(), x,
                                                               w.r.data(), w.partials.data());
      LABKIT_CHECK_LAUNCH();
      finish_rr_kernel<<<1, kThreads, 0, g.stream>>>(d_state.data(), grid, w.partials.data());
      LABKIT_CHECK_LAUNCH();
      update_p_device_kernel<<<elementwise_grid(n), kThreads, 0, g.stream>>>(d_state.data(), n, w.r.data(),
                                                                             w.p.data());
      LABKIT_CHECK_LAUNCH();
    }
  } catch (...) {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(g.stream, &broken);  // leave capture mode before reporting the error
    if (broken) cudaGraphDestroy(broken);
    throw;
  }
  LABKIT_CUDA(cudaStreamEndCapture(g.stream, &g.graph));
  LABKIT_CUDA(cudaGraphInstantiate(&g.exec, g.graph, 0));

  int reported = 0;  // the last iteration handed to opt.progress
  for (;;) {
    LABKIT_CUDA(cudaGraphLaunch(g.exec, g.stream));
    LABKIT_CUDA(cudaMemcpyAsync(&st, d_state.data(), sizeof st, cudaMemcpyDeviceToHost, g.stream));
    LABKIT_CUDA(cudaStreamSynchronize(g.stream));  // the one synchronization per graph_iterations iterations
    res.iterations = st.iterations;
    if (std::isfinite(st.rr_new) && st.iterations > 0) res.updated_residual = std::sqrt(st.rr_new) / h.bnorm;
    // A stop found in the first iteration of a launch (p^T A p <= 0 at iteration k+1) completes no iteration: the
    // count is the one already reported, and progress must only ever see new iterations.
    if (opt.progress && st.iterations > reported) {
      opt.progress(st.iterations, res.updated_residual);
      reported = st.iterations;
    }
    switch (st.stop) {
      case kRunning:
        continue;
      case kNotSpd:
        return h.finish(labkit::CgStatus::not_spd,
                        "p^T A p = " + fmt(st.pAp) + " <= 0 at iteration " + std::to_string(st.iterations + 1) +
                            ": A is not symmetric positive definite (indefinite or singular)");
      case kBreakdown:
        return h.finish(labkit::CgStatus::breakdown, "a NaN or infinity appeared (p^T A p, alpha or r^T r)");
      case kMaxIter:
        return h.finish(labkit::CgStatus::max_iterations, "");
      case kMetTolerance: {
        double rr = 0;
        CgResult out;
        if (h.confirm(&rr, &out)) return out;
        if (st.iterations >= opt.max_iter) return h.finish(labkit::CgStatus::max_iterations, "");
        st.rr = rr;
        st.stop = kRunning;
        LABKIT_CUDA(cudaMemcpy(d_state.data(), &st, sizeof st, cudaMemcpyHostToDevice));
        continue;
      }
      default:
        throw std::logic_error("lab07: cg_solve_graph: unknown stop reason " + std::to_string(st.stop));
    }
  }
}

}  // namespace lab07
