// Lab 04, step 1 - your implementation. Replace the `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab04 -L student      (your gates; or: build/gpu/labgrade 04)
// The walkthrough (labs/04_bitonic_sort/README.md) explains the network, each step and what its gates check.
//
// Compare keys with labkit::float_order_key(x) (an unsigned integer; usable in kernels), never floats with `<`:
// that is what puts NaNs last and -0.0 before +0.0. For a descending sort, compare float_order_key(x) ^ 0xFFFFFFFF.
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

// Step 1. One kernel launch per step: for k = 2, 4, ..., n and j = k/2, ..., 1, thread i compares keys[i] with
// keys[i ^ j] when i < (i ^ j), ascending where (i & k) == 0 and descending elsewhere. Launch n threads; check
// the launch after each one. Why can't one kernel do all the steps (what would replace the launch boundary)?
void sort_global_pow2(float* keys, std::size_t n) {
  check_args(keys, n, "step 1 (sort_global_pow2)");
  if (n & (n - 1))
    throw std::invalid_argument("lab04 step 1 (sort_global_pow2): n = " + std::to_string(n) +
                                " is not a power of two (any n is step 2's job)");
  throw labkit::NotImplemented("step 1: sort_global_pow2");
}

}  // namespace lab04
