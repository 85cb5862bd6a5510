// Skeleton of the fake lab (the functions that are no step of their own): every function still throws, as a real
// lab's skeleton does.
#include "fake.h"
#include "labkit/not_implemented.h"

namespace lab99 {

int add(int, int) { throw labkit::NotImplemented("add"); }
long long sum(const std::vector<int>&) { throw labkit::NotImplemented("sum"); }
long long sum_fast(const std::vector<int>&) { throw labkit::NotImplemented("sum_fast"); }

}  // namespace lab99
