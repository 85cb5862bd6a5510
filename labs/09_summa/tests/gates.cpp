// Lab 09 gates. The gate binary is an MPI program: every process of `mpirun -np N` runs every gate, and every
// gate is collective. Each process checks its own part, then all processes agree on one verdict (agree()) so that
// they pass, skip or fail the gate together and never wait in a collective that another process left. Only
// world rank 0 writes the result channel (labkit's gates_main), and its failure message carries every process's
// diagnosis, each naming its rank.
//
// The gates distribute the inputs themselves (every process computes its blocks of the global matrices from the
// shared seed): steps 2 and 3 never depend on step 1. The grids are every P x Q of the list below that fits in
// the processes started (1 x 1 up to 2 x 4; the CTest runs use 1, 2, 4, 6 and 8 processes). What the gate files
// share is in gate_util.h; the speed gate is in gates_speed.cpp.
#include <catch2/catch_test_macros.hpp>
#include <catch2/reporters/catch_reporter_event_listener.hpp>
#include <catch2/reporters/catch_reporter_registrars.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <sstream>
#include <vector>

#include "gate_util.h"
#include "labkit/gate.h"
#include "labkit/not_implemented.h"
#include "summa.h"

namespace lab09_gates {

// MPI errors inside a step (a receive longer than its buffer, an invalid datatype) are recorded here instead of
// aborting the job, so that the gate can name them with the rank; the step goes on with what MPI did deliver.
std::vector<std::string> g_mpi_errors;
void record_mpi_error(MPI_Comm*, int* code, ...) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(*code, text, &len);
  if (g_mpi_errors.size() < 4) g_mpi_errors.emplace_back(text, static_cast<std::size_t>(len));
}
std::string take_mpi_errors() {
  std::string out;
  for (const auto& e : g_mpi_errors) out += (out.empty() ? "" : "; ") + e;
  g_mpi_errors.clear();
  return out.empty() ? out : "MPI reported: " + out;
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

lab09::Engine& engine() {
  static lab09::Engine e = lab09::make_engine();
  return e;
}

std::uint64_t shared_seed(std::string_view label) {
  std::uint64_t s = labkit::gate::seed(label);
  MPI_Bcast(&s, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return s;
}

std::string agree(const std::string& mine) {
  const int n = world_size();
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(n), offs(n);
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < n; ++r) offs[r] = total, total += lens[r];
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, MPI_COMM_WORLD);
  std::string out;
  for (int r = 0; r < n; ++r)
    if (lens[r] > 0) out += "\n  rank " + std::to_string(r) + ": " + all.substr(offs[r], lens[r]);
  return out;
}

void require_all(const std::string& mine, const std::string& context) {
  const std::string all = agree(mine);
  if (!all.empty())
    FAIL(context << all << "\n  " << labkit::gate::reproduce_hint() << " (under mpirun -np " << world_size() << ")");
}

std::string grid_text(const lab09::Grid& g) {
  return std::to_string(g.P) + " x " + std::to_string(g.Q) + " grid";
}
std::string where(const lab09::Grid& g) {
  return "(grid row " + std::to_string(g.row) + ", col " + std::to_string(g.col) + ")";
}

float hashed(std::uint64_t seed, int which, std::int64_t i, std::int64_t j) {
  std::uint64_t x = seed ^ (static_cast<std::uint64_t>(which) << 60) ^ (static_cast<std::uint64_t>(i) << 30) ^
                    static_cast<std::uint64_t>(j);
  x += 0x9e3779b97f4a7c15ull;  // splitmix64
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<float>(static_cast<double>(x >> 40) * 0x1p-23 - 1.0);
}

}  // namespace lab09_gates

