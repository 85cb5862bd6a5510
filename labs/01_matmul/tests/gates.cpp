// Lab 01 gates. Correctness: every step over shapes from 1x1x1 to 2048^3 (primes, non-multiples of every tile
// size, 1xN and Mx1, M,N >> K), fresh random inputs per run, guard bands around every array, C checked for
// never-written elements and for run-to-run differences, and shapes whose A, B or C pointer is not 16-byte aligned
// (rows that suit 16-byte loads, so that a float4 path without an alignment check faults or reads the wrong
// elements); the shapes whose product the CPU computes in full run in one batch per step (shapes_batch_failure), each
// on its own buffers when anything is wrong. Speed: every step against the gate's own cuBLAS call (tests/cublas_baseline.h), fresh inputs and a
// cold L2 per timed call, the output of a timed call the gate's secret picks and of the last verified
// (labkit::compare_speed with a TimedCase).
#include <catch2/catch_test_macros.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cublas_baseline.h"
#include "labkit/compare_device.h"
#include "labkit/cublas.h"
#include "labkit/gate.h"
#include "labkit/guard.h"
#include "labkit/huge.h"
#include "labkit/launches.h"
#include "labkit/random.h"
#include "labkit/reference.h"
#include "labkit/report.h"
#include "matmul.h"

