// Lab 01 reference kernels on the CPU (tools/tuning/emulate/emulate01.sh builds and runs it): every step from 3 to 6
// on small shapes (edges, K not a multiple of the tile, 1xN, Mx1, misaligned A, B or C) against a product in double;
// also checks that nothing outside C changed. Step 6 runs in three configurations of its template: the shipped one
// (6: 128 x 128 x 8, 2 stages, 128 threads) and two that take the kernel's other paths (6b: 16-deep k-tiles, 3
// stages, 32-wide warps, 256 threads; 6c: a 64-row block of 64 threads, whose 4-byte copies of B change column from
// pass to pass). The host has no cp.async: its copies are synchronous, so this checks indexing, edges, stage
// rotation and the barriers' placement, not the wait_group counts.
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>

#include "kernels.h"

using Fn = std::function<void(int, int, int, const float*, const float*, float*)>;
unsigned nb(int n, int p) { return unsigned((n + p - 1) / p); }
bool al16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

template <class K>
Fn vec_step(int BM, int BN, K kern) {  // kern(bool vec) -> callable kernel body
  return [=](int M, int N, int K_, const float* A, const float* B, float* C) {
    const bool vec = K_ % 4 == 0 && N % 4 == 0 && al16(A) && al16(B) && al16(C);
    launch(dim3(nb(N, BN), nb(M, BM)), dim3(256), [&] { kern(vec, M, N, K_, A, B, C); });
  };
}

// Step 6's launcher: its vec test ignores A (always 4-byte copies) and K; the dynamic shared memory of <<<>>>.
template <int BM, int BN, int BK, int kStages, int WN, int kMinBlocks>
Fn step6() {
  return [](int M, int N, int K, const float* A, const float* B, float* C) {
    using T = s6::AsyncTile<BM, BN, BK, kStages, WN>;
    const bool vec = N % 4 == 0 && al16(B) && al16(C);
    auto run = [&](auto kernel) {
      launch(dim3(nb(N, BN), nb(M, BM)), dim3(T::kThreads), T::kSmemBytes, [&] { kernel(M, N, K, A, B, C); });
    };
    if (vec)
      run(s6::matmul_async_pipeline_kernel<BM, BN, BK, kStages, WN, kMinBlocks, s6::FmaOrder::paired_snake, true>);
    else
      run(s6::matmul_async_pipeline_kernel<BM, BN, BK, kStages, WN, kMinBlocks, s6::FmaOrder::paired_snake, false>);
  };
}