namespace {
using namespace lab09_gates;

// MPI lives for the whole run of the gate binary: started before the first gate, finished after the last.
class MpiLifetime : public Catch::EventListenerBase {
 public:
  using Catch::EventListenerBase::EventListenerBase;
  void testRunStarting(const Catch::TestRunInfo&) override {
    int started = 0;
    MPI_Initialized(&started);
    if (!started) MPI_Init(nullptr, nullptr);
    // Communicators made from MPI_COMM_WORLD (the grids) inherit the handler.
    MPI_Errhandler handler;
    MPI_Comm_create_errhandler(record_mpi_error, &handler);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, handler);
    MPI_Errhandler_free(&handler);
  }
  void testRunEnded(const Catch::TestRunStats&) override {
    int started = 0, finished = 0;
    MPI_Initialized(&started);
    MPI_Finalized(&finished);
    if (started && !finished) MPI_Finalize();
  }
};
CATCH_REGISTER_LISTENER(MpiLifetime)

struct GridShape {
  int P, Q;
};
// 1 x 1 up to 2 x 4: square, one row, one column, and non-square two-row grids.
const GridShape kGrids[] = {{1, 1}, {1, 2}, {2, 1}, {1, 3}, {3, 1}, {2, 2}, {1, 4}, {4, 1}, {2, 3}, {3, 2}, {2, 4}};

// ---- Step 1 -------------------------------------------------------------------------------------------------------
// Every global element carries its own index (offset + i + j * rows, exact in a float), so a wrong value names
// where it came from: its global position, its block and the rank that owns it.
struct Labels {
  int rows, cols, b, P, Q;
  float offset;
  float at(int i, int j) const { return offset + static_cast<float>(i + static_cast<std::int64_t>(j) * rows); }
  int owner(int i, int j) const { return ((i / b) % P) * Q + (j / b) % Q; }
  std::string block(int i, int j) const {
    return "block (" + std::to_string(i / b) + ", " + std::to_string(j / b) + ")";
  }
  // What a received value is: "never written", or the global element it is, with its owner.
  std::string explain(float v, float poison) const {
    if (v == poison) return "never written (still the poison value)";
    const double idx = static_cast<double>(v) - offset;
    if (idx < 0 || idx >= double(rows) * cols || idx != std::floor(idx)) return "the value " + std::to_string(v) +
                                                                                " is no element of the matrix";
    const int i = static_cast<int>(static_cast<std::int64_t>(idx) % rows),
              j = static_cast<int>(static_cast<std::int64_t>(idx) / rows);
    return "global (" + std::to_string(i) + ", " + std::to_string(j) + ") of " + block(i, j) + ", owned by rank " +
           std::to_string(owner(i, j));
  }
};

constexpr float kPoison = -7.0f, kGuard = -3.0f;  // the labels are all positive
constexpr int kGuardLen = 16;

// The guard bands around a local array: a write outside it names the side and how far.
std::string check_guards(const std::vector<float>& buf, std::size_t n) {
  for (int k = 0; k < kGuardLen; ++k) {
    if (buf[kGuardLen - 1 - k] != kGuard)
      return "wrote " + std::to_string(k + 1) + " float(s) before the start of the array";
    if (buf[kGuardLen + n + k] != kGuard) return "wrote past the end of the array (" + std::to_string(n) + " floats)";
  }
  return "";
}

