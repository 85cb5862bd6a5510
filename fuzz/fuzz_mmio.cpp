// libFuzzer target for the Matrix Market reader (fuzz/README.md). The contract under test: for ANY bytes the
// reader either returns a valid CSR or throws labkit::MatrixMarketError naming the source. Everything else is a
// bug the fuzzer reports: a crash, a sanitizer finding, any other exception escaping (std::terminate), or one of
// the invariants below failing (abort).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "labkit/mmio.h"
#include "labkit/sparse.h"

namespace {

[[noreturn]] void invariant_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_mmio: invariant failed: %s: %s\n", what, detail.c_str());
  std::abort();
}

bool same(const labkit::Csr& a, const labkit::Csr& b) {
  return a.rows == b.rows && a.cols == b.cols && a.row_ptr == b.row_ptr && a.col_idx == b.col_idx &&
         a.values == b.values;
}

// Write A, read it back: the writer must accept everything the reader produces, and reproduce it exactly.
void check_round_trip(const labkit::Csr& A, bool symmetric, const labkit::MatrixMarketLimits& limits) {
  std::ostringstream out;
  labkit::write_matrix_market(out, A, symmetric);
  labkit::Csr B;
  try {
    B = labkit::parse_matrix_market(out.str(), "round-trip", limits);
  } catch (const labkit::MatrixMarketError& e) {
    invariant_failed("the reader rejects what the writer wrote", e.what());
  }
  if (!same(A, B)) invariant_failed("round trip changed the matrix", symmetric ? "symmetric" : "general");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Small limits: a legal size line such as "2000000000 1 0" costs an 8 GB row_ptr, which is the caller's choice
  // (MatrixMarketLimits), not a reader bug; the fuzzer's 2 GB malloc limit would report it as one.
  labkit::MatrixMarketLimits limits;
  limits.max_rows = 1 << 16;
  limits.max_entries = 1 << 20;

  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  labkit::Csr A;
  try {
    A = labkit::read_matrix_market(in, "fuzz.mtx", limits);
  } catch (const labkit::MatrixMarketError& e) {
    const std::string message = e.what();
    if (message.rfind("fuzz.mtx: ", 0) != 0 || e.detail().empty())
      invariant_failed("an error message does not name the source or says nothing", message);
    if (e.line() < 1) invariant_failed("a parse error without a line number", message);
    return 0;
  }
  const std::string problem = A.first_problem();
  if (!problem.empty()) invariant_failed("the reader returned an invalid CSR", problem);
  if (A.rows < 1 || A.cols < 1) invariant_failed("the reader returned an empty shape", std::to_string(A.rows));
  check_round_trip(A, false, limits);
  if (labkit::is_symmetric(A)) check_round_trip(A, true, limits);
  return 0;
}
