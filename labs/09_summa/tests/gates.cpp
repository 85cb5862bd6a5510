// Lab 09 gates. The gate binary is an MPI program: every process of `mpirun -np N` runs every gate, and every
// gate is collective. Each process checks its own part, then all processes agree on one verdict (agree()) so that
// they pass, skip or fail the gate together and never wait in a collective that another process left. Only
// world rank 0 writes the result channel (labkit's gates_main), and its failure message carries every process's
// diagnosis, each naming its rank.
//
// The gates distribute the inputs themselves (every process computes its blocks of the global matrices from the
// shared seed): steps 2 and 3 never depend on step 1. The grids are every P x Q of the list below that fits in
// the processes started (1 x 1 up to 2 x 4; the CTest runs use 1, 2, 4, 6 and 8 processes).
#include <catch2/catch_test_macros.hpp>
#include <catch2/reporters/catch_reporter_event_listener.hpp>
#include <catch2/reporters/catch_reporter_registrars.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <iomanip>
#include <iostream>
#include <functional>
#include <sstream>
#include <vector>

#include "labkit/gate.h"
#include "labkit/not_implemented.h"
#include "labkit/report.h"
#include "summa.h"

namespace {

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

// One engine per process for the whole run: binds the process to its device once, before any other CUDA use.
lab09::Engine& engine() {
  static lab09::Engine e = lab09::make_engine();
  return e;
}

// Every process uses rank 0's seed, so that all of them build the same global matrices (and rank 0's reproduce
// hint reproduces the whole run).
std::uint64_t shared_seed(std::string_view label) {
  std::uint64_t s = labkit::gate::seed(label);
  MPI_Bcast(&s, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return s;
}

// Every process's text ("" when it has nothing to say), joined in rank order as "rank r: text" lines; every
// process gets the same result.
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

// Fails the gate on every process when any process found a problem.
void require_all(const std::string& mine, const std::string& context) {
  const std::string all = agree(mine);
  if (!all.empty())
    FAIL(context << all << "\n  " << labkit::gate::reproduce_hint() << " (under mpirun -np " << world_size() << ")");
}

// Runs a step on the grid's processes (the others wait). When a process throws, all of them know: a step that is
// not written anywhere is reported as not implemented; anything else, or an MPI error, fails the gate naming the
// ranks.
template <class F>
void collective_call(const lab09::Grid& g, const std::string& context, F&& step) {
  std::string error;
  int not_implemented = 0, threw = 0;
  if (g.member()) {
    try {
      step();
    } catch (const labkit::NotImplemented& e) {
      error = e.what(), not_implemented = 1, threw = 1;
    } catch (const std::exception& e) {
      error = std::string("threw: ") + e.what(), threw = 1;
    } catch (...) {
      error = "threw something that is not a std::exception", threw = 1;
    }
    if (const std::string mpi = take_mpi_errors(); !mpi.empty())
      error = (threw ? error + "; " : std::string()) + mpi, threw = 1, not_implemented = 0;
  }
  int counts[3] = {threw, not_implemented, g.member() ? 1 : 0};
  MPI_Allreduce(MPI_IN_PLACE, counts, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (counts[0] == 0) return;
  const std::string all = agree(error);
  if (counts[1] == counts[2]) throw labkit::NotImplemented(error.empty() ? all : error.substr(17));
  FAIL(context << all);
}

struct GridShape {
  int P, Q;
};
// 1 x 1 up to 2 x 4: square, one row, one column, and non-square two-row grids.
const GridShape kGrids[] = {{1, 1}, {1, 2}, {2, 1}, {1, 3}, {3, 1}, {2, 2}, {1, 4}, {4, 1}, {2, 3}, {3, 2}, {2, 4}};

std::string grid_text(const lab09::Grid& g) {
  return std::to_string(g.P) + " x " + std::to_string(g.Q) + " grid";
}
std::string where(const lab09::Grid& g) {
  return "(grid row " + std::to_string(g.row) + ", col " + std::to_string(g.col) + ")";
}

// A value in [-1, 1) from (seed, matrix, i, j), the same on every process: 24 random bits, exact in a float.
float hashed(std::uint64_t seed, int which, std::int64_t i, std::int64_t j) {
  std::uint64_t x = seed ^ (static_cast<std::uint64_t>(which) << 60) ^ (static_cast<std::uint64_t>(i) << 30) ^
                    static_cast<std::uint64_t>(j);
  x += 0x9e3779b97f4a7c15ull;  // splitmix64
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<float>(static_cast<double>(x >> 40) * 0x1p-23 - 1.0);
}

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

// Host arrays in and out of the engine's memory (device memory with a GPU; the same host arrays without).
struct EngineArray {
  lab09::Engine& e;
  std::vector<float>& host;
  float* dev = nullptr;
  EngineArray(lab09::Engine& eng, std::vector<float>& h) : e(eng), host(h) {
    if (!e.gpu) return;
    LABKIT_CUDA(cudaMalloc(&dev, std::max<std::size_t>(1, host.size()) * sizeof(float)));
    LABKIT_CUDA(cudaMemcpy(dev, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~EngineArray() {
    if (dev) cudaFree(dev);
  }
  float* ptr() { return e.gpu ? dev : host.data(); }
  std::vector<float> read() const {
    if (!e.gpu) return host;
    std::vector<float> h(host.size());
    LABKIT_CUDA(cudaMemcpy(h.data(), dev, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }
};

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
  {
    EngineArray A(e, a), B(e, bb), C(e, c);
    collective_call(g, ctx.str(), [&] {
      fn(g, e, M, N, K, b, A.ptr(), B.ptr(), C.ptr());
      if (e.gpu) LABKIT_CUDA(cudaDeviceSynchronize());  // an asynchronous fault belongs to the step
    });
    if (g.member()) {
      got = C.read();
      inputs_changed = A.read() != a0 || B.read() != b0;
    }
  }
  std::string problem;
  if (inputs_changed) problem = where(g) + " the step changed its inputs A or B";
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

// Step 3's point is overlap: the broadcasts of panel k + 1 travel while the GPU multiplies panel k. The gate times,
// with its own code on the same 1 x 2 grid and the same arrays, the two phases of the product alone:
//   comm     every panel's communication as a blocking SUMMA does it (the owner stages the panel to pinned host
//            memory, both broadcasts, the receiver copies it to the device), and
//   updates  every local update (local_gemm, cuBLAS), no communication;
// then step 3 itself. Without overlap step 3 takes about comm + updates; with perfect overlap, the longer of the
// two. The graded figure is the share of the shorter phase that step 3 hides:
//   hidden = (comm + updates - step 3) / min(comm, updates)      0: none, 1: all of it.
// It measures the step, not the machine's MPI: on two H200s whose MPI broadcasts through host memory, one panel's
// communication (10.9 ms) takes twice its update (5.6 ms), so two processes cannot beat one GPU at N = 16384 however
// well they overlap; the ratio to one GPU's SGEMM of the whole product is measured and reported beside it
// (vs_one_gpu), not graded. Times are barrier to barrier, the slowest process's, median of three after a warm-up,
// the three measurements interleaved. A is scaled by 2 or 1/2 before every repetition (nothing can be replayed) and
// the last product is checked on sampled elements of every process.
TEST_CASE("step3.speed", "[lab09][step3][speed]") {
  using namespace lab09;
  LABKIT_REQUIRE_GPU();
  Engine& e = engine();
  int devices = 0;
  LABKIT_CUDA(cudaGetDeviceCount(&devices));
  if (world_size() < 2) SKIP("this gate runs 2 processes: start it under mpirun -np 2 (or more)");
  if (devices < 2)
    SKIP("this gate needs 2 processes on 2 GPUs; this machine has " + std::to_string(devices) + " GPU");
  const int N = 16384, b = 1024, P = 1, Q = 2;
  const std::uint64_t seed = shared_seed("speed");
  const double flops = 2.0 * N * double(N) * N;
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  // Milliseconds of fn on the slowest process, barrier to barrier, the GPU drained before the clock stops.
  auto timed = [](const std::function<void()>& fn) {
    LABKIT_CUDA(cudaDeviceSynchronize());
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    fn();
    LABKIT_CUDA(cudaDeviceSynchronize());  // work left running after the return is counted
    double t = (MPI_Wtime() - t0) * 1e3;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return t;
  };

  // For information: rank 0 alone, one cuBLAS SGEMM of the whole product on its GPU.
  double one_gpu_ms = 0;
  if (world_rank() == 0) {
    std::vector<float> h(std::size_t(N) * N);
    float *A, *B, *C;
    LABKIT_CUDA(cudaMalloc(&A, h.size() * 4));
    LABKIT_CUDA(cudaMalloc(&B, h.size() * 4));
    LABKIT_CUDA(cudaMalloc(&C, h.size() * 4));
    for (int which = 0; which < 2; ++which) {
      for (int j = 0; j < N; ++j)
        for (int i = 0; i < N; ++i) h[i + std::size_t(j) * N] = hashed(seed, which, i, j);
      LABKIT_CUDA(cudaMemcpy(which ? B : A, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    }
    cudaEvent_t t0, t1;
    LABKIT_CUDA(cudaEventCreate(&t0));
    LABKIT_CUDA(cudaEventCreate(&t1));
    std::vector<double> ms;
    for (int rep = 0; rep < 4; ++rep) {
      LABKIT_CUDA(cudaMemsetAsync(C, 0, h.size() * 4, e.stream));
      LABKIT_CUDA(cudaEventRecord(t0, e.stream));
      local_gemm(e, N, N, N, A, N, B, N, C, N);
      LABKIT_CUDA(cudaEventRecord(t1, e.stream));
      LABKIT_CUDA(cudaEventSynchronize(t1));
      float t = 0;
      LABKIT_CUDA(cudaEventElapsedTime(&t, t0, t1));
      if (rep > 0) ms.push_back(t);
    }
    one_gpu_ms = median(ms);
    cudaEventDestroy(t0), cudaEventDestroy(t1);
    cudaFree(A), cudaFree(B), cudaFree(C);
  }
  MPI_Bcast(&one_gpu_ms, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  Grid g = make_grid(MPI_COMM_WORLD, P, Q);
  const Dist dA{N, N, b}, dB{N, N, b}, dC{N, N, b};
  const int mloc = g.member() ? local_rows(dA, g) : 0, nloc = g.member() ? local_cols(dB, g) : 0;
  const int ld = g.member() ? local_ld(dA, g) : 1;
  std::vector<float> a, bb, c;
  if (g.member()) {
    a.resize(local_size(dA, g)), bb.resize(local_size(dB, g)), c.assign(local_size(dC, g), 0.0f);
    for (int lj = 0; lj < local_cols(dA, g); ++lj)
      for (int li = 0; li < local_rows(dA, g); ++li) {
        const int i = global_index(li, b, g.row, P), j = global_index(lj, b, g.col, Q);
        a[li + std::size_t(lj) * local_ld(dA, g)] = hashed(seed, 0, i, j);
        bb[li + std::size_t(lj) * local_ld(dB, g)] = hashed(seed, 1, i, j);  // same shape and layout as A
      }
  }
  const int steps = (N + b - 1) / b;
  double comm_ms = 0, updates_ms = 0, cand_ms = 0;
  std::string problem;
  {
    EngineArray A(e, a), B(e, bb), C(e, c);
    float *stage_a = nullptr, *stage_b = nullptr, *panel = nullptr;
    if (g.member()) {
      LABKIT_CUDA(cudaMallocHost(&stage_a, std::size_t(mloc) * b * 4));
      LABKIT_CUDA(cudaMallocHost(&stage_b, std::size_t(b) * nloc * 4));
      LABKIT_CUDA(cudaMalloc(&panel, std::size_t(std::max(mloc, nloc)) * b * 4));
    }
    // The blocking SUMMA's communication, the gate's own code: the same bytes step 3 must move.
    auto comm_alone = [&] {
      if (!g.member()) return;
      for (int kb = 0; kb < steps; ++kb) {
        const int w = std::min(b, N - kb * b);
        if (g.col == kb % g.Q)
          LABKIT_CUDA(cudaMemcpy(stage_a, A.ptr() + std::size_t(kb / g.Q) * b * ld, std::size_t(mloc) * w * 4,
                                 cudaMemcpyDeviceToHost));
        if (g.row == kb % g.P)
          LABKIT_CUDA(cudaMemcpy2D(stage_b, w * 4, B.ptr() + std::size_t(kb / g.P) * b, std::size_t(ld) * 4, w * 4,
                                   nloc, cudaMemcpyDeviceToHost));
        MPI_Bcast(stage_a, mloc * w, MPI_FLOAT, kb % g.Q, g.row_comm);
        MPI_Bcast(stage_b, w * nloc, MPI_FLOAT, kb % g.P, g.col_comm);
        if (g.col != kb % g.Q)
          LABKIT_CUDA(cudaMemcpy(panel, stage_a, std::size_t(mloc) * w * 4, cudaMemcpyHostToDevice));
        if (g.row != kb % g.P)
          LABKIT_CUDA(cudaMemcpy(panel, stage_b, std::size_t(w) * nloc * 4, cudaMemcpyHostToDevice));
      }
    };
    // Every local update alone: the same m x n x w products, from the process's own blocks (the time of a cuBLAS
    // SGEMM does not depend on the values).
    auto updates_alone = [&] {
      if (!g.member()) return;
      for (int kb = 0; kb < steps; ++kb)
        local_gemm(e, mloc, nloc, std::min(b, N - kb * b), A.ptr() + std::size_t(kb / g.Q) * b * ld, ld,
                   B.ptr() + std::size_t(kb / g.P) * b, ld, C.ptr(), ld);
    };
    std::vector<double> comm, upd, cand;
    for (int rep = 0; rep < 4; ++rep) {
      const double t_comm = timed(comm_alone), t_upd = timed(updates_alone);
      if (g.member()) {
        // A <- 2 A or A / 2 (exact in fp32): every timed call multiplies different values. After rep 3, A = 2 A0.
        const float f = rep % 2 ? 2.0f : 0.5f;
        if (rep > 0)
          if (cublasSscal(e.blas, int(a.size()), &f, A.ptr(), 1) != CUBLAS_STATUS_SUCCESS)
            throw std::runtime_error("cublasSscal failed");
        LABKIT_CUDA(cudaMemsetAsync(C.ptr(), 0, c.size() * 4, e.stream));
      }
      const double t_cand = timed([&] {
        collective_call(g, "summa_overlap, N = 16384 on a 1 x 2 grid",
                        [&] { summa_overlap(g, e, N, N, N, b, A.ptr(), B.ptr(), C.ptr()); });
      });
      if (rep > 0) comm.push_back(t_comm), upd.push_back(t_upd), cand.push_back(t_cand);
    }
    comm_ms = median(comm), updates_ms = median(upd), cand_ms = median(cand);
    if (g.member()) cudaFreeHost(stage_a), cudaFreeHost(stage_b), cudaFree(panel);
    // The last product (A = 2 A0), on 32 sampled elements of every process (a full check would cost N^3 on the CPU).
    if (g.member()) {
      const std::vector<float> out = C.read();
      const int mc = local_rows(dC, g), nc = local_cols(dC, g), ldc = local_ld(dC, g);
      for (int s = 0; s < 32 && problem.empty(); ++s) {
        const int li = int((s * 7919u + 13u) % unsigned(mc)), lj = int((s * 104729u + 7u) % unsigned(nc));
        const int i = global_index(li, b, g.row, P), j = global_index(lj, b, g.col, Q);
        double ref = 0, mag = 0;
        for (int p = 0; p < N; ++p) {
          const double t = 2.0 * hashed(seed, 0, i, p) * hashed(seed, 1, p, j);
          ref += t, mag += std::fabs(t);
        }
        const float v = out[li + std::size_t(lj) * ldc];
        if (!(std::fabs(v - ref) <= 2.0 * (N + 2) * 0x1p-24 * mag))
          problem = where(g) + " C global (" + std::to_string(i) + ", " + std::to_string(j) + "): expected " +
                    std::to_string(ref) + " (A was scaled by 2 before the last timed call), got " +
                    std::to_string(v);
      }
    }
  }
  free_grid(g);
  require_all(problem, "step 3 at N = 16384 on a 1 x 2 grid, after the timed calls:");

  const double shorter = std::min(comm_ms, updates_ms);
  const double hidden = (comm_ms + updates_ms - cand_ms) / shorter;
  labkit::report::metric("comm_ms", comm_ms, "ms");
  labkit::report::metric("updates_ms", updates_ms, "ms");
  labkit::report::metric("candidate_ms", cand_ms, "ms");
  labkit::report::metric("candidate_rate", flops / cand_ms / 1e9, "TFLOP/s");
  labkit::report::metric("broadcast_gb", double(N) * N / 2 * 4 / 1e9, "GB");  // A's panels each process receives
  labkit::report::metric("one_gpu_ms", one_gpu_ms, "ms");
  labkit::report::metric("vs_one_gpu", one_gpu_ms / cand_ms, "x");
  labkit::report::metric("hidden", hidden, "");
  const double threshold = labkit::gate::threshold();
  const auto* rg = labkit::gate::rubric().find("step3.speed");
  std::ostringstream os;
  os << std::setprecision(4) << "step 3 took " << cand_ms << " ms on 2 processes; alone, the communication takes "
     << comm_ms << " ms and the local updates " << updates_ms << " ms (the gate's own code): step 3 hid " << hidden
     << " of the shorter phase (0 = no overlap, 1 = all of it); one GPU's SGEMM of the whole product: " << one_gpu_ms
     << " ms";
  // The GPU must run every update: finishing sooner than the updates alone means the timed call skipped work.
  if (cand_ms < 0.9 * updates_ms)
    FAIL(os.str() << ": faster than its local updates alone, which no overlap allows: the timed call did not do "
                     "all of its products before it returned");
  if (hidden < threshold)
    FAIL(os.str() << "; the gate needs " << threshold << (rg && !rg->hint.empty() ? "\n  hint: " + rg->hint : ""));
  if (world_rank() == 0) std::cout << "  " << os.str() << std::endl;
}
