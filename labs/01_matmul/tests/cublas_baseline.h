// The trusted baseline of lab 01: the row-major product C += A*B through cuBLAS (fp32, the handle's default math,
// no TF32), called by the gates (cross-checks and every speed gate) and by the bench. The one copy of this call
// outside the reference solution's step 0, which is the answer a student writes and may not be trusted.
#pragma once
#include <cublas_v2.h>

#include "labkit/cublas.h"

namespace lab01::baseline {

// Row-major C (M x N) is column-major C^T, and C^T = B^T A^T: cublasSgemm on the swapped operands, no transposes.
inline void sgemm_rowmajor(cublasHandle_t handle, int M, int N, int K, const float* A, const float* B, float* C) {
  const float one = 1.f;
  LABKIT_CUBLAS(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &one, C, N));
}

}  // namespace lab01::baseline
