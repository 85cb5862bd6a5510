// Lab 06 gates. Correctness: every step over shapes from 1x1 to 3001x2999 (M = 1, N = 1, sizes that are multiples
// of no tile, square, N x 2N and tall A), fresh random inputs per run, guard bands around A and C, C poisoned
// before every call so that unwritten elements are told apart, A verified unmodified, C checked against a
// compensated CPU reference (full, or sampled plus an element-wise cross-check with cublasDgemm for large C),
// exact symmetry, and a repeat run compared bit for bit. The references are computed once per process and shape and
// reused by every step whose A is the same, element for element. Speed: ratios against cuBLAS or the gate's own naive
// kernel, measured in one process on a fresh A for every timed call, the last call's C verified (on the device; on the
// host only what the device cannot show passing, with the diagnosis).
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ata.h"
#include "naive_ata.h"
#include "labkit/compare_device.h"
#include "labkit/cublas.h"
#include "labkit/device.h"
#include "labkit/gate.h"
#include "labkit/launches.h"
#include "labkit/guard.h"
#include "labkit/random.h"
#include "labkit/ref_ata.h"
#include "labkit/reference.h"
#include "labkit/report.h"

namespace {

enum class Step { gemm = 0, syrk, naive, tiled, regblock, regblock4, symmetric, tensor_core, tensor_core_sm90 };
const char* const kStepName[] = {"step 1 (cublasDgemm)",        "step 1 (cublasDsyrk + mirror)",
                                 "step 2 (naive)",              "step 3 (shared-memory tiles)",
                                 "step 4 (register blocking)",  "step 5 (4 x 4 register blocks)",
                                 "step 6 (symmetric tiles)",    "step 7a (fp64 tensor cores, m8n8k4)",
                                 "step 7b (fp64 tensor cores, sm_90 shapes)"};
const char* name(Step s) { return kStepName[int(s)]; }

labkit::CublasHandle& cublas() {
  static labkit::CublasHandle handle;  // created once per process: handle creation costs ~100 ms
  return handle;
}

void run(Step s, int M, int N, const double* A, double* C) {
  switch (s) {
    case Step::gemm: return lab06::ata_cublas_gemm(cublas(), M, N, A, C);
    case Step::syrk: return lab06::ata_cublas_syrk(cublas(), M, N, A, C);
    case Step::naive: return lab06::ata_naive(M, N, A, C);
    case Step::tiled: return lab06::ata_tiled(M, N, A, C);
    case Step::regblock: return lab06::ata_regblock(M, N, A, C);
    case Step::regblock4: return lab06::ata_regblock4(M, N, A, C);
    case Step::symmetric: return lab06::ata_symmetric(M, N, A, C);
    case Step::tensor_core: return lab06::ata_tensor_core(M, N, A, C);
    case Step::tensor_core_sm90: return lab06::ata_tensor_core_sm90(M, N, A, C);
  }
}

// The gate's own cuBLAS handle for the library calls it trusts and its device-side checks: the student's step 1 is
// handed cublas() and could leave its stream, pointer mode, math mode, workspace or SM-count target changed, which
// would slow the baselines every speed gate is timed against.
labkit::CublasHandle& gate_blas() {
  static labkit::CublasHandle handle;
  return handle;
}

// The library calls the gates trust (never the student's step 1): the cross-check for large outputs and the
// speed baselines.
void reference_dgemm(int M, int N, const double* A, double* C) {
  const double one = 1.0, zero = 0.0;
  LABKIT_CUBLAS(cublasDgemm(gate_blas(), CUBLAS_OP_N, CUBLAS_OP_T, N, N, M, &one, A, N, A, N, &zero, C, N));
}
void reference_dsyrk_triangle(int M, int N, const double* A, double* C) {  // one triangle only: half the work
  const double one = 1.0, zero = 0.0;
  LABKIT_CUBLAS(cublasDsyrk(gate_blas(), CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, N, M, &one, A, N, &zero, C, N));
}

// Tolerance, relative to ||C||_max. Each C(i, j) is a sum of K = M products. Whatever the summation order (serial,
// blocked, tensor-core), the rounding error is bounded by gamma_K * sum_k |A(k,i) A(k,j)| with gamma_K ~ K*u
// (u = 2^-53), and by Cauchy-Schwarz sum_k |A(k,i) A(k,j)| <= sqrt(C(i,i) C(j,j)) <= max_i C(i,i) = ||C||_max.
// So K*u bounds the relative infinity-norm error rigorously; two correct results differ by at most twice that.
// 3*(K+2)*u adds the reference's own rounding and the 1/(1-Ku) of gamma_K. Typical errors are ~sqrt(K)*u, far
// below; a single missing product shifts an element by ~|C|/K, far above (K*u < 1e-12 for every K used here).
double tolerance(int M) { return 3.0 * (double(M) + 2.0) * 0x1p-53; }

struct Shape {
  int M, N;
};
std::string str(const Shape& s) {
  std::ostringstream os;
  os << "M=" << s.M << " N=" << s.N;
  return os.str();
}

// M = 1 (C is an outer product), N = 1 (C is 1x1), tiny, sizes that are multiples of none of the tiles used in
// this lab (16, 32, 48, 64, 128), square, N = 2M (the seed's N x 2N table) and tall A (M >> N), up to 3001x2999.
const std::vector<Shape> kShapes = {
    {1, 1},     {1, 7},     {7, 1},      {1, 300},    {300, 1},    {2, 3},      {13, 17},
    {31, 33},   {47, 65},   {100, 97},   {129, 95},   {5, 1000},   {1000, 5},   {257, 255},
    {300, 600}, {601, 301}, {769, 771},  {1531, 3062}, {3001, 2999},
};
constexpr double kFullReferenceLimit = double(1 << 28);  // multiply-adds of the upper triangle; above: sampled
// Under compute-sanitizer (labkit::gate::under_sanitizer) the shapes whose full product A^T A takes more than 2^27
// multiply-adds (M N^2) are left out: 769x771, 1531x3062 and 3001x2999 (the last two: many minutes under racecheck).
// What stays still has every kind: M = 1, N = 1, tiny, multiples of no tile, square (257x255), N = 2M (300x600)
// and tall A (601x301, 1000x5), with up to 5 tiles of 128 per side.
constexpr double kSanitizerCap = double(1 << 27);
// racecheck in the grader's default checks: 2^21 multiply-adds. Its cost is per shared-memory access (about a
// million a second on an H100) and a race is between the threads of one block, so the shapes that fill one block's
// tiles, edges included, are enough: 129x95 and 100x97 (a full and a partial 64-tile, one 128-tile), tiny, M = 1,
// N = 1 and the small misaligned shape. The misaligned 130x256 and 257x301, which skipped the cap before and were
// most of lab 06's two minutes of racecheck, now go through it like every shape (`labgrade --sanitize` keeps
// them; the default memcheck keeps 47x66 misaligned).
constexpr double kRaceCap = double(1 << 21);
// Of the shapes under that cap, racecheck keeps 129x95 and 100x97, M = 1 over three 128-tiles (1x300) and the
// misaligned 47x66 with both pointers off; memcheck checks the rest (SanitizerCap::skips with race_checked). Measured
// on an H100 (LABKIT_GATE_TRACE): a shape costs about 0.1 s under racecheck however small, and 1000x5, whose 1000 rows
// of A are the k loop of a single block, 2.7 s of step 3's 7 s and a third of every other step's time; 129 rows already
// take the k loop over several tiles with a partial last one.
bool race_checked(const Shape& s) {
  return (s.M == 129 && s.N == 95) || (s.M == 100 && s.N == 97) || (s.M == 1 && s.N == 300);
}

std::size_t at(int N, int i, int j) { return std::size_t(i) * N + j; }

// ---- host work: kept buffers, every core ---------------------------------------------------------------------
// A passing Verdict for a check decided on the device (the host check then only words a failure).
labkit::Verdict passed(std::size_t checked) {
  labkit::Verdict v;
  v.checked = checked;
  return v;
}

// Bit-for-bit equality on every core: whether a cached reference belongs to this A (reference_for).
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  std::atomic<bool> same{true};
  labkit::parallel_for(
      a.size(),
      [&](std::size_t b0, std::size_t e) {
        if (std::memcmp(a.data() + b0, b.data() + b0, (e - b0) * sizeof(double)) != 0) same = false;
      },
      labkit::kElementGrain);
  return same;
}

