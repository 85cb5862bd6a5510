// Lab 02 gates. Correctness: every step over shapes from 1x1 to 4099x3001 (1xN, Nx1, primes, non-multiples of
// the 32 and 64 tiles, rectangles both ways), fresh random inputs per run, guard bands around both arrays, the
// output poisoned before every run, the input checked unmodified, and a second run compared bit for bit; and shapes
// whose `in` or `out` pointer is not 16-byte aligned (rows of a multiple of 4 floats, where a float4 path without
// an alignment check faults or moves the wrong floats); and 65553 x 65573, past 2^32 elements (check_huge).
// Speed: every step against cudaMemcpy device-to-device in one process at 8192 x 8192 (256 MB per matrix, far
// beyond the 50 MB L2), fresh inputs and a cold L2 per timed call, the outputs of a timed call
// the gate's secret picks and of the last call verified.
#include <catch2/catch_test_macros.hpp>
#include <cmath>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "labkit/compare_device.h"
#include "labkit/gate.h"
#include "labkit/launches.h"
#include "labkit/guard.h"
#include "labkit/huge.h"
#include "labkit/random.h"
#include "labkit/reference.h"
#include "labkit/report.h"
#include "labkit/slot_batch.h"
#include "transpose.h"

namespace {

enum class Step { memcpy = 0, copy, naive, shared, padded, tuned };
const char* const kStepName[] = {"cudaMemcpy (device to device)", "step 1 (tiled copy)", "step 2 (naive transpose)",
                                 "step 3 (shared-memory tile)",   "step 4 (padded tile)", "step 5 (tuned)"};

bool transposes(Step s) { return s != Step::copy && s != Step::memcpy; }

void run(Step s, int rows, int cols, const float* in, float* out) {
  switch (s) {
    case Step::memcpy:
      LABKIT_CUDA(cudaMemcpyAsync(out, in, std::size_t(rows) * cols * sizeof(float), cudaMemcpyDeviceToDevice));
      return;
    case Step::copy: return lab02::copy_tiled(rows, cols, in, out);
    case Step::naive: return lab02::transpose_naive(rows, cols, in, out);
    case Step::shared: return lab02::transpose_shared(rows, cols, in, out);
    case Step::padded: return lab02::transpose_padded(rows, cols, in, out);
    case Step::tuned: return lab02::transpose_tuned(rows, cols, in, out);
  }
}

struct Shape {
  int rows, cols;
};
std::string str(const Shape& s) {
  std::ostringstream os;
  os << "rows=" << s.rows << " cols=" << s.cols;
  return os.str();
}

// 1x1; 1xN and Nx1 (a single tile row / column, N not a multiple of anything); primes; one below, at and above the
// 32 and 64 tiles; rectangles both ways (a kernel that mixes up rows and cols as out's row length fails these);
// a large non-multiple.
const std::vector<Shape> kShapes = {
    {1, 1},       {1, 2},       {2, 1},       {3, 5},       {7, 13},      {31, 33},     {32, 32},
    {33, 31},     {63, 65},     {64, 64},     {65, 129},    {1, 1000},    {1000, 1},    {1, 70001},
    {70001, 1},   {127, 131},   {500, 37},    {37, 500},    {1024, 1024}, {1023, 1025}, {2048, 512},
    {512, 2048},  {4099, 3001},
};

// The input's element i is uniform_float(seed, i): the expected output can be computed from the seed alone.
float input_at(std::uint64_t seed, std::size_t i) { return labkit::uniform_float(seed, i, -1.f, 1.f); }

// The expected output: in (copy) or in^T (transposes), in double for check_close.
std::vector<double> expected_for(Step step, const Shape& s, const std::vector<float>& in) {
  std::vector<double> e(in.size());
  if (!transposes(step)) {
    for (std::size_t i = 0; i < in.size(); ++i) e[i] = in[i];
    return e;
  }
  // out row c (length rows) = in column c
  labkit::parallel_for(std::size_t(s.cols), [&](std::size_t c0, std::size_t c1) {
    for (std::size_t c = c0; c < c1; ++c)
      for (std::size_t r = 0; r < std::size_t(s.rows); ++r) e[c * s.rows + r] = in[r * s.cols + c];
  });
  return e;
}

// Wrong answers of common mistakes, so that the diagnosis can name them (small shapes only).
void add_hypotheses(Step step, const Shape& s, const std::vector<float>& in, labkit::CheckOptions& opt) {
  if (!transposes(step) || in.size() > (std::size_t(1) << 20) || in.size() < 2) return;
  opt.hypotheses.push_back({"out is a copy of in: the indices of the write were not swapped",
                            std::vector<double>(in.begin(), in.end())});
  // Tiled kernels: the tile is transposed inside but written back at the block's own position (the block indices
  // were not swapped for the write), or swapped correctly but copied without transposing inside the tile.
  if (s.rows == s.cols && s.rows % 32 == 0 && s.rows > 32) {
    const std::size_t n = s.rows;
    std::vector<double> in_place(in.size()), not_inside(in.size());
    for (std::size_t R = 0; R < n; ++R)
      for (std::size_t C = 0; C < n; ++C) {
        in_place[R * n + C] = in[(R / 32 * 32 + C % 32) * n + C / 32 * 32 + R % 32];
        not_inside[R * n + C] = in[(C / 32 * 32 + R % 32) * n + R / 32 * 32 + C % 32];
      }
    opt.hypotheses.push_back({"each 32x32 tile is transposed but written at the block's own position: for the write, "
                              "the tile's origin must swap (blockIdx.x <-> blockIdx.y)",
                              std::move(in_place)});
    opt.hypotheses.push_back({"the tiles are placed right but their contents are not transposed: read the shared tile "
                              "as tile[threadIdx.x][...] when writing",
                              std::move(not_inside)});
  }
}

labkit::CheckOptions options_for(Step step, const Shape& s) {
  labkit::CheckOptions opt;
  // A copy or a transpose moves bits and computes nothing: the only correct answer is the exact one.
  opt.tolerance = 0;
  opt.name = "out";
  opt.rows = transposes(step) ? s.cols : s.rows;  // out is cols x rows for the transposes
  opt.cols = transposes(step) ? s.rows : s.cols;
  return opt;
}

// Where the step's pointers start: this many floats past the (256-byte aligned) start of each allocation; 1, 2 or
// 3 put a pointer off every 16-byte boundary. The floats before a pointer belong to nobody.
struct Offsets {
  int in = 0, out = 0;
};
std::string str(const Shape& s, const Offsets& o) {
  if (o.in == 0 && o.out == 0) return str(s);
  return str(s) + " (in " + std::to_string(4 * o.in) + " and out " + std::to_string(4 * o.out) +
         " bytes past a 16-byte boundary)";
}

struct Inputs {
  Shape s;
  Offsets off;
  std::uint64_t seed;
  std::vector<float> in_all;  // the whole input allocation: off.in floats, then the matrix
  std::vector<float> in;      // the matrix the step sees
  labkit::GuardedBuffer<float> din, dout;
  explicit Inputs(Shape sh, Offsets o = {})
      : s(sh),
        off(o),
        seed(labkit::gate::seed("in " + str(sh, o))),
        in_all(labkit::random_floats(o.in + std::size_t(sh.rows) * sh.cols, seed)),
        in(in_all.begin() + o.in, in_all.end()),
        din(in_all.size(), "in"),
        dout(o.out + in.size(), "out") {
    din.upload(in_all);
  }
  std::vector<float> run_step(Step step) {
    dout.poison();  // before EVERY run: an element this run skips shows up as never written
    // Only the step's own kernels may run (labkit/launches.h; the speed gates record through TimedCase::record).
    labkit::gate::own_kernels(kStepName[int(step)],
                              [&] { run(step, s.rows, s.cols, din.data() + off.in, dout.data() + off.out); });
    LABKIT_CUDA(cudaDeviceSynchronize());  // a fault inside the kernel surfaces here, attributed to this step
    const auto all = dout.download();
    for (int j = 0; j < off.out; ++j)  // a kernel that rounds `out` down to a 16-byte boundary writes these
      if (!labkit::is_poison(all[j]))
        FAIL(kStepName[int(step)] << ", " << str(s, off) << ": the float " << off.out - j
                                  << " before `out` was written: `out` is not 16-byte aligned here, so a float4 "
                                     "path must check the pointer, not only the shape\n  "
                                  << labkit::gate::reproduce_hint());
    return std::vector<float>(all.begin() + off.out, all.end());
  }
};

// Checks one step on one shape: value, never-written elements, guard bands, unmodified input, repeatability.
void check_shape(Step step, const Shape& s, Offsets o = {}) {
  Inputs in(s, o);
  const std::vector<float> out = in.run_step(step);
  const std::string ctx = std::string(kStepName[int(step)]) + ", " + str(s, o);
  for (const auto* buf : {&in.din, &in.dout}) {
    auto g = buf->check_guards();
    if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
  }
  labkit::gate::require(labkit::check_unmodified(in.din.download(), in.in_all, "in"), ctx);
  labkit::CheckOptions opt = options_for(step, s);
  add_hypotheses(step, s, in.in, opt);
  labkit::gate::require(labkit::check_close(out, expected_for(step, s, in.in), opt), ctx);
  // A sanitized run leaves the second run out (labkit::gate::repeat_runs): the tool saw every access in the first.
  if (labkit::gate::repeat_runs()) labkit::gate::require(labkit::check_same_runs(out, in.run_step(step), opt), ctx);
}

// Pointers off a 16-byte boundary on shapes whose rows are a multiple of 4 floats, one side at a time and both.
const std::vector<std::pair<Shape, Offsets>> kMisaligned = {
    {{64, 64}, {1, 0}}, {{64, 64}, {0, 3}}, {{96, 128}, {2, 2}}, {{132, 68}, {3, 1}},
};

// Under compute-sanitizer (labkit::gate::under_sanitizer) the matrices of more than 2^21 elements are left out,
// and in the grader's default checks (a sixteenth of the cap) everything above 2^17: the 1 x N and N x 1 strips,
// the primes and the shapes one off every tile still reach each bound and each barrier.
constexpr double kSanitizerCap = double(1 << 21);
// racecheck in the default checks: up to 65 x 129, every partial tile of a 32 x 32 tile both ways and a block whose
// rows loop; the strips and the larger rectangles add blocks, not barriers (memcheck still runs them).
constexpr double kRaceCap = double(1 << 14);
// Of the shapes under that cap racecheck keeps 31x33 (one partial tile each way), 64x64 (full tiles), 65x129 (full and
// partial tiles, rows that loop) and the misaligned shapes with both pointers off; memcheck checks the rest
// (SanitizerCap::skips with race_checked). Measured on an H100 (LABKIT_GATE_TRACE): each case cost about 0.08 s under
// racecheck, 17 cases 1.3-2 s a step, and the tiny shapes and strips meet no barrier those five do not.
bool race_checked(const Shape& s) {
  return (s.rows == 31 && s.cols == 33) || (s.rows == 64 && s.cols == 64) || (s.rows == 65 && s.cols == 129);
}

// A matrix past 2^32 elements (the contract: any rows, cols): an element index r * cols + c kept in an int wraps
// past 2^31 elements, in an unsigned past 2^32. No 34 GB of memory: `in` and `out` are labkit::HugeDeviceArray
// ranges, one 16 MiB chunk repeated 1024 times (16 GiB) and the rest, from element 2^32 on, memory of their own, so
// every element of `in` is known (the chunk's or the tail's) and `out` from element 2^32 on (its last 54 rows, and
// the bytes after the matrix) is checked against it. The step runs through the L2 in milliseconds; mapping the two
// ranges (1024 chunks each) is most of the case's time, about 2 s on two H200s beside other tests. Not under a
// sanitizer.
const Shape kHuge = {65553, 65573};  // 4,298,506,869 elements

void check_huge(Step step) {
  const std::string ctx = std::string(kStepName[int(step)]) + ", " + str(kHuge) + " (past 2^32 elements)";
  if (labkit::gate::huge_case_left_out(ctx)) return;
  const std::size_t n = std::size_t(kHuge.rows) * std::size_t(kHuge.cols);
  labkit::HugeDeviceArray din(n * sizeof(float), 1 << 21), dout(n * sizeof(float), 1 << 21);
  const labkit::KnownHugeFloats in = labkit::fill_random(din, labkit::gate::seed("huge in"));
  const std::size_t out_first = dout.tail_offset() / sizeof(float), tail = dout.tail_bytes() / sizeof(float);
  dout.fill_chunk(std::vector<float>(dout.chunk_bytes() / sizeof(float), 0.f));
  dout.fill_tail(std::vector<float>(tail, labkit::poison_value<float>()));
  labkit::gate::own_kernels(kStepName[int(step)], [&] {
    run(step, kHuge.rows, kHuge.cols, static_cast<const float*>(din.data()), static_cast<float*>(dout.data()));
  });
  LABKIT_CUDA(cudaDeviceSynchronize());
  const auto got = dout.read_tail<float>();
  auto in_at = [&](std::size_t i) { return in.at(i); };
  std::size_t wrong = 0, unwritten = 0, first_wrong = tail;
  for (std::size_t k = 0; k < tail; ++k) {
    const std::size_t j = out_first + k;
    if (j >= n) {  // after the matrix: nothing may be written there
      if (!labkit::is_poison(got[k]) && first_wrong == tail) first_wrong = k;
      wrong += !labkit::is_poison(got[k]);
      continue;
    }
    // out(c, r) = in(r, c) for the transposes: out is cols x rows; the copy keeps the layout.
    const std::size_t c = j / std::size_t(kHuge.rows), r = j % std::size_t(kHuge.rows);
    const float expected = transposes(step) ? in_at(r * std::size_t(kHuge.cols) + c) : in_at(j);
    if (std::memcmp(&got[k], &expected, sizeof(float)) != 0) {
      if (first_wrong == tail) first_wrong = k;
      ++wrong;
      unwritten += labkit::is_poison(got[k]);
    }
  }
  if (wrong) {
    const std::size_t j = out_first + first_wrong;
    std::ostringstream os;
    os << ctx << ": " << wrong << " of the last " << tail << " floats of out (out[" << out_first
       << "] on, past 2^32 elements) are wrong, " << unwritten << " of them never written; the first at out[" << j
       << "]";
    if (j >= n) os << ", after the end of the matrix (a store past the end)";
    else
      os << " (column " << j / std::size_t(kHuge.rows) << ", row " << j % std::size_t(kHuge.rows) << " of out)";
    os << ". An element index such as r * cols + c computed in int wraps past 2^31 elements (in unsigned past "
       << "2^32): compute it in size_t, e.g. std::size_t(r) * cols + c.\n  " << labkit::gate::reproduce_hint();
    FAIL(os.str());
  }
}

// Every shape of the step in one batch (labkit::SlotBatch): each call on slots of its own in one input and one
// output buffer, made back to back and checked in one download, then a second batch bit for bit. A shape on its own
// is a dozen round trips to the device, each waiting for the GPU's time slice when other labs share it: beside them
// on one H200, the 27 shapes took about 2 s a step (0.3 s alone). When anything differs, every shape is checked again
// on its own buffers (check_shape), whose message names the shape and the likely mistake.
// Returns "" when the batch is right, else what it found (labkit::gate::batch_failure).
std::string shapes_batch_failure(Step step, const std::vector<std::pair<Shape, Offsets>>& cases,
                                 const std::string& what) {
  std::vector<labkit::SlotBatch::Call> slots;
  for (const auto& [s, o] : cases) {
    const std::size_t n = std::size_t(s.rows) * std::size_t(s.cols);
    slots.push_back({n, n, std::size_t(o.in), std::size_t(o.out)});
  }
  labkit::SlotBatch batch(slots, labkit::gate::seed(std::string("batch ") + kStepName[int(step)]));
  // out(c, r) = in(r, c) for the transposes (out is cols x rows); the copy keeps the layout.
  auto source = [&](int k, std::size_t j) {
    const Shape& s = cases[std::size_t(k)].first;
    if (!transposes(step)) return static_cast<long long>(j);
    const std::size_t c = j / std::size_t(s.rows), r = j % std::size_t(s.rows);
    return static_cast<long long>(r * std::size_t(s.cols) + c);
  };
  auto call = [&](int k) {
    const Shape& s = cases[std::size_t(k)].first;
    run(step, s.rows, s.cols, batch.in(k), batch.out(k));
  };
  return labkit::gate::batch_failure(batch, kStepName[int(step)], what, call, source);
}

void check_step(Step step) {
  check_huge(step);
  labkit::gate::SanitizerCap cap(kSanitizerCap, "elements", kRaceCap);
  std::vector<std::pair<Shape, Offsets>> cases;
  for (const Shape& s : kShapes)
    if (!cap.skips(double(s.rows) * s.cols, str(s), race_checked(s))) cases.push_back({s, {}});
  for (const auto& [s, o] : kMisaligned)
    if (!cap.skips(double(s.rows) * s.cols, str(s, o), o.in && o.out)) cases.push_back({s, o});
  // Under a sanitizer each shape runs on buffers of its exact size, where memcheck sees a read past the end.
  const std::string what = std::string(kStepName[int(step)]) + ", " + std::to_string(cases.size()) + " shapes";
  std::string failure;
  if (!labkit::gate::under_sanitizer()) {
    failure = shapes_batch_failure(step, cases, what);
    if (failure.empty()) {
      labkit::gate::require(labkit::Verdict{}, what + " in one batch");
      return;
    }
  }
  for (const auto& [s, o] : cases) check_shape(step, s, o);
  if (!failure.empty()) FAIL(failure << "\n  " << labkit::gate::reproduce_hint());
}

// Speed: a step against cudaMemcpy device-to-device of the same bytes (the gate's own call, never a step of the
// student's) at n x n. Every timed call gets a freshly filled input and a poisoned output (so no result remembered
// from an earlier call matches) and a cold L2; the launch recorder watches a timed round the gate's secret picks
// and the last call (TimedCase::record), whose output is then checked at sampled positions: three whole rows and
// three whole columns (edges and middle) and 65536 random positions, and never-written elements over all. No check
// before the timing: the last call is one at the timed size on an input it never saw, with the same diagnosis.
void check_speed(Step candidate, std::optional<Step> previous, int n = 8192) {
  const Shape s{n, n};
  const std::size_t count = std::size_t(n) * n;
  const std::uint64_t seed_base = labkit::gate::seed("speed in");
  labkit::GuardedBuffer<float> din(count, "in"), dout(count, "out");
  auto seed_of = [&](int k) { return labkit::derive_seed(seed_base, "call " + std::to_string(k)); };
  auto check_output = [&](Step step, std::uint64_t seed, const std::string& when) {
    LABKIT_CUDA(cudaDeviceSynchronize());
    std::vector<std::pair<std::size_t, double>> samples;
    auto sample = [&](std::size_t i, std::size_t j) {  // out(i, j) = in(j, i) (transposes) or in(i, j) (copies)
      const std::size_t src = transposes(step) ? j * n + i : i * n + j;
      samples.emplace_back(i * n + j, input_at(seed, src));
    };
    for (std::size_t k = 0; k < std::size_t(n); ++k)
      for (std::size_t at : {std::size_t(0), std::size_t(n / 2), std::size_t(n - 1)}) sample(at, k), sample(k, at);
    for (int r = 0; r < 65536; ++r) {
      const auto pos = labkit::random_bits(labkit::derive_seed(seed, "positions"), r);
      sample(std::size_t(pos % n), std::size_t((pos >> 32) % n));
    }
    // Gathered and poison-counted on the device: downloading the 256 MB output and checking it on the host took
    // about 0.3 s of the speed gates' exclusive GPU turn per gate on an H100. A failing check downloads the output,
    // and the host check writes the diagnosis it always wrote.
    const labkit::CheckOptions opt = options_for(step, s);
    labkit::gate::require(
        labkit::device_or_host(labkit::check_close_at_device(dout.data(), count, samples, opt),
                               [&] { return labkit::check_close_at(dout.download(), samples, opt); }),
        std::string(kStepName[int(step)]) + " " + when + " " + str(s));
    auto g = dout.check_guards();
    if (!g.ok) FAIL(kStepName[int(step)] << " " << when << " " << str(s) << ": " << g.message);
  };
  int last = -1;
  labkit::TimedCase tc;
  tc.refresh = [&](int k) {
    labkit::fill_random_device(din.data(), count, seed_of(k));
    dout.poison();
    last = k;
  };
  tc.verify = [&] {
    check_output(candidate, seed_of(last), "in " + labkit::verified_call() + " (an input it had not seen), at");
  };
  // The output of every call kept alike, so that the picked calls are checked after the timing (labkit::KeptCalls).
  labkit::KeptCalls kept;
  kept.device(dout.data(), count).host(last);
  kept.attach(tc);
  labkit::TimingOptions opt;
  opt.warmup = 3;
  opt.min_repeats = 10;
  opt.budget_ms = 150;
  // Two recorded calls: the baseline (cudaMemcpy) runs no kernel, so the recorder's cost per kernel on every call
  // would land on the candidate alone (3 % of a transpose on an H100).
  labkit::gate::record_timed_calls(tc, kStepName[int(candidate)], opt, labkit::RecordedCalls::two_calls);
  auto launcher = [&](Step st) { return [&, st](int) { run(st, n, n, din.data(), dout.data()); }; };
  const auto cmp = labkit::compare_speed(launcher(Step::memcpy), launcher(candidate), tc, opt);
  const double gb = 2.0 * double(count) * sizeof(float) / 1e9;  // bytes read + written
  if (previous)  // information only: a deliberately slow previous step cannot change this gate's verdict
    labkit::gate::report_previous_ratio(cmp, launcher(Step::memcpy), launcher(*previous), tc.refresh,
                                        kStepName[int(candidate)], kStepName[int(*previous)], "memcpy");
  labkit::gate::require_speedup(cmp, kStepName[int(Step::memcpy)], kStepName[int(candidate)], gb, "GB");
}

}  // namespace