namespace {

enum class Step {
  cublas = 0, naive_col, naive_row, tiled, regblock,
  transposed_a, conflict_free, vector_loads, double_buffer, launch_bounds, tuned, async_pipeline
};
const char* const kStepName[] = {"step 0 (cuBLAS)",
                                 "step 1 (naive, column walk)",
                                 "step 2 (naive, row walk)",
                                 "step 3 (shared-memory tiles)",
                                 "step 4 (register blocking)",
                                 "step 5a (transposed A tile)",
                                 "step 5b (conflict-free layout)",
                                 "step 5c (16-byte global loads)",
                                 "step 5d (double buffering)",
                                 "step 5e (launch bounds, 16-deep tiles)",
                                 "step 5f (grouped block order)",
                                 "step 6 (asynchronous-copy pipeline)"};

// The handle the student's step 0 is handed. Never the baseline's: a step can change its handle's stream, math mode,
// workspace or SM-count target, which would slow the baseline every speed gate is timed against.
labkit::CublasHandle& cublas() {
  static labkit::CublasHandle handle;  // created once per process: handle creation costs ~100 ms
  return handle;
}
labkit::CublasHandle& gate_blas() {
  static labkit::CublasHandle handle;
  return handle;
}

void run(Step s, int M, int N, int K, const float* A, const float* B, float* C) {
  switch (s) {
    case Step::cublas: return lab01::matmul_cublas(cublas(), M, N, K, A, B, C);
    case Step::naive_col: return lab01::matmul_naive_col(M, N, K, A, B, C);
    case Step::naive_row: return lab01::matmul_naive_row(M, N, K, A, B, C);
    case Step::tiled: return lab01::matmul_tiled(M, N, K, A, B, C);
    case Step::regblock: return lab01::matmul_regblock(M, N, K, A, B, C);
    case Step::transposed_a: return lab01::matmul_transposed_a(M, N, K, A, B, C);
    case Step::conflict_free: return lab01::matmul_conflict_free(M, N, K, A, B, C);
    case Step::vector_loads: return lab01::matmul_vector_loads(M, N, K, A, B, C);
    case Step::double_buffer: return lab01::matmul_double_buffer(M, N, K, A, B, C);
    case Step::launch_bounds: return lab01::matmul_launch_bounds(M, N, K, A, B, C);
    case Step::tuned: return lab01::matmul_tuned(M, N, K, A, B, C);
    case Step::async_pipeline: return lab01::matmul_async_pipeline(M, N, K, A, B, C);
  }
}

// The product the gates trust for large outputs and time every step against (tests/cublas_baseline.h).
void reference_sgemm(int M, int N, int K, const float* A, const float* B, float* C) {
  lab01::baseline::sgemm_rowmajor(gate_blas(), M, N, K, A, B, C);
}

// Tolerance. An fp32 dot product of K random terms accumulates rounding errors that grow like sqrt(K)*u
// (u = 2^-24) relative to the size of its terms, whatever the summation order; 16*sqrt(K+1)*u leaves a wide
// margin for any correct order. TF32 (10-bit mantissa, u = 2^-11) lands near 1e-4 and fails at every K.
// "The size of its terms" is max |C0| + |A||B| (labkit::matmul_abs_max, CheckOptions::scale), not ||C||: with few
// output elements C0 + A*B can cancel (at 1x1x1, |c0 + a*b| ~ 0.003 with |a*b| ~ 0.7 for about one seed in a
// hundred), and measured against the cancelled sum the rounding of a correct product looked like an error.
double tolerance(int K) { return 16.0 * std::sqrt(double(K) + 1.0) * 0x1p-24; }

struct Shape {
  int M, N, K;
};
std::string str(const Shape& s) {
  std::ostringstream os;
  os << "M=" << s.M << " N=" << s.N << " K=" << s.K;
  return os.str();
}

const std::vector<Shape> kShapes = {
    {1, 1, 1},        {2, 3, 5},         {7, 13, 17},       {31, 37, 41},      {33, 65, 129},
    {64, 64, 64},     {127, 131, 137},   {1, 300, 7},       {300, 1, 9},       {5, 7, 1000},
    {1000, 1100, 32}, {1037, 999, 64},   {513, 1027, 128},  {1024, 1024, 156}, {2048, 2048, 2048},
};
constexpr double kFullReferenceLimit = double(1 << 28);  // multiply-adds; above it: sampled + vs cuBLAS
bool full_reference(const Shape& s) { return double(s.M) * s.N * s.K <= kFullReferenceLimit; }
// Under compute-sanitizer (labkit::gate::under_sanitizer) the shapes above 2^26 multiply-adds are left out: a
// 2048^3 tiled product takes many minutes under racecheck. What stays still has every kind: 1, primes, every
// non-multiple, 1xN and Mx1, long K (5x7x1000), and M,N >> K with many blocks and edge tiles (1000x1100x32, whose
// rows suit 16-byte loads, and 1037x999x64, more than 8 blocks of 128 rows).
constexpr double kSanitizerCap = double(1 << 26);
// racecheck in the grader's default checks: 2^19 multiply-adds. Its cost is per shared-memory access (about a
// million a second), and a race is between the threads of one block, so what matters is that every barrier of a
// block runs with full and partial tiles: K over several tiles (33x65x129, 5x7x1000), full 64x64 tiles, edges and
// the misaligned pointers (68x132x36) stay; 127x131x137 and 260x264x300 (which were most of the two minutes
// racecheck took over lab 01) are left to memcheck and `labgrade --sanitize`.
constexpr double kRaceCap = double(1 << 19);
// Of the shapes under that cap, racecheck keeps the ones that differ in what a block's barriers see, and leaves the
// rest to memcheck (SanitizerCap::skips with race_checked): measured on an H100 (LABKIT_GATE_TRACE), a shape costs
// about 0.1 s under racecheck however small (a dozen instrumented launches and copies), and 5x7x1000 with its 125 tiles
// of K in one block 0.7 s, a third of each step's two seconds. The shapes kept: 33x65x129 (partial tiles in M, N and K,
// with K over many tiles: a barrier missing at either end of the k loop shows), 64x64x64 (full tiles, the aligned
// 16-byte paths), 1x300x7 (one row over three blocks, B's rows suit 16-byte loads but the tiles are partial) and the
// misaligned 68x132x36 with all three pointers off.
bool race_checked(const Shape& s) {
  return (s.M == 33 && s.N == 65 && s.K == 129) || (s.M == 64 && s.N == 64 && s.K == 64) ||
         (s.M == 1 && s.N == 300 && s.K == 7);
}

// Where the step's pointers start: this many floats past the (256-byte aligned) start of each allocation. 1, 2 or
// 3 put a pointer off every 16-byte boundary; the elements before it belong to nobody and must stay as they are.
struct Offsets {
  int a = 0, b = 0, c = 0;
  bool any() const { return a || b || c; }
};
std::string str(const Shape& s, const Offsets& o) {
  if (!o.any()) return str(s);
  return str(s) + " (pointers " + std::to_string(4 * o.a) + ", " + std::to_string(4 * o.b) + " and " +
         std::to_string(4 * o.c) + " bytes past a 16-byte boundary for A, B and C)";
}

// The allocation of one matrix: `off` random floats, then the matrix; `at` is what the step sees.
std::vector<float> with_prefix(std::size_t n, int off, const std::string& label) {
  return labkit::random_floats(off + n, labkit::gate::seed(label));
}
std::vector<float> tail(const std::vector<float>& v, int off) { return std::vector<float>(v.begin() + off, v.end()); }

// A shape's inputs on the host: what the one-shape check (Inputs) and the batch of shapes (shapes_batch_failure)
// upload, the same values for both.
struct HostInputs {
  Shape s;
  Offsets off;
  std::vector<float> A_all, B_all, C_all;  // the whole allocations (offset elements first)
  std::vector<float> A, B, C0;             // the matrices the step sees
  // max |C0| + |A||B| for the full-reference shapes (the checks' CheckOptions::scale), 0 above them: large outputs
  // have so many elements that their largest cannot all cancel. Computed once: a shape is checked twice.
  double scale;
  explicit HostInputs(Shape sh, Offsets o = {})
      : s(sh),
        off(o),
        A_all(with_prefix(std::size_t(sh.M) * sh.K, o.a, "A " + str(sh, o))),
        B_all(with_prefix(std::size_t(sh.K) * sh.N, o.b, "B " + str(sh, o))),
        C_all(with_prefix(std::size_t(sh.M) * sh.N, o.c, "C " + str(sh, o))),
        A(tail(A_all, o.a)),
        B(tail(B_all, o.b)),
        C0(tail(C_all, o.c)),
        scale(full_reference(sh) ? labkit::matmul_abs_max(sh.M, sh.N, sh.K, A, B, C0) : 0.0) {}
};

struct Inputs : HostInputs {
  labkit::GuardedBuffer<float> dA, dB, dC;
  std::vector<float> last_C_all;  // the whole of C's allocation after the last run_step
  explicit Inputs(Shape sh, Offsets o = {})
      : HostInputs(sh, o),
        dA(A_all.size(), "A"),
        dB(B_all.size(), "B"),
        dC(C_all.size(), "C") {
    if (!o.any()) {  // an out-of-bounds write is then located in rows, not only elements
      dA.set_row_length(sh.K);
      dB.set_row_length(sh.N);
      dC.set_row_length(sh.N);
    }
    dA.upload(A_all);
    dB.upload(B_all);
    dC.upload(C_all);
  }
  const float* a() const { return dA.data() + off.a; }
  const float* b() const { return dB.data() + off.b; }
  float* c() { return dC.data() + off.c; }
  std::vector<float> run_step(Step step) {
    dC.upload(C_all);
    // Only the step's own kernels may run (the rubric's allow_libraries lets step 0 call cuBLAS). The speed gates
    // record two of their calls through compare_speed instead (TimedCase::record).
    labkit::gate::own_kernels(kStepName[int(step)], [&] { run(step, s.M, s.N, s.K, a(), b(), c()); });
    LABKIT_CUDA(cudaDeviceSynchronize());  // a fault inside the kernel surfaces here, attributed to this step
    last_C_all = dC.download();
    return tail(last_C_all, off.c);
  }
};

labkit::CheckOptions options_for(const HostInputs& in) {
  labkit::CheckOptions opt;
  opt.tolerance = tolerance(in.s.K);
  opt.scale = in.scale;
  opt.name = "C";
  opt.rows = in.s.M;
  opt.cols = in.s.N;
  opt.initial = in.C0.data();
  return opt;
}

// Wrong answers of common mistakes, so that the diagnosis can name them (small shapes only: each is a product).
void add_hypotheses(const Inputs& in, const std::vector<double>& ref, labkit::CheckOptions& opt) {
  const Shape& s = in.s;
  if (double(s.M) * s.N * s.K > double(1 << 22)) return;
  std::vector<double> no_accumulate(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) no_accumulate[i] = ref[i] - in.C0[i];
  opt.hypotheses.push_back({"C was overwritten instead of accumulated: the result lacks the + C (beta = 1)",
                            std::move(no_accumulate)});
  if (s.M == s.N) {
    std::vector<double> transposed(ref.size());
    for (int i = 0; i < s.M; ++i)
      for (int j = 0; j < s.N; ++j)
        transposed[std::size_t(i) * s.N + j] = in.C0[std::size_t(i) * s.N + j] + ref[std::size_t(j) * s.N + i] -
                                               in.C0[std::size_t(j) * s.N + i];
    opt.hypotheses.push_back({"C holds (A*B) transposed: a row-major / column-major mix-up", std::move(transposed)});
  }
  // A k loop that stops before the partial last tile (for tiles of t): the products for k >= K/t*t are missing.
  std::vector<int> seen;
  for (int t : {8, 16, 32, 64}) {
    const int K_short = s.K / t * t;
    if (K_short == s.K || std::find(seen.begin(), seen.end(), K_short) != seen.end()) continue;
    seen.push_back(K_short);
    std::vector<double> dropped(ref.size());
    for (int i = 0; i < s.M; ++i)
      for (int j = 0; j < s.N; ++j) {
        double tail = 0;
        for (int k = K_short; k < s.K; ++k)
          tail += double(in.A[std::size_t(i) * s.K + k]) * in.B[std::size_t(k) * s.N + j];
        dropped[std::size_t(i) * s.N + j] = ref[std::size_t(i) * s.N + j] - tail;
      }
    opt.hypotheses.push_back({"the products for k >= " + std::to_string(K_short) + " (of K = " + std::to_string(s.K) +
                                  ") are missing: the loop over K stops before the partial last tile",
                              std::move(dropped)});
  }
}

// (index, reference value) at each (i, j) of `where`, the values on every core: at 2048^3 the 16 K samples are
// 33 M multiply-adds down columns of B, 0.17 s of each step's correctness gate on one core.
template <class RefAt>
std::vector<std::pair<std::size_t, double>> sampled(const std::vector<std::pair<int, int>>& where, int N,
                                                    const RefAt& ref_at) {
  std::vector<std::pair<std::size_t, double>> samples(where.size());
  labkit::parallel_for(where.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t r = b; r < e; ++r) {
      const auto [i, j] = where[r];
      samples[r] = {std::size_t(i) * N + j, ref_at(i, j)};
    }
  });
  return samples;
}

