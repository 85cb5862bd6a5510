// Lab 08, step 3: halo exchange. Each part receives only the entries of p its rows reference, and the exchange
// overlaps with the SpMV of the interior rows.
#include <memory>
#include <vector>

#include "labkit/not_implemented.h"
#include "multi_cg.h"

namespace lab08 {

std::vector<HaloPlan> plan_halo(const labkit::Csr& A, const std::vector<int>& bounds) {
  // TODO: for each part, scan its rows' columns: those outside [row_begin, row_end) are halo entries (collect them
  // once each, then sort); a row with any such column is a boundary row. halo_offsets splits halo_cols by owner
  // (the part whose row range contains the column). Then build `local` with the renumbered columns, each row's
  // columns ascending.
  (void)A;
  (void)bounds;
  throw labkit::NotImplemented("step 3: plan_halo");
}

// TODO: the solver: step 2's solver with p stored as [own p; halo] per part and the SpMV on `local`. Per
// iteration: pack what other parts need (a gather kernel on team.comm_stream(k), after an event from stream(k)
// says p is final), send it (ncclSend/ncclRecv in one group, or cudaMemcpyPeerAsync straight into the receiver's
// halo slots), and meanwhile multiply the interior rows on stream(k); the boundary rows wait (event) for the halo.
std::unique_ptr<Solver> make_halo_solver(const Team& team, const labkit::Csr& A) {
  (void)team;
  (void)A;
  throw labkit::NotImplemented("step 3: make_halo_solver");
}

}  // namespace lab08
