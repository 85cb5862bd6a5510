#include "labkit/ref_sort.h"

#include <algorithm>
#include <array>

namespace labkit {

void radix_sort_u32(std::vector<std::uint32_t>& v) {
  std::vector<std::uint32_t> tmp(v.size());
  for (int shift = 0; shift < 32; shift += 8) {
    std::array<std::size_t, 257> start{};  // counting sort on one byte; stable, so later passes keep earlier order
    for (std::uint32_t x : v) ++start[((x >> shift) & 0xFFu) + 1];
    for (int b = 0; b < 256; ++b) start[b + 1] += start[b];
    for (std::uint32_t x : v) tmp[start[(x >> shift) & 0xFFu]++] = x;
    v.swap(tmp);
  }
}

std::vector<std::uint32_t> sorted_order_keys(const std::vector<float>& keys, bool descending) {
  std::vector<std::uint32_t> k(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) k[i] = float_order_key(keys[i], descending);
  radix_sort_u32(k);
  return k;
}

std::vector<float> sort_ref(std::vector<float> keys, bool descending) {
  std::sort(keys.begin(), keys.end(), [descending](float a, float b) {
    return float_order_key(a, descending) < float_order_key(b, descending);
  });
  return keys;
}

}  // namespace labkit
