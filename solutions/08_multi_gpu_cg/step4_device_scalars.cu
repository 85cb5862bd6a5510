// Lab 08 reference, step 4: the halo scheme with the scalars kept on the devices. Every part holds the same
// small state (rr, p^T A p, alpha, beta, the stop reason) and updates it from the all-reduced sums with the same
// kernels, so all parts agree bit for bit without asking the host; the host launches opt.graph_iterations
// iterations and then reads part 0's state once (lab 07 step 6's idea, across devices).
// Longer than the project's ~500-line guide on purpose: a step is one file that a student reads whole and diffs
// against the step before (docs/student-guide.md). This one repeats step3_halo.cu's kernels, halo exchange and host
// helpers instead of sharing them, so that `diff step3_halo.cu step4_device_scalars.cu` shows what keeping the
// scalars on the devices changes.
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
__global__ void residual_kernel(int n, const double* __restrict__ b, double* __restrict__ out) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < std::size_t(n)) out[i] = b[i] - out[i];
}
// The rows listed in `rows` (interior or boundary), one thread each, with the local column numbering: p_ext holds
// [own p; halo]. Interior rows touch only the first part, so they may run before the halo has arrived.
__global__ void spmv_row_list_kernel(int count, const int* __restrict__ rows, const int* __restrict__ row_ptr,
                                     const int* __restrict__ col, const double* __restrict__ val,
                                     const double* __restrict__ p_ext, double* __restrict__ y) {
  const std::size_t t = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= std::size_t(count)) return;
  const int i = rows[t];
  const int end = row_ptr[i + 1];
  double sum = 0;
  for (int k = row_ptr[i]; k < end; ++k) sum = fma(val[k], __ldg(&p_ext[col[k]]), sum);
  y[i] = sum;
}
// Packs the entries other parts need into one contiguous send buffer (NCCL and copies move contiguous ranges).
__global__ void gather_kernel(int count, const int* __restrict__ idx, const double* __restrict__ p,
                              double* __restrict__ out) {
  const std::size_t t = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < std::size_t(count)) out[t] = p[idx[t]];
}

// ---- device-side scalars -------------------------------------------------------------------------------------
enum StopReason : int { kRunning = 0, kMetTolerance = 1, kNotSpd = 2, kBreakdown = 3, kMaxIter = 4 };

// Each part's copy of the iteration's scalars. All parts run the same kernels on the same all-reduced sums, so
// their copies stay identical; the host reads part 0's.
struct DeviceState {
  double rr, pAp, alpha, beta, rr_new;
  double stop_rr;  // rel_tol^2 ||b||^2
  int iterations, max_iter;
  int stop;        // StopReason; once set, every later kernel returns at once (the batch runs out harmlessly)
};

// Slots of each part's `sums` array: its own partial sums and the all-reduced totals.
enum Slot : int { kPapLocal = 0, kPapSum = 1, kRrLocal = 2, kRrSum = 3, kSlots = 4 };