void scatter_gather_case(int P, int Q, int rows, int cols, int b, std::uint64_t seed) {
  using namespace lab09;
  Grid g = make_grid(MPI_COMM_WORLD, P, Q);
  const Dist d{rows, cols, b};
  const Labels L{rows, cols, b, P, Q, static_cast<float>(1 + seed % 1000)};
  std::ostringstream ctx;
  ctx << "M = " << rows << ", N = " << cols << ", b = " << b << " on a " << P << " x " << Q << " grid";
  const int mloc = g.member() ? local_rows(d, g) : 0, nloc = g.member() ? local_cols(d, g) : 0;
  const std::size_t n = g.member() ? local_size(d, g) : 0;
  const int ld = g.member() ? local_ld(d, g) : 1;

  std::vector<float> global;
  if (world_rank() == 0) {
    global.resize(std::size_t(rows) * cols);
    for (int j = 0; j < cols; ++j)
      for (int i = 0; i < rows; ++i) global[i + std::size_t(j) * rows] = L.at(i, j);
  }
  // scatter: each process checks its local array against the blocks it must own.
  std::vector<float> local(n + 2 * kGuardLen, kGuard);
  std::fill(local.begin() + kGuardLen, local.begin() + kGuardLen + n, kPoison);
  collective_call(g, "scatter, " + ctx.str(), [&] { scatter(g, d, global.data(), local.data() + kGuardLen); });
  std::string problem;
  if (g.member()) {
    problem = check_guards(local, n);
    int wrong = 0;
    for (int lj = 0; lj < nloc; ++lj)
      for (int li = 0; li < mloc; ++li) {
        const int i = global_index(li, b, g.row, P), j = global_index(lj, b, g.col, Q);
        const float got = local[kGuardLen + li + std::size_t(lj) * ld];
        if (got == L.at(i, j)) continue;
        if (wrong++ == 0 && problem.empty()) {
          const std::string what = L.explain(got, kPoison);
          problem = where(g) + " local (" + std::to_string(li) + ", " + std::to_string(lj) + ") should be global (" +
                    std::to_string(i) + ", " + std::to_string(j) + ") of " + L.block(i, j) + ", got " + what;
          if (what.find("owned by rank ") != std::string::npos)
            problem += what.find("owned by rank " + std::to_string(g.rank)) == std::string::npos
                           ? " (a block of another rank: the cyclic owner is (block row mod P, block col mod Q))"
                           : " (a block of this rank in the wrong place: a stride or a block offset)";
        }
      }
    if (wrong) problem += "; " + std::to_string(wrong) + " of " + std::to_string(mloc * nloc) + " local elements wrong";
  }
  require_all(problem, "scatter, " + ctx.str() + ":");

  // gather: every process holds its correct blocks; rank 0 checks the whole matrix it receives.
  if (g.member())
    for (int lj = 0; lj < nloc; ++lj)
      for (int li = 0; li < mloc; ++li)
        local[kGuardLen + li + std::size_t(lj) * ld] =
            L.at(global_index(li, b, g.row, P), global_index(lj, b, g.col, Q));
  std::vector<float> out;
  if (world_rank() == 0) out.assign(std::size_t(rows) * cols + 2 * kGuardLen, kGuard),
                         std::fill(out.begin() + kGuardLen, out.end() - kGuardLen, kPoison);
  const std::vector<float> sent = local;
  collective_call(g, "gather, " + ctx.str(), [&] {
    gather(g, d, local.data() + kGuardLen, world_rank() == 0 ? out.data() + kGuardLen : nullptr);
  });
  problem.clear();
  if (g.member() && local != sent) problem = where(g) + " gather changed its input (the local array)";
  if (world_rank() == 0) {
    if (problem.empty()) problem = check_guards(out, std::size_t(rows) * cols);
    int wrong = 0;
    for (int j = 0; j < cols; ++j)
      for (int i = 0; i < rows; ++i) {
        const float got = out[kGuardLen + i + std::size_t(j) * rows];
        if (got == L.at(i, j)) continue;
        if (wrong++ == 0 && problem.empty()) {
          const int li = (i / (b * P)) * b + i % b, lj = (j / (b * Q)) * b + j % b;
          problem = "global (" + std::to_string(i) + ", " + std::to_string(j) + ") of " + L.block(i, j) +
                    " (rank " + std::to_string(L.owner(i, j)) + ", its local (" + std::to_string(li) + ", " +
                    std::to_string(lj) + ")): got " + L.explain(got, kPoison);
        }
      }
    if (wrong) problem += "; " + std::to_string(wrong) + " of " + std::to_string(rows * cols) + " elements wrong";
  }
  require_all(problem, "gather, " + ctx.str() + ":");
  free_grid(g);
}

