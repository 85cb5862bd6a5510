// Lab 01 reference, step 0: the row-major product through cuBLAS (the yardstick of every later step).
#include <stdexcept>

#include "labkit/cublas.h"
#include "labkit/labkit.h"
#include "matmul.h"

namespace lab01 {

namespace {
void check_sizes(int M, int N, int K) {
  if (M < 1 || N < 1 || K < 1) throw std::invalid_argument("lab01: M, N and K must be >= 1");
}
}  // namespace

void matmul_cublas(cublasHandle_t handle, int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  // cuBLAS is column-major. Read as column-major, row-major C (M x N) is C^T (N x M) with leading dimension N,
  // and C^T = B^T A^T, where B^T is B's row-major storage seen as N x K (ld N) and A^T is A's seen as K x M
  // (ld K). So: no transposes, operands swapped, m = N, n = M. beta = 1 accumulates into C.
  const float alpha = 1.f, beta = 1.f;
  LABKIT_CUBLAS(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, N, A, K, &beta, C, N));
}

}  // namespace lab01