// Checks one step on one shape: value, never-written elements, guard bands, unmodified inputs, repeatability.
void check_shape(Step step, const Shape& s, Offsets o = {}) {
  Inputs in(s, o);
  const std::vector<float> out = in.run_step(step);
  const std::string ctx = std::string(kStepName[int(step)]) + ", " + str(s, o);
  // The floats before C belong to nobody: a kernel that rounds C down to a 16-byte boundary writes them.
  labkit::gate::require(labkit::check_unmodified(std::vector<float>(in.last_C_all.begin(), in.last_C_all.begin() + o.c),
                                                 std::vector<float>(in.C_all.begin(), in.C_all.begin() + o.c),
                                                 "the floats before C (C was not 16-byte aligned)"),
                        ctx);
  // Identical inputs must give identical bits (a race that changes the answer); a sanitized run leaves the second
  // run out (labkit::gate::repeat_runs): the tool saw every access in the first.
  labkit::Verdict same;
  if (labkit::gate::repeat_runs()) same = labkit::check_same_runs(out, in.run_step(step), options_for(in));
  // A wrong answer that also changes from run to run is a race: say so together with the wrong values.
  auto require = [&](const labkit::Verdict& v, const std::string& where) {
    if (v.ok || same.ok) return labkit::gate::require(v, where);
    labkit::Verdict both = v;
    both.message += "\n  " + same.message;
    labkit::gate::require(both, where);
  };

  for (const auto* buf : {&in.dA, &in.dB, &in.dC}) {
    auto g = buf->check_guards();
    if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
  }
  labkit::gate::require(labkit::check_unmodified(in.dA.download(), in.A_all, "A"), ctx);
  labkit::gate::require(labkit::check_unmodified(in.dB.download(), in.B_all, "B"), ctx);

  labkit::CheckOptions opt = options_for(in);
  if (full_reference(s)) {
    const auto ref = labkit::matmul_ref(s.M, s.N, s.K, in.A, in.B, in.C0);
    add_hypotheses(in, ref, opt);
    require(labkit::check_close(out, ref, opt), ctx);
  } else {
    // Too large for a full CPU product: every element against cuBLAS (itself checked at sampled positions),
    // and whole edge rows/columns plus random positions against the CPU in double.
    std::vector<std::pair<int, int>> where;
    for (int j = 0; j < s.N; ++j)
      where.emplace_back(0, j), where.emplace_back(s.M / 2, j), where.emplace_back(s.M - 1, j);
    for (int i = 0; i < s.M; ++i)
      where.emplace_back(i, 0), where.emplace_back(i, s.N / 2), where.emplace_back(i, s.N - 1);
    for (int r = 0; r < 4096; ++r) {
      const auto pos = labkit::random_bits(labkit::gate::seed("positions"), r);
      where.emplace_back(int(pos % s.M), int((pos >> 32) % s.N));
    }
    const auto samples = sampled(where, s.N, [&](int i, int j) {
      return labkit::matmul_ref_at(s.M, s.N, s.K, in.A, in.B, in.C0, i, j);
    });
    require(labkit::check_close_at(out, samples, opt), ctx);
    if (step != Step::cublas) {
      labkit::GuardedBuffer<float> trusted(in.C0.size(), "C (cuBLAS)");
      trusted.upload(in.C0);
      reference_sgemm(s.M, s.N, s.K, in.a(), in.b(), trusted.data());
      const auto t = trusted.download();
      labkit::gate::require(labkit::check_close_at(t, samples, opt), "the cuBLAS cross-check itself, " + str(s));
      require(labkit::check_close(out, std::vector<double>(t.begin(), t.end()), opt), ctx + " (compared with cuBLAS)");
    }
  }
  labkit::gate::require(same, ctx);
}

