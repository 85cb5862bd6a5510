// labkit::gate::own_kernels: the launch recorder as the gates use it (Catch2, rubric, result channel).
#include <catch2/catch_test_macros.hpp>
#include <iostream>

#include "labkit/gate.h"
#include "labkit/launches.h"
#include "labkit/report.h"

namespace labkit::gate {

void own_kernels(std::string_view step, const std::function<void()>& call) {
  if (launches::Recorder::active()) return call();  // an enclosing scope records this call already
  launches::Recorder recorder;
  if (!recorder.available()) {
    if (under_sanitizer()) {
      // compute-sanitizer holds the tools interface that CUPTI needs; the normal graded run checks the kernels.
      static bool said = false;
      if (!said) std::cout << "  [sanitizer] the check that steps run their own kernels is left out: "
                           << recorder.reason() << std::endl;
      said = true;
      return call();
    }
    FAIL("cannot record which kernels " << step << " runs (" << recorder.reason()
                                        << "); a profiler attached to the gate binary blocks it: profile the bench "
                                           "binary instead\n  "
                                        << reproduce_hint());
  }
  call();
  const std::vector<launches::Kernel> ran = recorder.stop();
  static const std::vector<std::string> none;
  const RubricGate* g = rubric().find(report::current_gate());
  const std::string refused =
      launches::refusal(step, ran, g ? g->allow_libraries : none, launches::own_symbols());
  if (!refused.empty()) FAIL(refused << "\n  " << reproduce_hint());
}

}  // namespace labkit::gate
