// Lab 01, step 0 (matmul_cublas): your implementation. Replace the `throw labkit::NotImplemented(...)` with the
// step; labs/01_matmul/README.md explains it and what its gates check. Check your step with
//   ctest --preset gpu -L lab01 -L student      (or: build/gpu/labgrade 01)
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

// Hint: row-major C (M x N) is column-major C^T (N x M), and C^T = B^T * A^T. Which matrix is the first operand of
// cublasSgemm, and what are its leading dimensions? beta = 1 keeps what C held.
void matmul_cublas(cublasHandle_t handle, int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  (void)handle, (void)A, (void)B, (void)C;
  throw labkit::NotImplemented("step 0: matmul_cublas");
}

}  // namespace lab01