// Every shape of a step whose product the CPU computes in full, in one batch. A shape on its own is a dozen round
// trips to the device (three allocations and their fills, uploads, the step, C downloaded twice, guard scans), and
// beside the other labs on one H200 each waits for the GPU's time slices: the 19 small and misaligned shapes took
// 0.45-0.9 s each over the twelve steps, about 12 s of the lab's 18 s plain run. In the batch each shape has a slot
// of its own in one A, one B and one C buffer:
//   [slot k: the shape's offset floats, its matrix][gap: at least max(its size, 1024) guard words][slot k + 1] ...
// each slot 256-byte aligned like cudaMalloc's pointers (the offsets then put a pointer off every 16-byte boundary
// as on its own), and every buffer a GuardedBuffer. The calls go back to back; one download of C then checks each
// shape's C against the CPU's product (check_close, the tolerance and scale of its own check), the floats before it
// and every gap word unchanged, A and B unchanged, and a second batch the same bit for bit. On any finding every shape
// runs again on buffers of its own (check_shape), whose message names the shape and the likely mistake.
// Returns "" when the batch is right, else what it found first.
std::string shapes_batch_failure(Step step, const std::vector<std::pair<Shape, Offsets>>& cases) {
  constexpr std::size_t kGapMin = 1024, kAlign = 64;  // floats
  std::vector<HostInputs> in;
  for (const auto& [sh, o] : cases) in.emplace_back(sh, o);
  struct Slots {
    std::vector<std::size_t> at;
    std::vector<float> image;  // guard words everywhere, each shape's whole allocation (offset floats first) in its slot
  };
  const std::uint64_t gap_key = labkit::gate::seed(std::string("batch gaps ") + kStepName[int(step)]);
  auto slots = [&](const std::vector<float> HostInputs::*all, std::uint64_t key) {
    Slots sl;
    std::size_t total = 0;
    for (const HostInputs& h : in) {
      const std::size_t n = (h.*all).size();
      sl.at.push_back(total);
      total = (total + n + std::max(n, kGapMin) + kAlign - 1) / kAlign * kAlign;
    }
    sl.image.resize(total);
    labkit::fill_guard_host(sl.image.data(), 0, total, 4, key);
    for (std::size_t k = 0; k < in.size(); ++k)
      std::copy((in[k].*all).begin(), (in[k].*all).end(), sl.image.begin() + std::ptrdiff_t(sl.at[k]));
    return sl;
  };
  const Slots a = slots(&HostInputs::A_all, gap_key), b = slots(&HostInputs::B_all, labkit::mix64(gap_key)),
              c = slots(&HostInputs::C_all, labkit::mix64(gap_key + 1));
  labkit::GuardedBuffer<float> dA(a.image.size(), "A (all shapes in one batch)"),
      dB(b.image.size(), "B (all shapes in one batch)"), dC(c.image.size(), "C (all shapes in one batch)");
  dA.upload(a.image);
  dB.upload(b.image);
  auto run_all = [&] {
    dC.upload(c.image);
    labkit::gate::own_kernels(kStepName[int(step)], [&] {
      for (std::size_t k = 0; k < in.size(); ++k) {
        const HostInputs& h = in[k];
        // NaN in shared memory before every call, as on its own (own_kernels fills it before the first): a tile
        // entry read but never written must not meet the finite values the previous shape's kernel left there.
        if (k) labkit::poison_shared_memory();
        run(step, h.s.M, h.s.N, h.s.K, dA.data() + a.at[k] + h.off.a, dB.data() + b.at[k] + h.off.b,
            dC.data() + c.at[k] + h.off.c);
      }
    });
    LABKIT_CUDA(cudaDeviceSynchronize());
    return dC.download();
  };
  auto same_bits = [](const std::vector<float>& x, const std::vector<float>& y, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i)
      if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0) return i;  // bits: NaN payloads and zero signs count
    return to;
  };
  auto where = [&](std::size_t k) { return std::string(kStepName[int(step)]) + ", " + str(in[k].s, in[k].off); };
  // The guard bands of the three buffers, and A and B as uploaded (their gaps included): after each batch.
  auto intact = [&]() -> std::string {
    for (const auto* buf : {&dA, &dB, &dC})
      if (const auto g = buf->check_guards(); !g.ok) return g.message;
    for (const auto& [sl, dev, name] : {std::tuple{&a, &dA, "A"}, std::tuple{&b, &dB, "B"}}) {
      const std::vector<float> now = dev->download();
      if (const std::size_t i = same_bits(now, sl->image, 0, now.size()); i < now.size()) {
        const std::size_t k = std::size_t(std::upper_bound(sl->at.begin(), sl->at.end(), i) - sl->at.begin()) - 1;
        return where(k) + ": " + name + " changed (element " + std::to_string(i - sl->at[k]) + " of its slot)";
      }
    }
    return "";
  };
  const std::vector<float> out = run_all();
  if (std::string why = intact(); !why.empty()) return why;
  for (std::size_t k = 0; k < in.size(); ++k) {
    const HostInputs& h = in[k];
    const std::size_t begin = c.at[k] + h.off.c, end = begin + h.C0.size();
    const std::size_t next = k + 1 < in.size() ? c.at[k + 1] : out.size();
    if (const std::size_t i = same_bits(out, c.image, c.at[k], begin); i < begin)
      return where(k) + ": the float " + std::to_string(begin - i) + " before C was written";
    if (const std::size_t i = same_bits(out, c.image, end, next); i < next)
      return where(k) + ": C[" + std::to_string(i - begin) + "], past its end, was written";
    const std::vector<float> got(out.begin() + std::ptrdiff_t(begin), out.begin() + std::ptrdiff_t(end));
    const labkit::Verdict v = labkit::check_close(got, labkit::matmul_ref(h.s.M, h.s.N, h.s.K, h.A, h.B, h.C0),
                                                  options_for(h));
    if (!v.ok) return where(k) + ": " + v.message;
  }
  if (!labkit::gate::repeat_runs()) return "";
  const std::vector<float> again = run_all();
  if (std::string why = intact(); !why.empty()) return why + " (in the second batch)";
  if (const std::size_t i = same_bits(again, out, 0, out.size()); i < out.size()) {
    const std::size_t k = std::size_t(std::upper_bound(c.at.begin(), c.at.end(), i) - c.at.begin()) - 1;
    return where(k) + ": a second batch gave other bits at element " + std::to_string(i - c.at[k]) +
           " of its slot of C than the first";
  }
  return "";
}

// Pointers off a 16-byte boundary, one matrix at a time and all three at once, on shapes whose K and N are
// multiples of 4: a step that takes a float4 path after checking only K and N faults (misaligned address) or
// reads the wrong floats here. All three at once also on a shape small enough for every sanitizer cap.
const std::vector<std::pair<Shape, Offsets>> kMisaligned = {
    {{68, 132, 36}, {1, 0, 0}},
    {{68, 132, 36}, {0, 2, 0}},
    {{68, 132, 36}, {0, 0, 3}},
    {{68, 132, 36}, {3, 1, 2}},
    {{260, 264, 300}, {3, 1, 2}},
};

// Past 2^32 elements of C: M = 131073, N = 32772, K = 4. An element index in 32 bits (`row * N + col` in int or
// unsigned) wraps there, while every shape above is right with it. C's 4.3e9 floats are a labkit::HugeDeviceArray:
// one 16 MiB chunk mapped over and over, then a tail with memory of its own, whose elements are checked. N a
// multiple of 4 and K = 4: the 16-byte paths of steps 5c-6 run too. Left out under a sanitizer, and where the
// driver cannot map such a range.
const Shape kHuge = {131073, 32772, 4};

