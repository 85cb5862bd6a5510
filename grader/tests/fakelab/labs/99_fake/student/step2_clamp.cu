// Skeleton of the fake lab, step 2 (gate step2.clamp).
#include "fake.h"
#include "labkit/not_implemented.h"

namespace lab99 {

int clamp(int, int, int) { throw labkit::NotImplemented("step 2: clamp"); }

}  // namespace lab99