// Host vectors the process keeps, one per role and size class. A fresh 72 MB vector costs ~40 ms of page faults
// and zeroing before a copy even starts, more than the copy; a kept one is mapped once. Large shapes have their
// own set, so that switching between the two large shapes regrows a vector by a few MB, not from nothing.
// A: the drawn A (compared with the cached one), then A as the step left it (compared again).
enum class Scratch { A, out, again, count };
std::vector<double>& scratch(Scratch role, std::size_t n) {
  constexpr std::size_t kLarge = std::size_t(1) << 20;
  static std::vector<double> kept[2][int(Scratch::count)];
  std::vector<double>& v = kept[n >= kLarge][int(role)];
  v.resize(n);
  return v;
}

// ---- what a gate process computes once per shape ---------------------------------------------------------------
// Every correctness gate of a process draws the same A for a shape (its seed names the shape only), and the CPU
// reference of one shape cost more than the rest of a step's check (full at 769 x 771: 0.1 s; sampled at 3001 x 2999,
// with cublasDgemm's C downloaded: 0.2 s). An entry serves a gate only when its A equals the gate's element for
// element (reference_for), so that what it holds is always the reference of the A the step was given.
struct FullReference {
  std::vector<double> C;
  std::vector<labkit::Hypothesis> hypotheses;
};
struct ShapeReference {
  std::vector<double> A;
  std::optional<FullReference> full;                                   // shapes small enough for a full reference
  std::optional<std::vector<std::pair<std::size_t, double>>> samples;  // larger ones: CPU values at sample positions
  std::optional<std::vector<double>> dgemm;  // larger ones: cublasDgemm's C, kept once it matched the samples
};

// The entry for this A: the cached one when its A is bit-for-bit this one, else a new entry (nothing computed yet).
ShapeReference& reference_for(const Shape& s, const std::vector<double>& A) {
  static std::map<std::pair<int, int>, ShapeReference> cache;
  ShapeReference& r = cache[{s.M, s.N}];
  if (!same_bits(r.A, A)) {
    r = ShapeReference{};
    r.A = A;
  }
  return r;
}

