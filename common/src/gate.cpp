#include "labkit/gate.h"

#include <catch2/catch_get_random_seed.hpp>
#include <catch2/interfaces/catch_interfaces_capture.hpp>
#include <catch2/internal/catch_context.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <utility>

#include "labkit/check.h"
#include "labkit/huge.h"
#include "labkit/random.h"
#include "labkit/report.h"

namespace labkit {
namespace detail {
std::string gate_binary = "gates";
std::string gate_rubric_path;
}  // namespace detail

namespace gate {

namespace {
std::optional<std::uint64_t>& secret_slot() {
  static std::optional<std::uint64_t> s;
  return s;
}
}  // namespace

void detail::set_secret(std::uint64_t secret) { secret_slot() = secret; }

detail::BodyRuns& detail::body_runs() {
  static BodyRuns runs;
  return runs;
}
void detail::body_started() { ++body_runs().started; }
void detail::body_returned() { ++body_runs().returned; }

std::uint64_t secret() {
  auto& s = secret_slot();
  if (!s) {
    // Two 32-bit draws: std::random_device yields unsigned int. Where it is a real entropy source (Linux:
    // getrandom), nothing in the gates' source or the student's build predicts it.
    std::random_device rd;
    s = (std::uint64_t(rd()) << 32) ^ rd();
  }
  return *s;
}

std::uint64_t base_seed() { return Catch::getSeed(); }
// The secret enters through mix64, so a base seed and a secret that differ only in a few bits still give unrelated
// seeds; derive_seed then separates the labels as before.
std::uint64_t mix_seed(std::uint64_t base, std::uint64_t secret, std::string_view label) {
  return derive_seed(base ^ mix64(secret ^ 0x5EC2E7ull), label);
}
std::uint64_t seed(std::string_view label) { return mix_seed(base_seed(), secret(), label); }

std::string detail::next_timed_case_label() {
  static std::string gate;
  static int cases = 0;
  const std::string current = report::current_gate();
  if (current != gate) gate = current, cases = 0;
  return ", " + gate + ", timed case " + std::to_string(cases++);
}

void detail::pick_timed_round(TimedCase& tc, const TimingOptions& opt, const std::string& label) {
  const std::uint64_t rounds = std::uint64_t(std::max(1, opt.min_repeats));
  const std::uint64_t draw = seed("verified round" + label);
  // Any round but a recorded one (two_calls), each as likely (with one round only, that one).
  tc.verified_round = tc.record && tc.recorded == RecordedCalls::two_calls && rounds > 1
                          ? static_cast<int>((std::uint64_t(tc.recorded_round) + 1 + draw % (rounds - 1)) % rounds)
                          : static_cast<int>(draw % rounds);
  tc.late_draw = seed("late verified round" + label) | 1;  // never 0 (none)
}

void pick_timed_round(TimedCase& tc, const TimingOptions& opt) {
  detail::pick_timed_round(tc, opt, detail::next_timed_case_label());
}

std::string reproduce_hint() {
  std::ostringstream os;
  os << "reproduce: " << ::labkit::detail::gate_binary << " \"" << report::current_gate() << "\" --rng-seed "
     << base_seed() << " --labkit-secret " << secret();
  return os.str();
}

const Rubric& rubric() {
  static std::unique_ptr<Rubric> r;
  if (!r) r = std::make_unique<Rubric>(load_rubric(::labkit::detail::gate_rubric_path));
  return *r;
}

double threshold(std::string gate_id) {
  if (gate_id.empty()) gate_id = report::current_gate();
  const RubricGate* g = rubric().find(gate_id);
  if (!g || !g->threshold) FAIL("the rubric " << rubric().path << " has no threshold for gate " << gate_id);
  return *g->threshold;
}

void require(const Verdict& verdict, std::string_view context) {
  report::detail::trace_checkpoint(context, verdict.ok);
  if (verdict.ok) return;
  FAIL(context << ": " << verdict.message << "\n  " << reproduce_hint());
}

std::string speed_problem(const SpeedComparison& cmp, double need, std::optional<double> max_ratio,
                          std::string_view baseline_name, std::string_view candidate_name) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2);
  if (cmp.escaped) {
    os << "work still running after the timed call returned: a kernel launched on a stream the timer does not see ("
       << candidate_name << " returned, its stop event completed, and the device stayed busy for another "
       << std::setprecision(3) << cmp.escaped_ms << " ms, median over the timed calls; the limit is "
       << escaped_limit_ms(cmp.candidate.median_ms)
       << " ms). Launch on the default stream, or wait for your own stream before returning";
    return os.str();
  }
  if (keeps_device_memory(cmp)) {
    os << candidate_name << " kept device memory call after call: after " << cmp.kept_calls << " of its "
       << cmp.kept_measured << " timed calls less device memory was free than before, "
       << std::setprecision(1) << double(cmp.kept_bytes) / double(1 << 20) << " MiB in all (about "
       << double(cmp.kept_bytes) / double(1 << 20) / cmp.kept_measured
       << " MiB a call). Something allocated in every call is never freed: a cudaMalloc without its cudaFree, a "
          "graph instantiated per call and never destroyed, a handle or stream created per call. A program that "
          "calls the step in a loop runs out of device memory; free what a call allocates before it returns, or "
          "allocate once and reuse";
    return os.str();
  }
  if (max_ratio && cmp.ratio > *max_ratio) {
    os << candidate_name << " measured " << cmp.ratio << "x the speed of " << baseline_name
       << ", beyond what the hardware allows (at most " << *max_ratio
       << "x for this gate): replayed results or work hidden from the timer; a real kernel cannot do this";
    return os.str();
  }
  if (!(cmp.ratio >= need)) {
    os << candidate_name << " runs at " << cmp.ratio << "x the speed of " << baseline_name << "; the gate needs "
       << need << "x";
    if (!cmp.note.empty()) os << " (" << cmp.note << ")";
    return os.str();
  }
  return "";
}

