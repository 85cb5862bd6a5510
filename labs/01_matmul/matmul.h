// Lab 01: C <- C + A*B for row-major float matrices, from a naive kernel to one that rivals cuBLAS.
//
// Every function takes DEVICE pointers: A is M x K, B is K x N, C is M x N, all row-major and contiguous
// (element (i, j) of C is C[i * N + j]). Each adds A*B to what C already holds. Any M, N, K >= 1 must work;
// a size < 1 throws std::invalid_argument (see check_sizes). Work goes on the default stream; the functions
// return without waiting for it (the gates synchronize).
#pragma once
#include <cublas_v2.h>

namespace lab01 {

// Step 0: the library. cublasSgemm is column-major; compute the row-major product with it, in plain fp32
// (the handle's default math mode: no TF32 tensor cores). Also the speed baseline for later steps.
void matmul_cublas(cublasHandle_t handle, int M, int N, int K, const float* A, const float* B, float* C);

// Step 1: one thread per element of C; consecutive threads (threadIdx.x) walk DOWN a column of C.
void matmul_naive_col(int M, int N, int K, const float* A, const float* B, float* C);

// Step 2: one thread per element of C; consecutive threads walk ALONG a row of C.
void matmul_naive_row(int M, int N, int K, const float* A, const float* B, float* C);

// Step 3: square tiles of A and B staged in shared memory, one element of C per thread.
void matmul_tiled(int M, int N, int K, const float* A, const float* B, float* C);

// Step 4: register blocking: each thread computes a TM x TN block of C.
void matmul_regblock(int M, int N, int K, const float* A, const float* B, float* C);

// Step 5: tuned: A tile transposed in shared memory, 16-byte loads, no bank conflicts, unrolled loops.
void matmul_tuned(int M, int N, int K, const float* A, const float* B, float* C);

}  // namespace lab01
