// labkit::gate::own_kernels: the launch recorder as the gates use it (Catch2, rubric, result channel).
#include <catch2/catch_test_macros.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <set>

#include "labkit/check.h"
#include "labkit/gate.h"
#include "labkit/guard.h"
#include "labkit/launches.h"
#include "labkit/not_implemented.h"
#include "labkit/report.h"
#include "labkit/slot_batch.h"

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

std::string detail::function_of(std::string_view label) {
  const std::size_t close = label.find(')');
  return std::string(close == std::string_view::npos ? label : label.substr(0, close + 1));
}

namespace {

// Recorder scopes nest only inside scopes of the gates' own: a recorder that some other code left running (a step
// that held one open would have every later check pass by an early return) fails the gate instead.
int g_scope_depth = 0;
struct ScopeDepth {
  ScopeDepth() { ++g_scope_depth; }
  ~ScopeDepth() { --g_scope_depth; }
};

// A recorder the gate may use for `step`: nullptr where the check is left out (a profiler or compute-sanitizer holds
// CUPTI in a run by hand, or under LABKIT_SANITIZER); fails the gate where a graded run cannot record.
using Attribution = launches::Recorder::Attribution;

std::unique_ptr<launches::Recorder> start_recorder(std::string_view step, Attribution attribution) {
  if (launches::Recorder::active())
    FAIL("a launch recorder that the gates did not start is running, so which kernels " << step
         << " runs cannot be checked\n  " << reproduce_hint());
  auto recorder = std::make_unique<launches::Recorder>(attribution);
  if (recorder->available()) return recorder;
  // CUPTI serves one tool at a time: under compute-sanitizer, ncu or nsys the recorder cannot start. A run by
  // hand (no result channel) goes on without the check; a graded run fails, since a check that switches itself
  // off is no check (the grader never runs the gates under a profiler).
  if (under_sanitizer() || !report::detail::is_open()) {
    static bool said = false;
    if (!said)
      std::cout << "  [launches] not checking that steps run only their own kernels: " << recorder->reason()
                << " (a profiler or compute-sanitizer holds CUPTI; graded runs check it)" << std::endl;
    said = true;
    return nullptr;
  }
  FAIL("cannot record which kernels " << step << " runs (" << recorder->reason() << ")\n  " << reproduce_hint());
  return nullptr;  // not reached: FAIL throws
}

// What one call of `step` ran: counted for the gate's "ran no kernel" check (gates_main.cpp), and refused when a
// kernel came from a library the gate's rubric entry does not allow.
void check_call(std::string_view step, const std::vector<launches::Kernel>& ran) {
  detail::RecordedWork& work = detail::recorded_work();
  ++work.scopes;
  work.kernels += static_cast<long>(ran.size());
  detail::RecordedWork::Function& f = work.functions[detail::function_of(step)];
  ++f.scopes;
  f.kernels += static_cast<long>(ran.size());
  for (const auto& k : ran)
    if (k.shared_bytes > 0 && launches::classify(k, launches::own_symbols()).own()) ++work.own_shared_memory_kernels;
  work.step = std::string(step);
  static const std::vector<std::string> none;
  const RubricGate* g = rubric().find(report::current_gate());
  const std::string refused =
      launches::refusal(step, ran, g ? g->allow_libraries : none, launches::own_symbols());
  if (!refused.empty()) FAIL(refused << "\n  " << reproduce_hint());
}

// A speed gate's recorder (TimedCase::record): on through every call of compare_speed (every_call) or one call
// (two_calls); each candidate call it sees is checked.
class TimedCallRecorder : public CallRecorder {
 public:
  explicit TimedCallRecorder(std::string step) : step_(std::move(step)) {
    if (g_scope_depth > 0) return;  // an enclosing scope of the gates' records these calls already
    // Without the launch callbacks: their host cost per launch (6-24 us on an H100) is what a step could time to
    // tell a recorded call from another. With them on every call, lab 07's dot product lost 31 % of its ratio and
    // labs 02 and 05 9-15 %; without them 8 % and 3-5 % (an H100), CUPTI's cost per kernel on the device.
    recorder_ = start_recorder(step_, Attribution::names_only);
    if (recorder_) depth_.emplace();
  }
  void drop() override {
    if (recorder_) recorder_->take();
  }
  void check() override {
    if (!recorder_) return;
    std::vector<launches::Kernel> ran = recorder_->take();
    // compare_speed's L2 scrub runs between drop() and the call (so that the call's launch overlaps it): it is the
    // gate's, not the step's. Left out by its exact name, which only ever hides a kernel from the count.
    ran.erase(std::remove_if(ran.begin(), ran.end(),
                             [](const launches::Kernel& k) { return k.name == l2_scrub_kernel_name(); }),
              ran.end());
    check_call(step_, ran);
  }

