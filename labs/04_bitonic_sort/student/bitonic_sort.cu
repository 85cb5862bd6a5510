// Lab 04 - your implementation. Replace each `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab04      (or: labgrade 04)
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

// Step 2. Any n: sort N = next power of two slots, where slots >= n act as keys larger than everything. Hint:
// use the "mirror" form of stage k, whose first step compares i with i ^ (k - 1) and whose comparators all put
// the smaller key at the lower index. Then a padding slot never moves, and any comparator that touches one can
// be skipped: no padding memory and no sentinel value. Descending: flip the keys (XOR with all ones).
void sort_global(float* keys, std::size_t n, Order order) {
  check_args(keys, n, "step 2 (sort_global)");
  (void)order;
  throw labkit::NotImplemented("step 2: sort_global");
}

// Step 3. Pick the chunk: the largest power of two of keys that fits in a block's shared memory
// (cudaDevAttrMaxSharedMemoryPerBlockOptin; above 48 KiB call cudaFuncSetAttribute(...MaxDynamicSharedMemorySize)).
// Kernel A sorts each chunk entirely in shared memory (stages k = 2 .. chunk, __syncthreads() between steps).
// For each larger stage k: the steps j >= chunk with step 2's global kernel, then kernel B does all j < chunk of
// each chunk in shared memory. Load and store the chunk coalesced; skip padding slots as in step 2.
void sort_shared(float* keys, std::size_t n, Order order) {
  check_args(keys, n, "step 3 (sort_shared)");
  (void)order;
  throw labkit::NotImplemented("step 3: sort_shared");
}

// Step 4. Step 3 with a value array that moves whenever its key moves (in global and in shared memory). A chunk
// now needs 8 bytes per slot: it holds half as many slots.
void sort_pairs(float* keys, std::uint32_t* values, std::size_t n, Order order) {
  check_args(keys, n, "step 4 (sort_pairs)");
  if (n > 0 && values == nullptr) throw std::invalid_argument("lab04 step 4 (sort_pairs): null values pointer");
  (void)order;
  throw labkit::NotImplemented("step 4: sort_pairs");
}

// Step 5. Keys only: step 3 with several steps per pass, in registers. Steps r in a row of one stage (distances
// J, J/2, ..., J/2^(r-1)) only mix slots whose indices differ in those r bits: a thread that loads such a group
// of 2^r slots (spaced J/2^(r-1) apart) can do all r steps in registers and store once: one global pass for r
// steps (at 2^24 keys and r = 5: 13 passes instead of step 3's 45). Hints:
//  - The mirror step (i with i ^ (k-1)) also flips the bits BELOW the group: give the upper half of the group the
//    mirrored low bits (x ^ (J/2^(r-1) - 1)); the plain steps after it never mix the two halves.
//  - Sort 32-bit integer keys, converted once on load and back on store. float_order_key() cannot be inverted
//    (all NaNs map to one key): use a bijection that orders the same way (radix transform, then rotate the
//    negative NaNs above +inf), and a compare-exchange becomes (min, max) with no branch.
//  - Slots >= n: load them as the largest key and never store them; check that they can never change.
//  - In shared memory: steps with j < 32 stay inside 32 consecutive slots: one thread holds such a row in
//    registers (pad the shared array by one word per 32 so that rows and runs are both bank-conflict-free).
//  - Fully unroll every loop over a register array (compile-time bounds), and check -Xptxas -v for spills.
void sort_fused(float* keys, std::size_t n, Order order) {
  check_args(keys, n, "step 5 (sort_fused)");
  (void)order;
  throw labkit::NotImplemented("step 5: sort_fused");
}

}  // namespace lab04
