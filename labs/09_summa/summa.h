// Lab 09: C += A B distributed over a P x Q grid of MPI processes in a 2D block-cyclic layout (SUMMA).
//
// Layout. A global rows x cols matrix is cut into b x b blocks (the last block row/column may be smaller).
// Block (I, J) lives on grid process (I mod P, J mod Q); each process keeps its blocks packed together in one
// column-major local array of local_rows x local_cols elements, leading dimension local_ld (ScaLAPACK's layout,
// and the one MPI_Type_create_darray describes). Local row li is global row (li / b) * P * b + row * b + li % b.
//
// Grid. The grid's ranks are numbered row-major: rank = row * Q + col (the order MPI_Type_create_darray assumes).
// row_comm holds the Q processes of one grid row (rank in it = col), col_comm the P processes of one grid column
// (rank in it = row).
//
// Engine. Where a process keeps its local blocks and how it multiplies them: with a CUDA device, the blocks are
// in device memory and the local update is cuBLAS on the engine's stream (ranks bound to the node's devices
// round-robin); without one, the blocks are in host memory and the update is a CPU GEMM. The gates run both: the
// same SUMMA code is tested on every commit without a GPU.
//
// Every function here is collective over the grid (every process of the grid calls it with the same sizes).
// Impossible sizes (negative, b < 1) throw std::invalid_argument on every process alike.
#pragma once
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only (no deprecated C++ bindings in a CUDA translation unit)
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "labkit/check.h"
#include "labkit/device.h"