// One shape's inputs. offA / offC: the step gets A + offA and C + offC, pointers one double (8 bytes) off a 16-byte
// boundary when 1, so that a vector path (float4, double2, 16-byte cp.async) taken without checking the alignment
// faults or reads the wrong elements. The elements before C + offC belong to nobody and must stay untouched.
// A is drawn fresh from the gate's seed, then looked up (by content) among the process's references.
struct Inputs {
  Shape s;
  int offA, offC;
  ShapeReference& ref;
  const std::vector<double>& A;  // ref.A: equal to what was drawn
  labkit::GuardedBuffer<double> dA, dC;
  Inputs(Shape sh, int offA_ = 0, int offC_ = 0)
      : s(sh),
        offA(offA_),
        offC(offC_),
        ref(reference_for(sh, drawn(sh))),
        A(ref.A),
        dA(A.size() + offA_, "A"),
        dC(std::size_t(sh.N) * sh.N + offC_, "C") {
    const std::vector<double> pad(offA, 1.0);  // the elements before A + offA: never part of any product
    if (offA) LABKIT_CUDA(cudaMemcpy(dA.data(), pad.data(), offA * sizeof(double), cudaMemcpyHostToDevice));
    LABKIT_CUDA(cudaMemcpy(dA.data() + offA, A.data(), A.size() * sizeof(double), cudaMemcpyHostToDevice));
    LABKIT_CUDA(cudaStreamSynchronize(0));  // a pageable copy may return before its DMA has landed
  }
  static const std::vector<double>& drawn(const Shape& sh) {
    std::vector<double>& v = scratch(Scratch::A, std::size_t(sh.M) * sh.N);
    labkit::fill_random(v, labkit::gate::seed("A " + str(sh)));
    return v;
  }
  const double* a() const { return dA.data() + offA; }
  double* c() { return dC.data() + offC; }
  std::string label() const {
    return str(s) + (offA || offC ? ", A offset " + std::to_string(offA) + " C offset " + std::to_string(offC) +
                                        " doubles (not 16-byte aligned)"
                                  : std::string());
  }
  // Runs the step and copies C (from C + offC) into `out`, sized N x N by the caller.
  void run_step(Step step, std::vector<double>& out) {
    dC.poison();  // every element must be written by the call itself
    // Only the step's own kernels may run (step 1: cuBLAS too, rubric allow_libraries); timed calls: run().
    labkit::gate::own_kernels(name(step), [&] { run(step, s.M, s.N, a(), c()); });
    LABKIT_CUDA(cudaDeviceSynchronize());  // a fault inside the kernel surfaces here, attributed to this step
    std::vector<double> before(offC);
    if (offC) LABKIT_CUDA(cudaMemcpy(before.data(), dC.data(), offC * sizeof(double), cudaMemcpyDeviceToHost));
    for (int e = 0; e < offC; ++e)
      if (!labkit::is_poison(before[e]))
        FAIL(name(step) << ", " << label() << ": the element " << (offC - e)
                        << " before C was written: the kernel rounded the pointer down to a 16-byte boundary (check "
                           "the alignment before a vector access)\n  "
                        << labkit::gate::reproduce_hint());
    LABKIT_CUDA(cudaMemcpy(out.data(), c(), out.size() * sizeof(double), cudaMemcpyDeviceToHost));
  }
};

labkit::CheckOptions options_for(const Shape& s) {
  labkit::CheckOptions opt;
  opt.tolerance = tolerance(s.M);
  opt.name = "C";
  opt.rows = s.N;
  opt.cols = s.N;
  return opt;
}

// Poisoned (never written) elements of C above, below and on the diagonal, counted on every core.
struct PoisonCounts {
  std::size_t upper = 0, lower = 0, diag = 0;
};
PoisonCounts count_poison_by_triangle(const std::vector<double>& C, int N) {
  const std::size_t rows_per_task = std::max<std::size_t>(1, labkit::kElementGrain / std::size_t(N));
  PoisonCounts total;
  for (const PoisonCounts& part : labkit::parallel_parts<PoisonCounts>(
           std::size_t(N),
           [&](std::size_t i0, std::size_t i1) {
             PoisonCounts p;
             for (std::size_t i = i0; i < i1; ++i)
               for (std::size_t j = 0; j < std::size_t(N); ++j)
                 if (labkit::is_poison(C[i * N + j])) (i < j ? p.upper : i > j ? p.lower : p.diag)++;
             return p;
           },
           rows_per_task))
    total.upper += part.upper, total.lower += part.lower, total.diag += part.diag;
  return total;
}

