#include "labkit/bench.h"

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "labkit/device.h"

namespace labkit {

BenchArgs parse_bench_args(int argc, char** argv, const std::string& lab, const std::string& default_csv,
                           long long default_max, const char* max_meaning) {
  BenchArgs a;
  a.csv = default_csv;
  a.max = default_max;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) {
      a.csv = argv[++i];
    } else if (!std::strcmp(argv[i], "--quick")) {
      a.quick = true;
    } else if (max_meaning && !std::strcmp(argv[i], "--max") && i + 1 < argc) {
      char* end = nullptr;
      a.max = std::strtoll(argv[++i], &end, 10);
      if (!end || *end) {
        std::cerr << argv[0] << ": --max needs a whole number, got '" << argv[i] << "'\n";
        std::exit(2);
      }
    } else {
      std::cerr << "usage: " << argv[0] << " [--csv FILE] [--quick]" << (max_meaning ? " [--max " : "")
                << (max_meaning ? max_meaning : "") << (max_meaning ? "]" : "") << "\n";
      std::exit(2);
    }
  }
  if (!has_device()) {
    std::cerr << no_device_reason() << "\n";
    std::exit(1);
  }
  std::cout << lab << " bench on " << describe(device_info()) << "\n";
  return a;
}

}  // namespace labkit
