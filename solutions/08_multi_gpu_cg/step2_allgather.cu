// Lab 08 reference, step 2: the classic multi-GPU CG. Every part holds the whole p; after each p update the parts'
// blocks are all-gathered (NCCL broadcasts in one group, or peer copies for virtual devices), and the dot products
// are all-reduced. Scalars travel to the host every iteration, as in lab 07 step 4.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "labkit/buffer.h"
#include "multi_cg.h"

namespace lab08 {

namespace {

constexpr int kThreads = 256;
constexpr int kReduceBlocks = 1024;  // first-pass blocks of every reduction (a few per SM on current GPUs)

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}
// Result in thread 0; every thread of the block must call it (barriers).
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

__global__ void dot_partial_kernel(int n, const double* __restrict__ x, const double* __restrict__ y,
                                   double* __restrict__ partials) {
  double sum = 0;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < std::size_t(n); i += stride)
    sum = fma(x[i], y[i], sum);
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
__global__ void sum_partials_kernel(int count, const double* __restrict__ partials, double* __restrict__ out) {
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) *out = sum;
}
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
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
__global__ void xpby_kernel(int n, const double* __restrict__ x, double b, double* __restrict__ y) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < std::size_t(n)) y[i] = fma(b, y[i], x[i]);
}
// out = b - out (the true residual from out = A x)
__global__ void residual_kernel(int n, const double* __restrict__ b, double* __restrict__ out) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < std::size_t(n)) out[i] = b[i] - out[i];
}
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

unsigned grid_for(long long n) { return unsigned(std::max<long long>(1, (n + kThreads - 1) / kThreads)); }
int reduce_grid(int n) { return int(std::min<long long>(kReduceBlocks, grid_for(n))); }

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

// One part's vectors on its device. p is full length (every part sees all of p); x, r, Ap, b are the part's rows.
struct PartWork {
  labkit::DeviceBuffer<double> p_full, x, r, Ap, b, partials, scalar;
  cudaEvent_t sent = nullptr;  // recorded after this part's block of p was copied to the others (peer path)
};

class AllgatherSolver final : public Solver {
 public:
  AllgatherSolver(const Team& team, const labkit::Csr& A) : team_(team), n_(A.rows) {
    if (A.rows != A.cols) throw std::invalid_argument("lab08: the allgather solver needs a square matrix");
    bounds_ = partition_rows(A, team.parts());
    parts_ = distribute_rows(team, A, bounds_);
    work_.resize(std::size_t(team.parts()));
    for (int k = 0; k < team.parts(); ++k) {
      team.use(k);
      // At least one element each: an empty part (more parts than rows) still has valid pointers.
      const std::size_t m = std::max<std::size_t>(1, std::size_t(rows(k)));
      PartWork& w = work_[std::size_t(k)];
      w.p_full = labkit::DeviceBuffer<double>(std::max<std::size_t>(1, std::size_t(n_)));
      w.x = labkit::DeviceBuffer<double>(m);
      w.r = labkit::DeviceBuffer<double>(m);
      w.Ap = labkit::DeviceBuffer<double>(m);
      w.b = labkit::DeviceBuffer<double>(m);
      w.partials = labkit::DeviceBuffer<double>(kReduceBlocks);
      w.scalar = labkit::DeviceBuffer<double>(1);
      LABKIT_CUDA(cudaEventCreateWithFlags(&w.sent, cudaEventDisableTiming));
    }
    host_scalars_ = labkit::PinnedBuffer<double>(std::size_t(team.parts()));
    team.use(0);
  }
  ~AllgatherSolver() override {
    for (int k = 0; k < int(work_.size()); ++k) {
      cudaSetDevice(team_.device(k));
      cudaEventDestroy(work_[std::size_t(k)].sent);
    }
    cudaSetDevice(team_.device(0));
  }

  CgResult solve(const std::vector<double>& b, std::vector<double>& x, const CgOptions& opt) override;

 private:
  int rows(int k) const { return bounds_[std::size_t(k) + 1] - bounds_[std::size_t(k)]; }
  double* own_p(int k) { return work_[std::size_t(k)].p_full.data() + bounds_[std::size_t(k)]; }

