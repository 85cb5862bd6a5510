// Lab 08: the conjugate gradient solver of lab 07 split over several GPUs of one machine.
//
// The matrix is cut into contiguous blocks of rows, one block ("part") per GPU; part k owns rows
// [bounds[k], bounds[k+1]) of A and the same entries of x, r, p and A p. Every iteration then needs two kinds of
// communication: the dot products (p^T A p, r^T r) are sums over all parts, and the SpMV of part k reads entries
// of p that other parts own.
//
// Parts and devices. A Team names the device of every part. Distinct devices talk through NCCL (one communicator
// per part, ncclCommInitAll) and peer-to-peer copies. A device may also appear several times ("virtual devices":
// 2-4 parts on one GPU): NCCL cannot put two ranks of one communicator on one device, so then the team has no
// communicators and the parts exchange data with cudaMemcpyPeerAsync between their buffers on that device. The
// partition, the halo lists and every exchange are exactly the same code paths apart from the transport, which is
// how a one-GPU machine still tests the multi-device logic.
//
// Solvers take the matrix and vectors on the HOST (each builds its parts' device copies once, in its make_*
// function) and return when x is on the host. Status, residuals and messages follow lab 07's cg_solve.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../07_cg/cg.h"  // lab07::CgOptions, lab07::CgResult: the same options and results as one GPU
#include "labkit/check.h"
#include "labkit/sparse.h"

