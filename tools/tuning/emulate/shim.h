// Host emulation of the CUDA subset the lab 01 kernels use: one std::thread per CUDA thread, blocks one at a time,
// __syncthreads() as a std::barrier, __shared__ as function statics (shared by the block's threads), dynamic shared
// memory (extern __shared__, which extract.py rewrites to g_dyn_smem) as a buffer allocated per block and filled
// with NaN, so a read of a word no copy wrote shows in the result.
#pragma once
#include <algorithm>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
inline std::barrier<>* g_bar = nullptr;
inline void* g_dyn_smem = nullptr;
inline void __syncthreads() { g_bar->arrive_and_wait(); }
using std::max;
using std::min;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
// kernel<<<grid, block, smem_bytes>>>: launch(grid, block, smem_bytes, [&] { kernel(...); }).
template <class F>
void launch(dim3 grid, dim3 block, std::size_t smem_bytes, F kernel) {
  gridDim = grid;
  blockDim = block;
  const unsigned nt = block.x * block.y;
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      std::barrier<> bar(nt);
      g_bar = &bar;
      std::vector<float4> smem((smem_bytes + 15) / 16);  // 16-byte aligned, fresh for every block
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::fill(smem.begin(), smem.end(), float4{nan, nan, nan, nan});
      g_dyn_smem = smem.data();
      std::vector<std::thread> ts;
      for (unsigned t = 0; t < nt; ++t)
        ts.emplace_back([&, t, bx, by] {
          threadIdx = dim3(t % block.x, t / block.x);
          blockIdx = dim3(bx, by);
          kernel();
        });
      for (auto& th : ts) th.join();
    }
}
template <class F>
void launch(dim3 grid, dim3 block, F kernel) {
  launch(grid, block, 0, kernel);
}