  // Every part's block of p_full to every other part.
  void allgather_p() {
    const int P = team_.parts();
    if (P == 1) return;
    if (team_.uses_nccl()) {
      // ncclAllGather needs equal counts per rank; blocks differ, so each owner broadcasts its block in place
      // (root q sends from and every rank receives into p_full + bounds[q]). One group: NCCL schedules all of them
      // together instead of P rounds.
      LAB08_NCCL(ncclGroupStart());
      for (int q = 0; q < P; ++q) {
        if (rows(q) == 0) continue;
        for (int k = 0; k < P; ++k) {
          double* block = work_[std::size_t(k)].p_full.data() + bounds_[std::size_t(q)];
          LAB08_NCCL(ncclBroadcast(block, block, std::size_t(rows(q)), ncclDouble, q, team_.comm(k), team_.stream(k)));
        }
      }
      LAB08_NCCL(ncclGroupEnd());
      return;
    }
    // Peer copies: the owner pushes its block on its own stream, then every receiver waits for all owners.
    for (int q = 0; q < P; ++q) {
      team_.use(q);
      const std::size_t bytes = sizeof(double) * std::size_t(rows(q));
      for (int d = 0; d < P && bytes > 0; ++d) {
        if (d == q) continue;
        LABKIT_CUDA(cudaMemcpyPeerAsync(work_[std::size_t(d)].p_full.data() + bounds_[std::size_t(q)], team_.device(d),
                                        own_p(q), team_.device(q), bytes, team_.stream(q)));
      }
      LABKIT_CUDA(cudaEventRecord(work_[std::size_t(q)].sent, team_.stream(q)));
    }
    for (int d = 0; d < P; ++d) {
      team_.use(d);
      for (int q = 0; q < P; ++q)
        if (q != d) LABKIT_CUDA(cudaStreamWaitEvent(team_.stream(d), work_[std::size_t(q)].sent, 0));
    }
    team_.use(0);
  }

  // Sum over parts of each part's `scalar` (already written on its stream); the same value on every part's device
  // afterwards (NCCL) and returned to the host.
  double allreduce_scalar() {
    const int P = team_.parts();
    if (team_.uses_nccl()) {
      LAB08_NCCL(ncclGroupStart());
      for (int k = 0; k < P; ++k) {
        double* s = work_[std::size_t(k)].scalar.data();
        LAB08_NCCL(ncclAllReduce(s, s, 1, ncclDouble, ncclSum, team_.comm(k), team_.stream(k)));
      }
      LAB08_NCCL(ncclGroupEnd());
      team_.use(0);
      LABKIT_CUDA(cudaMemcpyAsync(host_scalars_.data(), work_[0].scalar.data(), sizeof(double),
                                  cudaMemcpyDeviceToHost, team_.stream(0)));
      LABKIT_CUDA(cudaStreamSynchronize(team_.stream(0)));
      return host_scalars_[0];
    }
    // One part, or virtual devices: the partial sums meet on the host, added in part order (deterministic).
    for (int k = 0; k < P; ++k) {
      team_.use(k);
      LABKIT_CUDA(cudaMemcpyAsync(host_scalars_.data() + k, work_[std::size_t(k)].scalar.data(), sizeof(double),
                                  cudaMemcpyDeviceToHost, team_.stream(k)));
    }
    double sum = 0;
    for (int k = 0; k < P; ++k) {
      team_.use(k);
      LABKIT_CUDA(cudaStreamSynchronize(team_.stream(k)));
      sum += host_scalars_[std::size_t(k)];
    }
    team_.use(0);
    return sum;
  }

  // Each part: scalar = u_k^T v_k over its rows; then the sum over parts.
  template <class U, class V>
  double dot(U u, V v) {
    for (int k = 0; k < team_.parts(); ++k) {
      team_.use(k);
      PartWork& w = work_[std::size_t(k)];
      const int m = rows(k), g = reduce_grid(m);
      dot_partial_kernel<<<g, kThreads, 0, team_.stream(k)>>>(m, u(k), v(k), w.partials.data());
      LABKIT_CHECK_LAUNCH();
      sum_partials_kernel<<<1, kThreads, 0, team_.stream(k)>>>(g, w.partials.data(), w.scalar.data());
      LABKIT_CHECK_LAUNCH();
    }
    return allreduce_scalar();
  }

  // Ap = A p for every part (p_full must hold the whole p).
  void spmv() {
    for (int k = 0; k < team_.parts(); ++k) {
      const PartCsr& a = parts_[std::size_t(k)];
      if (a.rows == 0) continue;
      team_.use(k);
      spmv_rows_kernel<<<grid_for(a.rows), kThreads, 0, team_.stream(k)>>>(
          a.rows, a.row_ptr, a.col_idx, a.values, work_[std::size_t(k)].p_full.data(), work_[std::size_t(k)].Ap.data());
      LABKIT_CHECK_LAUNCH();
    }
  }