namespace lab09 {

// ---- Layout (given) -------------------------------------------------------------------------------------------
// How many of n rows (or columns) in blocks of b land on grid coordinate `coord` of `nprocs` (ScaLAPACK numroc).
inline int local_extent(int n, int b, int coord, int nprocs) {
  const int nblocks = (n + b - 1) / b;
  int size = (nblocks / nprocs + (coord < nblocks % nprocs ? 1 : 0)) * b;
  if (nblocks > 0 && (nblocks - 1) % nprocs == coord) size -= nblocks * b - n;  // the short last block is mine
  return size;
}
// Global index of local index `l` on grid coordinate `coord` (rows or columns alike).
inline int global_index(int l, int b, int coord, int nprocs) { return (l / b) * nprocs * b + coord * b + l % b; }

struct Grid {
  MPI_Comm comm = MPI_COMM_NULL;  // the P * Q processes of the grid; MPI_COMM_NULL on a process outside it
  MPI_Comm row_comm = MPI_COMM_NULL, col_comm = MPI_COMM_NULL;
  int P = 1, Q = 1, row = 0, col = 0, rank = 0;
  bool member() const { return comm != MPI_COMM_NULL; }
};

// A global matrix: rows x cols in b x b blocks, distributed over a grid.
struct Dist {
  int rows = 0, cols = 0, b = 1;
};
inline int local_rows(const Dist& d, const Grid& g) { return local_extent(d.rows, d.b, g.row, g.P); }
inline int local_cols(const Dist& d, const Grid& g) { return local_extent(d.cols, d.b, g.col, g.Q); }
inline int local_ld(const Dist& d, const Grid& g) { return std::max(1, local_rows(d, g)); }
inline std::size_t local_size(const Dist& d, const Grid& g) {
  return static_cast<std::size_t>(local_ld(d, g)) * static_cast<std::size_t>(local_cols(d, g));
}

// The first P * Q processes of `parent` form the grid (collective over parent); the others get a Grid whose
// member() is false.
inline Grid make_grid(MPI_Comm parent, int P, int Q) {
  int rank = 0, size = 0;
  MPI_Comm_rank(parent, &rank);
  MPI_Comm_size(parent, &size);
  if (P < 1 || Q < 1 || P * Q > size)
    throw std::invalid_argument("make_grid: a " + std::to_string(P) + " x " + std::to_string(Q) + " grid needs " +
                                std::to_string(P * Q) + " processes, there are " + std::to_string(size));
  Grid g;
  g.P = P;
  g.Q = Q;
  MPI_Comm_split(parent, rank < P * Q ? 0 : MPI_UNDEFINED, rank, &g.comm);
  if (g.comm == MPI_COMM_NULL) return g;
  MPI_Comm_rank(g.comm, &g.rank);
  g.row = g.rank / Q;
  g.col = g.rank % Q;
  MPI_Comm_split(g.comm, g.row, g.col, &g.row_comm);
  MPI_Comm_split(g.comm, g.col, g.row, &g.col_comm);
  return g;
}
inline void free_grid(Grid& g) {
  for (MPI_Comm* c : {&g.row_comm, &g.col_comm, &g.comm})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

// ---- Engine (given) -------------------------------------------------------------------------------------------
struct Engine {
  bool gpu = false;
  int device = -1;
  cublasHandle_t blas = nullptr;
  cudaStream_t stream = nullptr;  // the local updates run here
};

// The rank on this node of the calling process (mpirun's environment; 0 when started without a launcher).
inline int node_local_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 0;
}

// Binds the process to device (node-local rank mod device count) when there is one. Call it before anything
// else touches CUDA, so that the process never opens a context on another rank's device.
inline Engine make_engine() {
  Engine e;
  if (!labkit::has_device()) return e;
  int count = 0;
  LABKIT_CUDA(cudaGetDeviceCount(&count));
  e.gpu = true;
  e.device = node_local_rank() % count;
  LABKIT_CUDA(cudaSetDevice(e.device));
  LABKIT_CUDA(cudaStreamCreateWithFlags(&e.stream, cudaStreamNonBlocking));
  if (cublasCreate(&e.blas) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  cublasSetStream(e.blas, e.stream);
  return e;
}
inline void free_engine(Engine& e) {
  if (e.blas) cublasDestroy(e.blas);
  if (e.stream) cudaStreamDestroy(e.stream);
  e = Engine{};
}

// The local update C(m x n) += A(m x k) B(k x n), column-major, in the engine's memory. On the GPU it is queued on
// e.stream and returns at once; on the CPU it returns when done.
inline void local_gemm(Engine& e, int m, int n, int k, const float* A, int lda, const float* B, int ldb, float* C,
                       int ldc) {
  if (m == 0 || n == 0 || k == 0) return;
  if (e.gpu) {
    const float one = 1.0f;
    cublasStatus_t s = cublasSgemm(e.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, lda, B, ldb, &one, C, ldc);
    if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("local_gemm: cublasSgemm failed (" + std::to_string(s) + ")");
    return;
  }
  // j-p-i order: the innermost loop walks down a column of A and of C (unit stride in column-major).
  for (int j = 0; j < n; ++j)
    for (int p = 0; p < k; ++p) {
      const float bpj = B[p + static_cast<std::size_t>(j) * ldb];
      const float* a = A + static_cast<std::size_t>(p) * lda;
      float* c = C + static_cast<std::size_t>(j) * ldc;
      for (int i = 0; i < m; ++i) c[i] += a[i] * bpj;
    }
}

// ---- Step 1: block-cyclic scatter and gather with MPI derived datatypes ------------------------------------------
// scatter: grid rank 0 holds the whole matrix `global` (column-major, leading dimension d.rows; ignored on the
// other ranks); every grid process receives its blocks into `local` (HOST memory, local_ld x local_cols).
// gather: the reverse; only grid rank 0's `global` is written. Both describe each process's blocks inside the
// global array with one derived datatype (MPI_Type_create_darray, or vector + resized), no hand packing.
void scatter(const Grid& g, const Dist& d, const float* global, float* local);
void gather(const Grid& g, const Dist& d, const float* local, float* global);

// ---- Step 2: SUMMA --------------------------------------------------------------------------------------------
// C += A B with A M x K, B K x N, C M x N, all three distributed over g with the same block size b. A, B, C are
// the local arrays (leading dimensions local_ld of each Dist) in the engine's memory (device memory with a GPU).
// For each block column k of A / block row k of B: the process column that owns A's panel k broadcasts it along
// the grid rows, the process row that owns B's panel k broadcasts it along the grid columns, and every process
// adds A_panel * B_panel to its C with local_gemm. C stays where it is. Returns when C is final.
void summa(const Grid& g, Engine& e, int M, int N, int K, int b, const float* A, const float* B, float* C);

// ---- Step 3: SUMMA with the next panels' broadcast in flight during the current local update -----------------------
// Same contract as step 2.
void summa_overlap(const Grid& g, Engine& e, int M, int N, int K, int b, const float* A, const float* B, float* C);

}  // namespace lab09