void check_huge(Step step) {
  const std::string ctx = std::string(kStepName[int(step)]) + ", " + str(kHuge) + " (C past 2^32 elements)";
  if (labkit::gate::huge_case_left_out(ctx)) return;
  const std::size_t M = std::size_t(kHuge.M), N = std::size_t(kHuge.N), K = std::size_t(kHuge.K), n = M * N;
  const auto hA = labkit::random_floats(M * K, labkit::gate::seed("huge A"));
  const auto hB = labkit::random_floats(K * N, labkit::gate::seed("huge B"));
  labkit::GuardedBuffer<float> dA(M * K, "A"), dB(K * N, "B");
  dA.upload(hA);
  dB.upload(hB);
  // One mapping per process (never freed, as the operand cases'): C's chunk and tail are filled again for each step.
  static labkit::HugeDeviceArray* const huge_c = new labkit::HugeDeviceArray(n * sizeof(float), std::size_t(1) << 21);
  labkit::HugeDeviceArray& dC = *huge_c;
  const std::size_t chunk = dC.chunk_bytes() / sizeof(float), first = dC.tail_offset() / sizeof(float);
  const std::size_t tail = dC.tail_bytes() / sizeof(float);
  dC.fill_chunk(std::vector<float>(chunk, 0.f));
  const auto c0 = labkit::random_floats(tail, labkit::gate::seed("huge C tail"));
  dC.fill_tail(c0);
  try {
    labkit::gate::own_kernels(kStepName[int(step)], [&] {
      run(step, kHuge.M, kHuge.N, kHuge.K, dA.data(), dB.data(), static_cast<float*>(dC.data()));
    });
    LABKIT_CUDA(cudaDeviceSynchronize());
  } catch (const std::exception& e) {
    const std::string what = e.what();
    // A launch the grid limits refuse (every shape before had M, N <= 2048), or a fault past the arrays.
    if (what.find("configuration") != std::string::npos)
      FAIL(ctx << ": " << what << "\n  a grid's y and z sizes are at most 65535 blocks: with M = 131073 rows, "
                                  "cover several rows of C per block in y, or put the rows on gridDim.x\n  "
               << labkit::gate::reproduce_hint());
    FAIL(ctx << ": " << what << "\n  an element index such as row * N + col computed in int turns negative past 2^31 "
                                "elements and the store lands before C: compute it in size_t\n  "
             << labkit::gate::reproduce_hint());
  }
  for (const auto* buf : {&dA, &dB}) {
    const auto g = buf->check_guards();
    if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
  }
  const auto got = dC.read_tail<float>();
  std::size_t wrong = 0, unchanged = 0, first_wrong = tail;
  for (std::size_t k = 0; k < tail; ++k) {
    const std::size_t j = first + k;
    double expected = c0[k], scale = std::fabs(c0[k]);
    if (j < n) {  // element (i, c) of C; past the matrix nothing may change
      const std::size_t i = j / N, c = j % N;
      for (std::size_t p = 0; p < K; ++p) {
        const double t = double(hA[i * K + p]) * hB[p * N + c];
        expected += t;
        scale += std::fabs(t);
      }
    }
    if (!(std::fabs(double(got[k]) - expected) <= tolerance(kHuge.K) * scale)) {
      if (first_wrong == tail) first_wrong = k;
      ++wrong;
      unchanged += got[k] == c0[k];
    }
  }
  if (wrong) {
    const std::size_t j = first + first_wrong;
    std::ostringstream os;
    os << ctx << ": " << wrong << " of the last " << tail << " floats of C (C[" << first << "] on, past 2^32 "
       << "elements) are wrong, " << unchanged << " of them never written; the first at C[" << j << "]";
    if (j >= n) os << ", after the end of the matrix (a store past the end)";
    else os << " (row " << j / N << ", column " << j % N << ")";
    os << ". An element index such as row * N + col computed in int wraps past 2^31 elements (in unsigned past "
       << "2^32): compute it in size_t, e.g. std::size_t(row) * N + col, and likewise the offsets of A's and B's "
       << "tiles.\n  " << labkit::gate::reproduce_hint();
    FAIL(os.str());
  }
  labkit::gate::require(labkit::Verdict{}, ctx);
}

// Past 2^32 elements of A (M = 131073, K = 32772, N = 4) or of B (M = 4, K = 32772, N = 131076), C small (half a
// million floats): the offsets of A's and B's tiles (row * K + k, k * N + col) wrap in 32 bits there, which the case
// above (C past 2^32 with K = 4) never reaches. A step whose C index is size_t and whose tile offsets are int passes
// every other shape. The large operand is a labkit::HugeDeviceArray filled with random floats (chunk and tail), so
// the host knows each of its elements; C is checked on rows (A) or columns (B) where the offsets cross 2^31 and 2^32
// and at the ends: 128 elements. K and N multiples of 4: the 16-byte paths run. About 1.7e10 multiply-adds on the
// GPU per case.
enum class HugeOperand { A, B };
Shape huge_operand_shape(HugeOperand big) {
  return big == HugeOperand::A ? Shape{131073, 4, 32772} : Shape{4, 131076, 32772};
}

// What every step's case shares, made once per gate process (the seeds do not name the gate, so every step gets the
// same inputs): mapping the 17 GB range (1024 chunks), drawing its contents and the host's products cost more than
// the steps' kernels (on one H200 beside the other labs, about 0.3 s a case when each step made its own). A step
// that writes into the operand (a const pointer) fails its gate, and the next step's case is made afresh.
struct HugeOperandCase {
  Shape shape;
  std::unique_ptr<labkit::HugeDeviceArray> huge;
  labkit::KnownHugeFloats known;
  std::vector<float> small, c0;                   // the other operand and C's first contents
  std::vector<std::pair<std::size_t, std::size_t>> at;  // the elements (i, c) of C checked
  std::vector<double> expected, scale;
};

