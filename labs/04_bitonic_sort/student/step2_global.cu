// Lab 04, step 2 - your implementation. Replace the `throw labkit::NotImplemented(...)` with the step, then run
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

// Step 2. Any n: sort N = next power of two slots, where slots >= n act as keys larger than everything. Hint:
// use the "mirror" form of stage k, whose first step compares i with i ^ (k - 1) and whose comparators all put
// the smaller key at the lower index. Then a padding slot never moves, and any comparator that touches one can
// be skipped: no padding memory and no sentinel value. Descending: flip the keys (XOR with all ones).
void sort_global(float* keys, std::size_t n, Order order) {
  check_args(keys, n, "step 2 (sort_global)");
  (void)order;
  throw labkit::NotImplemented("step 2: sort_global");
}

}  // namespace lab04
