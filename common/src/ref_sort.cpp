#include "labkit/ref_sort.h"

#include <algorithm>
#include <array>
#include <functional>
#include <thread>

#include "labkit/reference.h"  // kElementGrain

namespace labkit {

void radix_sort_u32(std::vector<std::uint32_t>& v) {
  const std::size_t n = v.size();
  std::vector<std::uint32_t> tmp(n);
  // Lab 04's gates sort 2^24 keys twice per check (~0.55 s each on one core of the grading machine), so large inputs
  // are split into chunks of at least kElementGrain (2^16) keys, one per core. Each chunk counts its byte values;
  // chunk c's keys of a value are then placed after those of chunks < c, where the serial, stable sort puts them.
  // (Not parallel_for: both passes of a byte need the same chunks, by index.)
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t chunks = std::max<std::size_t>(1, std::min(cores, n / kElementGrain));
  const std::size_t len = (n + chunks - 1) / chunks;
  std::vector<std::array<std::size_t, 256>> offset(chunks);
  auto each_chunk = [&](const std::function<void(std::size_t, std::size_t, std::size_t)>& body) {
    auto run = [&](std::size_t c) { body(c, std::min(n, c * len), std::min(n, (c + 1) * len)); };
    if (chunks == 1) return run(0);
    std::vector<std::thread> pool;
    for (std::size_t c = 0; c < chunks; ++c) pool.emplace_back(run, c);
    for (auto& t : pool) t.join();
  };
  for (int shift = 0; shift < 32; shift += 8) {
    each_chunk([&](std::size_t c, std::size_t b, std::size_t e) {
      offset[c].fill(0);
      for (std::size_t i = b; i < e; ++i) ++offset[c][(v[i] >> shift) & 0xFFu];
    });
    std::size_t at = 0;  // counts -> starting positions: byte value first, then chunk
    for (int d = 0; d < 256; ++d)
      for (std::size_t c = 0; c < chunks; ++c) {
        const std::size_t count = offset[c][d];
        offset[c][d] = at;
        at += count;
      }
    each_chunk([&](std::size_t c, std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) tmp[offset[c][(v[i] >> shift) & 0xFFu]++] = v[i];
    });
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