HugeOperandCase* make_huge_operand_case(HugeOperand big) {
  const bool in_a = big == HugeOperand::A;
  auto hc = std::make_unique<HugeOperandCase>();
  hc->shape = huge_operand_shape(big);
  const std::size_t M = std::size_t(hc->shape.M), N = std::size_t(hc->shape.N), K = std::size_t(hc->shape.K);
  hc->huge = std::make_unique<labkit::HugeDeviceArray>((in_a ? M * K : K * N) * sizeof(float), std::size_t(1) << 21);
  hc->known = labkit::fill_random(*hc->huge, labkit::gate::seed(in_a ? "huge-A A" : "huge-B B"));
  hc->small = labkit::random_floats(in_a ? K * N : M * K, labkit::gate::seed(in_a ? "huge-A B" : "huge-B A"));
  hc->c0 = labkit::random_floats(M * N, labkit::gate::seed(in_a ? "huge-A C" : "huge-B C"));
  // The rows of A where row * K passes 2^31 and 2^32, and the ends; for B every column of C reads all of B's rows
  // (k * N passes 2^31 at k = 16383), so the columns are the ends and a few in between.
  const std::size_t count = in_a ? M : N, width = in_a ? K : N;
  std::vector<std::size_t> lines;
  for (const std::size_t around : {std::size_t(0), (std::size_t(1) << 31) / width, (std::size_t(1) << 32) / width,
                                   count - 8})
    for (std::size_t d = 0; d < 8; ++d)
      if (around + d < count && (lines.empty() || lines.back() < around + d)) lines.push_back(around + d);
  auto a = [&](std::size_t i, std::size_t p) { return in_a ? hc->known.at(i * K + p) : hc->small[i * K + p]; };
  auto b = [&](std::size_t p, std::size_t c) { return in_a ? hc->small[p * N + c] : hc->known.at(p * N + c); };
  for (const std::size_t line : lines)
    for (std::size_t other = 0; other < (in_a ? N : M); ++other) {
      const std::size_t i = in_a ? line : other, c = in_a ? other : line;
      double e = hc->c0[i * N + c], sc = std::fabs(hc->c0[i * N + c]);
      for (std::size_t p = 0; p < K; ++p) {
        const double t = double(a(i, p)) * b(p, c);
        e += t;
        sc += std::fabs(t);
      }
      hc->at.emplace_back(i, c);
      hc->expected.push_back(e);
      hc->scale.push_back(sc);
    }
  return hc.release();
}

// "" when the operand's chunk and tail still hold what was drawn, else what changed.
std::string huge_operand_changed(const HugeOperandCase& hc) {
  std::vector<float> chunk(hc.known.chunk.size());
  LABKIT_CUDA(cudaMemcpy(chunk.data(), hc.huge->data(), chunk.size() * sizeof(float), cudaMemcpyDeviceToHost));
  if (std::memcmp(chunk.data(), hc.known.chunk.data(), chunk.size() * sizeof(float)) != 0)
    return "its first 16 MiB";
  const auto tail = hc.huge->read_tail<float>();
  if (std::memcmp(tail.data(), hc.known.tail.data(), tail.size() * sizeof(float)) != 0) return "its last elements";
  return "";
}

void check_huge_operand(Step step, HugeOperand big) {
  const bool in_a = big == HugeOperand::A;
  const Shape shape = huge_operand_shape(big);
  const std::string ctx = std::string(kStepName[int(step)]) + ", " + str(shape) + (in_a ? " (A" : " (B") +
                          " past 2^32 elements)";
  if (labkit::gate::huge_case_left_out(ctx)) return;
  // Never freed: a static's destructor would unmap after the CUDA runtime may have gone; the process's end frees it.
  static HugeOperandCase* cases[2] = {nullptr, nullptr};
  HugeOperandCase*& hc = cases[in_a ? 0 : 1];
  if (!hc) hc = make_huge_operand_case(big);
  const std::size_t M = std::size_t(shape.M), N = std::size_t(shape.N);
  labkit::GuardedBuffer<float> d_small(hc->small.size(), in_a ? "B" : "A"), dC(M * N, "C");
  d_small.upload(hc->small);
  dC.upload(hc->c0);
  const float* dA = in_a ? static_cast<const float*>(hc->huge->data()) : d_small.data();
  const float* dB = in_a ? d_small.data() : static_cast<const float*>(hc->huge->data());
  try {
    labkit::gate::own_kernels(kStepName[int(step)], [&] { run(step, shape.M, shape.N, shape.K, dA, dB, dC.data()); });
    LABKIT_CUDA(cudaDeviceSynchronize());
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (what.find("configuration") != std::string::npos)  // a grid past its y or z limit (N = 131076 columns)
      FAIL(ctx << ": " << what << "\n  a grid's y and z sizes are at most 65535 blocks: with " << shape.M
                                  << " rows and " << shape.N << " columns, put the larger dimension on gridDim.x or "
                                     "cover several tiles per block\n  "
               << labkit::gate::reproduce_hint());
    FAIL(ctx << ": " << what << "\n  an offset into " << (in_a ? "A such as row * K + k" : "B such as k * N + col")
             << " computed in int turns negative past 2^31 elements and the load leaves the array: compute it in "
                "size_t\n  "
             << labkit::gate::reproduce_hint());
  }
  if (const std::string changed = huge_operand_changed(*hc); !changed.empty()) {
    delete hc;  // the next step's case draws it again
    hc = nullptr;
    FAIL(ctx << ": " << (in_a ? "A" : "B") << " changed (" << changed << "): the step must not write its inputs\n  "
             << labkit::gate::reproduce_hint());
  }
  for (const auto* buf : {&d_small, &dC}) {
    const auto g = buf->check_guards();
    if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
  }
  const auto got = dC.download();
  for (std::size_t k = 0; k < hc->at.size(); ++k) {
    const auto [i, c] = hc->at[k];
    const float v = got[i * N + c];
    if (!(std::fabs(double(v) - hc->expected[k]) <= tolerance(shape.K) * hc->scale[k]))
      FAIL(ctx << ": C(" << i << ", " << c << ") = " << v << ", expected " << hc->expected[k]
               << (v == hc->c0[i * N + c] ? " (never written)" : "") << "; "
               << (in_a ? "row " + std::to_string(i) + " of A starts at element " + std::to_string(i * shape.K)
                        : "B's rows run to element " + std::to_string(std::size_t(shape.K) * N))
               << ". An offset such as " << (in_a ? "row * K + k into A" : "k * N + col into B")
               << " computed in int wraps past 2^31 elements (in unsigned past 2^32), while C's index, in size_t, "
                  "is right: compute the tiles' offsets in size_t too, e.g. std::size_t(row) * K + k\n  "
               << labkit::gate::reproduce_hint());
  }
  labkit::gate::require(labkit::Verdict{}, ctx);
}

