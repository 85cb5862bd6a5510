// Lab 05 gates: the bodies of gate_util.h's helpers (running a step, the host twin of the device fill, the check
// of a saxpy result and of the untouched memory around it, the check of a norm).
#include "gate_util.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <sstream>
#include <utility>

#include "labkit/compare_device.h"
#include "labkit/launches.h"
#include "labkit/ref_saxpy.h"
#include "labkit/reference.h"

namespace lab05_gates {

labkit::CublasHandle& cublas() {
  static labkit::CublasHandle handle;  // created once per process: handle creation costs ~100 ms
  return handle;
}

void run(Saxpy s, std::size_t n, float a, const float* x, float* y) {
  switch (s) {
    case Saxpy::kernel: return lab05::saxpy_kernel(n, a, x, y);
    case Saxpy::functor: return lab05::saxpy_thrust_functor(n, a, x, y);
    case Saxpy::lambda: return lab05::saxpy_thrust_lambda(n, a, x, y);
    case Saxpy::cublas: return lab05::saxpy_cublas(cublas(), n, a, x, y);
  }
}

// A call the correctness gates and the untimed verification make: only the kernels the rubric's allow_libraries
// admits for the current gate may run (step 1: yours only; steps 2-3: Thrust; step 4: cuBLAS). Timed: run().
void run_checked(Saxpy s, std::size_t n, float a, const float* x, float* y) {
  labkit::gate::own_kernels(kStepName[int(s)], [&] { run(s, n, a, x, y); });
}

std::vector<float> host_random(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  labkit::parallel_for(n, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) v[i] = labkit::uniform_float(seed, i, -1.f, 1.f);
  });
  return v;
}

// A nonzero a with a random sign: a == 0 would let a library skip reading x (reference BLAS returns early), which
// changes what Inf/NaN in x produce; the lab's contract is the plain formula a*x + y.
float random_alpha(const std::string& label) {
  const std::uint64_t s = labkit::gate::seed(label);
  const float a = labkit::uniform_float(s, 0, 0.5f, 3.f);
  return (labkit::random_bits(s, 1) & 1) ? -a : a;
}

std::string size_str(std::size_t n) { return "n=" + std::to_string(n); }

namespace {

// The tolerance of a saxpy result as check_close wants it (relative to max|expected| over finite elements): twice
// the largest per-element rounding bound of labkit::saxpy_error_bound, which covers one fma (one rounding) and a
// product then a sum (two roundings) alike. Anything else (half precision, a wrong formula) is orders above it.
double saxpy_tolerance(float a, const std::vector<float>& x, const std::vector<float>& y0,
                       const std::vector<double>& expected) {
  double bound = 0, norm = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (!std::isfinite(expected[i])) continue;
    bound = std::max(bound, labkit::saxpy_error_bound(a, x[i], y0[i]));
    norm = std::max(norm, std::fabs(expected[i]));
  }
  return 2 * bound / (norm > 0 ? norm : 1.0);
}

// Wrong answers of common mistakes, named in the diagnosis when the output matches one.
void add_hypotheses(float a, const std::vector<float>& x, const std::vector<float>& y0, labkit::CheckOptions& opt) {
  std::vector<double> overwrite(x.size()), swapped(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    overwrite[i] = double(a) * x[i];
    swapped[i] = double(a) * y0[i] + x[i];
  }
  opt.hypotheses.push_back({"y was overwritten with a*x: the + y is missing", std::move(overwrite)});
  opt.hypotheses.push_back({"x and y are swapped: the result is a*y + x", std::move(swapped)});
}

}  // namespace