namespace lab08 {

using CgOptions = lab07::CgOptions;  // rel_tol, max_iter, blocks_per_sm, graph_iterations (step 4: iterations
                                     // launched between two host checks), progress
using CgResult = lab07::CgResult;

// Throws std::runtime_error naming the call when an NCCL call fails. (Not labkit::LibraryError: a step file may
// only instantiate its own lab's and the standard library's types, see the grader's object check.)
#define LAB08_NCCL(call)                                                                                        \
  do {                                                                                                          \
    const ncclResult_t lab08_nccl_status_ = (call);                                                             \
    if (lab08_nccl_status_ != ncclSuccess)                                                                      \
      throw std::runtime_error(std::string(#call) + " failed: " + ncclGetErrorString(lab08_nccl_status_) +     \
                               " at " + __FILE__ + ":" + std::to_string(__LINE__));                             \
  } while (0)

// ---- Given: the team of devices -------------------------------------------------------------------------------
// Part k runs on device(k) with two non-blocking streams of its own: stream(k) for its computation and
// comm_stream(k) for its exchanges (so that an exchange can run while the part computes). Peer access is enabled
// wherever cudaDeviceCanAccessPeer allows; cudaMemcpyPeerAsync works either way (staged through the host when the
// devices cannot reach each other). Not copyable: it owns streams and communicators. The gates, the bench and
// cg_multi set NCCL_NVLS_ENABLE=0 (unless already set) before the first Team: no NVLink multicast (NVLS) in this
// lab; its exchanges are point-to-point and one-number reductions.
class Team {
 public:
  explicit Team(std::vector<int> devices) : devices_(std::move(devices)) {
    if (devices_.empty()) throw std::invalid_argument("lab08: Team: at least one part is needed");
    int count = 0;
    LABKIT_CUDA(cudaGetDeviceCount(&count));
    for (int d : devices_)
      if (d < 0 || d >= count)
        throw std::invalid_argument("lab08: Team: device " + std::to_string(d) + " does not exist (" +
                                    std::to_string(count) + " devices)");
    distinct_ = true;
    for (std::size_t i = 0; i < devices_.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (devices_[i] == devices_[j]) distinct_ = false;
    // Virtual devices put every part on one GPU (mixing, e.g. {0, 0, 1}, is refused: a part would then need
    // peer reads of two devices at once, which this lab does not cover).
    for (int d : devices_)
      if (!distinct_ && d != devices_[0])
        throw std::invalid_argument("lab08: Team: repeated devices must all be the same one (virtual devices)");
    for (int d : devices_) {
      LABKIT_CUDA(cudaSetDevice(d));
      cudaStream_t s = nullptr, c = nullptr;
      LABKIT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      LABKIT_CUDA(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
      streams_.push_back(s);
      comm_streams_.push_back(c);
      for (int e : devices_) {
        int can = 0;
        if (e == d) continue;
        LABKIT_CUDA(cudaDeviceCanAccessPeer(&can, d, e));
        if (!can) continue;
        const cudaError_t err = cudaDeviceEnablePeerAccess(e, 0);
        if (err == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();  // a second team: fine
        else LABKIT_CUDA(err);
      }
    }
    if (distinct_ && devices_.size() > 1) {
      comms_.resize(devices_.size());
      LAB08_NCCL(ncclCommInitAll(comms_.data(), int(devices_.size()), devices_.data()));
    }
    LABKIT_CUDA(cudaSetDevice(devices_[0]));
  }
  ~Team() {
    for (ncclComm_t c : comms_) ncclCommDestroy(c);
    for (std::size_t k = 0; k < devices_.size(); ++k) {
      cudaSetDevice(devices_[k]);
      cudaStreamDestroy(streams_[k]);
      cudaStreamDestroy(comm_streams_[k]);
    }
    cudaSetDevice(devices_[0]);
  }
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int parts() const { return int(devices_.size()); }
  int device(int k) const { return devices_.at(std::size_t(k)); }
  cudaStream_t stream(int k) const { return streams_.at(std::size_t(k)); }
  cudaStream_t comm_stream(int k) const { return comm_streams_.at(std::size_t(k)); }
  // True when every part has its own device and there is more than one: then comm(k) is part k's NCCL
  // communicator (rank k). False for one part and for virtual devices: exchange with peer copies.
  bool uses_nccl() const { return !comms_.empty(); }
  ncclComm_t comm(int k) const { return comms_.at(std::size_t(k)); }
  bool virtual_devices() const { return !distinct_; }
  // Makes part k's device current (every allocation and launch for part k goes after this).
  void use(int k) const { LABKIT_CUDA(cudaSetDevice(device(k))); }
  // Waits for both streams of every part.
  void synchronize() const {
    for (int k = 0; k < parts(); ++k) {
      use(k);
      LABKIT_CUDA(cudaStreamSynchronize(stream(k)));
      LABKIT_CUDA(cudaStreamSynchronize(comm_stream(k)));
    }
    use(0);
  }
  std::string describe() const {
    std::string s = std::to_string(parts()) + (parts() == 1 ? " part on device" : " parts on devices");
    for (int d : devices_) s += " " + std::to_string(d);
    s += uses_nccl() ? " (NCCL)" : parts() > 1 ? " (virtual devices: peer copies)" : "";
    return s;
  }

 private:
  std::vector<int> devices_;
  std::vector<cudaStream_t> streams_, comm_streams_;
  std::vector<ncclComm_t> comms_;
  bool distinct_ = true;
};

// Any of the solvers below, ready to solve with the matrix it was made for (device copies built once).
class Solver {
 public:
  virtual ~Solver() = default;
  // Solves A x = b from x0 = 0 (b.size() == A.rows; x is resized and overwritten). Same statuses, stopping rule
  // and message as lab07::cg_solve; opt.progress sees (iterations, ||r|| / ||b||) as there.
  virtual CgResult solve(const std::vector<double>& b, std::vector<double>& x, const CgOptions& opt = {}) = 0;
};

// ---- Step 1: row blocks balanced by nonzeros --------------------------------------------------------------------
// parts + 1 row boundaries: bounds[0] = 0, bounds[parts] = A.rows, non-decreasing (a block may be empty when
// there are more parts than rows). Row i costs (entries of row i) + 1 (the +1: its row_ptr read and y write, so
// that empty rows still count); with C(i) = row_ptr[i] + i the cost of rows [0, i), bounds[k] for 0 < k < parts
// is the first row i with C(i) >= k * C(rows) / parts (real division). Then every block's cost is within one
// row's cost of C(rows) / parts. Host code. Throws std::invalid_argument for parts < 1 or an invalid A.
std::vector<int> partition_rows(const labkit::Csr& A, int parts);

// One part's rows of A on its device: rows [row_begin, row_end) with row_ptr rebased to start at 0 and the
// column indices unchanged (global), allocated on team.device(k) and uploaded on team.stream(k).
struct PartCsr {
  int device = 0;
  int row_begin = 0, rows = 0, cols = 0, nnz = 0;
  std::shared_ptr<void> storage;  // owns the arrays (freed on the part's device)
  const int* row_ptr = nullptr;
  const int* col_idx = nullptr;
  const double* values = nullptr;
};
// Uploads the blocks of A given by bounds (partition_rows) to the team's devices, part k to device(k), all
// uploads in flight at once (one stream per part); returns when they are done.
std::vector<PartCsr> distribute_rows(const Team& team, const labkit::Csr& A, const std::vector<int>& bounds);
// y_k = A_k x for every part at once: x[k] is a DEVICE pointer to the whole x (A.cols entries) on part k's
// device, y[k] to part k's rows.size() outputs there. Each part on its own stream; returns without waiting.
void spmv_parts(const Team& team, const std::vector<PartCsr>& parts, const std::vector<const double*>& x,
                const std::vector<double*>& y);

// ---- Step 2: every part gets the whole p (all-gather), dots reduced across parts ---------------------------------
// Each part keeps a full-length copy of p; after the p update every part's own block is sent to all others
// (NCCL: one broadcast per part in one group, since blocks differ in size; virtual devices: peer copies), and
// p^T A p and r^T r are summed over the parts (NCCL all-reduce; virtual devices: on the host, in part order).
// Scalars come to the host every iteration, as in lab07::cg_solve. A must be square.
std::unique_ptr<Solver> make_allgather_solver(const Team& team, const labkit::Csr& A);

// ---- Step 3: halo exchange overlapped with the interior rows -----------------------------------------------------
// What part k needs from the others, computed once from the column indices (host code).
struct HaloPlan {
  int row_begin = 0, row_end = 0;  // the part's rows [row_begin, row_end) (= its own entries of p)
  // Global columns outside [row_begin, row_end) that the part's rows reference: ascending, no duplicates.
  std::vector<int> halo_cols;
  // parts + 1 offsets: halo_cols[halo_offsets[q] .. halo_offsets[q+1]) are the entries owned by part q (empty for
  // q == k). Since blocks are contiguous and halo_cols ascending, each owner's entries are one range.
  std::vector<int> halo_offsets;
  // Local row indices (0-based within the part), ascending: rows whose columns all lie in [row_begin, row_end)
  // (computable before the halo arrives) and the others.
  std::vector<int> interior_rows, boundary_rows;
  // The part's rows with renumbered columns: c - row_begin for an own column, (row_end - row_begin) + j for
  // halo_cols[j]. local.cols = own rows + halo size, so local * [own p; halo p] = the part's rows of A p.
  labkit::Csr local;
};
// One plan per part. A must be square; bounds as partition_rows returns them (std::invalid_argument otherwise).
std::vector<HaloPlan> plan_halo(const labkit::Csr& A, const std::vector<int>& bounds);
// Bytes of p received per iteration by all parts together: the all-gather scheme (every part receives every
// entry it does not own) and the halo scheme (only halo_cols). Host code, given (not a step).
inline double allgather_bytes(const std::vector<int>& bounds) {
  const double n = bounds.back(), parts = double(bounds.size() - 1);
  return (parts - 1) * n * sizeof(double);
}
inline double halo_bytes(const std::vector<HaloPlan>& plans) {
  double total = 0;
  for (const auto& p : plans) total += double(p.halo_cols.size()) * sizeof(double);
  return total;
}
// Part k keeps [own p; halo p] in one array; before each SpMV the owners send exactly the halo entries (a gather
// kernel packs them, NCCL send/recv or peer copies move them) on comm_stream(k), while stream(k) multiplies the
// interior rows; the boundary rows wait for the halo. Host scalars as in step 2.
std::unique_ptr<Solver> make_halo_solver(const Team& team, const labkit::Csr& A);

// ---- Step 4: device-side scalars across parts --------------------------------------------------------------------
// The halo scheme with alpha, beta and the dot products kept on the devices: every part computes the same
// scalars from the all-reduced sums (NCCL all-reduce into device memory; virtual devices: each part adds all
// parts' partial sums in part order, so all parts hold identical bits), and the host launches
// opt.graph_iterations iterations before it reads the state back once. Stops exactly at max_iter and never runs
// on after a stop inside a batch, as lab07::cg_solve_graph.
std::unique_ptr<Solver> make_device_scalar_solver(const Team& team, const labkit::Csr& A);

}  // namespace lab08