void check_step(Step step) {
  labkit::gate::SanitizerCap cap(kSanitizerCap, "multiply-adds", kRaceCap);
  std::vector<std::pair<Shape, Offsets>> cases;
  for (const Shape& s : kShapes)
    if (!cap.skips(double(s.M) * s.N * s.K, str(s), race_checked(s))) cases.push_back({s, {}});
  for (const auto& [s, o] : kMisaligned) {
    // One offset at a time runs the same tiles and barriers as all three at once: racecheck takes only the
    // latter (68x132x36 is most of racecheck's time in this lab), memcheck checks every address of each.
    const bool all_three = o.a && o.b && o.c;
    if (!cap.skips(double(s.M) * s.N * s.K, str(s, o), all_three)) cases.push_back({s, o});
  }
  // The shapes the CPU multiplies in full, in one batch (shapes_batch_failure); under a sanitizer each on buffers of
  // its exact size, where memcheck sees a read past the end.
  std::vector<std::pair<Shape, Offsets>> batch;
  if (!labkit::gate::under_sanitizer())
    for (const auto& c : cases)
      if (full_reference(c.first)) batch.push_back(c);
  if (!batch.empty())
    labkit::gate::require_batch(
        std::string(kStepName[int(step)]) + ", " + std::to_string(batch.size()) + " shapes",
        "made one after another on slots of their own in one buffer each for A, B and C",
        [&] { return shapes_batch_failure(step, batch); },
        [&] {
          for (const auto& [s, o] : batch) check_shape(step, s, o);
        });
  for (const auto& [s, o] : cases)
    if (labkit::gate::under_sanitizer() || !full_reference(s)) check_shape(step, s, o);
  check_huge(step);
  check_huge_operand(step, HugeOperand::A);
  check_huge_operand(step, HugeOperand::B);
}

// Speed: a step against the gate's own cuBLAS SGEMM (reference_sgemm, never the student's step 0) at n^3. Every
// timed call gets fresh A, B and C (a result cached on pointers, sizes or sampled values never matches) and a cold
// L2; the launch recorder watches one timed round the gate's secret picks and the last call (only the step's own
// kernels may run: TimedCase::record), whose C is then checked against cuBLAS on the same inputs and at sampled
// positions against the CPU (work done once and skipped later fails). No separate check before the timing: the
// last call is a call at the timed size on inputs it never saw, and a wrong step fails there with the same message.
struct SpeedRun {
  Step candidate;
  int n;
  std::uint64_t seed_base;
  int last = -1;  // the call whose inputs are on the device
  std::uint64_t seed(const char* what, int k) const { return labkit::derive_seed(seed_base, what + std::to_string(k)); }
};

// The speed gates' device matrices, filled on the device by refresh (no host copy is ever made of most of them).
struct SpeedInputs {
  labkit::GuardedBuffer<float> dA, dB, dC;
  explicit SpeedInputs(int n)
      : dA(std::size_t(n) * n, "A"), dB(std::size_t(n) * n, "B"), dC(std::size_t(n) * n, "C") {
    for (auto* b : {&dA, &dB, &dC}) b->set_row_length(n);
  }
};

// The inputs of one timed call, known by their seeds: fill_random_device wrote them, uniform_float gives any element
// again on the host, so the CPU samples need no host copy of the 64 MB matrices.
struct GeneratedInputs {
  int n;
  std::uint64_t sA, sB, sC;
  static float at(std::uint64_t seed, std::size_t i) { return labkit::uniform_float(seed, i, -1.f, 1.f); }
  // C0(i,j) + sum_k A(i,k) B(k,j), by labkit::matmul_ref_at's own arithmetic.
  double ref_at(int i, int j) const {
    auto element = [this](std::uint64_t seed) {
      return [this, seed](int r, int c) { return at(seed, std::size_t(r) * n + c); };
    };
    return labkit::matmul_ref_at_of(n, element(sA), element(sB), element(sC), i, j);
  }
};

labkit::TimedCase timed_case(SpeedRun& run_, SpeedInputs& in) {
  const std::size_t nn = std::size_t(run_.n) * run_.n;
  labkit::TimedCase tc;
  tc.refresh = [&run_, &in, nn](int k) {
    labkit::fill_random_device(in.dA.data(), nn, run_.seed("A", k));
    labkit::fill_random_device(in.dB.data(), nn, run_.seed("B", k));
    labkit::fill_random_device(in.dC.data(), nn, run_.seed("C", k));
    run_.last = k;
  };
  tc.verify = [&run_, &in, nn]() {
    const int n = run_.n, k = run_.last;
    LABKIT_CUDA(cudaDeviceSynchronize());
    const std::string ctx = std::string(kStepName[int(run_.candidate)]) +
                            ", " + labkit::verified_call() + " (fresh inputs it had not seen before), M=N=K=" +
                            std::to_string(n);
    for (const auto* buf : {&in.dA, &in.dB, &in.dC}) {
      auto g = buf->check_guards();
      if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
    }
    const GeneratedInputs gen{n, run_.seed("A", k), run_.seed("B", k), run_.seed("C", k)};
    // A and B against the generator's values, on the device (the same verdict and message as check_unmodified).
    labkit::gate::require(labkit::check_unmodified_device(in.dA.data(), nn, gen.sA, "A"), "after the timed calls");
    labkit::gate::require(labkit::check_unmodified_device(in.dB.data(), nn, gen.sB, "B"), "after the timed calls");
    labkit::GuardedBuffer<float> trusted(nn, "C (cuBLAS)");
    labkit::fill_random_device(trusted.data(), nn, gen.sC);  // C0 of call k, as the candidate got it
    reference_sgemm(n, n, n, in.dA.data(), in.dB.data(), trusted.data());
    labkit::CheckOptions opt;
    opt.tolerance = tolerance(n);
    opt.name = "C";
    opt.rows = opt.cols = n;
    std::vector<std::pair<int, int>> where;
    for (int r = 0; r < 256; ++r) {
      const auto pos = labkit::random_bits(run_.seed("positions", k), r);
      where.emplace_back(int(pos % n), int((pos >> 32) % n));
    }
    const auto samples = sampled(where, n, [&](int i, int j) { return gen.ref_at(i, j); });
    // Each check on the device first; only a failing one downloads C (and cuBLAS's C, and C0 for the message's
    // "initial value") and runs the host check, which writes the diagnosis it always wrote.
    const auto C0 = [&] { return labkit::random_floats_via_device(nn, gen.sC); };
    const auto with_initial = [&](const std::vector<float>& c0) {
      labkit::CheckOptions o = opt;
      o.initial = c0.data();
      return o;
    };
    labkit::gate::require(labkit::device_or_host(labkit::check_close_at_device(trusted.data(), nn, samples, opt),
                                                 [&] {
                                                   const auto c0 = C0();
                                                   return labkit::check_close_at(trusted.download(), samples,
                                                                                 with_initial(c0));
                                                 }),
                          "the cuBLAS cross-check itself");
    labkit::gate::require(labkit::device_or_host(labkit::check_close_at_device(in.dC.data(), nn, samples, opt),
                                                 [&] {
                                                   const auto c0 = C0();
                                                   return labkit::check_close_at(in.dC.download(), samples,
                                                                                 with_initial(c0));
                                                 }),
                          ctx);
    labkit::gate::require(labkit::device_or_host(labkit::check_close_device(in.dC.data(), trusted.data(), nn, opt),
                                                 [&] {
                                                   const auto c0 = C0();
                                                   const auto t = trusted.download();
                                                   return labkit::check_close(in.dC.download(),
                                                                              std::vector<double>(t.begin(), t.end()),
                                                                              with_initial(c0));
                                                 }),
                          ctx + " (compared with cuBLAS)");
  };
  return tc;
}