// Which triangles still hold the poison: a whole triangle never written is the classic step 1b / 6 / 7 mistake.
std::string triangle_diagnosis(const std::vector<double>& C, int N) {
  const PoisonCounts p = count_poison_by_triangle(C, N);
  const std::size_t tri = std::size_t(N) * (N - 1) / 2;
  if (tri == 0) return "";
  if (p.lower == tri && p.upper < tri)
    return "the strictly lower triangle of C was never written (still the poison value) while the upper one was:"
           " the mirror step is missing (step 1b: copy the syrk triangle across; steps 6-7: every upper tile must"
           " also write C(j, i))";
  if (p.upper == tri && p.lower < tri)
    return "the strictly upper triangle of C was never written (still the poison value) while the lower one was:"
           " the mirror step is missing";
  if (p.diag == std::size_t(N) && p.upper < tri)
    return "the diagonal of C was never written: diagonal tiles skip their i == j elements";
  return "";
}

// Pairs (i < j) with C(i, j) and C(j, i) not equal (NaN matching NaN), and the first of them in row order.
struct Asymmetry {
  std::size_t count = 0;
  int i = -1, j = -1;
  void add(int i_, int j_) {
    if (count++ == 0 || i_ < i || (i_ == i && j_ < j)) i = i_, j = j_;
  }
  void merge(const Asymmetry& o) {
    if (o.count == 0) return;
    if (count == 0 || o.i < i || (o.i == i && o.j < j)) i = o.i, j = o.j;
    count += o.count;
  }
};

// One block row of the upper triangle, 64 x 64 blocks at a time: both the rows read and the columns read stay in
// cache while a block is compared.
constexpr int kSymBlock = 64;
void scan_block_row(const std::vector<double>& C, int N, int i0, Asymmetry& found) {
  for (int j0 = i0; j0 < N; j0 += kSymBlock)
    for (int i = i0; i < std::min(N, i0 + kSymBlock); ++i)
      for (int j = std::max(j0, i + 1); j < std::min(N, j0 + kSymBlock); ++j) {
        const double a = C[at(N, i, j)], b = C[at(N, j, i)];
        if (!(a == b) && !(std::isnan(a) && std::isnan(b))) found.add(i, j);
      }
}

// Every block row on every core. Block row b holds nb - b blocks: a task takes rows p and nb-1-p together, so that
// the tasks carry equal work and the cores finish together.
Asymmetry find_asymmetry(const std::vector<double>& C, int N) {
  const int nb = (N + kSymBlock - 1) / kSymBlock;
  Asymmetry total;
  for (const Asymmetry& part : labkit::parallel_parts<Asymmetry>(
           std::size_t(nb + 1) / 2,
           [&](std::size_t p0, std::size_t p1) {
             Asymmetry found;
             for (std::size_t p = p0; p < p1; ++p) {
               scan_block_row(C, N, int(p) * kSymBlock, found);
               if (int(p) != nb - 1 - int(p)) scan_block_row(C, N, (nb - 1 - int(p)) * kSymBlock, found);
             }
             return found;
           },
           1))
    total.merge(part);
  return total;
}

// C(i, j) and C(j, i) must be equal bit for bit (up to the sign of zero).
labkit::Verdict check_exact_symmetry(const std::vector<double>& C, int N, Step step) {
  labkit::Verdict v;
  const Asymmetry bad = find_asymmetry(C, N);
  v.checked = std::size_t(N) * (N - 1) / 2;
  v.wrong = bad.count;
  v.ok = bad.count == 0;
  if (!v.ok) {
    const int fi = bad.i, fj = bad.j;
    std::ostringstream os;
    os.precision(17);
    os << "C is not exactly symmetric: " << bad.count << " of " << v.checked << " pairs differ, first C(" << fi
       << "," << fj << ") = " << C[at(N, fi, fj)] << " but C(" << fj << "," << fi << ") = " << C[at(N, fj, fi)]
       << ".\n  ";
    if (step == Step::symmetric || step == Step::tensor_core || step == Step::tensor_core_sm90 || step == Step::syrk)
      os << "Here C(j, i) should be a copy of C(i, j). On a diagonal tile both halves are computed: let only the"
            " elements with i <= j write (both places), so that each pair comes from one accumulator.";
    else
      os << "C(i, j) and C(j, i) are sums of the same products A(k,i)*A(k,j) = A(k,j)*A(k,i); summed in the same"
            " k order they are bit-identical. A difference means different k orders for the two (e.g. a k tile"
            " skipped on one side only) or a race.";
    v.message = os.str();
  }
  return v;
}

// Wrong answers of common mistakes, so that the diagnosis can name them (small shapes only).
std::vector<labkit::Hypothesis> hypotheses(const Shape& s, const std::vector<double>& A) {
  std::vector<labkit::Hypothesis> out;
  if (double(s.M) * s.N * s.N > double(1 << 22)) return out;
  if (s.M == s.N && s.M > 1) {
    // A A^T: the row-/column-major mix-up. (A^T)^T (A^T) with A^T as an N x M row-major array.
    std::vector<double> At(A.size());
    for (int k = 0; k < s.M; ++k)
      for (int i = 0; i < s.N; ++i) At[std::size_t(i) * s.M + k] = A[std::size_t(k) * s.N + i];
    out.push_back({"C holds A*A^T instead of A^T*A: rows of A were multiplied instead of columns "
                   "(a row-major / column-major mix-up)",
                   labkit::ata_ref(s.N, s.M, At)});
  }
  // The loop over k drops the partial last tile of t rows: only the first M/t*t rows of A are summed.
  for (int t : {4, 8, 16, 32, 48, 64, 128}) {
    const int M_short = s.M / t * t;
    if (M_short == s.M || M_short == 0) continue;
    std::vector<double> head(A.begin(), A.begin() + std::size_t(M_short) * s.N);
    out.push_back({"the products for k >= " + std::to_string(M_short) +
                       " are missing: the loop over k skips the partial last tile (tile of " + std::to_string(t) +
                       " rows of A)",
                   labkit::ata_ref(M_short, s.N, head)});
  }
  return out;
}

