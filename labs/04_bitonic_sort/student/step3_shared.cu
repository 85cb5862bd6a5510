// Lab 04, step 3 - your implementation. Replace the `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab04 -L student      (your gates; or: build/gpu/labgrade 04)
// The walkthrough (labs/04_bitonic_sort/README.md) explains the network, each step and what its gates check.
//
// Compare keys with labkit::float_order_key(x) (an unsigned integer; usable in kernels), never floats with `<`:
// that is what puts NaNs last and -0.0 before +0.0. For a descending sort, compare float_order_key(x) ^ 0xFFFFFFFF.
// Faster in shared memory: convert each key once with labkit::float_sort_key (it converts back; see the walkthrough).
#include <stdexcept>
#include <string>

#include "bitonic_sort.h"
#include "labkit/labkit.h"

namespace lab04 {

namespace {
// Refuse impossible arguments before launching anything.
void check_args(const void* keys, std::size_t n, const char* step) {
  if (n > kMaxN)
    throw std::invalid_argument(std::string("lab04 ") + step + ": n = " + std::to_string(n) +
                                " exceeds kMaxN = 2^31 (32-bit indices)");
  if (n > 0 && keys == nullptr) throw std::invalid_argument(std::string("lab04 ") + step + ": null keys pointer");
}
}  // namespace

// Step 3. Pick the chunk: the largest power of two of keys that fits in a block's shared memory
// (cudaDevAttrMaxSharedMemoryPerBlockOptin; above 48 KiB call cudaFuncSetAttribute(...MaxDynamicSharedMemorySize)).
// Kernel A sorts each chunk entirely in shared memory (stages k = 2 .. chunk, __syncthreads() between steps).
// For each larger stage k: the steps j >= chunk with step 2's global kernel (copy it into this file: every step
// file compiles and is graded on its own), then kernel B does all j < chunk of each chunk in shared memory. Load
// and store the chunk coalesced; skip padding slots as in step 2.
void sort_shared(float* keys, std::size_t n, Order order) {
  check_args(keys, n, "step 3 (sort_shared)");
  (void)order;
  throw labkit::NotImplemented("step 3: sort_shared");
}

}  // namespace lab04
