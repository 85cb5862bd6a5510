// Lab 07 reference, step 5: blocks per SM for the reductions, chosen by timing them (first local minimum). The
// choice is remembered between runs by the cg tool (tools/tuning_cache.h), not here.
#include <stdexcept>

#include "cg.h"
#include "labkit/labkit.h"
#include "labkit/timing.h"

namespace lab07 {

TuneResult tune_blocks_per_sm(int n) {
  if (n < 1) throw std::invalid_argument("lab07: tune_blocks_per_sm: n must be >= 1");
  TuneResult res;
  // The work being tuned: one dot product and one fused update, the two reductions of a CG iteration.
  labkit::DeviceBuffer<double> u(n), v(n), xs(n), rs(n), partials(kMaxPartials), out(1);
  labkit::fill_random_device(u.data(), n, 1);
  labkit::fill_random_device(v.data(), n, 2);
  labkit::fill_random_device(xs.data(), n, 3);
  labkit::fill_random_device(rs.data(), n, 4);
  labkit::TimingOptions topt;
  topt.warmup = 2;
  topt.min_repeats = 5;
  topt.max_repeats = 50;
  topt.budget_ms = 10;
  res.blocks_per_sm = kMaxBlocksPerSm;
  for (int bps = 1; bps <= kMaxBlocksPerSm; ++bps) {
    const double ms = labkit::time_gpu(
                          [&](int) {
                            dot_shuffle(n, u.data(), v.data(), partials.data(), out.data(), bps);
                            // alpha = 0: the same memory traffic as a real update, and x, r stay as they are.
                            update_xr(n, 0.0, u.data(), v.data(), xs.data(), rs.data(), partials.data(), out.data(),
                                      bps);
                          },
                          topt)
                          .median_ms;
    res.ms.push_back(ms);
    if (bps >= 2 && ms >= res.ms[bps - 2]) {  // first local minimum: the previous count
      res.blocks_per_sm = bps - 1;
      break;
    }
  }
  return res;
}

}  // namespace lab07