// Positions for the sampled reference: whole rows 0, N/2, N-1, the whole diagonal, and random positions.
std::vector<std::pair<int, int>> sample_positions(const Shape& s) {
  std::vector<std::pair<int, int>> pos;
  for (int j = 0; j < s.N; ++j) pos.emplace_back(0, j), pos.emplace_back(s.N / 2, j), pos.emplace_back(s.N - 1, j);
  for (int i = 0; i < s.N; ++i) pos.emplace_back(i, i);
  const auto seed = labkit::gate::seed("positions " + str(s));
  for (int r = 0; r < 4096; ++r) {
    const auto bits = labkit::random_bits(seed, r);
    pos.emplace_back(int(bits % s.N), int((bits >> 32) % s.N));
  }
  return pos;
}

// The entry's full CPU reference and hypotheses, computed on first use.
const FullReference& full_reference(ShapeReference& r, const Shape& s) {
  if (!r.full) r.full = FullReference{labkit::ata_ref(s.M, s.N, r.A), hypotheses(s, r.A)};
  return *r.full;
}

// The entry's CPU values at the sample positions, as (index in C, value), computed on first use.
const std::vector<std::pair<std::size_t, double>>& sampled_reference(ShapeReference& r, const Shape& s) {
  if (!r.samples) {
    const auto pos = sample_positions(s);
    const auto vals = labkit::ata_ref_at(s.M, s.N, r.A, pos);
    std::vector<std::pair<std::size_t, double>> samples(pos.size());
    for (std::size_t p = 0; p < pos.size(); ++p) samples[p] = {at(s.N, pos[p].first, pos[p].second), vals[p]};
    r.samples = std::move(samples);
  }
  return *r.samples;
}

// cublasDgemm's C for the entry's A, computed on first use from the gate's device copy of A (just verified
// unmodified, so equal to r.A) and kept only once it matches the CPU at the sample positions: the later gates of
// the process compare with a result already checked.
const std::vector<double>& trusted_dgemm(ShapeReference& r, const Inputs& in) {
  if (!r.dgemm) {
    const Shape& s = in.s;
    labkit::GuardedBuffer<double> trusted(std::size_t(s.N) * s.N, "C (cublasDgemm)");
    trusted.poison();
    reference_dgemm(s.M, s.N, in.a(), trusted.data());
    std::vector<double> t = trusted.download();
    labkit::gate::require(labkit::check_close_at(t, sampled_reference(r, s), options_for(s)),
                          "the cublasDgemm cross-check itself, " + str(s));
    r.dgemm = std::move(t);
  }
  return *r.dgemm;
}

// Checks one step on one shape: guards, unmodified input, written triangles, value, exact symmetry, repeatability.
void check_shape(Step step, const Shape& s, int offA = 0, int offC = 0) {
  Inputs in(s, offA, offC);
  std::vector<double>& out = scratch(Scratch::out, std::size_t(s.N) * s.N);
  in.run_step(step, out);
  const std::string ctx = std::string(name(step)) + ", " + in.label();

  for (const auto* buf : {&in.dA, &in.dC}) {
    auto g = buf->check_guards();
    if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
  }
  {
    std::vector<double>& after = scratch(Scratch::A, in.A.size());
    LABKIT_CUDA(cudaMemcpy(after.data(), in.a(), after.size() * sizeof(double), cudaMemcpyDeviceToHost));
    labkit::gate::require(labkit::check_unmodified(after, in.A, "A"), ctx);
  }
  const std::string tri = triangle_diagnosis(out, s.N);
  if (!tri.empty()) FAIL(ctx << ": " << tri << "\n  " << labkit::gate::reproduce_hint());

  labkit::CheckOptions opt = options_for(s);
  if (double(s.M) * s.N * (s.N + 1) / 2 <= kFullReferenceLimit) {
    const FullReference& full = full_reference(in.ref, s);
    opt.hypotheses = full.hypotheses;
    labkit::gate::require(labkit::check_close(out, full.C, opt), ctx);
  } else {
    // Too large for a full CPU reference: sampled positions against the CPU, and every element against
    // cublasDgemm (itself checked at the sampled positions first).
    labkit::gate::require(labkit::check_close_at(out, sampled_reference(in.ref, s), opt), ctx);
    if (step != Step::gemm)
      labkit::gate::require(labkit::check_close(out, trusted_dgemm(in.ref, in), opt),
                            ctx + " (compared with cublasDgemm)");
  }
  // cuBLAS's GEMM computes C(i, j) and C(j, i) independently and promises no bitwise symmetry; every other step
  // must deliver it (by construction in steps 1b, 6, 7; by identical summation order in steps 2-5).
  if (step != Step::gemm) labkit::gate::require(check_exact_symmetry(out, s.N, step), ctx);

  // A sanitized run leaves the second run out (labkit::gate::repeat_runs): the tool saw every access in the first.
  if (labkit::gate::repeat_runs()) {
    std::vector<double>& again = scratch(Scratch::again, out.size());
    in.run_step(step, again);
    labkit::gate::require(labkit::check_same_runs(out, again, opt), ctx);
  }
}
// Pointers off a 16-byte boundary (lab 05's pattern): A, C or both one double past an aligned address, on shapes with
// an even N (every row would otherwise be 16-byte aligned if the base were) and an odd one, over several tiles.
const std::vector<std::pair<int, int>> kOffsets = {{1, 0}, {0, 1}, {1, 1}};
// 47x66 is small enough for every sanitizer cap.
const std::vector<Shape> kOffsetShapes = {{47, 66}, {130, 256}, {257, 301}};