  // r = b - A x on every part (x goes through p_full, which the caller may overwrite); returns ||r|| / ||b||.
  double true_residual() {
    for (int k = 0; k < team_.parts(); ++k) {
      team_.use(k);
      LABKIT_CUDA(cudaMemcpyAsync(own_p(k), work_[std::size_t(k)].x.data(), sizeof(double) * std::size_t(rows(k)),
                                  cudaMemcpyDeviceToDevice, team_.stream(k)));
    }
    allgather_p();
    spmv();
    for (int k = 0; k < team_.parts(); ++k) {
      if (rows(k) == 0) continue;
      team_.use(k);
      PartWork& w = work_[std::size_t(k)];
      residual_kernel<<<grid_for(rows(k)), kThreads, 0, team_.stream(k)>>>(rows(k), w.b.data(), w.Ap.data());
      LABKIT_CHECK_LAUNCH();
      LABKIT_CUDA(cudaMemcpyAsync(w.r.data(), w.Ap.data(), sizeof(double) * std::size_t(rows(k)),
                                  cudaMemcpyDeviceToDevice, team_.stream(k)));
    }
    return std::sqrt(dot([&](int k) { return work_[std::size_t(k)].r.data(); },
                         [&](int k) { return work_[std::size_t(k)].r.data(); })) /
           bnorm_;
  }

  CgResult finish(CgResult res, labkit::CgStatus status, const std::string& cause, const CgOptions& opt,
                  std::vector<double>& x) {
    res.status = status;
    std::string note;
    if (status != labkit::CgStatus::converged && bnorm_ > 0) {
      const double xx = dot([&](int k) { return work_[std::size_t(k)].x.data(); },
                            [&](int k) { return work_[std::size_t(k)].x.data(); });
      if (!std::isfinite(xx)) {
        for (int k = 0; k < team_.parts(); ++k) {
          team_.use(k);
          LABKIT_CUDA(cudaMemsetAsync(work_[std::size_t(k)].x.data(), 0, sizeof(double) * std::size_t(rows(k)),
                                      team_.stream(k)));
        }
        note = "; x overflowed and was reset to 0";
      }
    }
    if (bnorm_ > 0) res.relative_residual = true_residual();
    x.assign(std::size_t(n_), 0.0);
    for (int k = 0; k < team_.parts(); ++k) {
      team_.use(k);
      LABKIT_CUDA(cudaMemcpyAsync(x.data() + bounds_[std::size_t(k)], work_[std::size_t(k)].x.data(),
                                  sizeof(double) * std::size_t(rows(k)), cudaMemcpyDeviceToHost, team_.stream(k)));
    }
    team_.synchronize();
    res.message = std::string("cg (") + team_.describe() + ", all-gather): " + labkit::to_string(status) + " after " +
                  std::to_string(res.iterations) + " iterations, ||b - Ax|| / ||b|| = " + fmt(res.relative_residual) +
                  " (tolerance " + fmt(opt.rel_tol) + ")" + (cause.empty() ? "" : ": " + cause) + note;
    return res;
  }

  const Team& team_;
  int n_;
  std::vector<int> bounds_;
  std::vector<PartCsr> parts_;
  std::vector<PartWork> work_;
  labkit::PinnedBuffer<double> host_scalars_;
  double bnorm_ = 0;
};

