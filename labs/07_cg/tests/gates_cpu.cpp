// Lab 07 CPU gates: the CPU references every GPU gate trusts, and the cg tool's command line and tuning cache.
#include <catch2/catch_test_macros.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gate_util.h"
#include "tools/cg_args.h"
#include "tools/tuning_cache.h"

using namespace lab07_gates;

TEST_CASE("cpu.reference", "[lab07][cpu]") {
  // The CPU references every gate trusts, on examples small enough to check by hand.
  const labkit::Csr A = labkit::from_dense(3, 3, {4, -1, 0, -1, 4, -1, 0, -1, 4});
  CHECK(labkit::spmv_ref(A, {1, 2, 3}) == std::vector<double>{2, 4, 10});
  const auto P = labkit::poisson2d(10, 10);
  const auto res = labkit::cg_ref(P, std::vector<double>(100, 1.0), 1e-10, 1000);
  CHECK(res.converged);
  CHECK(res.relative_residual <= 1e-10);
  CHECK(rel_true_residual(P, std::vector<double>(100, 1.0), res.x) <= 1e-10);
  // Matrix Market: write one triangle, read back the whole matrix, bit for bit.
  const auto R = labkit::random_spd(50, 5, 7);
  std::stringstream ss;
  labkit::write_matrix_market(ss, R, true);
  const auto back = labkit::read_matrix_market(ss, "round trip");
  CHECK(back.row_ptr == R.row_ptr);
  CHECK(back.col_idx == R.col_idx);
  CHECK(back.values == R.values);
  // The Neumann Laplacian the singular gates use: rows sum to zero.
  const auto N = neumann2d(5, 4);
  for (double v : labkit::spmv_ref(N, std::vector<double>(20, 1.0))) CHECK(v == 0.0);
}

TEST_CASE("cpu.cli_args", "[lab07][cpu]") {
  using lab07_cli::parse_cg_args;
  const auto a = parse_cg_args({"A.mtx", "--tol", "1e-10", "--maxit=500", "--rhs", "b.txt", "--solver", "loop",
                                "--blocks-per-sm", "3", "--out", "x.txt", "--every", "10", "--quiet"});
  CHECK(a.matrix == "A.mtx");
  CHECK(a.tol == 1e-10);
  CHECK(a.maxit == 500);
  CHECK(a.rhs == "b.txt");
  CHECK(a.solver == "loop");
  CHECK(a.blocks_per_sm == 3);
  CHECK(a.out == "x.txt");
  CHECK(a.every == 10);
  CHECK(a.quiet);
  const auto d = parse_cg_args({"m.mtx"});
  CHECK(d.tol == 1e-8);
  CHECK(d.maxit == -1);
  CHECK(d.solver == "auto");
  CHECK(d.blocks_per_sm == 0);
  CHECK(parse_cg_args({"--help"}).help);
  CHECK(parse_cg_args({"m.mtx", "--blocks-per-sm=auto"}).blocks_per_sm == 0);
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{},
                                             {"m.mtx", "--tol"},
                                             {"m.mtx", "--tol", "abc"},
                                             {"m.mtx", "--tol", "1e-8x"},
                                             {"m.mtx", "--tol", "-1"},
                                             {"m.mtx", "--tol", "nan"},
                                             {"m.mtx", "--maxit", "-3"},
                                             {"m.mtx", "--maxit", "2.5"},
                                             {"m.mtx", "--solver", "fast"},
                                             {"m.mtx", "--blocks-per-sm", "0"},
                                             {"m.mtx", "--blocks-per-sm", "17"},
                                             {"m.mtx", "--frobnicate"},
                                             {"m.mtx", "n.mtx"},
                                             {"m.mtx", "--quiet=yes"}}) {
    INFO("arguments: " << [&] {
      std::string s;
      for (const auto& x : bad) s += x + " ";
      return s;
    }());
    CHECK_THROWS_AS(parse_cg_args(bad), std::invalid_argument);
  }
  CHECK(lab07_cli::default_maxit(10) == 100);
  CHECK(lab07_cli::default_maxit(5000) == 10000);
  CHECK(lab07_cli::default_maxit(10000000) == 1000000);
}

TEST_CASE("cpu.tuning_cache", "[lab07][cpu]") {
  // The cg tool's memory of step 5's choice (tools/tuning_cache.h): keys, round trip, other keys kept, corrupt
  // lines ignored, an unwritable path a note and not an error.
  namespace fs = std::filesystem;
  using namespace lab07_cli;
  CHECK(tuning_key("GPU X", 1) == "GPU X|2^0");
  CHECK(tuning_key("GPU X", 4194304) == "GPU X|2^22");
  CHECK(tuning_key("GPU X", 4194303) == "GPU X|2^21");
  const fs::path dir = scratch_dir("tuning_cache");
  const std::string cache = (dir / "nested" / "folder" / "cache.tsv").string();
  const int kMax = lab07::kMaxBlocksPerSm;
  CHECK(cache_lookup(cache, "GPU X|2^22", kMax) == 0);  // no file yet
  REQUIRE(cache_store(cache, "GPU X|2^22", 3));
  REQUIRE(cache_store(cache, "GPU Y|2^22", 5));
  CHECK(cache_lookup(cache, "GPU X|2^22", kMax) == 3);
  CHECK(cache_lookup(cache, "GPU Y|2^22", kMax) == 5);
  CHECK(cache_lookup(cache, "GPU X|2^2", kMax) == 0);  // a prefix of a stored key is another key
  REQUIRE(cache_store(cache, "GPU X|2^22", 4));         // replaces its own line only
  CHECK(cache_lookup(cache, "GPU X|2^22", kMax) == 4);
  CHECK(cache_lookup(cache, "GPU Y|2^22", kMax) == 5);
  {
    std::ifstream in(cache);
    std::stringstream ss;
    ss << in.rdbuf();
    CHECK(ss.str() == "GPU Y|2^22\t5\nGPU X|2^22\t4\n");
  }
  {  // corrupt lines: ignored, never an error
    std::ofstream out(cache, std::ios::trunc);
    out << "garbage without a tab\nGPU X|2^22\tnot-a-number\nGPU X|2^22\t99\nGPU X|2^22\t0\n";
  }
  CHECK(cache_lookup(cache, "GPU X|2^22", kMax) == 0);
  {  // an unwritable cache (its folder would have to be a regular file): false and a note
    const fs::path file = dir / "plain_file";
    std::ofstream(file) << "x";
    CHECK_FALSE(cache_store((file / "cache.tsv").string(), "GPU X|2^22", 3));
    CHECK(cache_lookup((file / "cache.tsv").string(), "GPU X|2^22", kMax) == 0);
  }
  CHECK_FALSE(cache_store("", "GPU X|2^22", 3));  // no cache location known
  CHECK(cache_lookup("", "GPU X|2^22", kMax) == 0);
  fs::remove_all(dir);
}
