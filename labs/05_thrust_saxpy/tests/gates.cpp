// Lab 05 correctness gates: every saxpy over sizes 0 (also with null pointers), 1, 2, 3, odd and prime sizes,
// misaligned pointers, 2^24+3, 2^32+4099 (check_huge), and an array seeded with +-Inf and NaN whose results must
// follow IEEE 754; fresh random inputs per run, guard bands around every array, inputs checked unmodified, a repeat
// run compared bit for bit; steps 5a and 5b's norm, step 6's interop and step 7's library calls. What the gate files
// share is in gate_util.h; the speed gates are in gates_speed.cpp.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gate_util.h"
#include "labkit/gate.h"
#include "labkit/guard.h"
#include "labkit/huge.h"
#include "labkit/launches.h"
#include "labkit/random.h"
#include "labkit/ref_saxpy.h"
#include "labkit/reference.h"
#include "labkit/report.h"
#include "saxpy.h"

using namespace lab05_gates;

namespace {

// One saxpy step on one case: value, IEEE specials, untouched memory, repeatability.
void check_saxpy_case(Saxpy step, SaxpyCase& c) {
  const std::string ctx = std::string(kStepName[int(step)]) + ", " + c.label + ", a=" + std::to_string(c.a);
  run_checked(step, c.n, c.a, c.xd(), c.yd());
  LABKIT_CUDA(cudaDeviceSynchronize());  // a fault inside the kernel surfaces here, attributed to this step
  const auto yf = c.y_full();
  check_untouched(c, yf, ctx);
  const auto out = tail(yf, c.offy);
  labkit::gate::require(check_saxpy(out, c.a, c.x, c.y0), ctx);
  c.reset_y();
  run_checked(step, c.n, c.a, c.xd(), c.yd());
  LABKIT_CUDA(cudaDeviceSynchronize());
  labkit::CheckOptions opt;
  opt.name = "y";
  labkit::gate::require(labkit::check_same_runs(out, tail(c.y_full(), c.offy), opt), ctx + " (second run)");
}

// n == 0 must be a no-op, with real pointers (nothing written: guards and contents intact) and with null ones.
void check_empty(Saxpy step) {
  SaxpyCase c(0, false);
  run_checked(step, 0, c.a, c.xd(), c.yd());
  run_checked(step, 0, c.a, nullptr, nullptr);
  LABKIT_CUDA(cudaDeviceSynchronize());
  check_untouched(c, c.y_full(), std::string(kStepName[int(step)]) + ", n=0");
}

// n past 2^32 (the contract's size_t n; README: "n may exceed 2^31"): an index or count kept in 32 bits wraps
// there (an `int` grid-stride index, cuBLAS's int n passed unsplit), so the last elements are never written or a
// store lands before y. No 17 GB of memory: x and y are labkit::HugeDeviceArray ranges whose first 16 GiB repeat
// one 16 MiB chunk and whose last 2 MiB (from element 2^32 on: the last 4099 elements of y and what follows them)
// have memory of their own; only that tail is checked. The step moves about 50 GB through the L2 in milliseconds;
// mapping the two ranges (1024 chunks each) is most of the case's time. Not under a sanitizer (2^32 elements).
constexpr std::size_t kHuge = (std::size_t(1) << 32) + 4099;

void check_huge(Saxpy step) {
  const std::string ctx = std::string(kStepName[int(step)]) + ", n=" + std::to_string(kHuge) + " (past 2^32)";
  if (labkit::gate::huge_case_left_out(ctx)) return;
  labkit::HugeDeviceArray x(kHuge * sizeof(float), 1 << 21), y(kHuge * sizeof(float), 1 << 21);
  const std::size_t chunk = x.chunk_bytes() / sizeof(float), first = x.tail_offset() / sizeof(float);
  const std::size_t tail = x.tail_bytes() / sizeof(float);  // elements from `first` on: up to n, then past it
  const auto x_tail = host_random(tail, labkit::gate::seed("huge x tail"));
  const auto y_tail = host_random(tail, labkit::gate::seed("huge y tail"));
  x.fill_chunk(host_random(chunk, labkit::gate::seed("huge x chunk")));
  y.fill_chunk(host_random(chunk, labkit::gate::seed("huge y chunk")));
  x.fill_tail(x_tail);
  y.fill_tail(y_tail);
  const float a = random_alpha("a huge");
  run_checked(step, kHuge, a, static_cast<const float*>(x.data()), static_cast<float*>(y.data()));
  LABKIT_CUDA(cudaDeviceSynchronize());
  const auto got = y.read_tail<float>();
  labkit::gate::require(labkit::check_unmodified(x.read_tail<float>(), x_tail, "x (its last elements)"), ctx);
  const std::size_t in_range = kHuge - first;  // tail elements below n
  const std::vector<float> mine(got.begin(), got.begin() + in_range);
  const labkit::Verdict v = check_saxpy(mine, a, std::vector<float>(x_tail.begin(), x_tail.begin() + in_range),
                                        std::vector<float>(y_tail.begin(), y_tail.begin() + in_range));
  if (!v.ok)
    FAIL(ctx << ": the last " << in_range << " elements of y (y[" << first << "] on, past 2^32) are wrong; an index, "
             << "size or count kept in 32 bits wraps before them (size_t n: use size_t for i and the stride; "
             << "cuBLAS takes an int n: split larger n into chunks). Indices below are relative to y[" << first
             << "].\n  " << v.message);
  labkit::gate::require(labkit::check_unmodified(std::vector<float>(got.begin() + in_range, got.end()),
                                                 std::vector<float>(y_tail.begin() + in_range, y_tail.end()),
                                                 "the memory after y[n-1] (written past the end of y)"),
                        ctx);
}

void check_saxpy_step(Saxpy step) {
  check_empty(step);
  check_huge(step);
  labkit::gate::SanitizerCap cap(kSanitizerCap, "elements");
  for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(5), std::size_t(31),
                        std::size_t(33), std::size_t(1000), std::size_t(4099), std::size_t(65537),
                        (std::size_t(1) << 20), kLarge}) {
    if (cap.skips(double(n), "n=" + std::to_string(n))) continue;
    SaxpyCase c(n, false);
    check_saxpy_case(step, c);
  }
  {
    SaxpyCase c(1001, true);  // IEEE: Inf, NaN, Inf - Inf, signed zero
    check_saxpy_case(step, c);
  }
  const std::vector<std::pair<std::size_t, std::size_t>> offsets = {{1, 1}, {0, 3}, {2, 0}};
  for (auto [ox, oy] : offsets) {
    SaxpyCase c(4099, false, ox, oy);  // pointers off a 16-byte boundary: float4 loads there would fault
    check_saxpy_case(step, c);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Step 5: saxpy + norm, 5a unfused (two passes), 5b fused (one pass).
using NormFn = double (*)(std::size_t, float, const float*, float*);

void check_norm_case(NormFn fn, const char* name, SaxpyCase& c) {
  const std::string ctx = std::string(name) + ", " + c.label;
  double norm = 0;
  labkit::gate::own_kernels(ctx, [&] { norm = fn(c.n, c.a, c.xd(), c.yd()); });  // Thrust allowed, not cuBLAS
  LABKIT_CUDA(cudaDeviceSynchronize());
  const auto yf = c.y_full();
  check_untouched(c, yf, ctx);
  const auto out = tail(yf, c.offy);
  labkit::gate::require(check_saxpy(out, c.a, c.x, c.y0), ctx);
  const double expected = labkit::norm2_ref(labkit::saxpy_ref(c.a, c.x, c.y0));
  labkit::gate::require(check_norm(norm, expected, "||y||_2 (of the new y)"), ctx);
  c.reset_y();
  const double again = fn(c.n, c.a, c.xd(), c.yd());
  LABKIT_CUDA(cudaDeviceSynchronize());
  labkit::CheckOptions opt;
  opt.name = "y";
  labkit::gate::require(labkit::check_same_runs(out, tail(c.y_full(), c.offy), opt), ctx + " (second run)");
  labkit::gate::require(check_norm(again, expected, "||y||_2 in a second run"), ctx);
}

// Every x and y times 2^exponent (exact in float, so the host reference scales exactly): a square taken in float
// overflows to Inf above about 1.8e19 and vanishes below about 1e-23, where the double norm is finite and nonzero.
void check_norm_scaled(NormFn fn, const char* name, int exponent) {
  const std::size_t n = 1001;
  const std::string label = "n=1001, x and y times 2^" + std::to_string(exponent);
  const std::string ctx = std::string(name) + ", " + label;
  std::vector<float> x = host_random(n, labkit::gate::seed("x " + label));
  std::vector<float> y0 = host_random(n, labkit::gate::seed("y " + label));
  for (float& v : x) v = std::ldexp(v, exponent);
  for (float& v : y0) v = std::ldexp(v, exponent);
  const float a = random_alpha("a " + label);
  labkit::GuardedBuffer<float> dx(n, "x"), dy(n, "y");
  dx.upload(x);
  dy.upload(y0);
  double norm = 0;
  labkit::gate::own_kernels(ctx, [&] { norm = fn(n, a, dx.data(), dy.data()); });
  LABKIT_CUDA(cudaDeviceSynchronize());
  for (const auto* buf : {&dx, &dy}) {
    auto g = buf->check_guards();
    if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
  }
  labkit::gate::require(check_saxpy(dy.download(), a, x, y0), ctx);
  const double expected = labkit::norm2_ref(labkit::saxpy_ref(a, x, y0));
  labkit::gate::require(check_norm(norm, expected,
                                   "||y||_2 of values near 2^" + std::to_string(exponent) +
                                       " (square each v as a double: a float square " +
                                       (exponent > 0 ? "overflows to Inf" : "vanishes") + " here)"),
                        ctx);
}

// The correctness cases of either version: n = 0 (also with null pointers), small and odd sizes, a NaN, an Inf,
// values whose float squares overflow or vanish.
void check_norm_step(NormFn fn, const char* name) {
  {
    SaxpyCase c(0, false);
    const double r0 = fn(0, c.a, c.xd(), c.yd()), r1 = fn(0, c.a, nullptr, nullptr);
    LABKIT_CUDA(cudaDeviceSynchronize());
    if (r0 != 0.0 || r1 != 0.0)
      FAIL(name << ", n=0: the norm of an empty y is 0, got " << r0 << " and " << r1);
    check_untouched(c, c.y_full(), std::string(name) + ", n=0");
  }
  labkit::gate::SanitizerCap cap(kSanitizerCap, "elements");
  for (std::size_t n : {std::size_t(1), std::size_t(3), std::size_t(1001), std::size_t(65537), kLarge}) {
    if (cap.skips(double(n), "n=" + std::to_string(n))) continue;
    SaxpyCase c(n, false);
    check_norm_case(fn, name, c);
  }
  // Pointers off cudaMalloc's alignment, as steps 1-4 get them: a float4 path needs its fallback (x and y 16-byte
  // aligned, or the plain loop), like the saxpy steps'.
  for (auto [offx, offy] : {std::pair<std::size_t, std::size_t>{1, 3}, {2, 2}}) {
    SaxpyCase off(65537, false, offx, offy);
    check_norm_case(fn, name, off);
  }
  // `count` elements of y from `from` on 1000 times larger, so that they are most of the norm: leaving any of them
  // out is off by far more than the tolerance, where with values all alike it was off by about 2^-16.
  auto heavy = [&](SaxpyCase& c, std::size_t from, std::size_t count, const std::string& what) {
    std::vector<float> y0 = c.y0;
    for (std::size_t i = from; i < from + count; ++i) y0[i] *= 1000.f;
    LABKIT_CUDA(cudaMemcpy(c.yd() + from, &y0[from], count * sizeof(float), cudaMemcpyHostToDevice));
    LABKIT_CUDA(cudaStreamSynchronize(0));  // landed before a step on any stream reads it
    const double norm = fn(c.n, c.a, c.xd(), c.yd());
    LABKIT_CUDA(cudaDeviceSynchronize());
    labkit::gate::require(check_norm(norm, labkit::norm2_ref(labkit::saxpy_ref(c.a, c.x, y0)), "||y||_2 with " + what),
                          std::string(name) + ", n=" + std::to_string(c.n));
  };
  // The end: a reduction that leaves out elements there (a grid clamped to 65535 blocks with no stride loop misses
  // the last few hundred of 2^24 + 3).
  if (!cap.skips(double(kLarge), "n=" + std::to_string(kLarge) + " with a heavy tail")) {
    SaxpyCase tail(kLarge, false);
    heavy(tail, tail.n - 1024, 1024, "the last 1024 elements of y 1000 times larger");
  }
  // The start, on pointers 2 floats past a 16-byte boundary: a float4 path that updates the 2 elements before y's
  // first boundary on their own and forgets their squares (about 2 of 65537 when values are alike).
  {
    SaxpyCase head(65537, false, 2, 2);
    heavy(head, 0, 8, "the first 8 elements of y 1000 times larger, x and y 2 floats off 16-byte alignment");
  }
  SaxpyCase special(1001, true);  // a NaN in the new y makes the norm NaN (IEEE: NaN propagates through + and sqrt)
  check_norm_case(fn, name, special);
  SaxpyCase inf_only(1001, false);  // only an Inf: the norm is +Inf
  {
    std::vector<float> y0 = inf_only.y0;
    y0[500] = -kInf;
    LABKIT_CUDA(cudaMemcpy(inf_only.yd() + 500, &y0[500], sizeof(float), cudaMemcpyHostToDevice));
    LABKIT_CUDA(cudaStreamSynchronize(0));  // landed before a step on any stream reads it
    const double norm = fn(inf_only.n, inf_only.a, inf_only.xd(), inf_only.yd());
    LABKIT_CUDA(cudaDeviceSynchronize());
    labkit::gate::require(check_norm(norm, labkit::norm2_ref(labkit::saxpy_ref(inf_only.a, inf_only.x, y0)),
                                     "||y||_2 with one -Inf in y"),
                          std::string(name) + ", n=1001");
  }
  check_norm_scaled(fn, name, 70);
  check_norm_scaled(fn, name, -80);
}

// ---------------------------------------------------------------------------------------------------------
// Step 6b / 7: arrays with planted values.
std::vector<float> with_nonfinite(std::size_t n, std::uint64_t seed, std::size_t* count) {
  std::vector<float> v = host_random(n, seed);
  // Finite extremes that a wrong test calls non-finite, and every kind of non-finite value.
  const float planted[] = {kInf, -kInf, kNaN, -kNaN, std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(), -0.0f};
  const std::size_t k = n < 16 ? n : std::min<std::size_t>(n / 8, 4096);
  for (std::size_t r = 0; r < k; ++r) {
    const std::size_t pos = r == 0 ? n - 1 : labkit::random_bits(seed ^ 0x5eed, r) % n;
    v[pos] = planted[r % 8];
  }
  std::size_t c = 0;
  for (float f : v) c += !std::isfinite(f);
  *count = c;
  return v;
}

}  // namespace

