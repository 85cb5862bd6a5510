// Reference solution of the fake lab, step 1: a kernel (gate step1.correct, the one GPU gate).
#include "fake.h"
#include "labkit/check.h"

namespace lab99 {

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