// ---- Steps 2 and 3 ------------------------------------------------------------------------------------------------
using SummaFn = void (*)(const lab09::Grid&, lab09::Engine&, int, int, int, int, const float*, const float*, float*);

// The local blocks of a global rows x cols matrix (column-major) on this process, leading dimension local_ld.
std::vector<float> local_part(const std::vector<float>& global, const lab09::Dist& d, const lab09::Grid& g) {
  using namespace lab09;
  std::vector<float> out(local_size(d, g));
  const int ld = local_ld(d, g);
  for (int lj = 0; lj < local_cols(d, g); ++lj)
    for (int li = 0; li < local_rows(d, g); ++li)
      out[li + std::size_t(lj) * ld] =
          global[global_index(li, d.b, g.row, g.P) + std::size_t(global_index(lj, d.b, g.col, g.Q)) * d.rows];
  return out;
}

void summa_case(SummaFn fn, const char* name, int P, int Q, int M, int N, int K, int b, std::uint64_t seed) {
  using namespace lab09;
  Grid g = make_grid(MPI_COMM_WORLD, P, Q);
  std::ostringstream ctx;
  ctx << name << ", M = " << M << ", N = " << N << ", K = " << K << ", b = " << b << " on a " << P << " x " << Q
      << " grid";
  std::vector<float> gA(std::size_t(M) * K), gB(std::size_t(K) * N), gC(std::size_t(M) * N);
  for (int j = 0; j < K; ++j)
    for (int i = 0; i < M; ++i) gA[i + std::size_t(j) * M] = hashed(seed, 0, i, j);
  for (int j = 0; j < N; ++j)
    for (int i = 0; i < K; ++i) gB[i + std::size_t(j) * K] = hashed(seed, 1, i, j);
  for (int j = 0; j < N; ++j)
    for (int i = 0; i < M; ++i) gC[i + std::size_t(j) * M] = hashed(seed, 2, i, j);
  const Dist dA{M, K, b}, dB{K, N, b}, dC{M, N, b};
  std::vector<float> a, bb, c;
  if (g.member()) a = local_part(gA, dA, g), bb = local_part(gB, dB, g), c = local_part(gC, dC, g);
  const std::vector<float> a0 = a, b0 = bb, c0 = c;
  Engine& e = engine();
  std::vector<float> got;
  bool inputs_changed = false;
  std::string past_block;  // a write outside a local block, as the guard bands saw it
  {
    EngineArray A(e, a, "A"), B(e, bb, "B"), C(e, c, "C");
    collective_call(g, ctx.str(), [&] {
      fn(g, e, M, N, K, b, A.ptr(), B.ptr(), C.ptr());
      if (e.gpu) LABKIT_CUDA(cudaDeviceSynchronize());  // an asynchronous fault belongs to the step
    });
    if (g.member()) {
      got = C.read();
      inputs_changed = A.read() != a0 || B.read() != b0;
      for (const EngineArray* x : {&A, &B, &C})
        if (const labkit::GuardReport r = x->guards(); !r.ok && past_block.empty()) past_block = r.message;
    }
  }
  std::string problem;
  if (inputs_changed) problem = where(g) + " the step changed its inputs A or B";
  else if (!past_block.empty()) problem = where(g) + " " + past_block;
  if (g.member() && problem.empty()) {
    const int mloc = local_rows(dC, g), nloc = local_cols(dC, g), ld = local_ld(dC, g);
    const double u = 0x1p-24;  // fp32 unit roundoff
    int wrong = 0, untouched = 0;
    for (int lj = 0; lj < nloc; ++lj)
      for (int li = 0; li < mloc; ++li) {
        const int i = global_index(li, b, g.row, P), j = global_index(lj, b, g.col, Q);
        double ref = gC[i + std::size_t(j) * M], mag = std::fabs(ref);
        for (int p = 0; p < K; ++p) {
          const double t = double(gA[i + std::size_t(p) * M]) * gB[p + std::size_t(j) * K];
          ref += t, mag += std::fabs(t);
        }
        // Any order of K fp32 multiply-adds (cuBLAS, the CPU loop) errs by at most ~(K + 1) u sum|terms|; twice that.
        const double tol = 2.0 * (K + 2) * u * mag + 1e-30;
        const float v = got[li + std::size_t(lj) * ld];
        if (std::fabs(v - ref) <= tol) continue;
        if (v == c0[li + std::size_t(lj) * ld]) ++untouched;
        if (wrong++ > 0) continue;
        std::ostringstream os;
        os << where(g) << " C local (" << li << ", " << lj << ") = global (" << i << ", " << j << ") in block ("
           << i / b << ", " << j / b << "): expected " << ref << ", got " << v;
        if (std::isnan(v)) os << " (NaN)";
        else if (v == c0[li + std::size_t(lj) * ld]) os << " (C unchanged: no update reached this element)";
        else {
          // Which panel is missing or counted twice: its contribution matches the error.
          for (int kb = 0; kb * b < K; ++kb) {
            double part = 0;
            for (int p = kb * b; p < std::min(K, (kb + 1) * b); ++p)
              part += double(gA[i + std::size_t(p) * M]) * gB[p + std::size_t(j) * K];
            const double err = double(v) - ref;
            const char* what = std::fabs(err + part) <= tol ? "missing" : std::fabs(err - part) <= tol ? "added twice" : nullptr;
            if (what && std::fabs(part) > tol) {
              os << " (panel " << kb << " looks " << what << ": A's panel comes from grid column " << kb % Q
                 << ", B's from grid row " << kb % P << ")";
              break;
            }
          }
        }
        problem = os.str();
      }
    if (wrong)
      problem += "; " + std::to_string(wrong) + " of " + std::to_string(mloc * nloc) + " local elements wrong" +
                 (untouched ? " (" + std::to_string(untouched) + " unchanged)" : "");
  }
  require_all(problem, ctx.str() + ":");
  free_grid(g);
}