TEST_CASE("cpu.reference", "[lab05][cpu]") {
  // The CPU references every gate trusts, on values small enough to check by hand, IEEE cases included.
  const std::vector<float> x{1, -2, kInf, kInf, 0.5f}, y{3, 1, 1, -kInf, kNaN};
  const auto r = labkit::saxpy_ref(2.f, x, y);
  REQUIRE(r.size() == 5);
  CHECK(r[0] == 5.0);
  CHECK(r[1] == -3.0);
  CHECK(std::isinf(r[2]));
  CHECK(r[2] > 0);
  CHECK(std::isnan(r[3]));
  CHECK(std::isnan(r[4]));
  CHECK(labkit::norm2_ref(labkit::saxpy_ref(1.f, {3.f}, {1.f})) == 4.0);
  CHECK(labkit::norm2_ref(std::vector<float>{3.f, -4.f}) == 5.0);
  CHECK(labkit::sum_ref(std::vector<float>{1.5f, -0.5f, 2.f}) == 3.0);
}

TEST_CASE("step1.correct", "[lab05][step1][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_saxpy_step(Saxpy::kernel);
}
TEST_CASE("step2.correct", "[lab05][step2][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_saxpy_step(Saxpy::functor);
}
TEST_CASE("step3.correct", "[lab05][step3][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_saxpy_step(Saxpy::lambda);
}
TEST_CASE("step4.correct", "[lab05][step4][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_saxpy_step(Saxpy::cublas);
}

