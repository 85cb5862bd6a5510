// Lab 08, step 4: the halo solver with alpha, beta and the dot products kept on the devices.
#include <memory>

#include "labkit/not_implemented.h"
#include "multi_cg.h"

namespace lab08 {

// TODO: step 3's solver where every part keeps a copy of lab 07 step 6's device state (rr, p^T A p, alpha, beta,
// stop reason) and updates it from all-reduced sums: ncclAllReduce into device memory, or (virtual devices) a
// one-thread kernel per part that adds all parts' partial sums in part order after waiting (events) for them.
// Launch opt.graph_iterations iterations, then read part 0's state once; every kernel returns at once when the
// state says stop.
std::unique_ptr<Solver> make_device_scalar_solver(const Team& team, const labkit::Csr& A) {
  (void)team;
  (void)A;
  throw labkit::NotImplemented("step 4: make_device_scalar_solver");
}

}  // namespace lab08
