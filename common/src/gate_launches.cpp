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

// The metric shared_memory_kernels of the current gate: the distinct own kernels with shared memory that its scopes
// saw. Library kernels do not count (trusted code, and racecheck instruments only what it is asked about anyway).
void report_shared_memory_kernels(const std::vector<launches::Kernel>& ran) {
  static std::string gate;
  static std::set<std::string> seen;
  const bool first = report::current_gate() != gate;
  if (first) {
    gate = report::current_gate();
    seen.clear();
  }
  const std::size_t before = seen.size();
  for (const auto& k : ran)
    if (k.shared_bytes > 0 && launches::classify(k, launches::own_symbols()).own()) seen.insert(k.name);
  // Once per gate and again whenever the count grows: the last value written is the gate's. The names go with the
  // count: the grader's racecheck instruments these kernels only, not the gate's fills and checks or a library's.
  if (first || seen.size() != before) {
    report::metric("shared_memory_kernels", double(seen.size()), "kernels");
    report::names("shared_memory_kernels", std::vector<std::string>(seen.begin(), seen.end()));
  }
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
  report_shared_memory_kernels(ran);
}

void record_timed_calls(TimedCase& tc, std::string step, const TimingOptions& opt) {
  tc.record = [step = std::move(step)](const std::function<void()>& call) { own_kernels(step, call); };
  tc.recorded_round = static_cast<int>(seed("recorded round") % std::uint64_t(std::max(1, opt.min_repeats)));
}

}  // namespace labkit::gate