// The gate's verdict is `candidate` against cuBLAS. `previous` (the step before) is timed against the same cuBLAS
// only to report how far the step moved (metric previous_ratio): the teaching point, step 2 many times faster than
// step 1, without letting a deliberately slow earlier step raise this gate's ratio.
void check_speed(Step candidate, int n, std::optional<Step> previous) {
  SpeedInputs in(n);
  labkit::TimingOptions opt;
  opt.warmup = 2;
  opt.min_repeats = 5;
  // 100 ms of timed calls a side (about 18 rounds at 4096^3): five runs on an H100 gave the same medians as 200 ms
  // (within 0.1 %) and spreads of 0.1-1.9 %, for 2 s less per graded workbook.
  opt.budget_ms = 100;
  SpeedRun sr{candidate, n, labkit::gate::seed("speed " + str(Shape{n, n, n}))};
  auto cublas_call = [&](int) { reference_sgemm(n, n, n, in.dA.data(), in.dB.data(), in.dC.data()); };
  auto step_call = [&](Step st) {
    return [&, st](int) { run(st, n, n, n, in.dA.data(), in.dB.data(), in.dC.data()); };
  };
  labkit::TimedCase tc = timed_case(sr, in);
  // What verify() reads of a call, kept after every call so that the picked ones are checked after the timing: C,
  // and A and B, which it checks the call left as the refresh wrote them.
  labkit::KeptCalls kept;
  const std::size_t nn = std::size_t(n) * n;
  kept.device(in.dA.data(), nn).device(in.dB.data(), nn).device(in.dC.data(), nn).host(sr.last);
  kept.attach(tc);
  // Every call recorded: a GEMM call (milliseconds) dwarfs the recorder's cost per kernel (ratios within 1 % of two
  // recorded calls on an H100), and cuBLAS is the shortcut worth the most here.
  labkit::gate::record_timed_calls(tc, kStepName[int(candidate)], opt, labkit::RecordedCalls::every_call);
  const auto cmp = labkit::compare_speed(cublas_call, step_call(candidate), tc, opt);
  const double gflop = 2.0 * n * double(n) * n / 1e9;
  if (previous)
    labkit::gate::report_previous_ratio(cmp, cublas_call, step_call(*previous), tc.refresh,
                                        kStepName[int(candidate)], kStepName[int(*previous)], "cuBLAS");
  labkit::gate::require_speedup(cmp, "cuBLAS SGEMM (the gate's own call)", kStepName[int(candidate)], gflop, "GFLOP");
}

}  // namespace

TEST_CASE("cpu.reference", "[lab01][cpu]") {
  // The CPU reference every gate trusts, on a product small enough to check by hand.
  const std::vector<float> A{1, 2, 3, 4}, B{5, 6, 7, 8}, C0{1, 1, 1, 1};
  CHECK(labkit::matmul_ref(2, 2, 2, A, B, C0) == std::vector<double>{20, 23, 44, 51});
}

TEST_CASE("step0.correct", "[lab01][step0][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::cublas);
}
TEST_CASE("step1.correct", "[lab01][step1][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::naive_col);
}
TEST_CASE("step2.correct", "[lab01][step2][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::naive_row);
}
TEST_CASE("step3.correct", "[lab01][step3][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::tiled);
}
TEST_CASE("step4.correct", "[lab01][step4][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::regblock);
}
TEST_CASE("step5a.correct", "[lab01][step5a][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::transposed_a);
}
TEST_CASE("step5b.correct", "[lab01][step5b][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::conflict_free);
}
TEST_CASE("step5c.correct", "[lab01][step5c][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::vector_loads);
}
TEST_CASE("step5d.correct", "[lab01][step5d][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::double_buffer);
}
TEST_CASE("step5e.correct", "[lab01][step5e][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::launch_bounds);
}
TEST_CASE("step5f.correct", "[lab01][step5f][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::tuned);
}
TEST_CASE("step6.correct", "[lab01][step6][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::async_pipeline);
}

TEST_CASE("step2.speed", "[lab01][step2][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::naive_row, 2048, Step::naive_col);
}
TEST_CASE("step3.speed", "[lab01][step3][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::tiled, 4096, Step::naive_row);
}
TEST_CASE("step4.speed", "[lab01][step4][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::regblock, 4096, Step::tiled);
}
// Each sub-step of step 5 against the same cuBLAS call at 4096^3, the sub-step before reported beside it.
TEST_CASE("step5a.speed", "[lab01][step5a][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::transposed_a, 4096, Step::regblock);
}
TEST_CASE("step5b.speed", "[lab01][step5b][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::conflict_free, 4096, Step::transposed_a);
}
TEST_CASE("step5c.speed", "[lab01][step5c][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::vector_loads, 4096, Step::conflict_free);
}
TEST_CASE("step5d.speed", "[lab01][step5d][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::double_buffer, 4096, Step::vector_loads);
}
TEST_CASE("step5e.speed", "[lab01][step5e][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::launch_bounds, 4096, Step::double_buffer);
}
TEST_CASE("step5f.speed", "[lab01][step5f][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::tuned, 4096, Step::launch_bounds);
}
TEST_CASE("step6.speed", "[lab01][step6][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::async_pipeline, 4096, Step::tuned);
}
