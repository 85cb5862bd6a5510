// Step 1: the block-cyclic layout. Grid rank 0 holds the whole matrix; one derived datatype per destination
// describes that process's blocks inside the global array, in the order of its local array, so one send moves
// them all and the receiver sees a plain contiguous array.
#include <vector>

#include "summa.h"

namespace lab09 {
namespace {

void check_args(const Grid& g, const Dist& d, const char* what) {
  if (!g.member()) throw std::invalid_argument(std::string(what) + ": called on a process outside the grid");
  if (d.rows < 0 || d.cols < 0 || d.b < 1)
    throw std::invalid_argument(std::string(what) + ": impossible sizes " + std::to_string(d.rows) + " x " +
                                std::to_string(d.cols) + " in blocks of " + std::to_string(d.b));
}

// The blocks of grid process r inside the global column-major array. MPI_ORDER_FORTRAN: the array is
// column-major, and the type's elements come in the order of r's column-major local array. The process grid of
// a darray is row-major (rank = row * Q + col), as ours.
MPI_Datatype blocks_of(const Grid& g, const Dist& d, int r) {
  int gsizes[2] = {d.rows, d.cols};
  int distribs[2] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_CYCLIC};
  int dargs[2] = {d.b, d.b};
  int psizes[2] = {g.P, g.Q};
  MPI_Datatype t;
  MPI_Type_create_darray(g.P * g.Q, r, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_FORTRAN, MPI_FLOAT, &t);
  MPI_Type_commit(&t);
  return t;
}

constexpr int kTag = 901;

}  // namespace

void scatter(const Grid& g, const Dist& d, const float* global, float* local) {
  check_args(g, d, "scatter");
  if (d.rows == 0 || d.cols == 0) return;
  std::vector<MPI_Request> sends;
  if (g.rank == 0) {
    sends.resize(g.P * g.Q);
    for (int r = 0; r < g.P * g.Q; ++r) {
      MPI_Datatype t = blocks_of(g, d, r);
      MPI_Isend(global, 1, t, r, kTag, g.comm, &sends[r]);
      MPI_Type_free(&t);  // freed types stay valid for the sends already posted
    }
  }
  const int count = local_rows(d, g) * local_cols(d, g);
  MPI_Recv(local, count, MPI_FLOAT, 0, kTag, g.comm, MPI_STATUS_IGNORE);
  MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE);
}

void gather(const Grid& g, const Dist& d, const float* local, float* global) {
  check_args(g, d, "gather");
  if (d.rows == 0 || d.cols == 0) return;
  MPI_Request send;
  MPI_Isend(local, local_rows(d, g) * local_cols(d, g), MPI_FLOAT, 0, kTag, g.comm, &send);
  if (g.rank == 0) {
    for (int r = 0; r < g.P * g.Q; ++r) {
      MPI_Datatype t = blocks_of(g, d, r);
      MPI_Recv(global, 1, t, r, kTag, g.comm, MPI_STATUS_IGNORE);
      MPI_Type_free(&t);
    }
  }
  MPI_Wait(&send, MPI_STATUS_IGNORE);
}

}  // namespace lab09