void require_speedup(const SpeedComparison& cmp, std::string_view baseline_name, std::string_view candidate_name,
                     double work, std::string_view work_unit) {
  const std::string id = report::current_gate();
  const double need = threshold(id);
  const RubricGate* g = rubric().find(id);
  const std::optional<double> ceiling = g ? g->max_ratio : std::nullopt;
  auto rate = [&](const TimingStats& t) { return work / (t.median_ms * 1e-3); };
  // The metrics are reported whatever the verdict, so that an instructor sees the impossible figures too.
  report::metric("baseline_ms", cmp.baseline.median_ms, "ms");
  report::metric("candidate_ms", cmp.candidate.median_ms, "ms");
  if (work > 0) {
    report::metric("baseline_rate", rate(cmp.baseline), std::string(work_unit) + "/s");
    report::metric("candidate_rate", rate(cmp.candidate), std::string(work_unit) + "/s");
  }
  report::metric("ratio", cmp.ratio, "x");
  report::metric("escaped_ms", cmp.escaped_ms, "ms");
  if (cmp.stall_rounds > 0) report::metric("stall_rounds", cmp.stall_rounds, "rounds");
  if (cmp.stalled) report::metric("stalled", 1, "");  // labgrade's class report lists a failed gate that says so
  if (cmp.kept_calls > 0) report::metric("kept_device_mib", double(cmp.kept_bytes) / double(1 << 20), "MiB");
  // Two recorded calls: how much slower the faster of them ran than the counted median. Not judged here (the
  // reference's gates measured 1.004-1.223 on H100s, the recorder's cost per kernel and the machine's noise; a
  // bound for every GPU is not known); the class report lists the gates far above 1 (labgrade's writers.cpp,
  // kReviewRecordedSlower).
  if (cmp.recorded_ms > 0 && cmp.candidate.median_ms > 0)
    report::metric("recorded_over_counted", cmp.recorded_ms / cmp.candidate.median_ms, "x");
  const std::string problem = speed_problem(cmp, need, ceiling, baseline_name, candidate_name);
  std::ostringstream os;
  os << std::fixed << std::setprecision(2);
  os << candidate_name << " runs at " << cmp.ratio << "x the speed of " << baseline_name << "; the gate needs "
     << need << "x";
  if (ceiling) os << " and allows at most " << *ceiling << "x";
  if (g && g->reference) os << " (the reference solution reached " << *g->reference << "x on an H100)";
  os << "\n  " << baseline_name << ": " << std::setprecision(3) << cmp.baseline.median_ms << " ms";
  if (work > 0) os << " = " << std::setprecision(1) << rate(cmp.baseline) << " " << work_unit << "/s";
  os << "\n  " << candidate_name << ": " << std::setprecision(3) << cmp.candidate.median_ms << " ms";
  if (work > 0) os << " = " << std::setprecision(1) << rate(cmp.candidate) << " " << work_unit << "/s";
  if (!cmp.note.empty()) os << "\n  (" << cmp.note << ")";
  os << "\n  (median of " << cmp.candidate.repeats << " interleaved runs each, fresh inputs and a cold L2 per run)";
  if (problem.empty()) {
    INFO(os.str());
    SUCCEED();
    return;
  }
  // Only a slow step gets the hint; the two impossible verdicts get their own diagnosis instead.
  const bool too_slow = !cmp.escaped && !keeps_device_memory(cmp) && !(ceiling && cmp.ratio > *ceiling);
  if (too_slow && cmp.stalled)
    os << "\n  the timing was unsteady: after " << cmp.stall_rounds << " extra round(s) a median still lay more than "
       << std::lround((kStalledMedianFactor - 1) * 100) << " % above its side's lower quartile, as when other "
       << "processes hold the GPU driver on a busy machine; if the step is fast on a quiet GPU, this verdict is the "
       << "machine's (labgrade times such a gate once more with nothing else of its batch on the machine, and that "
       << "timing decides)";
  if (too_slow && g && !g->hint.empty()) os << "\n  hint: " << g->hint;
  FAIL_CHECK((too_slow ? os.str() : problem + "\n  " + os.str()) << "\n  " << reproduce_hint());
}

