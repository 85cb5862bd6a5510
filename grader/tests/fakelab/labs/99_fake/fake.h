// The fake lab's interface: host functions (graded by CPU gates), one launch function (a GPU gate) and one step that
// runs on the CPU. Files: fake.cu (add, sum, sum_fast: no step of their own), step1_scale.cu, step2_clamp.cu.
#pragma once
#include <vector>

namespace lab99 {

int add(int a, int b);                           // gate cpu.add
long long sum(const std::vector<int>& v);        // gate cpu.sum
long long sum_fast(const std::vector<int>& v);   // gate cpu.speed: timed against a slow baseline
void scale(float* d_data, int n, float factor);  // gate step1.correct (GPU): d_data[i] *= factor
int clamp(int x, int lo, int hi);                // gate step2.clamp (CPU): x limited to [lo, hi]

}  // namespace lab99
