// Lab 09: the communication of one whole product as a blocking SUMMA does it, and nothing else: for every panel
// the owners stage it to host memory, both broadcasts run, and the receivers copy it to the device. The speed gate
// times it (the communication step 3 must hide behind its updates) and so does the bench (its per-step cost).
#pragma once
#include <algorithm>
#include <cstddef>

#include "summa.h"

namespace lab09 {

// N x N matrices A and B distributed as d on grid g (the same layout, leading dimension local_ld(d, g)), in the
// engine's memory. stage_a and stage_b: host buffers (pinned with a GPU) of local_rows * b and b * local_cols
// floats; to: device scratch of max(local_rows, local_cols) * b floats (unused without a GPU, where only the
// broadcasts run). Returns the bytes this process received. Processes outside the grid return 0 at once.
inline double blocking_comm(const Grid& g, const Engine& e, const Dist& d, const float* A, const float* B,
                            float* stage_a, float* stage_b, float* to) {
  if (!g.member()) return 0;
  const int N = d.cols, b = d.b, steps = (N + b - 1) / b;
  const int mloc = local_rows(d, g), nloc = local_cols(d, g), ld = local_ld(d, g);
  double bytes = 0;
  for (int kb = 0; kb < steps; ++kb) {
    const int w = std::min(b, N - kb * b);
    const bool own_a = g.col == kb % g.Q, own_b = g.row == kb % g.P;
    if (e.gpu && own_a)
      LABKIT_CUDA(cudaMemcpy(stage_a, A + std::size_t(kb / g.Q) * b * ld, std::size_t(mloc) * w * 4,
                             cudaMemcpyDeviceToHost));
    if (e.gpu && own_b)
      LABKIT_CUDA(cudaMemcpy2D(stage_b, std::size_t(w) * 4, B + std::size_t(kb / g.P) * b, std::size_t(ld) * 4,
                               std::size_t(w) * 4, nloc, cudaMemcpyDeviceToHost));
    MPI_Bcast(stage_a, mloc * w, MPI_FLOAT, kb % g.Q, g.row_comm);
    MPI_Bcast(stage_b, w * nloc, MPI_FLOAT, kb % g.P, g.col_comm);
    if (e.gpu && !own_a) LABKIT_CUDA(cudaMemcpy(to, stage_a, std::size_t(mloc) * w * 4, cudaMemcpyHostToDevice));
    if (e.gpu && !own_b) LABKIT_CUDA(cudaMemcpy(to, stage_b, std::size_t(w) * nloc * 4, cudaMemcpyHostToDevice));
    bytes += 4.0 * ((own_a ? 0 : double(mloc) * w) + (own_b ? 0 : double(w) * nloc));
  }
  return bytes;
}

}  // namespace lab09
