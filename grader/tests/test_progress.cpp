// Time limits on a busy machine (grader/src/progress.h): a healthy gate that only waits for a CPU is not killed,
// while a gate that spins, hangs or forks runaway processes still is. The load is made deterministic by pinning
// the gate binary and a few busy loops to one CPU, so the gate gets a fraction of it whatever the machine has.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "grade.h"
#include "progress.h"
#include "runner.h"
#include "test_support.h"
#include "util.h"

using namespace labgrade;
using Catch::Matchers::ContainsSubstring;

namespace {

// Pins this thread (and so every process it starts) to one CPU, with `n` busy loops on that CPU beside it.
// Undone on destruction.
struct PinnedLoad {
  cpu_set_t saved;
  std::vector<pid_t> hogs;
  explicit PinnedLoad(int n) {
    sched_getaffinity(0, sizeof saved, &saved);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved)) ++cpu;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof one, &one);
    for (int i = 0; i < n; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        alarm(120);  // never outlive a crashed test
        for (volatile unsigned long x = 0;; ++x) {
        }
      }
      hogs.push_back(pid);
    }
  }
  ~PinnedLoad() {
    for (pid_t p : hogs) kill(p, SIGKILL);
    for (pid_t p : hogs) waitpid(p, nullptr, 0);
    sched_setaffinity(0, sizeof saved, &saved);
  }
};

// The scripted gate binary of test_runner.cpp, reduced to what these tests need: gate b does $SCENARIO.
const char* kScript = R"(#!/bin/bash
shift 4
IFS=, read -ra gates <<< "$1"
emit() { echo "$1" >&3; }
emit '{"event":"run_start","lab":"98","seed":7,"device":"none","rubric":"r"}'
for g in "${gates[@]}"; do
  emit "{\"event\":\"gate_start\",\"gate\":\"$g\"}"
  if [ "$g" = b ]; then
    case "$SCENARIO" in
      work) while :; do read -ra st < /proc/$$/stat; (( st[13] + st[14] >= WORK_TICKS )) && break; done ;;
      spin) while :; do :; done ;;
      sleep) sleep 1000 ;;
      children) for i in 1 2 3 4 5 6 7 8; do ( while :; do :; done ) & done; wait ;;
    esac
  fi
  emit "{\"event\":\"gate_end\",\"gate\":\"$g\",\"status\":\"passed\",\"message\":\"\",\"seconds\":0.01}"
done
emit '{"event":"run_end","passed":3,"failed":0,"skipped":0}'
)";

