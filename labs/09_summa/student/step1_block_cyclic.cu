// Step 1: the block-cyclic layout. Grid rank 0 holds the whole matrix; describe each process's blocks inside the
// global array with one derived datatype (MPI_Type_create_darray, or MPI_Type_vector + MPI_Type_create_resized),
// so that one send moves them all and the receiver sees a plain contiguous local array. See the README, step 1.
#include "summa.h"
#include "labkit/not_implemented.h"

namespace lab09 {

void scatter(const Grid& g, const Dist& d, const float* global, float* local) {
  // TODO: rank 0 sends each grid process its blocks (one derived datatype per destination); every process
  // receives local_rows(d, g) * local_cols(d, g) floats into `local`.
  (void)g, (void)d, (void)global, (void)local;
  throw labkit::NotImplemented("step 1: scatter");
}

void gather(const Grid& g, const Dist& d, const float* local, float* global) {
  // TODO: the reverse of scatter: every process sends its local array, rank 0 receives each one through the
  // datatype of that process's blocks.
  (void)g, (void)d, (void)local, (void)global;
  throw labkit::NotImplemented("step 1: gather");
}

}  // namespace lab09
