// Lab 07 tuning harness (see tools/tuning/README.md): where one CG iteration of step 4 spends its time, on the
// speed gates' matrix (2D Poisson, 3163^2 = 10^7 rows). Each building block the loop calls is timed alone and set
// against the bytes it must move at memcpy bandwidth (the same floor the step4.speed gate uses), then the loop itself
// per iteration ((t(48) - t(16)) / 32, as the gate does) for several blocks per SM, and the part of an iteration
// that no kernel accounts for (the two scalar round trips to the host). Linked with the reference's steps 1-4.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cg.h"
#include "labkit/buffer.h"
#include "labkit/device.h"
#include "labkit/random.h"
#include "labkit/sparse.h"
#include "labkit/timing.h"

namespace {

// 3 warm-up runs, at least 15 timed repeats (at most 200), and 300 ms of timed runs once those are done
const labkit::TimingOptions kTiming{3, 15, 200, 300};

struct Row {
  std::string what;
  double ms, bytes;
};

void print(const Row& r, double bw_gbs) {
  if (r.bytes == 0) {  // no bytes to speak of: latency only
    std::printf("  %-44s %9.1f us\n", r.what.c_str(), r.ms * 1e3);
    return;
  }
  const double floor_ms = r.bytes / (bw_gbs * 1e6);
  std::printf("  %-44s %9.1f us  floor %8.1f us  fraction %.3f  (%6.0f GB/s)\n", r.what.c_str(), r.ms * 1e3, floor_ms * 1e3,
              floor_ms / r.ms, r.bytes / (r.ms * 1e6));
}

}  // namespace

int main(int argc, char** argv) {
  if (!labkit::has_device()) {
    std::printf("%s\n", labkit::no_device_reason().c_str());
    return 1;
  }
  const int side = argc > 1 ? std::atoi(argv[1]) : 3163;
  std::printf("lab07 tune on %s, Poisson %d^2\n", labkit::describe(labkit::device_info()).c_str(), side);
  const labkit::Csr H = labkit::poisson2d(side, side);
  const int n = H.rows;
  const double nnz = H.nnz();
  labkit::DeviceBuffer<int> rp(H.row_ptr), ci(H.col_idx);
  labkit::DeviceBuffer<double> va(H.values);
  const lab07::DeviceCsr A{H.rows, H.cols, H.nnz(), rp.data(), ci.data(), va.data()};
  labkit::DeviceBuffer<double> b(n), x(n), p(n), Ap(n), r(n), partials(lab07::kMaxPartials), scalar(1);
  for (auto* v : {&b, &x, &p, &Ap, &r}) labkit::fill_random_device(v->data(), std::size_t(n), 7);
  const double bw = labkit::memcpy_bandwidth_gbs();
  std::printf("memcpy bandwidth %.0f GB/s (one read + one write counted as two bytes moved)\n", bw);

  auto t = [&](const std::function<void()>& f) { return labkit::time_gpu([&](int) { f(); }, kTiming).median_ms; };
  const double spmv_bytes = 12.0 * nnz + 4.0 * (n + 1) + 16.0 * n;
  std::vector<Row> rows = {
      {"spmv_thread_per_row", t([&] { lab07::spmv_thread_per_row(A, p.data(), Ap.data()); }), spmv_bytes},
      {"spmv_warp_per_row", t([&] { lab07::spmv_warp_per_row(A, p.data(), Ap.data()); }), spmv_bytes},
      {"xpby (p = r + beta p)", t([&] { lab07::xpby(n, r.data(), 0.5, p.data()); }), 24.0 * n},
  };
  for (int bps : {1, 2, 4, 8, 16}) {
    const std::string per_sm = ", " + std::to_string(bps) + " blocks/SM";
    rows.push_back({"dot_shuffle (p^T Ap)" + per_sm,
                    t([&] { lab07::dot_shuffle(n, p.data(), Ap.data(), partials.data(), scalar.data(), bps); }),
                    16.0 * n});
    // alpha tiny so that x and r stay finite however often it runs
    rows.push_back({"update_xr" + per_sm, t([&] {
                      lab07::update_xr(n, 1e-300, p.data(), Ap.data(), x.data(), r.data(), partials.data(),
                                       scalar.data(), bps);
                    }),
                    48.0 * n});
  }
  // The scalar a step 4 iteration waits for twice: a one-element reduction, then its result on the host, either
  // copied into pageable memory or written by the kernel straight into mapped pinned memory.
  double* mapped = nullptr;
  LABKIT_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&mapped), sizeof(double), cudaHostAllocMapped));
  const double pageable_ms = t([&] {
    lab07::dot_shuffle(1, p.data(), Ap.data(), partials.data(), scalar.data(), 1);
    double h;
    LABKIT_CUDA(cudaMemcpy(&h, scalar.data(), sizeof h, cudaMemcpyDeviceToHost));
  });
  const double mapped_ms = t([&] {
    lab07::dot_shuffle(1, p.data(), Ap.data(), partials.data(), mapped, 1);
    LABKIT_CUDA(cudaStreamSynchronize(0));
  });
  LABKIT_CUDA(cudaFreeHost(mapped));
  rows.push_back({"1-element dot + cudaMemcpy to pageable memory", pageable_ms, 0.0});
  rows.push_back({"1-element dot into mapped pinned memory + sync", mapped_ms, 0.0});
  std::printf("building blocks (median of repeats):\n");
  for (const Row& row : rows) print(row, bw);

  const double floor_bytes = spmv_bytes + 16.0 * n + 48.0 * n + 24.0 * n;
  std::printf("step 4 loop, one iteration ((t(48) - t(16)) / 32); floor %.1f us:\n", floor_bytes / (bw * 1e3));
  for (int bps : {1, 2, 4, 8, 16}) {
    lab07::CgOptions o;
    o.rel_tol = 0;
    o.blocks_per_sm = bps;
    auto run = [&](int iters) {
      o.max_iter = iters;
      return t([&] { lab07::cg_solve(A, b.data(), x.data(), o); });
    };
    const double per = (run(48) - run(16)) / 32;
    print({"cg_solve iteration, " + std::to_string(bps) + " blocks/SM", per, floor_bytes}, bw);
  }
  std::printf("  (two scalars per iteration: %.1f us through pageable memory, %.1f us through mapped memory)\n",
              2 * pageable_ms * 1e3, 2 * mapped_ms * 1e3);
  return 0;
}