struct Run {
  test::TempDir dir{"progress"};
  GateRunSpec spec;
  LabResult lab;
  double seconds = 0;
  Run(const std::string& scenario, double gate_limit, std::vector<std::pair<std::string, std::string>> env = {}) {
    fs::path script = dir.path / "gates.sh";
    std::ofstream(script) << kScript;
    fs::permissions(script, fs::perms::owner_all);
    spec.exe = script;
    spec.signed_channel = false;  // a shell script does not sign its lines
    spec.rubric = dir.path / "rubric.toml";
    spec.log_dir = dir.path / "logs";
    fs::create_directories(spec.log_dir);
    spec.gate_time_limit_s = gate_limit;
    spec.time_limit_s = 120;
    spec.process.env = {{"PATH", "/usr/bin:/bin"}, {"SCENARIO", scenario}};
    spec.process.env.insert(spec.process.env.end(), env.begin(), env.end());
    lab.lab = "98";
    for (const char* g : {"a", "b", "c"}) {
      GateResult r;
      r.id = g;
      r.kind = "cpu";
      r.max_points = 1;
      lab.gates.push_back(r);
    }
  }
  const GateResult& gate(const std::string& id) const {
    for (const auto& g : lab.gates)
      if (g.id == id) return g;
    throw std::runtime_error("no gate " + id);
  }
  void go() {
    auto t0 = std::chrono::steady_clock::now();
    run_gates(lab, spec);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // As labgrade grades a lab: the visible gates, then the hidden ones in a process of their own.
  void score() {
    spec.sanitizer_checks = false;
    auto t0 = std::chrono::steady_clock::now();
    run_and_score(lab, spec, false, false);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

std::string ticks(double s) { return std::to_string(static_cast<long>(s * sysconf(_SC_CLK_TCK))); }

}  // namespace

TEST_CASE("progress counts a sleeping tree at full speed", "[runner][progress]") {
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sleep", "sleep", "1", static_cast<char*>(nullptr));
    _exit(127);
  }
  ProgressClock clock(pid);
  while (clock.wall_seconds() < 0.8) {
    clock.sample(std::chrono::milliseconds(0));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(clock.progress_seconds() > 0.7);
  CHECK(clock.cpu_seconds() < 0.3);
  waitpid(pid, nullptr, 0);
}

TEST_CASE("progress forgives waiting that moves from process to process", "[runner][progress]") {
  // Six short-lived children one after another, each doing 0.1 s of its own CPU work on one CPU shared with three
  // busy loops: every child waits about three times as long as it computes. Counting only the largest total wait
  // of any one thread forgave one child's wait and let the clock run at nearly wall speed (a sandbox that waits
  // while it starts, then the gate binary, is such a tree); interval by interval, every child's wait is forgiven.
  PinnedLoad load(3);
  pid_t pid = fork();
  if (pid == 0) {
    const std::string child = "while :; do read -ra st < /proc/$$/stat; (( st[13] + st[14] >= " + ticks(0.1) +
                              " )) && break; done";
    const std::string script = "for i in 1 2 3 4 5 6; do bash -c '" + child + "'; done";
    execl("/bin/bash", "bash", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ProgressClock clock(pid);
  for (;;) {
    clock.sample(std::chrono::milliseconds(0));
    if (waitpid(pid, nullptr, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double wall = clock.wall_seconds(), progress = clock.progress_seconds();
  INFO("wall " << wall << " s, progress " << progress << " s, waited " << clock.waited_seconds() << " s");
  if (wall < 1.2) WARN("the load did not slow the children (" << wall << " s): this run proves less");
  REQUIRE(clock.measures_waits());
  CHECK(progress < 0.6 * wall);
}

TEST_CASE("a healthy gate that waits for a CPU is not killed at the gate limit", "[runner][progress]") {
  // 0.6 s of its own CPU work against a 2 s limit, sharing one CPU with 5 busy loops: about 3.6 s on the clock,
  // which a wall-clock limit would have killed.
  Run r("work", 2.0, {{"WORK_TICKS", ticks(0.6)}});
  {
    PinnedLoad load(5);
    r.go();
  }
  INFO(r.gate("b").message);
  if (r.seconds < 2.0) WARN("the load did not slow the gate (" << r.seconds << " s): this run proves less");
  CHECK(r.gate("b").status == Status::passed);
  CHECK(r.gate("c").status == Status::passed);
  REQUIRE_FALSE(r.lab.notes.empty());
  CHECK_THAT(r.lab.notes.back(), ContainsSubstring("waiting for a CPU"));
}

TEST_CASE("a gate that spins is still killed under load, after its own time", "[runner][progress]") {
  Run r("spin", 1.0);
  {
    PinnedLoad load(2);
    r.go();
  }
  INFO(r.gate("b").message);
  CHECK(r.gate("b").status == Status::timeout);
  CHECK_THAT(r.gate("b").message, ContainsSubstring("of its own time"));
  CHECK(r.gate("c").status == Status::passed);
  CHECK(r.seconds < 30);
}

TEST_CASE("a gate that sleeps forever is killed at the gate limit", "[runner][progress]") {
  Run r("sleep", 1.0);
  r.go();
  CHECK(r.gate("b").status == Status::timeout);
  CHECK(r.seconds < 10);
}

TEST_CASE("runaway processes are killed by the CPU they use, even though each one starves", "[runner][progress]") {
  // Eight busy children share the CPUs: each waits most of the time, so the progress of any one thread is slow,
  // but together they use every core.
  Run r("children", 1.5);
  r.go();
  INFO(r.gate("b").message);
  CHECK(r.gate("b").status == Status::timeout);
  CHECK(r.seconds < 20);
}

TEST_CASE("hidden gates get the lab time the visible ones left, counted by progress, not by the clock",
          "[runner][progress]") {
  // The visible run does 0.6 s of its own work on one CPU shared with 5 busy loops: about 3.6 s on the clock, more
  // than the whole lab's 3 s limit. Its progress is ~0.7 s, so the hidden gate still has ~2.3 s.
  Run r("work", 2.0, {{"WORK_TICKS", ticks(0.6)}});
  r.spec.time_limit_s = 3.0;
  for (auto& g : r.lab.gates) g.hidden = g.id == "c";
  {
    PinnedLoad load(5);
    r.score();
  }
  INFO(r.gate("c").message);
  if (r.seconds < 3.0) WARN("the load did not slow the gates (" << r.seconds << " s): this run proves less");
  CHECK(r.gate("b").status == Status::passed);
  CHECK(r.gate("c").status == Status::passed);
}

TEST_CASE("run_command's limit forgives a probe's wait for a CPU and still ends one that hangs", "[util][progress]") {
  // The batch's probes (bwrap, the CUDA query, nm of the libraries) run through run_command: at a wall-clock limit a
  // busy machine made bubblewrap "unable to run" and a batch refused to start. 0.6 s of its own CPU work against a
  // 2 s limit, on one CPU with 5 busy loops: about 3.6 s on the clock.
  const std::string work =
      "while :; do read -ra st < /proc/$$/stat; (( st[13] + st[14] >= " + ticks(0.6) + " )) && break; done; echo ok";
  {
    PinnedLoad load(5);
    const auto start = std::chrono::steady_clock::now();
    const auto r = run_command({"/bin/bash", "-c", work}, 2.0);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO("took " << s << " s: " << r.output);
    if (s < 2.0) WARN("the load did not slow the probe (" << s << " s): this run proves less");
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, ContainsSubstring("ok"));
  }
  // A probe that spins or sleeps forever is still ended after its own time.
  for (const char* hang : {"while :; do :; done", "sleep 1000"}) {
    INFO(hang);
    PinnedLoad load(2);
    const auto start = std::chrono::steady_clock::now();
    const auto r = run_command({"/bin/bash", "-c", hang}, 1.0);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(r.timed_out);
    CHECK(s < 10);
  }
}

TEST_CASE("run_command runs its child, and what the child starts, on the CPUs it is given", "[util]") {
  // A batch's helper work beside a lab's gates (cuobjdump) stays on the lab's CPUs, off the workers' speed-gate CPUs.
  cpu_set_t mine;
  REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mine)) last = c;
  REQUIRE(last >= 0);
  const auto pinned = run_command({"/bin/bash", "-c", "grep Cpus_allowed_list /proc/self/status; "
                                                      "/bin/bash -c 'grep Cpus_allowed_list /proc/self/status'"},
                                  10.0, {}, false, {last});
  REQUIRE(pinned.exit_code == 0);
  const std::string line = "Cpus_allowed_list:\t" + std::to_string(last) + "\n";
  CHECK(pinned.output == line + line);
  const auto free = run_command({"/bin/bash", "-c", "grep Cpus_allowed_list /proc/self/status"}, 10.0);
  CHECK(free.exit_code == 0);
  CHECK_FALSE(free.output.empty());
  if (CPU_COUNT(&mine) > 1) CHECK(free.output != line);  // no set given: the grader's own CPUs
}
