// Step 2: SUMMA. For each block column k of A (block row k of B): the owners broadcast the panels along the grid
// rows (A, in g.row_comm) and columns (B, in g.col_comm), and every process adds A_panel * B_panel to the blocks
// of C it already holds (local_gemm). MPI moves host memory here, so with a GPU (e.gpu) a panel goes
// device -> host -> broadcast -> device. See the README, step 2.
#include "summa.h"
#include "labkit/not_implemented.h"

namespace lab09 {

void summa(const Grid& g, Engine& e, int M, int N, int K, int b, const float* A, const float* B, float* C) {
  // TODO: for k0 = 0, b, 2b, ... < K (panel width w = min(b, K - k0), block index kb = k0 / b):
  //   - process column kb % g.Q owns A's panel (local block column kb / g.Q, contiguous); broadcast it in
  //     g.row_comm;
  //   - process row kb % g.P owns B's panel (local block row kb / g.P, strided by the local leading dimension);
  //     pack it and broadcast it in g.col_comm;
  //   - local_gemm(e, local rows of A, local columns of B, w, ...) into C.
  (void)g, (void)e, (void)M, (void)N, (void)K, (void)b, (void)A, (void)B, (void)C;
  throw labkit::NotImplemented("step 2: summa");
}

}  // namespace lab09
