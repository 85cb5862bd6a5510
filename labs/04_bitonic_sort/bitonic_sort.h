// Lab 04: bitonic sort of float keys (and key-value pairs), from one kernel per network step to shared memory and
// several steps per pass in registers.
//
// Every function sorts IN PLACE an array of n floats in DEVICE memory. The order is the total order of
// labkit/ref_sort.h, computed by labkit::float_order_key():
//     ascending:   -inf < ... < -0.0 < +0.0 < ... < +inf < NaN      (all NaNs equal, and last)
//     descending:  the exact mirror image: NaN first, then +inf ... +0.0, -0.0 ... -inf
// so -0.0 and +0.0 are ordered (not equal), and NaNs are kept, bit for bit, at the end (ascending) or the start
// (descending). Compare keys, never floats with `<` (a NaN compares false with everything and would stay where it
// is, breaking the network). The sort is not stable: equal keys (two NaNs with different payloads, or equal
// keys in a key-value sort) may come out in any order, but the same order on every run.
//
// n may be 0 (nothing to do) up to kMaxN; a larger n throws std::invalid_argument. Work goes on the default
// stream; the functions return without waiting for it (the gates synchronize).
#pragma once
#include <cstddef>
#include <cstdint>

#include "labkit/ref_sort.h"

namespace lab04 {

enum class Order { ascending, descending };

// 32-bit indices in the kernels: n up to 2^31 (the next power of two still fits an unsigned 32-bit index).
constexpr std::size_t kMaxN = std::size_t(1) << 31;

// Step 1: the textbook network for a power-of-two n (1, 2, 4, ...; 0 is allowed too), ascending: one kernel
// launch per (k, j) step, in global memory; element i is compared with i ^ j, direction from i & k.
// Any other n throws std::invalid_argument.
void sort_global_pow2(float* keys, std::size_t n);

// Step 2: any n, either direction, still one global-memory kernel per step.
void sort_global(float* keys, std::size_t n, Order order);

// Step 3: shared memory. Chunks that fit in one block's shared memory are sorted there in one kernel; for every
// stage k larger than a chunk only the steps with j >= chunk run in global memory, and one shared-memory kernel
// finishes all j < chunk.
void sort_shared(float* keys, std::size_t n, Order order);

// Step 4: key-value sort (step 3's structure): values[i] travels with keys[i]. With values = 0, 1, ..., n-1 the
// values come out as the permutation that sorts the keys ("argsort").
void sort_pairs(float* keys, std::uint32_t* values, std::size_t n, Order order);

// Step 5: keys only, step 3's structure with several network steps per pass: a thread loads the 2^r slots that
// interact across r consecutive steps into registers, does the r steps there and writes them back (one global
// pass instead of r); in shared memory the same, plus every step with j < 32 inside one thread's row of 32 keys.
void sort_fused(float* keys, std::size_t n, Order order);

}  // namespace lab04
