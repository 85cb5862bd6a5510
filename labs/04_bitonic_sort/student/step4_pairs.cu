// Lab 04, step 4 - your implementation. Replace the `throw labkit::NotImplemented(...)` with the step, then run
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

// Step 4. Step 3 with a value array that moves whenever its key moves (in global and in shared memory). A chunk
// now needs 8 bytes per slot: it holds half as many slots. Start from a copy of your step-3 file's kernels.
void sort_pairs(float* keys, std::uint32_t* values, std::size_t n, Order order) {
  check_args(keys, n, "step 4 (sort_pairs)");
  if (n > 0 && values == nullptr) throw std::invalid_argument("lab04 step 4 (sort_pairs): null values pointer");
  (void)order;
  throw labkit::NotImplemented("step 4: sort_pairs");
}

}  // namespace lab04