void check_step(Step step) {
  labkit::gate::SanitizerCap cap(kSanitizerCap, "multiply-adds", kRaceCap);
  for (const Shape& s : kShapes)
    if (!cap.skips(double(s.M) * s.N * s.N, str(s), race_checked(s))) check_shape(step, s);
  for (const Shape& s : kOffsetShapes)
    for (auto [oa, oc] : kOffsets) {
      const std::string name = str(s) + " offsets A+" + std::to_string(oa) + " C+" + std::to_string(oc);
      // One pointer off at a time runs the same tiles and barriers as both at once: racecheck takes only the
      // latter, memcheck checks every address of each.
      if (!cap.skips(double(s.M) * s.N * s.N, name, oa && oc)) check_shape(step, s, oa, oc);
    }
}

// Speed: candidate vs a baseline the student cannot change (cublasDgemm, cublasDsyrk, or the gate's own naive
// kernel in naive_ata.cu) at one size, in the TimedCase form of labkit::compare_speed:
//  - refresh(rep), untimed, before every timed call: A gets new random contents (a seed per rep) and C the poison,
//    so a step that caches C (keyed on pointers, sizes or sampled values) or returns at once leaves a wrong C;
//  - verify(), untimed, after the candidate's call in a round the gate's secret picks and after its last call:
//    that call's C is compared with cublasDgemm on its A, and must be exactly symmetric;
//  - record: only the step's own kernels may run, in a timed round the gate's secret picks and in the last call.
std::uint64_t speed_seed(const Shape& s, int rep) {
  return labkit::gate::seed("A speed " + str(s) + ", timed call " + std::to_string(rep));
}


// True when check_exact_symmetry(C) would pass, shown on the device with one number copied back: D = C - C^T
// (cublasDgeam, one rounded subtraction per element) is all zeros exactly when every pair is finite and equal (two
// different finite doubles never subtract to zero, subnormals included; Inf and NaN give Inf or NaN), and
// sum |D| (cublasDasum, a sum of non-negative terms) is zero exactly when D is. False means "not shown": the host
// check then decides, and words the diagnosis.
bool device_shows_symmetric(const double* C, int N) {
  labkit::DeviceBuffer<double> D(std::size_t(N) * N);
  const double one = 1.0, minus_one = -1.0;
  cublasHandle_t h = gate_blas();
  LABKIT_CUBLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  LABKIT_CUBLAS(cublasDgeam(h, CUBLAS_OP_N, CUBLAS_OP_T, N, N, &one, C, N, &minus_one, C, N, D.data(), N));
  double sum = -1;
  LABKIT_CUBLAS(cublasDasum(h, N * N, D.data(), 1, &sum));
  return sum == 0.0;
}

// The candidate's C against cublasDgemm on the same A (the trusted result), guards and exact symmetry. Both checks
// run on the device first (at N = 8192 copying C and the reference back and comparing them on the host took
// ~0.3 s, the machine's GPU idle meanwhile); only what the device cannot show passing is downloaded and decided,
// with its diagnosis, by the host checks.
void require_matches_dgemm(Step candidate, const Shape& s, const labkit::GuardedBuffer<double>& dA,
                           const labkit::GuardedBuffer<double>& dC, const std::string& ctx) {
  for (const auto* buf : {&dA, &dC}) {
    const auto g = buf->check_guards();
    if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
  }
  labkit::GuardedBuffer<double> trusted(std::size_t(s.N) * s.N, "C (cublasDgemm)");
  trusted.poison();
  reference_dgemm(s.M, s.N, dA.data(), trusted.data());
  // The gate's own handle (gate_blas(), on the legacy default stream): an error of its cublasDgemm shows here, not
  // in the checks below.
  LABKIT_CUDA(cudaDeviceSynchronize());
  // Host copies kept for the process (512 MB each at N = 8192: fresh ones cost more in page faults than the
  // comparison), filled only for a host check.
  static std::vector<double> out, t;
  bool downloaded = false;
  auto host_out = [&]() -> const std::vector<double>& {
    if (!downloaded) dC.download_into(out), downloaded = true;
    return out;
  };
  const labkit::CheckOptions opt = options_for(s);
  const std::size_t n = dC.size();
  labkit::gate::require(labkit::device_or_host(labkit::check_close_device(dC.data(), trusted.data(), n, opt),
                                               [&] {
                                                 trusted.download_into(t);
                                                 return labkit::check_close(host_out(), t, opt);
                                               }),
                        ctx + " (compared with cublasDgemm)");
  labkit::gate::require(device_shows_symmetric(dC.data(), s.N) ? passed(std::size_t(s.N) * (s.N - 1) / 2)
                                                                : check_exact_symmetry(host_out(), s.N, candidate),
                        ctx);
}