 private:
  std::string step_;
  std::optional<ScopeDepth> depth_;
  std::unique_ptr<launches::Recorder> recorder_;  // declared last: stopped before the depth is given back
};

}  // namespace

std::vector<launches::Kernel> own_kernels_ran(std::string_view step, const std::function<void()>& call) {
  if (g_scope_depth > 0) {  // an enclosing scope of the gates' records this call already
    call();
    return {};
  }
  // Before the recorder starts (the fill is the gate's, not the step's) and finished before the call.
  poison_shared_memory();
  std::unique_ptr<launches::Recorder> recorder = start_recorder(step, Attribution::by_launch_callbacks);
  if (!recorder) {
    call();
    return {};
  }
  const ScopeDepth inside;
  call();
  std::vector<launches::Kernel> ran = recorder->stop();
  // The gate's own spin (spin_on_streams) and shared-memory fills between a batch's calls are not the step's work.
  ran.erase(std::remove_if(ran.begin(), ran.end(),
                           [](const launches::Kernel& k) { return is_stream_spin(k.name) || is_shared_poison(k.name); }),
            ran.end());
  check_call(step, ran);
  report_step_kernels(ran);
  return ran;
}

void own_kernels(std::string_view step, const std::function<void()>& call) { own_kernels_ran(step, call); }

void allow_copies_only(std::string_view function) {
  detail::recorded_work().copies_only.insert(detail::function_of(function));
}

std::string batch_failure(SlotBatch& batch, std::string_view step, const std::string& what,
                          const std::function<void(int k)>& call,
                          const std::function<long long(int k, std::size_t j)>& source) {
  const auto all_calls = [&] {
    own_kernels(step, [&] {
      for (int k = 0; k < batch.calls(); ++k) call(k);
    });
  };
  return batch.run_and_check(all_calls, source, repeat_runs()) ? "" : batch.failure(what);
}

void require_batch(const std::string& what, const std::string& layout, const std::function<std::string()>& batch,
                   const std::function<void()>& each) {
  std::string finding;
  try {
    finding = batch();
  } catch (const NotImplemented&) {
    throw;  // the step is not written: the gate's status says so
  } catch (const CudaError& e) {
    if (!e.sticky()) {
      finding = e.what();
    } else {  // the context is lost: no case can run on its own after it
      FAIL(what << ", " << layout << ": " << e.what()
                << "\n  Which case: under compute-sanitizer the cases run one by one, and memcheck names the kernel "
                   "and the access (labgrade --sanitize, or the gate binary under compute-sanitizer with "
                   "LABKIT_SANITIZER=memcheck)\n  "
                << reproduce_hint());
    }
  } catch (const std::exception& e) {
    finding = e.what();
  }
  if (finding.empty()) return require(Verdict{}, what + " in one batch");
  each();
  FAIL(what << ", " << layout << ": " << finding
            << "; yet each case passed on buffers of its own. Look for a race (results that change from run to run), "
               "state kept from one call to the next (a size or a buffer in a static), or a store far past the end "
               "(into another call's slot)\n  "
            << reproduce_hint());
}

void record_timed_calls(TimedCase& tc, std::string step, const TimingOptions& opt, RecordedCalls which) {
  tc.record = [step = std::move(step)]() -> std::unique_ptr<CallRecorder> {
    return std::make_unique<TimedCallRecorder>(step);
  };
  tc.recorded = which;
  const std::string label = detail::next_timed_case_label();
  tc.recorded_round = static_cast<int>(seed("recorded round" + label) % std::uint64_t(std::max(1, opt.min_repeats)));
  detail::pick_timed_round(tc, opt, label);
}

}  // namespace labkit::gate
