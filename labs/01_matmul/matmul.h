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

// Step 5, one idea per sub-step, each building on the one before (same 128 x 128 tile per block of 256 threads):
// 5a: step 4 with the A tile stored transposed in shared memory, read with 16-byte (float4) shared loads.
void matmul_transposed_a(int M, int N, int K, const float* A, const float* B, float* C);
// 5b: a thread-to-result layout (four 4x4 sub-blocks per thread) whose 16-byte shared loads are conflict-free.
void matmul_conflict_free(int M, int N, int K, const float* A, const float* B, float* C);
// 5c: 16-byte global loads and stores, taken only where every row of A, B and C starts on a 16-byte boundary.
void matmul_vector_loads(int M, int N, int K, const float* A, const float* B, float* C);
// 5d: two shared buffers: the next tile's global loads are in flight while the current tile is multiplied.
void matmul_double_buffer(int M, int N, int K, const float* A, const float* B, float* C);
// 5e: 16-deep k-tiles with __launch_bounds__ keeping two blocks per SM.
void matmul_launch_bounds(int M, int N, int K, const float* A, const float* B, float* C);
// 5f: the tuned kernel: blocks visit the tiles of C in grouped order, so that reused panels stay in L2.
void matmul_tuned(int M, int N, int K, const float* A, const float* B, float* C);

// Step 6 (expert): 128 x 128 tiles of 4 warps, each warp 64 x 64 of C (8 x 16 results per thread), the k-tiles
// copied global -> shared with asynchronous copies (cp.async) into a pipeline of shared-memory stages, and each
// thread's operands for the next k read from shared memory while the current k's FMAs run.
void matmul_async_pipeline(int M, int N, int K, const float* A, const float* B, float* C);

}  // namespace lab01
