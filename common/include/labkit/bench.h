// Command line of every lab's bench: --csv FILE (where the measurements go), --quick (fewer sizes and repeats, for
// a smoke run) and, where a lab has one, --max N (the largest size; what N means is the lab's, e.g. LOG2N).
#pragma once
#include <string>

namespace labkit {

struct BenchArgs {
  std::string csv;
  bool quick = false;
  long long max = 0;
};

// Bad options print the usage and exit with status 2; without a CUDA device the reason is printed and the program
// exits with status 1. On success prints "<lab> bench on <device>". max_meaning == nullptr: no --max option.
BenchArgs parse_bench_args(int argc, char** argv, const std::string& lab, const std::string& default_csv,
                           long long default_max = 0, const char* max_meaning = nullptr);

}  // namespace labkit
