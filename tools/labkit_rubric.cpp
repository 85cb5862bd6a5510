// labkit_rubric RUBRIC.toml: prints each gate of a rubric as "id kind hidden" (one line per gate, rubric order),
// parsed by labkit's own parser (common/src/rubric.cpp). cmake/LabKit.cmake builds it at configure time and
// registers one CTest test per line, so that CMake never reads TOML itself. Exit status 1 (with the parser's
// message) for a rubric that labkit would refuse.
#include <iostream>

#include "labkit/rubric.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: labkit_rubric RUBRIC.toml\n";
    return 2;
  }
  try {
    const labkit::Rubric r = labkit::load_rubric(argv[1]);
    for (const auto& g : r.gates) std::cout << g.id << ' ' << g.kind << ' ' << (g.hidden ? "hidden" : "visible") << '\n';
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
