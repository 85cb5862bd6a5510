// Lab 07 reference, step 4: the CG loop with its scalars on the host, built from the kernels of steps 1-3 (it calls
// them through cg.h, so a step 4 that works needs working steps 1-3).
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "cg.h"
#include "labkit/labkit.h"

namespace lab07 {

namespace {

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}


// The reductions write their scalar into pinned host memory: with unified addressing, memory from cudaMallocHost is
// mapped into the device's address space at the same pointer, so a reduction's second pass stores its result there
// over PCIe and the host only waits for the stream. A cudaMemcpy of 8 bytes into pageable memory instead costs a
// staged copy on top of the wait: with two scalars per iteration that was ~4 % of an iteration on the 10^7-row
// Poisson matrix (H100, tools/tuning/tune07, median of three: 0.90 -> 0.94 of the bytes-moved floor) and 28 % at
// 1 024 rows.
double read_after_sync(const labkit::PinnedBuffer<double>& scalar) {
  // Every kernel before this point on the default stream has finished, so its write to host memory is visible.
  LABKIT_CUDA(cudaStreamSynchronize(0));
  return scalar[0];
}

// The solvers' work vectors and scalars.
struct Work {
  labkit::DeviceBuffer<double> r, p, Ap, partials;
  labkit::PinnedBuffer<double> scalar;  // where each reduction's result lands (see read_after_sync)
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
    return read_after_sync(w.scalar);
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

CgResult cg_solve(const DeviceCsr& A, const double* b, double* x, const CgOptions& opt) {
  args::solver(A, b, x, opt, "cg_solve");
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
    const double rr_new = read_after_sync(w.scalar);
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

}  // namespace lab07
