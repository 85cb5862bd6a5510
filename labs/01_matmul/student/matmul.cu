// Lab 01 - your implementation. Replace each `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab01      (or: labgrade 01)
// The walkthrough (labs/01_matmul/README.md) explains each step and what its gates check.
#include <stdexcept>

#include "labkit/cublas.h"
#include "labkit/labkit.h"
#include "matmul.h"

namespace lab01 {

namespace {
// Sizes below 1 have no meaning here; refuse them before launching anything.
void check_sizes(int M, int N, int K) {
  if (M < 1 || N < 1 || K < 1) throw std::invalid_argument("lab01: M, N and K must be >= 1");
}
}  // namespace

// Step 0. Hint: row-major C (M x N) is column-major C^T (N x M), and C^T = B^T * A^T. Which matrix is the
// first operand of cublasSgemm, and what are its leading dimensions? beta = 1 keeps what C held.
void matmul_cublas(cublasHandle_t handle, int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  (void)handle, (void)A, (void)B, (void)C;
  throw labkit::NotImplemented("step 0: matmul_cublas");
}

// Step 1. Write a kernel in which threadIdx.x selects the ROW of C (consecutive threads, same column).
void matmul_naive_col(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  (void)A, (void)B, (void)C;
  throw labkit::NotImplemented("step 1: matmul_naive_col");
}

// Step 2. Now threadIdx.x selects the COLUMN of C. Which loads become coalesced?
void matmul_naive_row(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  (void)A, (void)B, (void)C;
  throw labkit::NotImplemented("step 2: matmul_naive_row");
}

// Step 3. Tiles in __shared__ memory: load, barrier, multiply, barrier. Out-of-range elements load as 0.
void matmul_tiled(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  (void)A, (void)B, (void)C;
  throw labkit::NotImplemented("step 3: matmul_tiled");
}

// Step 4. Each thread keeps a TM x TN block of C in registers and updates it with rank-1 products.
void matmul_regblock(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  (void)A, (void)B, (void)C;
  throw labkit::NotImplemented("step 4: matmul_regblock");
}

// Step 5. Transposed A tile, float4 loads, conflict-free shared memory, unrolled loops, double buffering.
void matmul_tuned(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  (void)A, (void)B, (void)C;
  throw labkit::NotImplemented("step 5: matmul_tuned");
}

}  // namespace lab01
