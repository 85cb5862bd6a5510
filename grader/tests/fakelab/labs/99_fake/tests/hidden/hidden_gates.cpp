// A hidden gate: graded in the instructor's tree, dropped (with its rubric entry) from a student release.
#include "fake.h"
#include "labkit/gate.h"

TEST_CASE("cpu.negative", "[lab99][cpu]") {
  CHECK(lab99::add(-5, -6) == -11);
  CHECK(lab99::add(-2147483647, -1) == -2147483647 - 1);
}
