// Lab 07 reference, step 6: CG with its scalars on the device, several iterations replayed as one CUDA graph launch.
// The host side (start, true residual, ending) is step 4's, repeated here so that this file stands alone.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "cg.h"
#include "labkit/labkit.h"

namespace lab07 {

namespace {

constexpr int kThreads = 256;  // every kernel here: 8 warps, a multiple of 32 (the shuffle reductions need it)

// The SM count of the CURRENT device, remembered per device ordinal: a process may switch devices between calls,
// and host threads may call at the same time (each slot is one atomic int; two racing threads store the same value).
int sm_count() {
  constexpr int kSlots = 64;
  static std::atomic<int> cached[kSlots];  // static storage: zero-initialized, 0 = not asked yet
  int dev = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  if (dev < kSlots)
    if (const int v = cached[dev].load(std::memory_order_relaxed)) return v;
  int v = 0;
  LABKIT_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
  if (dev < kSlots) cached[dev].store(v, std::memory_order_relaxed);
  return v;
}

// Blocks of the first reduction pass: enough to keep every SM busy (bps per SM), never more than there is work
// for, and never more partials than the caller's array holds.
int reduce_grid(int n, int bps) {
  const long long work_blocks = std::max<long long>(1, (static_cast<long long>(n) + kThreads - 1) / kThreads);
  return static_cast<int>(std::min<long long>({static_cast<long long>(bps) * sm_count(), work_blocks, kMaxPartials}));
}
unsigned elementwise_grid(long long threads) { return static_cast<unsigned>((threads + kThreads - 1) / kThreads); }

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


std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
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
// still in a register, so the dot product costs no extra pass over p and Ap. The row loop is unrolled by 5 for the
// reason step 3's is (step3_spmv.cu): a 5-point row's loads go out together.
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
#pragma unroll 5
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
  args::solver(A, b, x, opt, "cg_solve_graph");
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
