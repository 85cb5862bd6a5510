// Lab 06: C = A^T A in double precision, from a naive kernel to fp64 tensor cores.
//
// Every function takes DEVICE pointers. A is M x N, row-major and contiguous (element (k, i) is A[k * N + i]);
// there is exactly ONE copy of it: no function may build a transposed copy. C is N x N, row-major, and every
// function OVERWRITES all of it, both triangles: C(i, j) = sum_k A(k, i) * A(k, j), the dot product of columns i
// and j of A. C is symmetric, which the later steps exploit. Any M, N >= 1 must work; a size < 1 throws
// std::invalid_argument. Work goes on the default stream; the functions return without waiting (the gates
// synchronize). A and C need not be 16-byte aligned (the gates pass pointers one double past an aligned address).
#pragma once
#include <cublas_v2.h>

#include <stdexcept>

namespace lab06 {

// Step 1a: the library, general product. cublasDgemm is column-major; compute A^T A from the row-major A with one
// call and no copy. Also the speed baseline of the last step.
void ata_cublas_gemm(cublasHandle_t handle, int M, int N, const double* A, double* C);

// Step 1b: the library routine that knows C is symmetric: cublasDsyrk computes one triangle (half the work);
// a kernel of yours then mirrors it into the other triangle, so that C is complete.
void ata_cublas_syrk(cublasHandle_t handle, int M, int N, const double* A, double* C);

// Step 2: one thread per element of C: the dot product of two columns of A, straight from global memory.
void ata_naive(int M, int N, const double* A, double* C);

// Step 3: square tiles of the two column panels of A staged in shared memory, one element of C per thread.
void ata_tiled(int M, int N, const double* A, double* C);

// Step 4: register blocking: each thread computes a small block of C (3 x 3 in the reference), its operands read
// once from shared memory per k and reused from registers.
void ata_regblock(int M, int N, const double* A, double* C);

// Step 5: step 4 with a wider block per thread: 4 x 4 elements of C (a 64 x 64 tile per block of 16 x 16 threads),
// so that every value read from shared memory feeds 4 FMAs instead of 3.
void ata_regblock4(int M, int N, const double* A, double* C);

// Step 6: step 5 plus symmetry: only the blocks on or above the diagonal of C compute; each writes its tile and
// the mirror image. About half the arithmetic of step 5.
void ata_symmetric(int M, int N, const double* A, double* C);

// Step 7a (expert, optional): fp64 tensor cores (mma.sync m8n8k4 f64, sm_80 or newer) with symmetry. Throws
// std::runtime_error on a device older than sm_80, or when the program holds no sm_80+ code for the kernel.
void ata_tensor_core(int M, int N, const double* A, double* C);

// Step 7b (expert, optional): the Hopper shapes (mma.sync m16n8k{4,8,16} f64, sm_90 only) fed by a cp.async
// pipeline, with symmetry. Throws std::runtime_error on a device other than sm_90, or when the program holds no sm_90 code.
void ata_tensor_core_sm90(int M, int N, const double* A, double* C);

// Given (every step calls it first): sizes below 1 have no meaning here; refuse them before launching anything.
inline void check_sizes(int M, int N) {
  if (M < 1 || N < 1) throw std::invalid_argument("lab06: M and N must be >= 1");
}

}  // namespace lab06
