// The trusted one-GPU CG iteration of lab 08's speed gates and bench: lab 07's reference kernels (thread-per-row
// SpMV, two-pass dot product, fused x/r update with r^T r, p update) with host scalars, compiled into the gate so
// that nothing the student writes runs in it.
#pragma once
#include <memory>
#include <vector>

#include "labkit/sparse.h"

namespace lab08_baseline {

class OneGpuCg {
 public:
  // Uploads A to the current device and allocates the work vectors.
  explicit OneGpuCg(const labkit::Csr& A);
  ~OneGpuCg();
  OneGpuCg(const OneGpuCg&) = delete;
  OneGpuCg& operator=(const OneGpuCg&) = delete;
  // Exactly `iters` CG iterations from x0 = 0 on the device copy of b (set_b); returns when done.
  void run(int iters);
  void set_b(const std::vector<double>& b);
  std::vector<double> x() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lab08_baseline