labkit::Verdict check_saxpy(const std::vector<float>& got, float a, const std::vector<float>& x,
                            const std::vector<float>& y0) {
  const std::size_t n = x.size();
  labkit::CheckOptions opt;
  opt.name = "y";
  if (n <= (std::size_t(1) << 20)) {
    const auto expected = labkit::saxpy_ref(a, x, y0);
    opt.tolerance = saxpy_tolerance(a, x, y0, expected);
    opt.initial = y0.data();
    if (n >= 8) add_hypotheses(a, x, y0, opt);
    return labkit::check_close(got, expected, opt);
  }
  std::mutex m;
  std::size_t wrong = 0, first = n;
  labkit::parallel_for(n, [&](std::size_t b, std::size_t e) {
    std::size_t w = 0, f = n;
    for (std::size_t i = b; i < e; ++i) {
      const double ex = double(a) * x[i] + double(y0[i]), g = got[i];
      const bool bad = std::isnan(ex) ? !std::isnan(g)
                       : std::isinf(ex) ? g != ex
                                        : !(std::fabs(g - ex) <= 2 * labkit::saxpy_error_bound(a, x[i], y0[i]));
      if (bad) w++, f = std::min(f, i);
    }
    std::lock_guard<std::mutex> lock(m);
    wrong += w;
    first = std::min(first, f);
  });
  if (!wrong) return labkit::Verdict{};
  const std::size_t lo = first >= 32 ? first - 32 : 0, hi = std::min(n, first + 4096);
  const std::vector<float> gx(x.begin() + lo, x.begin() + hi), gy(y0.begin() + lo, y0.begin() + hi),
      gg(got.begin() + lo, got.begin() + hi);
  const auto expected = labkit::saxpy_ref(a, gx, gy);
  opt.tolerance = saxpy_tolerance(a, gx, gy, expected);
  opt.initial = gy.data();
  labkit::Verdict v = labkit::check_close(gg, expected, opt);
  std::ostringstream os;
  os << "y is wrong at " << wrong << " of " << n << " elements, the first at y[" << first << "]; in the window y["
     << lo << ".." << hi << ") (indices below relative to " << lo << "):\n  " << v.message;
  v.ok = false;
  v.message = os.str();
  return v;
}

labkit::Verdict check_saxpy_device(const float* y, std::size_t n, float a, std::uint64_t sx, std::uint64_t sy) {
  // Up to 2^20 elements check_saxpy is a check_close with patterns and likely mistakes, a different rule: those
  // sizes are cheap on the host anyway.
  if (n > (std::size_t(1) << 20) && labkit::saxpy_scan_device(y, n, a, sx, sy).wrong == 0) return labkit::Verdict{};
  std::vector<float> got(n);
  if (n) LABKIT_CUDA(cudaMemcpy(got.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
  return check_saxpy(got, a, labkit::random_floats_via_device(n, sx), labkit::random_floats_via_device(n, sy));
}

void check_untouched(const SaxpyCase& c, const std::vector<float>& y_full, const std::string& ctx) {
  for (const auto* buf : {&c.dx, &c.dy}) {
    auto g = buf->check_guards();
    if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
  }
  if (!c.offx && !c.specials) {
    // x is exactly what fill_random_device wrote: compared with the generator on the device, the same verdict
    // without copying 2^24 floats back (n = 2^24 + 3).
    labkit::gate::require(labkit::check_unmodified_device(c.xd(), c.n, c.sx, "x"), ctx);
  } else {
    const auto xf = c.x_full();
    labkit::gate::require(labkit::check_unmodified(std::vector<float>(xf.begin() + c.offx, xf.end()), c.x, "x"),
                          ctx);
  }
  // The elements before the offset pointer belong to nobody: a kernel that rounds the pointer down to a 16-byte
  // boundary writes them.
  const auto fy = host_random(c.offy, c.sy);
  labkit::gate::require(labkit::check_unmodified(std::vector<float>(y_full.begin(), y_full.begin() + c.offy), fy,
                                                 "the elements before y (the pointer was not 16-byte aligned)"),
                        ctx);
}

std::vector<float> tail(const std::vector<float>& full, std::size_t off) {
  return std::vector<float>(full.begin() + off, full.end());
}

// The norm: any summation order of the n positive squares in float, with chains of up to a few thousand additions,
// errs by less than ~2^-12 relative on the sum (no cancellation among positive terms), 2^-13 on its square root.
// A single float accumulator over millions of terms stalls (each small term is lost against the large sum) and
// fails; double accumulation is ~2^-50.
constexpr double kNormTolerance = 0x1p-13;

labkit::Verdict check_norm(double got, double expected, const std::string& what) {
  labkit::CheckOptions opt;
  opt.name = what;
  opt.tolerance = kNormTolerance;
  return labkit::check_close(std::vector<double>{got}, std::vector<double>{expected}, opt);
}

}  // namespace lab05_gates