void report_previous_ratio(const SpeedComparison& candidate, const std::function<void(int)>& baseline,
                           const std::function<void(int)>& previous, const std::function<void(int)>& refresh,
                           std::string_view candidate_name, std::string_view previous_name,
                           std::string_view baseline_name) {
  try {
    TimingOptions quick;
    quick.warmup = 1;
    quick.min_repeats = 3;
    quick.budget_ms = 0;
    TimedCase info_only;
    info_only.refresh = refresh;
    info_only.verify = [] {};  // not graded here: the previous step's own gates check its answers
    const auto prev = compare_speed(baseline, previous, info_only, quick);
    report::metric("previous_ratio", prev.ratio, "x");
    UNSCOPED_INFO(candidate_name << " runs at " << candidate.ratio << "x " << baseline_name << ", " << previous_name
                                 << " at " << prev.ratio << "x: "
                                 << (prev.ratio > 0 ? candidate.ratio / prev.ratio : 0) << " times faster");
  } catch (const std::exception&) {
    LABKIT_CUDA(cudaGetLastError());  // a sticky fault still ends the gate; anything else is ignored here
  }
}

bool under_sanitizer() {
  const char* v = std::getenv("LABKIT_SANITIZER");
  return v && *v && std::string_view(v) != "0";
}

bool huge_case_left_out(std::string_view ctx) {
  if (under_sanitizer()) return true;
  const std::string why = HugeDeviceArray::unavailable();
  if (why.empty()) return false;
  std::cout << "  [" << report::current_gate() << "] " << ctx << " left out: " << why << std::endl;
  return true;
}

std::string sanitizer_tool() { return under_sanitizer() ? std::getenv("LABKIT_SANITIZER") : ""; }

bool sanitizer_small_shapes() {
  const char* v = std::getenv("LABKIT_SANITIZER_SMALL");
  return under_sanitizer() && v && *v && std::string_view(v) != "0";
}

bool default_racecheck() { return sanitizer_small_shapes() && sanitizer_tool() == "racecheck"; }

bool repeat_runs() { return !under_sanitizer(); }

// The default checks run on every graded submission, so they keep only the cases a sixteenth of the gate's cap
// allows: still every odd size, edge tile and several blocks, at a fraction of the instrumented run time.
SanitizerCap::SanitizerCap(double cap, std::string unit, double race_cap, double small_cap)
    : cap_(!sanitizer_small_shapes()                                 ? cap
           : race_cap > 0 && sanitizer_tool() == "racecheck" ? race_cap
           : small_cap > 0                                    ? small_cap
                                                                     : cap / kSmallShapesDivisor),
      unit_(std::move(unit)) {}

bool SanitizerCap::skips(double work, std::string_view name) {
  if (work <= cap_ || !under_sanitizer()) return false;
  left_out_.emplace_back(name);
  return true;
}

bool SanitizerCap::skips(double work, std::string_view name, bool race_checked) {
  return skips(work, name) || (!race_checked && skips_racecheck(name));
}

bool SanitizerCap::skips_racecheck(std::string_view name) {
  if (!default_racecheck()) return false;
  left_to_memcheck_.emplace_back(name);
  return true;
}

std::string SanitizerCap::summary() const {
  if (left_out_.empty() && left_to_memcheck_.empty()) return "";
  std::ostringstream os;
  os << "under compute-sanitizer (LABKIT_SANITIZER=" << sanitizer_tool() << "): left out ";
  for (std::size_t i = 0; i < left_out_.size(); ++i) os << (i ? "; " : "") << left_out_[i];
  if (!left_out_.empty()) {
    int e = 0;
    const double m = std::frexp(cap_, &e);  // cap_ = m * 2^e, m in [0.5, 1)
    os << " (above ";
    if (m == 0.5) os << "2^" << e - 1;
    else os << std::setprecision(12) << cap_;
    os << " " << unit_ << "; the small and odd cases check bounds and races)";
  }
  if (!left_to_memcheck_.empty()) {
    os << (left_out_.empty() ? "" : "; and ");
    for (std::size_t i = 0; i < left_to_memcheck_.size(); ++i) os << (i ? "; " : "") << left_to_memcheck_[i];
    os << " (their blocks meet the same barriers as the cases racecheck runs; memcheck checks them)";
  }
  return os.str();
}

SanitizerCap::~SanitizerCap() {
  if (left_out_.empty() && left_to_memcheck_.empty()) return;
  try {
    std::cout << "  [sanitizer] " << summary() << std::endl;
  } catch (...) {  // a destructor, possibly during a failing gate's unwinding: never throw from here
  }
}

}  // namespace gate
}  // namespace labkit
