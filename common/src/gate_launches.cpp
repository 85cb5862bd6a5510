// labkit::gate::own_kernels: the launch recorder as the gates use it (Catch2, rubric, result channel).
#include <catch2/catch_test_macros.hpp>
#include <algorithm>
#include <iostream>
#include <set>

#include "labkit/gate.h"
#include "labkit/launches.h"
#include "labkit/report.h"

namespace labkit::gate {

namespace {

// What the current gate's scopes saw, for the grader's memory and race checks (sanitizers.cpp), which instrument
// these kernels only and leave out the gates' own fills, comparisons and library references (trusted code):
//   - "step_kernels": every distinct kernel the steps ran, the allowed library kernels included (a wrong size passed
//     to cuBLAS makes cuBLAS's kernel read out of bounds: memcheck must see that kernel);
//   - "shared_memory_kernels" (also a metric): the distinct own kernels with shared memory, all racecheck can check.
void report_step_kernels(const std::vector<launches::Kernel>& ran) {
  static std::string gate;
  static std::set<std::string> shared, all;
  const bool first = report::current_gate() != gate;
  if (first) {
    gate = report::current_gate();
    shared.clear();
    all.clear();
  }
  const std::size_t shared_before = shared.size(), all_before = all.size();
  for (const auto& k : ran) {
    all.insert(k.name);
    if (k.shared_bytes > 0 && launches::classify(k, launches::own_symbols()).own()) shared.insert(k.name);
  }
  // Once per gate and again whenever a list grows: the last list written under a name is the gate's.
  if (first || shared.size() != shared_before) {
    report::metric("shared_memory_kernels", double(shared.size()), "kernels");
    report::names("shared_memory_kernels", std::vector<std::string>(shared.begin(), shared.end()));
  }
  if (first || all.size() != all_before)
    report::names("step_kernels", std::vector<std::string>(all.begin(), all.end()));
}

}  // namespace

detail::RecordedWork& detail::recorded_work() {
  static RecordedWork work;
  return work;
}

void own_kernels(std::string_view step, const std::function<void()>& call) {
  // Scopes nest only inside scopes of the gates' own: a recorder that some other code left running (a step that
  // held one open would have every later check pass by this early return) fails the gate instead.
  static int depth = 0;
  if (depth > 0) return call();  // an enclosing scope of the gates' records this call already
  if (launches::Recorder::active())
    FAIL("a launch recorder that the gates did not start is running, so which kernels " << step
         << " runs cannot be checked\n  " << reproduce_hint());
  struct Depth {
    Depth() { ++depth; }
    ~Depth() { --depth; }
  } inside;
  launches::Recorder recorder;
  if (!recorder.available()) {
    // CUPTI serves one tool at a time: under compute-sanitizer, ncu or nsys the recorder cannot start. A run by
    // hand (no result channel) goes on without the check; a graded run fails, since a check that switches itself
    // off is no check (the grader never runs the gates under a profiler).
    if (under_sanitizer() || !report::detail::is_open()) {
      static bool said = false;
      if (!said)
        std::cout << "  [launches] not checking that steps run only their own kernels: " << recorder.reason()
                  << " (a profiler or compute-sanitizer holds CUPTI; graded runs check it)" << std::endl;
      said = true;
      return call();
    }
    FAIL("cannot record which kernels " << step << " runs (" << recorder.reason() << ")\n  " << reproduce_hint());
  }
  call();
  const std::vector<launches::Kernel> ran = recorder.stop();
  detail::RecordedWork& work = detail::recorded_work();
  ++work.scopes;
  work.kernels += static_cast<long>(ran.size());
  work.step = std::string(step);
  static const std::vector<std::string> none;
  const RubricGate* g = rubric().find(report::current_gate());
  const std::string refused =
      launches::refusal(step, ran, g ? g->allow_libraries : none, launches::own_symbols());
  if (!refused.empty()) FAIL(refused << "\n  " << reproduce_hint());
  report_step_kernels(ran);
}

void record_timed_calls(TimedCase& tc, std::string step, const TimingOptions& opt) {
  tc.record = [step = std::move(step)](const std::function<void()>& call) { own_kernels(step, call); };
  tc.recorded_round = static_cast<int>(seed("recorded round") % std::uint64_t(std::max(1, opt.min_repeats)));
  pick_timed_round(tc, opt);
}

}  // namespace labkit::gate
