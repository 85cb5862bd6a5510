// Skeleton of the fake lab, step 1 (gate step1.correct). The grader links this file in place of a submission's
// step 1 that does not compile or is missing.
#include "fake.h"
#include "labkit/not_implemented.h"

namespace lab99 {

void scale(float*, int, float) { throw labkit::NotImplemented("step 1: scale"); }

}  // namespace lab99
