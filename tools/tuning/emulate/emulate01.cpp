// Lab 01 reference kernels on the CPU (tools/tuning/emulate/emulate01.sh builds and runs it): every step from 3 to 5f
// on small shapes (edges, K not a multiple of the tile, 1xN, Mx1, misaligned A or C) against a product in double;
// also checks that nothing outside C changed.
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
  };
  struct Case {
    int M, N, K, oa, ob, oc;
  };
  std::vector<Case> cases = {{1, 1, 1, 0, 0, 0},           {7, 13, 17, 0, 0, 0},    {130, 132, 40, 0, 0, 0},
                             {131, 133, 37, 0, 0, 0},      {257, 129, 33, 0, 0, 0}, {68, 132, 36, 1, 0, 0},
                             {68, 132, 36, 0, 0, 3},       {300, 1, 9, 0, 0, 0},    {1, 300, 7, 0, 0, 0},
                             {129, 1100 / 4, 64, 0, 0, 0}, {1037, 260, 20, 0, 0, 0}};
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
          err = std::max(err, std::fabs(r - C[c.oc + size_t(i) * c.N + j]));
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
