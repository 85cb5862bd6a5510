// Lab 06, step 1 - your implementation (cuBLAS). Replace the `throw labkit::NotImplemented(...)` with the step, then
// run your gates: ctest --preset gpu -L lab06 -L student (or: labgrade 06). The walkthrough (labs/06_ata/README.md)
// explains the step and what its gates check.
//
// Reminder: C(i, j) = sum_k A(k, i) * A(k, j) with A row-major M x N (A(k, i) = A[k * N + i]); write ALL of C.
// Use std::size_t for k * N + i (N * N exceeds 2^31 for N > 46340). Call LABKIT_CHECK_LAUNCH() after every launch.
#include <stdexcept>

#include "ata.h"
#include "labkit/cublas.h"
#include "labkit/labkit.h"

namespace lab06 {

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

}  // namespace lab06
