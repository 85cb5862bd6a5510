// Reference solution of the fake lab. The grader's patch fixtures (grader/fixtures/*/patch.toml) start from this
// file and replace exact snippets of it: change it together with them.
#include "fake.h"
#include "labkit/check.h"

namespace lab99 {

int add(int a, int b) { return a + b; }

long long sum(const std::vector<int>& v) {
  long long s = 0;
  for (int x : v) s += x;
  return s;
}

long long sum_fast(const std::vector<int>& v) {
  long long s = 0;
  for (int x : v) s += x;
  return s;
}

__global__ void scale_kernel(float* data, int n, float factor) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

void scale(float* d_data, int n, float factor) {
  if (n <= 0) return;
  scale_kernel<<<(n + 255) / 256, 256>>>(d_data, n, factor);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab99