struct Shape {
  int M, N, K, b;
};
// 1, primes, blocks that do not divide the sizes, a block larger than the matrix, rectangular shapes.
const Shape kShapes[] = {{1, 1, 1, 1},    {17, 13, 11, 4}, {5, 7, 3, 8},       {33, 65, 47, 8},
                         {64, 48, 80, 16}, {70, 30, 131, 9}, {100, 100, 100, 32}};

void summa_gate(SummaFn fn, const char* name) {
  const std::uint64_t seed = shared_seed(name);
  for (const auto& grid : kGrids) {
    if (grid.P * grid.Q > world_size()) continue;
    for (const auto& s : kShapes) summa_case(fn, name, grid.P, grid.Q, s.M, s.N, s.K, s.b, seed);
  }
}

}  // namespace

TEST_CASE("step1.correct", "[lab09][step1][cpu]") {
  (void)engine();
  const std::uint64_t seed = shared_seed("step1");
  struct Size {
    int rows, cols, b;
  };
  const Size sizes[] = {{1, 1, 1}, {7, 5, 2}, {13, 17, 4}, {5, 3, 8}, {64, 64, 16}, {100, 37, 8}, {33, 90, 32},
                        {1000, 3, 7}};
  for (const auto& grid : kGrids) {
    if (grid.P * grid.Q > world_size()) continue;
    for (const auto& s : sizes) scatter_gather_case(grid.P, grid.Q, s.rows, s.cols, s.b, seed);
  }
}

TEST_CASE("step2.correct", "[lab09][step2][cpu]") { summa_gate(lab09::summa, "summa"); }

TEST_CASE("step3.correct", "[lab09][step3][cpu]") { summa_gate(lab09::summa_overlap, "summa_overlap"); }