int main() {
  std::vector<std::pair<std::string, Fn>> steps = {
      {"3",
       [](int M, int N, int K, const float* A, const float* B, float* C) {
         launch(dim3(nb(N, 32), nb(M, 32)), dim3(32, 32), [&] { s3::matmul_tiled_kernel(M, N, K, A, B, C); });
       }},
      {"4",
       [](int M, int N, int K, const float* A, const float* B, float* C) {
         launch(dim3(nb(N, 128), nb(M, 128)), dim3(256), [&] { s4::matmul_regblock_kernel(M, N, K, A, B, C); });
       }},
      {"5a",
       [](int M, int N, int K, const float* A, const float* B, float* C) {
         launch(dim3(nb(N, 128), nb(M, 128)), dim3(256), [&] { s5a::matmul_transposed_a_kernel(M, N, K, A, B, C); });
       }},
      {"5b",
       [](int M, int N, int K, const float* A, const float* B, float* C) {
         launch(dim3(nb(N, 128), nb(M, 128)), dim3(256), [&] { s5b::matmul_conflict_free_kernel(M, N, K, A, B, C); });
       }},
      {"5c", vec_step(128, 128,
                      [](bool v, int M, int N, int K, const float* A, const float* B, float* C) {
                        if (v)
                          s5c::matmul_vector_loads_kernel<true>(M, N, K, A, B, C);
                        else
                          s5c::matmul_vector_loads_kernel<false>(M, N, K, A, B, C);
                      })},
      {"5d", vec_step(128, 128,
                      [](bool v, int M, int N, int K, const float* A, const float* B, float* C) {
                        if (v)
                          s5d::matmul_double_buffer_kernel<true>(M, N, K, A, B, C);
                        else
                          s5d::matmul_double_buffer_kernel<false>(M, N, K, A, B, C);
                      })},
      {"5e", vec_step(128, 128,
                      [](bool v, int M, int N, int K, const float* A, const float* B, float* C) {
                        if (v)
                          s5e::matmul_launch_bounds_kernel<true>(M, N, K, A, B, C);
                        else
                          s5e::matmul_launch_bounds_kernel<false>(M, N, K, A, B, C);
                      })},
      {"5f", vec_step(128, 128,
                      [](bool v, int M, int N, int K, const float* A, const float* B, float* C) {
                        if (v)
                          s5f::matmul_tuned_kernel<true>(M, N, K, A, B, C);
                        else
                          s5f::matmul_tuned_kernel<false>(M, N, K, A, B, C);
                      })},
      {"6", step6<128, 128, 8, 2, 64, 2>()},
      {"6b", step6<128, 128, 16, 3, 32, 2>()},
      {"6c", step6<64, 128, 8, 3, 64, 4>()},
  };
  struct Case {
    int M, N, K, oa, ob, oc;
  };
  // {68, 132, 37}: N % 4 == 0 but K odd, vector loads for step 6 only (A's rows are not 16-byte aligned).
  std::vector<Case> cases = {{1, 1, 1, 0, 0, 0},      {7, 13, 17, 0, 0, 0},    {130, 132, 40, 0, 0, 0},
                             {131, 133, 37, 0, 0, 0}, {257, 129, 33, 0, 0, 0}, {68, 132, 36, 1, 0, 0},
                             {68, 132, 36, 0, 2, 0},  {68, 132, 36, 0, 0, 3},  {68, 132, 37, 0, 0, 0},
                             {300, 1, 9, 0, 0, 0},    {1, 300, 7, 0, 0, 0},    {129, 1100 / 4, 64, 0, 0, 0},
                             {1037, 260, 20, 0, 0, 0}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1, 1);
  int bad = 0;
  for (auto& [name, fn] : steps)
    for (auto c : cases) {
      std::vector<float> A(c.oa + size_t(c.M) * c.K + 4), B(c.ob + size_t(c.K) * c.N + 4),
          C(c.oc + size_t(c.M) * c.N + 4);
      for (auto* v : {&A, &B, &C})
        for (auto& x : *v) x = d(rng);
      const std::vector<float> C0 = C;
      fn(c.M, c.N, c.K, A.data() + c.oa, B.data() + c.ob, C.data() + c.oc);
      double err = 0, mx = 0;
      for (int i = 0; i < c.M; ++i)
        for (int j = 0; j < c.N; ++j) {
          double r = C0[c.oc + size_t(i) * c.N + j];
          for (int k = 0; k < c.K; ++k) r += double(A[c.oa + size_t(i) * c.K + k]) * B[c.ob + size_t(k) * c.N + j];
          // A NaN (a read of shared memory nothing wrote: shim.h) must stick; std::max would drop it.
          const double e = std::fabs(r - C[c.oc + size_t(i) * c.N + j]);
          err = std::isnan(err) || std::isnan(e) ? e + err : std::max(err, e);
          mx = std::max(mx, std::fabs(r));
        }
      bool untouched = true;
      for (int j = 0; j < c.oc; ++j) untouched &= C[j] == C0[j];
      for (size_t j = c.oc + size_t(c.M) * c.N; j < C.size(); ++j) untouched &= C[j] == C0[j];
      const bool ok = err / mx < 1e-5 && untouched;
      if (!ok) ++bad;
      std::printf("step %-3s M=%d N=%d K=%d off=%d,%d,%d relerr %.2e %s%s\n", name.c_str(), c.M, c.N, c.K, c.oa, c.ob,
                  c.oc, err / mx, ok ? "ok" : "WRONG", untouched ? "" : " (wrote outside C)");
    }
  std::printf("%d wrong\n", bad);
  return bad != 0;
}
