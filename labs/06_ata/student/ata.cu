// Lab 06 - your implementation. Replace each `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab06      (or: labgrade 06)
// The walkthrough (labs/06_ata/README.md) explains each step and what its gates check.
//
// Reminder: C(i, j) = sum_k A(k, i) * A(k, j) with A row-major M x N (A(k, i) = A[k * N + i]); write ALL of C.
// Use std::size_t for k * N + i (N * N exceeds 2^31 for N > 46340). Call LABKIT_CHECK_LAUNCH() after every launch.
#include <stdexcept>

#include "ata.h"
#include "labkit/cublas.h"
#include "labkit/labkit.h"

namespace lab06 {

namespace {
// Sizes below 1 have no meaning here; refuse them before launching anything.
void check_sizes(int M, int N) {
  if (M < 1 || N < 1) throw std::invalid_argument("lab06: M and N must be >= 1");
}
}  // namespace

// Step 1a. Hint: cuBLAS reads the row-major M x N array A as a column-major N x M matrix with leading dimension
// N - that is, as A^T. Write A^T A as a product of that matrix and its transpose: which of the two operands of
// cublasDgemm gets CUBLAS_OP_T? Is the row-major/column-major reading of C a problem for a symmetric C?
void ata_cublas_gemm(cublasHandle_t handle, int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)handle, (void)A, (void)C;
  throw labkit::NotImplemented("step 1: ata_cublas_gemm");
}

// Step 1b. Hint: cublasDsyrk(handle, uplo, trans, n, k, alpha, A, lda, beta, C, ldc) computes ONE triangle of
// op(A) op(A)^T. Pick trans as in step 1a, then write a small kernel that copies that triangle into the other one
// (which triangle is it in row-major terms?). Transposing through a padded 32x33 shared tile keeps both the reads
// and the writes coalesced.
void ata_cublas_syrk(cublasHandle_t handle, int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)handle, (void)A, (void)C;
  throw labkit::NotImplemented("step 1: ata_cublas_syrk");
}

// Step 2. One thread per C(i, j): a loop over k of A[k*N + i] * A[k*N + j]. Let threadIdx.x select j: which of
// the two loads is then coalesced, and which is a broadcast?
void ata_naive(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 2: ata_naive");
}

// Step 3. A block computes a T x T tile of C. Per step along k, stage rows k0..k0+T of the two column panels of A
// (columns I0.. for the tile's rows, J0.. for its columns) in __shared__ memory - they are pieces of ROWS of A,
// so the loads are coalesced. Load, barrier, multiply, barrier. Out-of-range elements load as 0.
void ata_tiled(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 3: ata_tiled");
}

// Step 4. Each thread keeps a small block of C in registers (the seed: 48x48 tiles, 16x16 threads, 3x3 each).
// Give a thread rows ty + 16a and columns tx + 16b rather than a contiguous 3x3: why does that avoid bank
// conflicts for doubles (8 bytes = two banks)? Fully unrolled loops with compile-time bounds keep acc in
// registers (check with -Xptxas -v: no spills).
void ata_regblock(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 4: ata_regblock");
}

// Step 5. Two shared buffers. Issue the global loads of tile t+1 into registers, multiply tile t, then store the
// registers into the other buffer and sync once. Why is one barrier per tile enough?
void ata_prefetch(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 5: ata_prefetch");
}

// Step 6. Launch only the T(T+1)/2 tiles with bi <= bj (a 1-D grid and a mapping b -> (bi, bj), or a 2-D grid
// whose lower blocks return at once) and write every result twice: C(i, j) and C(j, i). On a diagonal tile,
// let only i <= j write, so that C(j, i) is bit for bit the value of C(i, j): the gates demand exact symmetry.
void ata_symmetric(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 6: ata_symmetric");
}

// Step 7 (expert). mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 through inline PTX (sm_80+): per lane one
// double of A (row lane/4, k lane%4), one of B (k lane%4, col lane/4), two of C/D (row lane/4, cols 2*(lane%4)
// + {0,1}). A warp tile of several 8x8 MMAs, panels in padded shared memory (a fragment read spans 4 rows:
// pad the rows so they start in different banks), symmetry as in step 6. Throw std::runtime_error below sm_80.
void ata_tensor_core(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 7: ata_tensor_core");
}

}  // namespace lab06
