// Reference solution of the fake lab, the functions that are no step of their own (graded by the cpu.* gates, which
// depend on the whole lab). The grader's patch fixtures (grader/fixtures/*/patch.toml) start from this file and
// the step files next to it and replace exact snippets: change them together.
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

}  // namespace lab99
