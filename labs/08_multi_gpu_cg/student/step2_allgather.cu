// Lab 08, step 2: CG with the whole p on every part (all-gather before each SpMV) and the dot products all-reduced.
#include <memory>

#include "labkit/not_implemented.h"
#include "multi_cg.h"

namespace lab08 {

// TODO: a class derived from Solver that, in its constructor, calls partition_rows and distribute_rows (step 1)
// and allocates per part: a full-length p, the part's rows of x, r, Ap and b, and reduction buffers. solve() is
// lab 07's cg_solve with every vector operation done per part on team.stream(k), plus two exchanges:
//  - p: each part's block to every other part. NCCL (team.uses_nccl()): ncclAllGather wants equal counts, so
//    broadcast each part's block in place (root q) inside one ncclGroupStart/ncclGroupEnd; otherwise
//    cudaMemcpyPeerAsync from the owner's stream, and every receiver's stream waits (event) for every owner.
//  - the dot products: ncclAllReduce of each part's partial sum (in one group), or the partial sums added on the
//    host in part order.
std::unique_ptr<Solver> make_allgather_solver(const Team& team, const labkit::Csr& A) {
  (void)team;
  (void)A;
  throw labkit::NotImplemented("step 2: make_allgather_solver");
}

}  // namespace lab08
