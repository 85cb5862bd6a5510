// Lab 06, step 7b - your implementation (Hopper fp64 tensor cores). Replace the `throw labkit::NotImplemented(...)`
// with the step, then run your gates: ctest --preset gpu -L lab06 -L student (or: labgrade 06). The walkthrough
// (labs/06_ata/README.md) explains the step and what its gates check.
//
// Reminder: C(i, j) = sum_k A(k, i) * A(k, j) with A row-major M x N (A(k, i) = A[k * N + i]); write ALL of C.
// Use std::size_t for k * N + i (N * N exceeds 2^31 for N > 46340). Call LABKIT_CHECK_LAUNCH() after every launch.
#include <stdexcept>

#include "ata.h"
#include "labkit/labkit.h"

namespace lab06 {

// Step 7b (expert). Step 7a on the Hopper shapes: mma.sync.aligned.m16n8k{4,8,16}.row.col.f64 (sm_90 only; fragment
// layout in the walkthrough), the shared tiles filled by cp.async (several stages in flight, one barrier per tile)
// instead of a register prefetch of the tiles, the next k-step's fragments read during the MMAs, symmetry as in
// step 6. 16-byte copies need 16-byte aligned addresses: A and C may start one
// double off a 16-byte boundary, and an odd N misaligns every other row, so keep an 8-byte path. Throw
// std::runtime_error on a device that is not sm_90 and when the program holds no sm_90 code for your kernel
// (cudaFuncGetAttributes: attr.ptxVersion >= 90).
void ata_tensor_core_sm90(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 7b: ata_tensor_core_sm90");
}

}  // namespace lab06