TEST_CASE("cpu.reference", "[lab02][cpu]") {
  // The reference every gate trusts: a 2x3 example by hand, and the seed formula the speed gates sample from
  // (in(r, c) = uniform_float(seed, r*cols + c)) against labkit::transpose_ref on a random 37x53 matrix.
  const std::vector<float> in{1, 2, 3, 4, 5, 6};
  CHECK(labkit::transpose_ref<float>(2, 3, in) == std::vector<float>{1, 4, 2, 5, 3, 6});
  const Shape s{37, 53};
  const auto x = labkit::random_floats(std::size_t(s.rows) * s.cols, 42);
  const auto t = labkit::transpose_ref<float>(s.rows, s.cols, x);
  const auto e = expected_for(Step::naive, s, x);
  bool same = true;
  for (std::size_t c = 0; c < std::size_t(s.cols); ++c)
    for (std::size_t r = 0; r < std::size_t(s.rows); ++r) {
      same = same && t[c * s.rows + r] == input_at(42, r * s.cols + c);
      same = same && e[c * s.rows + r] == double(t[c * s.rows + r]);
    }
  CHECK(same);
}

TEST_CASE("step1.correct", "[lab02][step1][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::copy);
}
TEST_CASE("step2.correct", "[lab02][step2][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::naive);
}
TEST_CASE("step3.correct", "[lab02][step3][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::shared);
}
TEST_CASE("step4.correct", "[lab02][step4][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::padded);
}
TEST_CASE("step5.correct", "[lab02][step5][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::tuned);
}

TEST_CASE("step3.speed", "[lab02][step3][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::shared, Step::naive);
}
TEST_CASE("step4.speed", "[lab02][step4][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::padded, Step::shared);
}
TEST_CASE("step4.memcpy", "[lab02][step4][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::padded, std::nullopt);
}
TEST_CASE("step5.speed", "[lab02][step5][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::tuned, Step::padded);
}