TEST_CASE("step5a.correct", "[lab05][step5a][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_norm_step(lab05::saxpy_norm_unfused, "step 5a (unfused)");
}

TEST_CASE("step5b.correct", "[lab05][step5b][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_norm_step(lab05::saxpy_norm_fused, "step 5b (fused)");
}

TEST_CASE("step6.correct", "[lab05][step6][correctness]") {
  LABKIT_REQUIRE_GPU();
  labkit::gate::SanitizerCap cap(kSanitizerCap, "elements");
  // (a) host vectors through thrust::device_vector and your kernel.
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(1001), std::size_t(65537), kLarge}) {
    if (cap.skips(double(n), "device_vector n=" + std::to_string(n))) continue;
    for (bool specials : {false, true}) {
      if (specials && n != 1001) continue;
      SaxpyCase c(n, specials);  // only its host arrays are used
      std::vector<float> y = c.y0;
      const std::string ctx = "step 6 (saxpy_device_vector), " + c.label;
      labkit::gate::own_kernels(ctx, [&] { lab05::saxpy_device_vector(c.a, c.x, y); });
      LABKIT_CUDA(cudaDeviceSynchronize());
      labkit::gate::require(check_saxpy(y, c.a, c.x, c.y0), ctx);
      std::vector<float> again = c.y0;
      lab05::saxpy_device_vector(c.a, c.x, again);
      labkit::CheckOptions opt;
      opt.name = "y";
      labkit::gate::require(labkit::check_same_runs(y, again, opt), ctx + " (second run)");
    }
  }
  {
    std::vector<float> x(5, 1.f), y(4, 1.f);
    bool threw = false;
    try {
      lab05::saxpy_device_vector(2.f, x, y);
    } catch (const std::invalid_argument&) {
      threw = true;
    }
    if (!threw) FAIL("step 6 (saxpy_device_vector): x of 5 and y of 4 elements must throw std::invalid_argument");
  }
  // (b) a raw cudaMalloc buffer through thrust::device_ptr.
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(9), std::size_t(1001), kLarge}) {
    if (cap.skips(double(n), "count_nonfinite n=" + std::to_string(n))) continue;
    const std::string ctx = "step 6 (count_nonfinite), " + size_str(n);
    std::size_t expected = 0;
    const auto v = with_nonfinite(n, labkit::gate::seed("nonfinite " + size_str(n)), &expected);
    labkit::GuardedBuffer<float> d(n, "x");
    d.upload(v);
    std::size_t got = 0;
    labkit::gate::own_kernels(ctx, [&] { got = lab05::count_nonfinite(d.data(), n); });
    LABKIT_CUDA(cudaDeviceSynchronize());
    auto g = d.check_guards();
    if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
    labkit::gate::require(labkit::check_unmodified(d.download(), v, "x"), ctx);
    if (got != expected)
      FAIL(ctx << ": counted " << got << " non-finite values, expected " << expected << " (the array holds +-Inf, "
               << "NaN and -NaN, and the finite extremes +-FLT_MAX, the smallest denormal and -0, which must not "
               << "count)\n  " << labkit::gate::reproduce_hint());
  }
  CHECK(lab05::count_nonfinite(nullptr, 0) == 0);
}

