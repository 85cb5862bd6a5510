// Step 3: SUMMA with the next panels' broadcast in flight during the current local update. Keep two sets of
// panel buffers: while local_gemm works on set k % 2 (on the GPU it only queues work on e.stream), broadcast the
// panels k + 1 with MPI_Ibcast into set (k + 1) % 2 and, with a GPU, copy them to the device on a second stream
// (events order the copies against the updates). See the README, step 3.
#include "summa.h"
#include "labkit/not_implemented.h"

namespace lab09 {

void summa_overlap(const Grid& g, Engine& e, int M, int N, int K, int b, const float* A, const float* B, float* C) {
  // TODO: step 2's loop, pipelined: post the broadcast of panels 0 and wait for it; then for each k: post the
  // broadcast of panels k + 1, queue the update with panels k, and only then wait for panels k + 1.
  (void)g, (void)e, (void)M, (void)N, (void)K, (void)b, (void)A, (void)B, (void)C;
  throw labkit::NotImplemented("step 3: summa_overlap");
}

}  // namespace lab09
