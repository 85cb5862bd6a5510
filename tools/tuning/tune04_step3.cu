// Lab 04 tuning harness, step 3's per-kernel times (part of tune04; build command in tune04.cu). Includes step 3's
// file to reach its kernels; the public sort_shared() it defines is the one tune04.cu calls.
#include "../../solutions/04_bitonic_sort/step3_shared.cu"
#include "tune04.h"

namespace tune04 {
void breakdown_step3(float* work, std::uint32_t N,
                     const std::function<void(const char*, const std::function<void()>&)>& kernel) {
  using namespace lab04;
  const std::uint32_t chunk = shared_chunk(sizeof(float));
  const std::size_t smem = std::size_t(chunk) * sizeof(float);
  const unsigned threads = chunk / 2 < kSharedThreads ? chunk / 2 : kSharedThreads;
  LABKIT_CUDA(cudaFuncSetAttribute(bitonic_sort_chunks_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(smem)));
  LABKIT_CUDA(cudaFuncSetAttribute(bitonic_merge_chunks_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(smem)));
  kernel("step 3 global step (j = 2^20, plain)", [&] { global_step(work, N, N, 1u << 20, false, 0); });
  kernel("step 3 global step (j = 2^23, mirror)", [&] { global_step(work, N, N, 1u << 23, true, 0); });
  kernel("step 3 kernel A (sort the chunks)", [&] {
    bitonic_sort_chunks_shared_kernel<<<N / chunk, threads, smem>>>(work, N, chunk, 0);
  });
  kernel("step 3 kernel B (finish a stage inside the chunks)", [&] {
    bitonic_merge_chunks_shared_kernel<<<N / chunk, threads, smem>>>(work, N, chunk, 0);
  });
}
}  // namespace tune04