__global__ void dot_partial_state_kernel(const DeviceState* __restrict__ st, int n, const double* __restrict__ x,
                                         const double* __restrict__ y, double* __restrict__ partials) {
  if (st->stop) return;  // one value for the whole grid: no divergent barrier
  double sum = 0;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < std::size_t(n); i += stride)
    sum = fma(x[i], y[i], sum);
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
__global__ void sum_partials_state_kernel(const DeviceState* __restrict__ st, int count,
                                          const double* __restrict__ partials, double* __restrict__ out) {
  if (st->stop) return;
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) *out = sum;
}
// Virtual devices (all parts on one GPU): each part adds every part's partial in part order, so every part gets
// the same bits without NCCL. `sums[k]` is part k's slot array.
__global__ void sum_parts_kernel(const DeviceState* __restrict__ st, int parts, const double* const* __restrict__ sums,
                                 int local_slot, double* __restrict__ out) {
  if (st->stop) return;
  double total = 0;
  for (int k = 0; k < parts; ++k) total += sums[k][local_slot];
  *out = total;
}
__global__ void finish_pap_kernel(DeviceState* __restrict__ st, const double* __restrict__ pap) {
  if (st->stop) return;
  const double sum = *pap;
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
__global__ void update_xr_state_kernel(const DeviceState* __restrict__ st, int n, const double* __restrict__ p,
                                       const double* __restrict__ Ap, double* __restrict__ x, double* __restrict__ r,
                                       double* __restrict__ partials) {
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
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
__global__ void finish_rr_kernel(DeviceState* __restrict__ st, const double* __restrict__ rr) {
  if (st->stop) return;
  const double sum = *rr;
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
__global__ void update_p_state_kernel(const DeviceState* __restrict__ st, int n, const double* __restrict__ r,
                                      double* __restrict__ p) {
  if (st->stop) return;
  const double beta = st->beta;
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < std::size_t(n)) p[i] = fma(beta, p[i], r[i]);
}

unsigned grid_for(long long n) { return unsigned(std::max<long long>(1, (n + kThreads - 1) / kThreads)); }
int reduce_grid(int n) { return int(std::min<long long>(kReduceBlocks, grid_for(n))); }

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

// One part on its device: the local matrix, the row lists, what it sends to whom, and its vectors.
struct PartWork {
  int m = 0, halo = 0;                  // own rows, halo entries
  std::vector<int> send_offsets;        // parts + 1: send[send_offsets[d] .. send_offsets[d+1]) goes to part d
  labkit::DeviceBuffer<int> row_ptr, col_idx, interior, boundary, send_idx;
  labkit::DeviceBuffer<double> values, p_ext, x, r, Ap, b, send, partials, scalar;
  labkit::DeviceBuffer<double> sums;               // kSlots: partial sums and all-reduced totals of the iteration
  labkit::DeviceBuffer<DeviceState> state;
  labkit::DeviceBuffer<const double*> all_sums;    // virtual devices: every part's `sums`, for sum_parts_kernel
  cudaEvent_t p_ready = nullptr, sent = nullptr, halo_ready = nullptr, local_ready = nullptr;
};

class DeviceScalarSolver final : public Solver {
 public:
  DeviceScalarSolver(const Team& team, const labkit::Csr& A) : team_(team), n_(A.rows) {
    if (A.rows != A.cols) throw std::invalid_argument("lab08: the halo solver needs a square matrix");
    const int P = team.parts();
    bounds_ = partition_rows(A, P);
    plans_ = plan_halo(A, bounds_);
    work_.resize(std::size_t(P));
    for (int q = 0; q < P; ++q) {
      team.use(q);
      const HaloPlan& h = plans_[std::size_t(q)];
      PartWork& w = work_[std::size_t(q)];
      w.m = h.row_end - h.row_begin;
      w.halo = int(h.halo_cols.size());
      // What q sends to d: d's halo entries owned by q, as q's local indices, destinations in part order.
      std::vector<int> send_idx;
      w.send_offsets.assign(std::size_t(P) + 1, 0);
      for (int d = 0; d < P; ++d) {
        const HaloPlan& hd = plans_[std::size_t(d)];
        for (int j = hd.halo_offsets[std::size_t(q)]; j < hd.halo_offsets[std::size_t(q) + 1]; ++j)
          send_idx.push_back(hd.halo_cols[std::size_t(j)] - h.row_begin);
        w.send_offsets[std::size_t(d) + 1] = int(send_idx.size());
      }
      auto up = [](const std::vector<int>& v) { return labkit::DeviceBuffer<int>(v.empty() ? std::vector<int>{0} : v); };
      w.row_ptr = up(h.local.row_ptr);
      w.col_idx = up(h.local.col_idx);
      w.values = labkit::DeviceBuffer<double>(h.local.values.empty() ? std::vector<double>{0} : h.local.values);
      w.interior = up(h.interior_rows);
      w.boundary = up(h.boundary_rows);
      w.send_idx = up(send_idx);
      plans_[std::size_t(q)].local = labkit::Csr{};  // on the device now; the host copy would double host memory
      w.send = labkit::DeviceBuffer<double>(std::max<std::size_t>(1, send_idx.size()));
      w.p_ext = labkit::DeviceBuffer<double>(std::max<std::size_t>(1, std::size_t(w.m + w.halo)));
      for (auto* v : {&w.x, &w.r, &w.Ap, &w.b}) *v = labkit::DeviceBuffer<double>(std::max<std::size_t>(1, w.m));
      w.partials = labkit::DeviceBuffer<double>(kReduceBlocks);
      w.scalar = labkit::DeviceBuffer<double>(1);
      w.sums = labkit::DeviceBuffer<double>(kSlots);
      w.state = labkit::DeviceBuffer<DeviceState>(1);
      for (auto* e : {&w.p_ready, &w.sent, &w.halo_ready, &w.local_ready})
        LABKIT_CUDA(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    }
    if (!team.uses_nccl()) {
      std::vector<const double*> ptrs;
      for (int q = 0; q < P; ++q) ptrs.push_back(work_[std::size_t(q)].sums.data());
      for (int q = 0; q < P; ++q) {
        team.use(q);
        work_[std::size_t(q)].all_sums = labkit::DeviceBuffer<const double*>(ptrs);
      }
    }
    host_scalars_ = labkit::PinnedBuffer<double>(std::size_t(P));
    LABKIT_CUDA(cudaDeviceSynchronize());  // the uploads above ran on the legacy stream of each device
    team.synchronize();
  }
  ~DeviceScalarSolver() override {
    for (int k = 0; k < int(work_.size()); ++k) {
      cudaSetDevice(team_.device(k));
      for (cudaEvent_t e : {work_[std::size_t(k)].p_ready, work_[std::size_t(k)].sent, work_[std::size_t(k)].halo_ready,
                            work_[std::size_t(k)].local_ready})
        cudaEventDestroy(e);
    }
    cudaSetDevice(team_.device(0));
  }

  CgResult solve(const std::vector<double>& b, std::vector<double>& x, const CgOptions& opt) override;

 private:
  PartWork& w(int k) { return work_[std::size_t(k)]; }

  // Starts the halo exchange of p_ext (own entries must be final on stream(k)): on each part's comm stream, pack
  // the entries others need, then send/receive. Ends with halo_ready(k) recorded once part k's halo has arrived.
  void start_exchange() {
    const int P = team_.parts();
    for (int q = 0; q < P; ++q) {
      team_.use(q);
      PartWork& s = w(q);
      LABKIT_CUDA(cudaEventRecord(s.p_ready, team_.stream(q)));
      LABKIT_CUDA(cudaStreamWaitEvent(team_.comm_stream(q), s.p_ready, 0));
      const int count = s.send_offsets.back();
      if (count > 0) {
        gather_kernel<<<grid_for(count), kThreads, 0, team_.comm_stream(q)>>>(count, s.send_idx.data(), s.p_ext.data(),
                                                                             s.send.data());
        LABKIT_CHECK_LAUNCH();
      }
    }
    if (team_.uses_nccl()) {
      // Point-to-point in one group: every matching send/recv pair proceeds concurrently, no ordering deadlock.
      LAB08_NCCL(ncclGroupStart());
      for (int q = 0; q < P; ++q) {
        PartWork& s = w(q);
        const HaloPlan& h = plans_[std::size_t(q)];
        for (int d = 0; d < P; ++d) {
          if (d == q) continue;
          const int ns = s.send_offsets[std::size_t(d) + 1] - s.send_offsets[std::size_t(d)];
          if (ns > 0)
            LAB08_NCCL(ncclSend(s.send.data() + s.send_offsets[std::size_t(d)], std::size_t(ns), ncclDouble, d,
                                team_.comm(q), team_.comm_stream(q)));
          const int nr = h.halo_offsets[std::size_t(d) + 1] - h.halo_offsets[std::size_t(d)];
          if (nr > 0)
            LAB08_NCCL(ncclRecv(s.p_ext.data() + s.m + h.halo_offsets[std::size_t(d)], std::size_t(nr), ncclDouble, d,
                                team_.comm(q), team_.comm_stream(q)));
        }
      }
      LAB08_NCCL(ncclGroupEnd());
      for (int q = 0; q < P; ++q) {
        team_.use(q);
        LABKIT_CUDA(cudaEventRecord(w(q).halo_ready, team_.comm_stream(q)));
      }
    } else {
      // Peer copies: the owner pushes each destination's range straight into the destination's halo slots.
      for (int q = 0; q < P; ++q) {
        team_.use(q);
        PartWork& s = w(q);
        for (int d = 0; d < P; ++d) {
          const int ns = s.send_offsets[std::size_t(d) + 1] - s.send_offsets[std::size_t(d)];
          if (d == q || ns == 0) continue;
          const HaloPlan& hd = plans_[std::size_t(d)];
          LABKIT_CUDA(cudaMemcpyPeerAsync(w(d).p_ext.data() + w(d).m + hd.halo_offsets[std::size_t(q)], team_.device(d),
                                          s.send.data() + s.send_offsets[std::size_t(d)], team_.device(q),
                                          sizeof(double) * std::size_t(ns), team_.comm_stream(q)));
        }
        LABKIT_CUDA(cudaEventRecord(s.sent, team_.comm_stream(q)));
      }
      for (int d = 0; d < P; ++d) {
        team_.use(d);
        for (int q = 0; q < P; ++q)
          if (q != d) LABKIT_CUDA(cudaStreamWaitEvent(team_.comm_stream(d), w(q).sent, 0));
        LABKIT_CUDA(cudaEventRecord(w(d).halo_ready, team_.comm_stream(d)));
      }
    }
    team_.use(0);
  }

  // Ap = A p: the exchange starts, the interior rows run meanwhile, the boundary rows wait for the halo.
  void spmv() {
    start_exchange();
    const int P = team_.parts();
    for (int k = 0; k < P; ++k) {
      team_.use(k);
      PartWork& s = w(k);
      const HaloPlan& h = plans_[std::size_t(k)];
      const int ni = int(h.interior_rows.size()), nb = int(h.boundary_rows.size());
      if (ni > 0) {
        spmv_row_list_kernel<<<grid_for(ni), kThreads, 0, team_.stream(k)>>>(
            ni, s.interior.data(), s.row_ptr.data(), s.col_idx.data(), s.values.data(), s.p_ext.data(), s.Ap.data());
        LABKIT_CHECK_LAUNCH();
      }
      LABKIT_CUDA(cudaStreamWaitEvent(team_.stream(k), s.halo_ready, 0));
      if (nb > 0) {
        spmv_row_list_kernel<<<grid_for(nb), kThreads, 0, team_.stream(k)>>>(
            nb, s.boundary.data(), s.row_ptr.data(), s.col_idx.data(), s.values.data(), s.p_ext.data(), s.Ap.data());
        LABKIT_CHECK_LAUNCH();
      }
    }
    team_.use(0);
  }

  // sums[total] = the sum over parts of sums[local], on every part's device, without the host.
  void allreduce_device(int local, int total) {
    const int P = team_.parts();
    if (team_.uses_nccl()) {
      LAB08_NCCL(ncclGroupStart());
      for (int k = 0; k < P; ++k)
        LAB08_NCCL(ncclAllReduce(w(k).sums.data() + local, w(k).sums.data() + total, 1, ncclDouble, ncclSum,
                                 team_.comm(k), team_.stream(k)));
      LAB08_NCCL(ncclGroupEnd());
      return;
    }
    for (int k = 0; k < P; ++k) {
      team_.use(k);
      LABKIT_CUDA(cudaEventRecord(w(k).local_ready, team_.stream(k)));
    }
    for (int k = 0; k < P; ++k) {
      team_.use(k);
      for (int q = 0; q < P; ++q)
        if (q != k) LABKIT_CUDA(cudaStreamWaitEvent(team_.stream(k), w(q).local_ready, 0));
      sum_parts_kernel<<<1, 1, 0, team_.stream(k)>>>(w(k).state.data(), P, w(k).all_sums.data(), local,
                                                     w(k).sums.data() + total);
      LABKIT_CHECK_LAUNCH();
    }
    team_.use(0);
  }

  // One CG iteration, queued on every part's streams; nothing comes back to the host.
  void iterate_on_device() {
    const int P = team_.parts();
    spmv();
    for (int k = 0; k < P; ++k) {
      team_.use(k);
      PartWork& s = w(k);
      const int g = reduce_grid(s.m);
      dot_partial_state_kernel<<<g, kThreads, 0, team_.stream(k)>>>(s.state.data(), s.m, s.p_ext.data(), s.Ap.data(),
                                                                    s.partials.data());
      LABKIT_CHECK_LAUNCH();
      sum_partials_state_kernel<<<1, kThreads, 0, team_.stream(k)>>>(s.state.data(), g, s.partials.data(),
                                                                     s.sums.data() + kPapLocal);
      LABKIT_CHECK_LAUNCH();
    }
    allreduce_device(kPapLocal, kPapSum);
    for (int k = 0; k < P; ++k) {
      team_.use(k);
      PartWork& s = w(k);
      const int g = reduce_grid(s.m);
      finish_pap_kernel<<<1, 1, 0, team_.stream(k)>>>(s.state.data(), s.sums.data() + kPapSum);
      LABKIT_CHECK_LAUNCH();
      update_xr_state_kernel<<<g, kThreads, 0, team_.stream(k)>>>(s.state.data(), s.m, s.p_ext.data(), s.Ap.data(),
                                                                  s.x.data(), s.r.data(), s.partials.data());
      LABKIT_CHECK_LAUNCH();
      sum_partials_state_kernel<<<1, kThreads, 0, team_.stream(k)>>>(s.state.data(), g, s.partials.data(),
                                                                     s.sums.data() + kRrLocal);
      LABKIT_CHECK_LAUNCH();
    }
    allreduce_device(kRrLocal, kRrSum);
    for (int k = 0; k < P; ++k) {
      team_.use(k);
      PartWork& s = w(k);
      finish_rr_kernel<<<1, 1, 0, team_.stream(k)>>>(s.state.data(), s.sums.data() + kRrSum);
      LABKIT_CHECK_LAUNCH();
      if (s.m > 0) {
        update_p_state_kernel<<<grid_for(s.m), kThreads, 0, team_.stream(k)>>>(s.state.data(), s.m, s.r.data(),
                                                                             s.p_ext.data());
        LABKIT_CHECK_LAUNCH();
      }
    }
    team_.use(0);
  }

  // The same state on every part (host to device, then wait).
  void write_state(const DeviceState& st) {
    for (int k = 0; k < team_.parts(); ++k) {
      team_.use(k);
      LABKIT_CUDA(cudaMemcpyAsync(w(k).state.data(), &st, sizeof st, cudaMemcpyHostToDevice, team_.stream(k)));
    }
    team_.synchronize();
  }

  double allreduce_scalar() {
    const int P = team_.parts();
    if (team_.uses_nccl()) {
      LAB08_NCCL(ncclGroupStart());
      for (int k = 0; k < P; ++k)
        LAB08_NCCL(ncclAllReduce(w(k).scalar.data(), w(k).scalar.data(), 1, ncclDouble, ncclSum, team_.comm(k),
                                 team_.stream(k)));
      LAB08_NCCL(ncclGroupEnd());
      team_.use(0);
      LABKIT_CUDA(cudaMemcpyAsync(host_scalars_.data(), w(0).scalar.data(), sizeof(double), cudaMemcpyDeviceToHost,
                                  team_.stream(0)));
      LABKIT_CUDA(cudaStreamSynchronize(team_.stream(0)));
      return host_scalars_[0];
    }
    for (int k = 0; k < P; ++k) {
      team_.use(k);
      LABKIT_CUDA(cudaMemcpyAsync(host_scalars_.data() + k, w(k).scalar.data(), sizeof(double), cudaMemcpyDeviceToHost,
                                  team_.stream(k)));
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

  template <class U, class V>
  double dot(U u, V v) {
    for (int k = 0; k < team_.parts(); ++k) {
      team_.use(k);
      const int m = w(k).m, g = reduce_grid(m);
      dot_partial_kernel<<<g, kThreads, 0, team_.stream(k)>>>(m, u(k), v(k), w(k).partials.data());
      LABKIT_CHECK_LAUNCH();
      sum_partials_kernel<<<1, kThreads, 0, team_.stream(k)>>>(g, w(k).partials.data(), w(k).scalar.data());
      LABKIT_CHECK_LAUNCH();
    }
    return allreduce_scalar();
  }

  double true_residual() {
    for (int k = 0; k < team_.parts(); ++k) {
      team_.use(k);
      LABKIT_CUDA(cudaMemcpyAsync(w(k).p_ext.data(), w(k).x.data(), sizeof(double) * std::size_t(w(k).m),
                                  cudaMemcpyDeviceToDevice, team_.stream(k)));
    }
    spmv();
    for (int k = 0; k < team_.parts(); ++k) {
      if (w(k).m == 0) continue;
      team_.use(k);
      residual_kernel<<<grid_for(w(k).m), kThreads, 0, team_.stream(k)>>>(w(k).m, w(k).b.data(), w(k).Ap.data());
      LABKIT_CHECK_LAUNCH();
      LABKIT_CUDA(cudaMemcpyAsync(w(k).r.data(), w(k).Ap.data(), sizeof(double) * std::size_t(w(k).m),
                                  cudaMemcpyDeviceToDevice, team_.stream(k)));
    }
    return std::sqrt(dot([&](int k) { return w(k).r.data(); }, [&](int k) { return w(k).r.data(); })) / bnorm_;
  }

  CgResult finish(CgResult res, labkit::CgStatus status, const std::string& cause, const CgOptions& opt,
                  std::vector<double>& x) {
    res.status = status;
    std::string note;
    if (status != labkit::CgStatus::converged && bnorm_ > 0) {
      const double xx = dot([&](int k) { return w(k).x.data(); }, [&](int k) { return w(k).x.data(); });
      if (!std::isfinite(xx)) {
        for (int k = 0; k < team_.parts(); ++k) {
          team_.use(k);
          LABKIT_CUDA(cudaMemsetAsync(w(k).x.data(), 0, sizeof(double) * std::size_t(w(k).m), team_.stream(k)));
        }
        note = "; x overflowed and was reset to 0";
      }
    }
    if (bnorm_ > 0) res.relative_residual = true_residual();
    x.assign(std::size_t(n_), 0.0);
    for (int k = 0; k < team_.parts(); ++k) {
      team_.use(k);
      LABKIT_CUDA(cudaMemcpyAsync(x.data() + bounds_[std::size_t(k)], w(k).x.data(), sizeof(double) * std::size_t(w(k).m),
                                  cudaMemcpyDeviceToHost, team_.stream(k)));
    }
    team_.synchronize();
    res.message = std::string("cg (") + team_.describe() + ", halo, device scalars): " + labkit::to_string(status) + " after " +
                  std::to_string(res.iterations) + " iterations, ||b - Ax|| / ||b|| = " + fmt(res.relative_residual) +
                  " (tolerance " + fmt(opt.rel_tol) + ")" + (cause.empty() ? "" : ": " + cause) + note;
    return res;
  }

  const Team& team_;
  int n_;
  std::vector<int> bounds_;
  std::vector<HaloPlan> plans_;
  std::vector<PartWork> work_;
  labkit::PinnedBuffer<double> host_scalars_;
  labkit::PinnedBuffer<DeviceState> host_state_{1};
  double bnorm_ = 0;
};

CgResult DeviceScalarSolver::solve(const std::vector<double>& b, std::vector<double>& x, const CgOptions& opt) {
  if (int(b.size()) != n_) throw std::invalid_argument("lab08: solve: b has the wrong size");
  if (!(opt.rel_tol >= 0)) throw std::invalid_argument("lab08: solve: rel_tol must be >= 0");
  if (opt.max_iter < 0) throw std::invalid_argument("lab08: solve: max_iter must be >= 0");
  const int P = team_.parts();
  for (int k = 0; k < P; ++k) {
    team_.use(k);
    PartWork& s = w(k);
    const std::size_t bytes = sizeof(double) * std::size_t(s.m);
    LABKIT_CUDA(cudaMemcpyAsync(s.b.data(), b.data() + bounds_[std::size_t(k)], bytes, cudaMemcpyHostToDevice,
                                team_.stream(k)));
    LABKIT_CUDA(cudaMemsetAsync(s.x.data(), 0, bytes, team_.stream(k)));
    LABKIT_CUDA(cudaMemcpyAsync(s.r.data(), s.b.data(), bytes, cudaMemcpyDeviceToDevice, team_.stream(k)));
    LABKIT_CUDA(cudaMemcpyAsync(s.p_ext.data(), s.b.data(), bytes, cudaMemcpyDeviceToDevice, team_.stream(k)));
  }
  CgResult res;
  bnorm_ = std::sqrt(dot([&](int k) { return w(k).b.data(); }, [&](int k) { return w(k).b.data(); }));
  if (bnorm_ == 0) return finish(res, labkit::CgStatus::converged, "b = 0, so x = 0 is exact", opt, x);
  if (!std::isfinite(bnorm_)) return finish(res, labkit::CgStatus::breakdown, "||b|| is not finite", opt, x);
  res.updated_residual = 1.0;
  if (opt.max_iter == 0) return finish(res, labkit::CgStatus::max_iterations, "max_iter = 0", opt, x);

  if (opt.graph_iterations < 1) throw std::invalid_argument("lab08: solve: graph_iterations must be >= 1");
  DeviceState st{};
  st.rr = bnorm_ * bnorm_;
  st.stop_rr = opt.rel_tol * opt.rel_tol * st.rr;
  st.max_iter = opt.max_iter;
  write_state(st);
  int checks = 0, reported = 0;
  double last_true = std::numeric_limits<double>::infinity();
  for (;;) {
    for (int i = 0; i < opt.graph_iterations; ++i) iterate_on_device();
    team_.use(0);
    LABKIT_CUDA(cudaMemcpyAsync(host_state_.data(), w(0).state.data(), sizeof st, cudaMemcpyDeviceToHost,
                                team_.stream(0)));
    team_.synchronize();  // the one host synchronization per batch
    st = host_state_[0];
    res.iterations = st.iterations;
    if (std::isfinite(st.rr_new) && st.iterations > 0) res.updated_residual = std::sqrt(st.rr_new) / bnorm_;
    if (opt.progress && st.iterations > reported) {  // progress sees new iterations only
      opt.progress(st.iterations, res.updated_residual);
      reported = st.iterations;
    }
    switch (st.stop) {
      case kRunning:
        continue;
      case kNotSpd:
        return finish(res, labkit::CgStatus::not_spd,
                      "p^T A p = " + fmt(st.pAp) + " <= 0 at iteration " + std::to_string(st.iterations + 1) +
                          ": A is not symmetric positive definite (indefinite or singular)",
                      opt, x);
      case kBreakdown:
        return finish(res, labkit::CgStatus::breakdown, "a NaN or infinity appeared (p^T A p, alpha or r^T r)", opt, x);
      case kMaxIter:
        return finish(res, labkit::CgStatus::max_iterations, "", opt, x);
      case kMetTolerance: {
        const double truth = true_residual();
        if (truth <= opt.rel_tol) return finish(res, labkit::CgStatus::converged, "", opt, x);
        if (++checks >= 10 || truth > 0.9 * last_true)
          return finish(res, labkit::CgStatus::stagnation,
                        "the true residual " + fmt(truth) +
                            " no longer improves while the updated residual met the tolerance (tolerance too tight "
                            "for double precision on this matrix?)",
                        opt, x);
        if (st.iterations >= opt.max_iter) return finish(res, labkit::CgStatus::max_iterations, "", opt, x);
        last_true = truth;
        for (int k = 0; k < P; ++k) {  // residual replacement: restart from x with the true residual
          team_.use(k);
          LABKIT_CUDA(cudaMemcpyAsync(w(k).p_ext.data(), w(k).r.data(), sizeof(double) * std::size_t(w(k).m),
                                      cudaMemcpyDeviceToDevice, team_.stream(k)));
        }
        st.rr = truth * truth * bnorm_ * bnorm_;
        st.stop = kRunning;
        write_state(st);
        continue;
      }
      default:
        throw std::logic_error("lab08: device-scalar solver: unknown stop reason " + std::to_string(st.stop));
    }
  }
}

}  // namespace

std::unique_ptr<Solver> make_device_scalar_solver(const Team& team, const labkit::Csr& A) {
  A.validate();
  return std::make_unique<DeviceScalarSolver>(team, A);
}

}  // namespace lab08