using Launcher = std::function<void(int, int, const double*, double*)>;

// The gate's verdict is `candidate` against `baseline`. `previous` (an earlier step) is timed against the same
// baseline only to report how far the step moved (metric previous_ratio): the teaching point, without letting a
// deliberately slow earlier step raise this gate's ratio.
void check_speed(const std::string& baseline_name, const Launcher& baseline, Step candidate, int M, int N,
                 std::optional<Step> previous = std::nullopt) {
  const Shape s{M, N};
  const std::string ctx = std::string(name(candidate)) + " at the timed size " + str(s);
  labkit::GuardedBuffer<double> dA(std::size_t(M) * N, "A"), dC(std::size_t(N) * N, "C");
  labkit::DeviceBuffer<double> base_C(std::size_t(N) * N);  // the baseline's own C: it never writes the candidate's
  // No check before the timing: a fast wrong kernel earns nothing, since verify() checks the last call (at the
  // timed size, on an A it never saw) with the same message, and the launch recorder watches a timed round the
  // gate's secret picks and that last call (TimedCase::record).
  // compare_speed calls refresh(k) before call k (k counts every call, the baseline's too), and verify() on the
  // candidate call it checks, restored with what `kept` holds of it: `last_rep` names the A that call read.
  int inputs_rep = -1, last_rep = -1;
  labkit::TimedCase tc;
  tc.refresh = [&](int rep) {
    labkit::fill_random_device(dA.data(), dA.size(), speed_seed(s, rep));
    dC.poison();
    inputs_rep = rep;
  };
  tc.verify = [&] {
    LABKIT_CUDA(cudaDeviceSynchronize());
    if (last_rep < 0 || last_rep != inputs_rep) FAIL(ctx << ": the verified call was not the candidate's");
    // A as the refresh wrote it, checked against its seed on the device: the trusted product is computed from dA,
    // so a step that overwrote A (zeros: a zero C is "right" and exactly symmetric) would judge itself.
    labkit::gate::require(labkit::check_unmodified_device(dA.data(), dA.size(), speed_seed(s, last_rep), "A"),
                          ctx + ", after " + labkit::verified_call());
    require_matches_dgemm(
        candidate, s, dA, dC,
        ctx + ", the C of " + labkit::verified_call() + " (fresh A, call " + std::to_string(last_rep) + ")");
  };
  labkit::TimingOptions opt;
  opt.warmup = 2;
  opt.min_repeats = 5;
  // Not 100 ms as in labs 01 and 04: at 8192 a call takes 12-30 ms, and with half the rounds step 7a's ratio moved
  // from 0.79 to 0.73 and step 6's from 0.52 to 0.54 (five runs each on an H100), a shift and not noise: the ratio
  // depends on how many calls run, probably because the clocks have not settled yet under that load.
  opt.budget_ms = 200;
  // Every call recorded: cuBLAS is the shortcut here, and the calls are long (on an H100 the ratios moved 0-4 %
  // against two recorded calls, upward: no step loses by it).
  labkit::gate::record_timed_calls(tc, name(candidate), opt, labkit::RecordedCalls::every_call);
  // C, A (which verify() checks the call left as the refresh wrote it) and the bookkeeping of every candidate call
  // kept alike, so that the picked calls are checked after the timing (labkit::KeptCalls).
  labkit::KeptCalls kept;
  kept.device(dA.data(), dA.size()).device(dC.data(), dC.size()).host(inputs_rep).host(last_rep);
  kept.attach(tc);
  auto timed_baseline = [&](int) { baseline(M, N, dA.data(), base_C.data()); };
  const auto cmp = labkit::compare_speed(timed_baseline,
                                         [&](int) {
                                           run(candidate, M, N, dA.data(), dC.data());
                                           last_rep = inputs_rep;  // host bookkeeping: nanoseconds
                                         },
                                         tc, opt);
  if (previous)
    labkit::gate::report_previous_ratio(cmp, timed_baseline,
                                        [&](int) { run(*previous, M, N, dA.data(), dC.data()); }, tc.refresh,
                                        name(candidate), name(*previous), baseline_name);
  // The work is the full product's 2*M*N^2 flops for every variant: symmetric variants are credited with the
  // half they did not compute, so the GFLOP/s are "effective" and comparable.
  const double gflop = 2.0 * M * double(N) * N / 1e9;
  labkit::gate::require_speedup(cmp, baseline_name, name(candidate), gflop, "GFLOP");
}

// Step 7b's instructions exist on sm_90 only: elsewhere its gates skip with the reason (the grading GPU is an H100).
void require_sm90() {
  const auto dev = labkit::device_info();
  if (dev.major != 9)
    SKIP("step 7b uses the mma.sync m16n8k* f64 shapes, which only sm_90 devices have; this one is sm_"
         << dev.major << dev.minor);
}

}  // namespace