CgResult AllgatherSolver::solve(const std::vector<double>& b, std::vector<double>& x, const CgOptions& opt) {
  if (int(b.size()) != n_) throw std::invalid_argument("lab08: solve: b has the wrong size");
  if (!(opt.rel_tol >= 0)) throw std::invalid_argument("lab08: solve: rel_tol must be >= 0");
  if (opt.max_iter < 0) throw std::invalid_argument("lab08: solve: max_iter must be >= 0");
  const int P = team_.parts();
  auto vec = [&](labkit::DeviceBuffer<double> PartWork::*member) {
    return [this, member](int k) { return (work_[std::size_t(k)].*member).data(); };
  };
  for (int k = 0; k < P; ++k) {
    team_.use(k);
    PartWork& w = work_[std::size_t(k)];
    const std::size_t m = std::size_t(rows(k)), bytes = sizeof(double) * m;
    LABKIT_CUDA(cudaMemcpyAsync(w.b.data(), b.data() + bounds_[std::size_t(k)], bytes, cudaMemcpyHostToDevice,
                                team_.stream(k)));
    LABKIT_CUDA(cudaMemsetAsync(w.x.data(), 0, bytes, team_.stream(k)));
    LABKIT_CUDA(cudaMemcpyAsync(w.r.data(), w.b.data(), bytes, cudaMemcpyDeviceToDevice, team_.stream(k)));
    LABKIT_CUDA(cudaMemcpyAsync(own_p(k), w.b.data(), bytes, cudaMemcpyDeviceToDevice, team_.stream(k)));
  }
  CgResult res;
  bnorm_ = std::sqrt(dot(vec(&PartWork::b), vec(&PartWork::b)));
  if (bnorm_ == 0) return finish(res, labkit::CgStatus::converged, "b = 0, so x = 0 is exact", opt, x);
  if (!std::isfinite(bnorm_)) return finish(res, labkit::CgStatus::breakdown, "||b|| is not finite", opt, x);
  res.updated_residual = 1.0;
  if (opt.max_iter == 0) return finish(res, labkit::CgStatus::max_iterations, "max_iter = 0", opt, x);

  double rr = bnorm_ * bnorm_;
  int checks = 0;
  double last_true = std::numeric_limits<double>::infinity();
  while (res.iterations < opt.max_iter) {
    allgather_p();
    spmv();
    const double pAp = dot([&](int k) { return own_p(k); }, vec(&PartWork::Ap));
    if (!std::isfinite(pAp)) return finish(res, labkit::CgStatus::breakdown, "p^T A p is not finite (overflow)", opt, x);
    if (pAp <= 0)
      return finish(res, labkit::CgStatus::not_spd,
                    "p^T A p = " + fmt(pAp) + " <= 0 at iteration " + std::to_string(res.iterations + 1) +
                        ": A is not symmetric positive definite (indefinite or singular)",
                    opt, x);
    const double alpha = rr / pAp;
    if (!std::isfinite(alpha)) return finish(res, labkit::CgStatus::breakdown, "step length alpha is not finite", opt, x);
    for (int k = 0; k < P; ++k) {
      team_.use(k);
      PartWork& w = work_[std::size_t(k)];
      const int m = rows(k), g = reduce_grid(m);
      update_xr_partial_kernel<<<g, kThreads, 0, team_.stream(k)>>>(m, alpha, own_p(k), w.Ap.data(), w.x.data(),
                                                                    w.r.data(), w.partials.data());
      LABKIT_CHECK_LAUNCH();
      sum_partials_kernel<<<1, kThreads, 0, team_.stream(k)>>>(g, w.partials.data(), w.scalar.data());
      LABKIT_CHECK_LAUNCH();
    }
    const double rr_new = allreduce_scalar();
    ++res.iterations;
    if (!std::isfinite(rr_new)) return finish(res, labkit::CgStatus::breakdown, "the residual overflowed", opt, x);
    res.updated_residual = std::sqrt(rr_new) / bnorm_;
    if (opt.progress) opt.progress(res.iterations, res.updated_residual);
    if (res.updated_residual <= opt.rel_tol) {
      // Only the true residual decides (lab 07's rule); otherwise restart from x with it (residual replacement).
      const double truth = true_residual();
      if (truth <= opt.rel_tol) return finish(res, labkit::CgStatus::converged, "", opt, x);
      if (++checks >= 10 || truth > 0.9 * last_true)
        return finish(res, labkit::CgStatus::stagnation,
                      "the true residual " + fmt(truth) +
                          " no longer improves while the updated residual met the tolerance (tolerance too tight for "
                          "double precision on this matrix?)",
                      opt, x);
      last_true = truth;
      rr = truth * truth * bnorm_ * bnorm_;
      for (int k = 0; k < P; ++k) {
        team_.use(k);
        LABKIT_CUDA(cudaMemcpyAsync(own_p(k), work_[std::size_t(k)].r.data(), sizeof(double) * std::size_t(rows(k)),
                                    cudaMemcpyDeviceToDevice, team_.stream(k)));
      }
      continue;
    }
    const double beta = rr_new / rr;
    rr = rr_new;
    for (int k = 0; k < P; ++k) {
      if (rows(k) == 0) continue;
      team_.use(k);
      xpby_kernel<<<grid_for(rows(k)), kThreads, 0, team_.stream(k)>>>(rows(k), work_[std::size_t(k)].r.data(), beta,
                                                                      own_p(k));
      LABKIT_CHECK_LAUNCH();
    }
  }
  return finish(res, labkit::CgStatus::max_iterations, "", opt, x);
}

}  // namespace

std::unique_ptr<Solver> make_allgather_solver(const Team& team, const labkit::Csr& A) {
  A.validate();
  return std::make_unique<AllgatherSolver>(team, A);
}

}  // namespace lab08
