// Tuning harness for lab 01 step 5: times kernel variants against cuBLAS (see tools/tuning/README.md).
#include "../../solutions/01_matmul/matmul.cu"
#include <cstdio>
#include <vector>
#include <cmath>
#include "labkit/timing.h"
#include "labkit/random.h"
using namespace lab01;
template <int BK, int MB, int G>
void launch(int M, int N, int K, const float* A, const float* B, float* C) {
  dim3 grid(blocks(N, 128), blocks(M, 128));
  matmul_tuned_kernel<BK, MB, G, true><<<grid, 256>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}
int main() {
  labkit::CublasHandle h;
  for (int n : {4096, 8192}) {
    size_t sz = size_t(n) * n;
    labkit::DeviceBuffer<float> A(sz), B(sz), C(sz), C2(sz);
    labkit::fill_random_device(A.data(), sz, 1); labkit::fill_random_device(B.data(), sz, 2);
    labkit::TimingOptions o; o.warmup = 3; o.min_repeats = 10; o.budget_ms = 300;
    auto cub = [&](int){ const float one=1.f; LABKIT_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B.data(), n, A.data(), n, &one, C.data(), n)); };
    using F = void(*)(int,int,int,const float*,const float*,float*);
    struct V { const char* name; F f; } vs[] = {
      {"bk8_mb1", launch<8,1,1>}, {"bk16_mb2_g4", launch<16,2,4>}, {"bk16_mb2_g8", launch<16,2,8>},
      {"bk16_mb2_g16", launch<16,2,16>}, {"bk16_mb2_g32", launch<16,2,32>}};
    for (auto& v : vs) {
      // correctness vs cuBLAS on zeroed C
      LABKIT_CUDA(cudaMemset(C.data(), 0, sz*4)); LABKIT_CUDA(cudaMemset(C2.data(), 0, sz*4));
      cub(0); v.f(n,n,n,A.data(),B.data(),C2.data()); LABKIT_CUDA(cudaDeviceSynchronize());
      auto x = C.download(), y = C2.download(); double md=0, mx=0; for (size_t i=0;i<sz;i+=7){ md=std::max(md,(double)std::fabs(x[i]-y[i])); mx=std::max(mx,(double)std::fabs(x[i]));}
      auto cmp = labkit::compare_speed(cub, [&](int){ v.f(n,n,n,A.data(),B.data(),C2.data()); }, o);
      printf("n=%d %-14s ratio %.3f  cublas %.3f ms  variant %.3f ms  %.1f TFLOP/s  relerr %.2e\n", n, v.name, cmp.ratio, cmp.baseline.median_ms, cmp.candidate.median_ms, 2.0*n*double(n)*n/(cmp.candidate.median_ms*1e-3)/1e12, md/mx);
    }
  }
}
