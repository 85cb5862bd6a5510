// The fake lab's interface: host functions (graded by CPU gates) and one launch function (a GPU gate).
#pragma once
#include <vector>

namespace lab99 {

int add(int a, int b);                           // gate cpu.add
long long sum(const std::vector<int>& v);        // gate cpu.sum
long long sum_fast(const std::vector<int>& v);   // gate cpu.speed: timed against a slow baseline
void scale(float* d_data, int n, float factor);  // gate step1.correct (GPU): d_data[i] *= factor

}  // namespace lab99
