// Reference solution of the fake lab, step 2: a CPU function (gate step2.clamp), so that a step file of its own
// can be graded, broken or missing, on a machine without a GPU.
#include "fake.h"

namespace lab99 {

int clamp(int x, int lo, int hi) { return x < lo ? lo : (x > hi ? hi : x); }

}  // namespace lab99
