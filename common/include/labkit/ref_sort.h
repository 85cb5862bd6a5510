// Sorting: the total order on floats that the sort lab defines, and CPU references for it.
//
// IEEE `<` is not a strict weak order once NaNs appear (every comparison with a NaN is false), and it calls -0.0
// and +0.0 equal, so "sorted" is ambiguous. The labs sort by float_order_key() instead, which gives
//     -inf < ... < -denormals < -0.0 < +0.0 < +denormals < ... < +inf < NaN
// with every NaN (any sign, any payload) equal to every other NaN: NaNs sort last. A descending sort is the
// exact mirror image (NaNs first, +0.0 before -0.0). The key is an unsigned integer, so comparing two keys is one
// integer compare on the device, and a CPU radix sort of the keys is the reference.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#ifdef __CUDACC__
#define LABKIT_SORT_HD __host__ __device__ __forceinline__
#else
#define LABKIT_SORT_HD inline
#endif

namespace labkit {

// Ascending order key: a < b in the order above exactly when float_order_key(a) < float_order_key(b).
// Positive floats get the sign bit set (they come above all negatives); negative floats are bit-inverted (a larger
// magnitude becomes a smaller key); all NaNs map to the largest key.
LABKIT_SORT_HD std::uint32_t float_order_key(float x) {
  std::uint32_t u;
#ifdef __CUDA_ARCH__
  u = __float_as_uint(x);
#else
  std::memcpy(&u, &x, sizeof u);
#endif
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0xFFFFFFFFu;  // NaN: exponent all ones, mantissa non-zero
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The key for a direction: a descending sort is an ascending sort of the inverted keys.
LABKIT_SORT_HD std::uint32_t float_order_key(float x, bool descending) {
  return descending ? ~float_order_key(x) : float_order_key(x);
}

// A sort key that, unlike float_order_key(), can be turned back into the float: a bijection on 32-bit patterns, so a
// GPU sort can convert each key once when it loads it, compare plain unsigned integers (one instruction, no NaN
// test) and convert back when it stores. The radix-sort transform (invert the bits of negatives, set the sign bit
// of positives) orders every non-NaN exactly as float_order_key() does but puts the negative NaNs below -inf;
// subtracting 0x7FFFFF (mod 2^32) rotates exactly those 2^23 - 1 patterns to the top, above +inf and the positive
// NaNs. So a < b in float_order_key() implies a < b here; NaNs are merely ordered among themselves by bit pattern,
// which an unstable sort is free to do. `mask` = 0xFFFFFFFF reverses the order (descending). Arguments and results
// are bit patterns (__float_as_uint / __uint_as_float on the device).
LABKIT_SORT_HD std::uint32_t float_sort_key(std::uint32_t bits, std::uint32_t mask = 0) {
  const std::uint32_t k = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (k - 0x007FFFFFu) ^ mask;
}
LABKIT_SORT_HD std::uint32_t float_from_sort_key(std::uint32_t key, std::uint32_t mask = 0) {
  const std::uint32_t k = (key ^ mask) + 0x007FFFFFu;
  return (k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k;
}

inline std::uint32_t float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float bits_float(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// LSD radix sort of 32-bit unsigned integers (4 passes of 8 bits): the fast CPU reference for large arrays.
void radix_sort_u32(std::vector<std::uint32_t>& v);

// The order keys of `keys`, sorted: what float_order_key() of a correct output must be, position by position.
std::vector<std::uint32_t> sorted_order_keys(const std::vector<float>& keys, bool descending);

// The reference sort (std::sort with the key order; NaN payloads among equal keys in unspecified order).
std::vector<float> sort_ref(std::vector<float> keys, bool descending);

}  // namespace labkit