TEST_CASE("step7.correct", "[lab05][step7][correctness]") {
  LABKIT_REQUIRE_GPU();
  labkit::gate::SanitizerCap cap(kSanitizerCap, "elements");
  // (a) the device fill equals the host generator bit for bit.
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(1001), kLarge}) {
    if (cap.skips(double(n), "fill_uniform n=" + std::to_string(n))) continue;
    const std::string ctx = "step 7 (fill_uniform), " + size_str(n);
    const std::uint64_t seed = labkit::gate::seed("fill " + size_str(n));
    const float lo = -3.5f, hi = 7.25f;
    labkit::GuardedBuffer<float> out(n, "out");
    out.poison();
    labkit::gate::own_kernels(ctx, [&] { lab05::fill_uniform(out.data(), n, seed, lo, hi); });
    LABKIT_CUDA(cudaDeviceSynchronize());
    auto g = out.check_guards();
    if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
    labkit::CheckOptions opt;
    opt.name = "out";
    labkit::gate::require(labkit::check_equal(out.download(), labkit::random_floats(n, seed, lo, hi), opt),
                          ctx + " (element i must be labkit::uniform_float(seed, i, lo, hi), bit for bit)");
  }
  // ... and past 2^32 elements (check_huge's HugeDeviceArray): element i is drawn from i as a 64-bit number, so an
  // index kept in int (a counting_iterator<int>, an int functor argument) wraps and repeats the first values there.
  if (const std::string ctx = "step 7 (fill_uniform), n=" + std::to_string(kHuge) + " (past 2^32)";
      !labkit::gate::huge_case_left_out(ctx)) {
    const std::uint64_t seed = labkit::gate::seed("fill huge");
    const float lo = -3.5f, hi = 7.25f;
    labkit::HugeDeviceArray out(kHuge * sizeof(float), 1 << 21);
    const std::size_t first = out.tail_offset() / sizeof(float), tail = out.tail_bytes() / sizeof(float);
    const std::vector<float> before = host_random(tail, labkit::gate::seed("fill huge tail"));
    out.fill_tail(before);
    labkit::gate::own_kernels(ctx, [&] { lab05::fill_uniform(static_cast<float*>(out.data()), kHuge, seed, lo, hi); });
    LABKIT_CUDA(cudaDeviceSynchronize());
    const auto got = out.read_tail<float>();
    for (std::size_t k = 0; k < tail; ++k) {
      const std::size_t i = first + k;
      const float want = i < kHuge ? labkit::uniform_float(seed, i, lo, hi) : before[k];
      if (std::memcmp(&got[k], &want, sizeof want) != 0)
        FAIL(ctx << ": out[" << i << "] = " << got[k] << ", "
                 << (i < kHuge ? "expected labkit::uniform_float(seed, " + std::to_string(i) + ", lo, hi) = " +
                                     std::to_string(want) + ": an index kept in 32 bits (a counting_iterator<int>, "
                                     "an int argument of the functor) wraps past 2^31; use std::size_t or int64_t"
                               : std::string("past the end of out (written beyond n)"))
                 << "\n  " << labkit::gate::reproduce_hint());
    }
  }
  CHECK_NOTHROW(lab05::fill_uniform(nullptr, 0, 1, 0.f, 1.f));
  // (b) the round trip. Values in [-1000, 1000) with runs of duplicates; the sorted result must equal std::sort's.
  double largest_ms[4] = {0, 0, 0, 0};
  std::size_t largest_n = 0;
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(1001), (std::size_t(1) << 22) + 1}) {
    if (cap.skips(double(n), "sort_and_sum n=" + std::to_string(n))) continue;
    const std::string ctx = "step 7 (sort_and_sum), " + size_str(n);
    const std::uint64_t seed = labkit::gate::seed("sort " + size_str(n));
    std::vector<float> data = labkit::random_floats(n, seed, -1000.f, 1000.f);
    for (std::size_t i = 1; i < n; i += 7) data[i] = data[i - 1];  // duplicates
    std::vector<float> sorted = data;
    std::sort(sorted.begin(), sorted.end());
    const double sum = labkit::sum_ref(data), sum_abs = labkit::sum_abs_ref(data);
    const auto t0 = std::chrono::steady_clock::now();
    lab05::SortSumReport r;
    labkit::gate::own_kernels(ctx, [&] { r = lab05::sort_and_sum(data); });  // Thrust's kernels only (rubric)
    LABKIT_CUDA(cudaDeviceSynchronize());
    const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    labkit::CheckOptions opt;
    opt.name = "data";
    labkit::gate::require(labkit::check_equal(data, sorted, opt), ctx + " (ascending order, every element kept)");
    // The sum: accumulated in double, any order errs by at most n * 2^-53 * sum|x| (2^-31 relative to sum|x| at
    // n = 2^22); 2^-30 allows that. A float accumulator (2^-24 per addition) typically misses it.
    labkit::CheckOptions sopt;
    sopt.name = "sum";
    sopt.tolerance = 0x1p-30 * sum_abs / (std::fabs(sum) > 0 ? std::fabs(sum) : 1.0);
    labkit::gate::require(labkit::check_close(std::vector<double>{r.sum}, std::vector<double>{sum}, sopt),
                          ctx + " (accumulate in double: thrust::reduce with init 0.0 and thrust::plus<double>)");
    const double phases[4] = {r.h2d_ms, r.sort_ms, r.reduce_ms, r.d2h_ms};
    const char* names[4] = {"h2d_ms", "sort_ms", "reduce_ms", "d2h_ms"};
    double total = 0;
    for (int p = 0; p < 4; ++p) {
      // Tiny arrays may take less than the events' resolution (~0.5 us); 16 MB cannot.
      if (!std::isfinite(phases[p]) || phases[p] < 0 || (n >= (std::size_t(1) << 20) && phases[p] <= 0))
        FAIL(ctx << ": " << names[p] << " = " << phases[p] << "; each phase must be timed with its own pair of "
                 << "CUDA events around it (> 0 ms for a 16 MB array)");
      total += phases[p];
    }
    if (total > wall_ms + 1.0)
      FAIL(ctx << ": the phases add up to " << total << " ms but the whole call took " << wall_ms
               << " ms: the event pairs overlap or are read in the wrong units");
    if (n > largest_n) {
      largest_n = n;
      std::copy(phases, phases + 4, largest_ms);
    }
  }
  if (largest_n < (std::size_t(1) << 20)) return;  // under a sanitizer: the large sort was left out, no rates
  const double mb = largest_n * sizeof(float) / 1e6;
  labkit::report::metric("h2d_gbs", mb / largest_ms[0] / 1e3, "GB/s");
  labkit::report::metric("sort_mkeys_s", largest_n / 1e6 / (largest_ms[1] * 1e-3), "Mkeys/s");
  labkit::report::metric("reduce_gbs", mb / largest_ms[2] / 1e3, "GB/s");
  labkit::report::metric("d2h_gbs", mb / largest_ms[3] / 1e3, "GB/s");
}