TEST_CASE("cpu.reference", "[lab06][cpu]") {
  // The CPU reference every gate trusts: a product small enough to check by hand, and a column pair whose dot
  // product (1e16 + 1 - 1e16 = 1) plain double summation gets wrong (0) and the compensated one exactly.
  CHECK(labkit::ata_ref(2, 2, {1, 2, 3, 4}) == std::vector<double>{10, 14, 14, 20});
  CHECK(labkit::ata_ref(3, 2, {1e8, 1e8, 1, 1, -1e8, 1e8})[1] == 1.0);
  CHECK(labkit::ata_ref(1, 1, {-3}) == std::vector<double>{9});

  // The exact symmetry check on every core finds what a plain scan of all pairs finds: the count and the first pair
  // in row order, over block rows that different tasks take (N = 301: 5 blocks of 64, the last partial).
  const int N = 301;
  std::vector<double> C = labkit::random_doubles(std::size_t(N) * N, 7);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < i; ++j) C[at(N, i, j)] = C[at(N, j, i)];
  CHECK(check_exact_symmetry(C, N, Step::naive).ok);
  for (auto [i, j] : {std::pair{250, 290}, {3, 200}, {3, 100}, {70, 71}}) C[at(N, j, i)] += 1.0;
  C[at(N, 5, 9)] = C[at(N, 9, 5)] = std::nan("");  // NaN against NaN counts as equal
  const auto v = check_exact_symmetry(C, N, Step::naive);
  CHECK(v.wrong == 4);
  CHECK(v.message.find("first C(3,100)") != std::string::npos);

  // Poison counted per triangle on every core: a lower triangle never written is named.
  std::vector<double> L(std::size_t(N) * N, 1.0);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < i; ++j) L[at(N, i, j)] = labkit::poison_value<double>();
  CHECK(triangle_diagnosis(L, N).find("strictly lower triangle") != std::string::npos);
  CHECK(triangle_diagnosis(C, N).empty());

  // The equality that decides whether a cached reference is this A's.
  std::vector<double> copy = C;
  CHECK(same_bits(C, copy));
  copy[N * N - 1] = -copy[N * N - 1];
  CHECK_FALSE(same_bits(C, copy));
}

TEST_CASE("step1.correct", "[lab06][step1][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::gemm);
}
TEST_CASE("step1.syrk_correct", "[lab06][step1][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::syrk);
}
TEST_CASE("step2.correct", "[lab06][step2][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::naive);
}
TEST_CASE("step3.correct", "[lab06][step3][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::tiled);
}
TEST_CASE("step4.correct", "[lab06][step4][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::regblock);
}
TEST_CASE("step5.correct", "[lab06][step5][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::regblock4);
}
TEST_CASE("step6.correct", "[lab06][step6][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::symmetric);
}
TEST_CASE("step7a.correct", "[lab06][step7a][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_step(Step::tensor_core);
}
TEST_CASE("step7b.correct", "[lab06][step7b][correctness]") {
  LABKIT_REQUIRE_GPU();
  require_sm90();
  check_step(Step::tensor_core_sm90);
}

TEST_CASE("step3.speed", "[lab06][step3][speed]") {
  LABKIT_REQUIRE_GPU();
  // The gate's own naive kernel (what step 2 is), never the student's step 2.
  check_speed("the naive kernel (the gate's own)", lab06::baseline::naive_ata, Step::tiled, 2048, 2048, Step::naive);
}
TEST_CASE("step5.speed", "[lab06][step5][speed]") {
  LABKIT_REQUIRE_GPU();
  // cublasDgemm, never the student's step 4 (reported for information): the threshold sits above where step 4 lands.
  check_speed("cublasDgemm", reference_dgemm, Step::regblock4, 4096, 4096, Step::regblock);
}
TEST_CASE("step6.speed", "[lab06][step6][speed]") {
  LABKIT_REQUIRE_GPU();
  // cublasDgemm, never the student's step 5: the threshold sits above where step 5 lands against it.
  check_speed("cublasDgemm", reference_dgemm, Step::symmetric, 4096, 4096, Step::regblock4);
}
TEST_CASE("step7a.speed", "[lab06][step7a][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed("cublasDgemm", reference_dgemm, Step::tensor_core, 8192, 8192);
}
TEST_CASE("step7a.speed_syrk", "[lab06][step7a][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed("cublasDsyrk (one triangle, no mirror)", reference_dsyrk_triangle, Step::tensor_core, 8192, 8192);
}
TEST_CASE("step7b.speed", "[lab06][step7b][speed]") {
  LABKIT_REQUIRE_GPU();
  require_sm90();
  check_speed("cublasDgemm", reference_dgemm, Step::tensor_core_sm90, 8192, 8192, Step::tensor_core);
}
TEST_CASE("step7b.speed_syrk", "[lab06][step7b][speed]") {
  LABKIT_REQUIRE_GPU();
  require_sm90();
  check_speed("cublasDsyrk (one triangle, no mirror)", reference_dsyrk_triangle, Step::tensor_core_sm90, 8192, 8192);
}
