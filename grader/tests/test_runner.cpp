// The runner against a scripted stand-in for a gate binary: crashes, context loss (exit 3), hangs, exit() inside a
// gate, missing gates, start-up crashes, the lab's time limit. No compiler, no GPU.
// One file although over ~500 lines: every test drives the same scripted gate binary (kScript) through the same
// Fixture. The sanitizer tests (from "the sanitizer pass ...") could move to a file of their own once those two
// live in a shared header.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <fstream>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <thread>

#include "grade.h"
#include "progress.h"
#include "runner.h"
#include "runner_internal.h"
#include "sandbox.h"
#include "test_support.h"
#include "util.h"

using namespace labgrade;
using Catch::Matchers::ContainsSubstring;

namespace {

// Behaves like labkit's gate main: result lines on fd 3, the gates named on the command line in order. What gate
// `b` does depends on $SCENARIO; it knows the gates a, b, c (and d only when $KNOW_D is set).
const char* kScript = R"(#!/bin/bash
shift 4  # --labkit-results /dev/fd/3 --labkit-rubric FILE
IFS=, read -ra gates <<< "$1"  # the gates, comma-separated as Catch2 takes them
emit() { echo "$1" >&3; }
if [ -n "$LABKIT_HOLD_START" ]; then  # started ahead of its turn (start_held): wait as labkit's constructor does
  [ -n "$ORDER" ] && echo "held $$" >> "$ORDER"
  flock -s "$LABKIT_HOLD_START" true
  [ -n "$ORDER" ] && echo "released" >> "$ORDER"
fi
[ -n "$ORDER" ] && echo "start ${LABKIT_SANITIZER:-run} $1" >> "$ORDER"  # which process ran when (gates, tool)
if [ -n "$CPUS_LOG" ]; then c=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status); echo "$1 $c" >> "$CPUS_LOG"; fi
[ "$SCENARIO" = startup ] && kill -SEGV $$
emit '{"event":"run_start","lab":"98","seed":7,"device":"none","rubric":"r"}'
for g in "${gates[@]}"; do
  case "$g" in a|b|c) ;; d) [ -n "$KNOW_D" ] || continue ;; *) continue ;; esac
  emit "{\"event\":\"gate_start\",\"gate\":\"$g\"}"
  if [ "$SCENARIO" = sanitize_skip ] && [ -n "$LABKIT_SANITIZER" ] && [ "$g" != a ]; then  # no GPU under it
    emit "{\"event\":\"gate_end\",\"gate\":\"$g\",\"status\":\"skipped\",\"message\":\"no CUDA device\",\"seconds\":0}"
    continue
  fi
  if [ "$g" = b ]; then
    case "$SCENARIO" in
      segv) echo "about to crash"; kill -SEGV $$ ;;
      catch2segv)  # what Catch2's signal handler does: report the gate and the run, then die of the signal
        emit '{"event":"gate_end","gate":"b","status":"crashed","message":"the gate binary crashed: SIGSEGV - Segmentation violation signal","seconds":0}'
        emit '{"event":"run_end","passed":1,"failed":1,"skipped":0}'
        kill -SEGV $$ ;;
      context) emit '{"event":"gate_end","gate":"b","status":"crashed","message":"the CUDA context was destroyed","seconds":0}'; exit 3 ;;
      hang) sleep 1000 ;;
      procbomb) for i in $(seq 400); do sleep 1000 & done 2> /dev/null; sleep 1000 ;;
      exit0) exit 0 ;;
      forge) emit '{"event":"gate_end","gate":"b","status":"passed","message":"","seconds":0}' ;;
      slowall) sleep 1000 ;;
      sanitize) echo "========= Invalid __global__ write of size 4 bytes" ;;  # as compute-sanitizer reports
      sanitize_env) echo "========= Invalid __global__ read, LABKIT_SANITIZER=${LABKIT_SANITIZER-unset}" ;;
      sanitize_hang) [ -n "$LABKIT_SANITIZER" ] && sleep 1000 ;;  # fine alone, endless under a sanitizer
    esac
  fi
  [ "$SCENARIO" = slowall ] && sleep 1000
  emit "{\"event\":\"metric\",\"gate\":\"$g\",\"name\":\"ratio\",\"value\":3,\"unit\":\"x\"}"
  emit "{\"event\":\"gate_end\",\"gate\":\"$g\",\"status\":\"passed\",\"message\":\"\",\"seconds\":0.01}"
done
emit '{"event":"run_end","passed":3,"failed":0,"skipped":0}'
[ -n "$ORDER" ] && echo "end ${LABKIT_SANITIZER:-run} $1" >> "$ORDER"
)";

struct Fixture {
  test::TempDir dir{"runner"};
  GateRunSpec spec;
  LabResult lab;
  explicit Fixture(const std::string& scenario, std::vector<std::string> gates = {"a", "b", "c"}) {
    fs::path script = dir.path / "gates.sh";
    std::ofstream(script) << kScript;
    fs::permissions(script, fs::perms::owner_all);
    spec.exe = script;
    spec.signed_channel = false;  // a shell script does not sign its lines (labkit does: test_channel_auth)
    spec.rubric = dir.path / "rubric.toml";
    spec.log_dir = dir.path / "logs";
    fs::create_directories(spec.log_dir);
    spec.gate_time_limit_s = 2;
    spec.time_limit_s = 30;
    spec.process.env = {{"PATH", "/usr/bin:/bin"}, {"SCENARIO", scenario}};
    lab.lab = "98";
    for (const auto& g : gates) {
      GateResult r;
      r.id = g;
      r.kind = "cpu";
      r.max_points = 1;
      lab.gates.push_back(r);
    }
  }
  Status status(const std::string& id) const {
    for (const auto& g : lab.gates)
      if (g.id == id) return g.status;
    return Status::missing;
  }
  const GateResult& gate(const std::string& id) const {
    for (const auto& g : lab.gates)
      if (g.id == id) return g;
    throw std::runtime_error("no gate " + id);
  }
};

}  // namespace

TEST_CASE("every gate passes in a clean run", "[runner]") {
  Fixture f("none");
  run_gates(f.lab, f.spec);
  for (const char* g : {"a", "b", "c"}) CHECK(f.status(g) == Status::passed);
  CHECK(f.gate("a").metrics.at("ratio").value == 3);
  CHECK(f.lab.seed == 7u);
  CHECK(f.lab.notes.empty());
}

TEST_CASE("a crash inside a gate costs that gate and the binary is restarted for the rest", "[runner]") {
  Fixture f("segv");
  run_gates(f.lab, f.spec);
  CHECK(f.status("a") == Status::passed);
  CHECK(f.status("b") == Status::crashed);
  CHECK_THAT(f.gate("b").message, ContainsSubstring("SIGSEGV"));
  CHECK_THAT(f.gate("b").message, ContainsSubstring("about to crash"));  // the console tail
  CHECK(f.status("c") == Status::passed);
  REQUIRE(f.lab.notes.size() == 1);
  CHECK_THAT(f.lab.notes[0], ContainsSubstring("restarted"));
}

TEST_CASE("a crash reported by Catch2's signal handler (gate_end and run_end - then the signal) restarts", "[runner]") {
  Fixture f("catch2segv");
  run_gates(f.lab, f.spec);
  CHECK(f.status("a") == Status::passed);
  CHECK(f.status("b") == Status::crashed);
  CHECK_THAT(f.gate("b").message, ContainsSubstring("SIGSEGV"));
  CHECK(f.status("c") == Status::passed);
}

TEST_CASE("exit code 3 after gate_end(crashed) restarts the binary", "[runner]") {
  Fixture f("context");
  run_gates(f.lab, f.spec);
  CHECK(f.status("a") == Status::passed);
  CHECK(f.status("b") == Status::crashed);
  CHECK(f.status("c") == Status::passed);
}

TEST_CASE("a gate that hangs is killed at the gate time limit", "[runner]") {
  Fixture f("hang");
  auto start = std::chrono::steady_clock::now();
  run_gates(f.lab, f.spec);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(f.status("a") == Status::passed);
  CHECK(f.status("b") == Status::timeout);
  CHECK_THAT(f.gate("b").message, ContainsSubstring("time limit"));
  CHECK(f.status("c") == Status::passed);
  CHECK(took < 10);
}

TEST_CASE("exit() inside a gate is a crash of that gate", "[runner]") {
  Fixture f("exit0");
  run_gates(f.lab, f.spec);
  CHECK(f.status("b") == Status::crashed);
  CHECK_THAT(f.gate("b").message, ContainsSubstring("exit code 0"));
  CHECK(f.status("c") == Status::passed);
}

TEST_CASE("a forged gate_end does not count", "[runner]") {
  Fixture f("forge");
  run_gates(f.lab, f.spec);
  CHECK(f.status("a") == Status::passed);
  CHECK(f.status("b") == Status::failed);
  CHECK_THAT(f.gate("b").message, ContainsSubstring("result channel"));
  CHECK(f.status("c") == Status::passed);
}

TEST_CASE("a gate the binary does not have is missing", "[runner]") {
  Fixture f("none", {"a", "b", "c", "d"});
  run_gates(f.lab, f.spec);
  CHECK(f.status("c") == Status::passed);
  CHECK(f.status("d") == Status::missing);
  CHECK_THAT(f.gate("d").message, ContainsSubstring("no gate named `d`"));
}

TEST_CASE("a crash before the first gate fails every gate once - without a restart loop", "[runner]") {
  Fixture f("startup");
  run_gates(f.lab, f.spec);
  for (const char* g : {"a", "b", "c"}) {
    CHECK(f.status(g) == Status::crashed);
    CHECK_THAT(f.gate(g).message, ContainsSubstring("before running any gate"));
  }
}

TEST_CASE("the lab's time limit stops the whole run", "[runner]") {
  Fixture f("slowall");
  f.spec.gate_time_limit_s = 20;
  f.spec.time_limit_s = 2;
  run_gates(f.lab, f.spec);
  CHECK(f.status("a") == Status::timeout);
  CHECK(f.status("b") == Status::timeout);
  CHECK_THAT(f.gate("b").message, ContainsSubstring("not run"));
}

TEST_CASE("gate ids are escaped for Catch2's test-spec syntax", "[runner]") {
  CHECK(catch2_test_arg("step1.correct") == "step1.correct");
  CHECK(catch2_test_arg("a,b") == "a\\,b");
  CHECK(catch2_test_arg("x[y]*") == "x\\[y\\]\\*");
}

namespace {
// A stand-in for compute-sanitizer in <dir>/bin: skips its options, runs the program and counts the reports it
// printed.
fs::path fake_sanitizer(const fs::path& dir) {
  fs::path bin = dir / "bin";
  fs::create_directories(bin);
  std::ofstream(bin / "compute-sanitizer")
      << "#!/bin/bash\nwhile [[ \"$1\" == --* ]]; do shift 2; done\nout=$(\"$@\"); rc=$?\nprintf '%s\\n' \"$out\"\n"
         "n=$(printf '%s\\n' \"$out\" | grep -c '^========= Invalid')\necho \"========= ERROR SUMMARY: $n errors\"\n"
         "exit $rc\n";
  fs::permissions(bin / "compute-sanitizer", fs::perms::owner_all);
  return bin;
}
}  // namespace

TEST_CASE("the sanitizer pass runs each gate alone and reports its findings", "[runner]") {
  Fixture f("sanitize");
  fs::path bin = fake_sanitizer(f.dir.path);
  std::string old_path = std::getenv("PATH");
  setenv("PATH", (bin.string() + ":" + old_path).c_str(), 1);  // where the grader looks for compute-sanitizer
  run_gates(f.lab, f.spec);
  run_sanitizer(f.lab, f.spec, "memcheck", true);
  setenv("PATH", old_path.c_str(), 1);
  REQUIRE(f.lab.sanitizer.size() == 1);
  CHECK(f.lab.sanitizer[0].tool == "memcheck");
  CHECK(f.lab.sanitizer[0].errors == 1);
  CHECK_THAT(f.lab.sanitizer[0].excerpt, ContainsSubstring("Invalid __global__ write"));
  CHECK(f.gate("a").sanitizer.empty());
  CHECK_THAT(f.gate("b").sanitizer, ContainsSubstring("memcheck: 1 error"));
  CHECK(f.status("a") == Status::passed);
  CHECK(f.status("b") == Status::failed);  // --sanitize-strict
  CHECK_THAT(f.gate("b").message, ContainsSubstring("compute-sanitizer"));
}

TEST_CASE("the sanitizer pass tells the gates through LABKIT_SANITIZER and the graded run does not", "[runner]") {
  std::string old_path = std::getenv("PATH");
  for (bool inherit : {false, true}) {  // batch grading (an explicit environment) and local grading (inherited)
    DYNAMIC_SECTION((inherit ? "inherited environment" : "explicit environment")) {
      Fixture f("sanitize_env");
      fs::path bin = fake_sanitizer(f.dir.path);
      setenv("PATH", (bin.string() + ":" + old_path).c_str(), 1);
      if (inherit) {
        f.spec.process.inherit_env = true;  // PATH and SCENARIO now come from this process
        setenv("SCENARIO", "sanitize_env", 1);
      }
      unsetenv("LABKIT_SANITIZER");
      run_gates(f.lab, f.spec);
      run_sanitizer(f.lab, f.spec, "memcheck", false);  // racecheck: correctness gates only
      setenv("PATH", old_path.c_str(), 1);
      unsetenv("SCENARIO");
      CHECK(std::getenv("LABKIT_SANITIZER") == nullptr);  // set for the child only
      CHECK_THAT(read_file(f.spec.log_dir / "run1.log"), ContainsSubstring("LABKIT_SANITIZER=unset"));
      REQUIRE(f.lab.sanitizer.size() == 1);
      CHECK_THAT(f.gate("b").sanitizer, ContainsSubstring("LABKIT_SANITIZER=memcheck"));
      CHECK(f.status("b") == Status::passed);  // not strict
    }
  }
}

namespace {
// The default checks take correctness gates (cpu gates too, for memcheck); the fixture's gates become correctness.
void make_correctness(Fixture& f) {
  for (auto& g : f.lab.gates) g.kind = "correctness";
}
std::size_t logs_starting(const fs::path& dir, const std::string& prefix) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += starts_with(e.path().filename().string(), prefix);
  return n;
}
struct PathWith {  // compute-sanitizer found first on PATH for one test
  std::string old = std::getenv("PATH");
  explicit PathWith(const fs::path& bin) { setenv("PATH", (bin.string() + ":" + old).c_str(), 1); }
  ~PathWith() { setenv("PATH", old.c_str(), 1); }
};
// fake_sanitizer, which also writes its options to <args>/<tool>.args before it runs the gates. Returns its folder.
fs::path options_recording_sanitizer(const fs::path& dir, const fs::path& args) {
  fs::path bin = fake_sanitizer(dir);
  fs::create_directories(args);
  std::string script = read_file(bin / "compute-sanitizer");
  script.insert(script.find('\n') + 1, "tool=$2; printf '%s\\n' \"$@\" > " + args.string() + "/$tool.args\n");
  std::ofstream(bin / "compute-sanitizer") << script;
  return bin;
}
}  // namespace

namespace {
// Waits up to 10 s for `text` in `file`.
bool wait_for_text(const fs::path& file, const std::string& text) {
  for (int i = 0; i < 200; ++i) {
    if (fs::exists(file) && contains(read_file(file), text)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}
}  // namespace

TEST_CASE("a held start waits for its turn, then is the run's first attempt", "[runner][held]") {
  Fixture f("");
  const fs::path order = f.dir.path / "order";
  f.spec.process.env.push_back({"ORDER", order.string()});
  std::shared_ptr<HeldStart> held = start_held(f.spec, {"a", "b", "c"});
  REQUIRE(held);
  REQUIRE(wait_for_text(order, "held "));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_THAT(read_file(order), !ContainsSubstring("released"));  // the lock holds it
  f.spec.held = held;
  run_gates(f.lab, f.spec);
  for (const auto& g : f.lab.gates) CHECK(g.status == Status::passed);
  const std::string o = read_file(order);
  INFO(o);
  CHECK_THAT(o, ContainsSubstring("released\nstart run a,b,c\nend run a,b,c\n"));
  CHECK(o.find("start run") == o.rfind("start run"));  // one process: the held one
  CHECK(!held->waiting());
  CHECK(!fs::exists(f.spec.log_dir / "run.turn"));
  CHECK(fs::exists(f.spec.log_dir / "run1.log"));
}

TEST_CASE("a held start for other gates is left alone by the run and ends with its process", "[runner][held]") {
  Fixture f("");
  const fs::path order = f.dir.path / "order";
  f.spec.process.env.push_back({"ORDER", order.string()});
  std::shared_ptr<HeldStart> held = start_held(f.spec, {"a", "b"});
  REQUIRE(held);
  REQUIRE(wait_for_text(order, "held "));
  const std::string line = read_file(order);
  const pid_t pid = std::stoi(line.substr(line.find("held ") + 5));
  f.spec.held = held;
  run_gates(f.lab, f.spec);  // a, b and c: not what the held process was started for
  for (const auto& g : f.lab.gates) CHECK(g.status == Status::passed);
  CHECK(held->waiting());
  CHECK(::kill(pid, 0) == 0);
  held.reset();
  f.spec.held.reset();
  CHECK(::kill(pid, 0) != 0);  // killed and reaped
  CHECK_THAT(read_file(order), !ContainsSubstring("released"));
  CHECK(!fs::exists(f.spec.log_dir / "run.turn"));
}

TEST_CASE("no held start under a sandbox", "[runner][held]") {
  Fixture f("");
  SandboxSettings sandbox;
  f.spec.process.sandbox = &sandbox;
  CHECK(start_held(f.spec, {"a"}) == nullptr);
}

TEST_CASE("labkit's gate binary waits in its first constructor while its turn is held", "[runner][held]") {
  // The real main() of every gate binary (gates_main.cpp), in the fake lab's gate binary: it must not get to
  // Catch2 (here: listing the tests) while the lock is held, and must once it goes.
  const fs::path exe = test::build_dir() / "grader" / "fakelab" / "grader_fakelab_gates_solution";
  REQUIRE(fs::exists(exe));
  test::TempDir dir{"held"};
  const fs::path turn = dir.path / "turn";
  const int fd = ::open(turn.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  ProcessSpec ps;
  ps.argv = {exe.string(), "--list-tests"};
  ps.inherit_env = true;
  ps.env = {{"LABKIT_CLOSE_PROC", "1"}, {"LABKIT_HOLD_START", turn.string()}};
  ps.cwd = dir.path;
  ps.output = dir.path / "out.log";
  Process p(ps);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // listing the tests alone takes well under a second
  const bool still_waiting = !p.poll();
  CHECK(still_waiting);
  CHECK_THAT(read_file(ps.output), !ContainsSubstring("test case"));
  ::flock(fd, LOCK_UN);
  ::close(fd);
  const ExitInfo e = p.wait();
  CHECK(e.exited);
  CHECK(e.code == 0);
  CHECK_THAT(read_file(ps.output), ContainsSubstring("test case"));
}

TEST_CASE("the default checks run each tool once over a healthy lab and fail nothing", "[runner][sanitizer]") {
  Fixture f("");
  make_correctness(f);
  PathWith p(fake_sanitizer(f.dir.path));
  run_gates(f.lab, f.spec);
  check_with_sanitizers(f.lab, f.spec);
  for (const auto& g : f.lab.gates) {
    CHECK(g.status == Status::passed);
    CHECK(g.sanitizer.empty());
  }
  CHECK(logs_starting(f.spec.log_dir, "memcheck-") == 1);  // one process for the three gates
  CHECK(logs_starting(f.spec.log_dir, "racecheck-") == 1);
  std::string notes = join(f.lab.notes, "\n");
  CHECK_THAT(notes, ContainsSubstring("memcheck: 3 gate(s) checked"));
  CHECK_THAT(notes, ContainsSubstring("racecheck: 3 gate(s) checked"));
  CHECK(f.lab.sanitizer.empty());
}

TEST_CASE("the speed gates' process runs on the CPUs kept for it, the lab's other runs on theirs", "[runner]") {
  const std::vector<int> cpus = allowed_cpus();
  REQUIRE(!cpus.empty());
  Fixture f("");
  f.lab.gates[0].kind = "speed";  // a; b and c stay cpu gates
  f.spec.sanitizer_checks = false;
  const fs::path log = f.dir.path / "cpus";
  f.spec.process.env.emplace_back("CPUS_LOG", log.string());
  f.spec.process.limits.cpus = {cpus.front()};
  f.spec.speed_cpus = {cpus.back()};
  run_and_score(f.lab, f.spec, false, false, nullptr);
  for (const auto& g : f.lab.gates) CHECK(g.status == Status::passed);
  const auto lines = split_lines(read_file(log));
  INFO(join(lines, "\n"));
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "a " + std::to_string(cpus.back()));  // the speed process first
  CHECK(lines[1] == "b,c " + std::to_string(cpus.front()));
}

TEST_CASE("a lab's hidden gates start after every visible process has ended, the checks included",
          "[runner][sanitizer]") {
  Fixture f("");
  make_correctness(f);
  f.lab.gates[2].hidden = true;  // c
  PathWith p(fake_sanitizer(f.dir.path));
  const fs::path order = f.dir.path / "order";
  f.spec.process.env.emplace_back("ORDER", order.string());
  // The default checks: one process per tool over "a,b", then over "c". --sanitize: one process per tool and gate.
  const bool sanitize = GENERATE(false, true);
  run_and_score(f.lab, f.spec, sanitize, false, nullptr);
  for (const auto& g : f.lab.gates) CHECK(g.status == Status::passed);
  const auto lines = split_lines(read_file(order));
  INFO(join(lines, "\n"));
  std::size_t last_visible_end = 0, first_hidden_start = lines.size(), visible = 0, hidden = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const bool is_hidden = lines[i].back() == 'c', start = starts_with(lines[i], "start");
    if (start) ++(is_hidden ? hidden : visible);
    if (!is_hidden && !start) last_visible_end = i;
    if (is_hidden && start) first_hidden_start = std::min(first_hidden_start, i);
  }
  CHECK(visible == (sanitize ? 5u : 3u));  // the graded run and the checks
  CHECK(hidden == 3);
  CHECK(last_visible_end < first_hidden_start);
  // The hidden pass's check notes are marked as the hidden runs' are, so the student's outputs leave them out (they
  // name gates and quote what a gate said under the sanitizer).
  int hidden_notes = 0;
  for (const auto& n : f.lab.notes)
    if (n.find("hidden gate") != std::string::npos) {
      ++hidden_notes;
      CHECK(starts_with(n, kHiddenRunNote));
    }
  CHECK(hidden_notes > 0);
  if (sanitize) {  // one entry per tool over the visible and the hidden pass
    CHECK(f.lab.sanitizer.size() == 2);
  }
}

TEST_CASE("a finding in the default checks fails the gate that has it, and only that one", "[runner][sanitizer]") {
  Fixture f("sanitize");
  make_correctness(f);
  PathWith p(fake_sanitizer(f.dir.path));
  run_gates(f.lab, f.spec);
  REQUIRE(f.status("b") == Status::passed);  // the graded run cannot see it
  check_with_sanitizers(f.lab, f.spec);
  CHECK(f.status("a") == Status::passed);
  CHECK(f.status("c") == Status::passed);
  CHECK(f.status("b") == Status::failed);
  CHECK_THAT(f.gate("b").message, ContainsSubstring("compute-sanitizer memcheck: 1 error(s)"));
  CHECK_THAT(f.gate("b").message, ContainsSubstring("Invalid __global__ write"));
  // racecheck ran at the same time over all three (the fake reports b under either tool): b's message is
  // memcheck's, the first tool in the merge order, and its sanitizer column has both.
  CHECK_THAT(join(f.lab.notes, "\n"), ContainsSubstring("racecheck: 3 gate(s) checked"));
  CHECK_THAT(f.gate("b").sanitizer, ContainsSubstring("racecheck: 1 error(s)"));
  // The combined run found it, then one process per gate said whose it was.
  CHECK(logs_starting(f.spec.log_dir, "memcheck-all-") == 1);
  CHECK(logs_starting(f.spec.log_dir, "memcheck-b-") == 1);
  CHECK(logs_starting(f.spec.log_dir, "memcheck-a-") == 1);
}

TEST_CASE("racecheck leaves out the gates whose own kernels use no shared memory", "[runner][sanitizer]") {
  Fixture f("sanitize");
  make_correctness(f);
  PathWith p(fake_sanitizer(f.dir.path));
  run_gates(f.lab, f.spec);
  // What labkit::gate::own_kernels reports from CUPTI's records: b ran only kernels without shared memory, a ran
  // one with, c opened no recorder scope (no metric: checked, to be safe).
  for (auto& g : f.lab.gates) {
    if (g.id == "a") g.metrics["shared_memory_kernels"] = {2, "kernels"};
    if (g.id == "b") g.metrics["shared_memory_kernels"] = {0, "kernels"};
  }
  check_with_sanitizers(f.lab, f.spec);
  const std::string notes = join(f.lab.notes, "\n");
  CHECK_THAT(notes, ContainsSubstring("memcheck: 3 gate(s) checked"));
  CHECK_THAT(notes, ContainsSubstring("racecheck: 2 gate(s) checked"));
  CHECK_THAT(notes, ContainsSubstring("racecheck: left out 1 gate(s) whose own kernels use no shared memory"));
  CHECK(f.status("b") == Status::failed);  // memcheck still checks it
  CHECK_THAT(f.gate("b").sanitizer, ContainsSubstring("memcheck: 1 error(s)"));
  CHECK_THAT(f.gate("b").sanitizer, !ContainsSubstring("racecheck"));
}

namespace {
// Correctness gates after their graded run, with a compute-sanitizer stand-in that records its options in `args`.
struct RecordedChecks : Fixture {
  const fs::path args = dir.path / "args";
  PathWith path{options_recording_sanitizer(dir.path, args)};
  RecordedChecks() : Fixture("") {
    make_correctness(*this);
    run_gates(lab, spec);
  }
};
}  // namespace

TEST_CASE("the checks instrument only the kernels the graded run saw its steps run", "[runner][sanitizer]") {
  RecordedChecks f;
  const fs::path& args = f.args;
  // What labkit::gate::own_kernels reported (report::names): racecheck's list, a kernel with shared memory shared by
  // a and b and one of c's own; memcheck's, those plus a kernel without shared memory and a cuBLAS kernel c called.
  for (auto& g : f.lab.gates) {
    g.metrics["shared_memory_kernels"] = {1, "kernels"};
    g.names["shared_memory_kernels"] = {g.id == "c" ? "_Z6kernelPd" : "_Z6kernelPf"};
    g.names["step_kernels"] = {g.id == "c" ? "_Z6kernelPd" : "_Z6kernelPf", "_Z4copyPfPKf"};
    if (g.id == "c") g.names["step_kernels"].push_back("sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8");
  }
  const bool one_without_list = GENERATE(false, true);
  if (one_without_list) f.lab.gates[1].names.clear();  // b opened no recorder scope: every kernel is checked
  check_with_sanitizers(f.lab, f.spec);
  for (const auto& g : f.lab.gates) CHECK(g.status == Status::passed);
  const std::string race = read_file(args / "racecheck.args"), mem = read_file(args / "memcheck.args");
  const std::string notes = join(f.lab.notes, "\n");
  INFO(race << "\n" << mem << "\n" << notes);
  if (one_without_list) {
    CHECK_THAT(race, !ContainsSubstring("--kernel-name"));
    CHECK_THAT(mem, !ContainsSubstring("--kernel-name"));
    CHECK_THAT(notes, ContainsSubstring("racecheck: 3 gate(s) checked"));
    CHECK_THAT(notes, ContainsSubstring("every kernel instrumented: b did not list its kernels"));
  } else {
    CHECK_THAT(race, ContainsSubstring("--kernel-name\nkne=_Z6kernelPd\n--kernel-name\nkne=_Z6kernelPf\n"));
    CHECK_THAT(race, !ContainsSubstring("copy"));
    CHECK_THAT(mem, ContainsSubstring("--kernel-name\nkne=_Z4copyPfPKf\n--kernel-name\nkne=_Z6kernelPd\n"
                                      "--kernel-name\nkne=_Z6kernelPf\n--kernel-name\nkne=sm90_xmma_gemm_"));
    CHECK_THAT(notes, ContainsSubstring("racecheck: 3 gate(s) checked"));
    CHECK_THAT(notes, ContainsSubstring("2 own kernel(s) with shared memory"));
    CHECK_THAT(notes, ContainsSubstring("memcheck: 3 gate(s) checked"));
    CHECK_THAT(notes, ContainsSubstring("their 4 steps' kernel(s)"));
  }
}

TEST_CASE("a cpu gate without a kernel list leaves memcheck's list as it is", "[runner][sanitizer]") {
  RecordedChecks f;
  const fs::path& args = f.args;
  for (auto& g : f.lab.gates) g.names["step_kernels"] = {"_Z6kernelPf"};
  f.lab.gates[2].kind = "cpu";  // memcheck runs cpu gates too; they open no recorder scope
  f.lab.gates[2].names.clear();
  check_with_sanitizers(f.lab, f.spec);
  const std::string mem = read_file(args / "memcheck.args");
  INFO(mem);
  CHECK_THAT(mem, ContainsSubstring("--kernel-name\nkne=_Z6kernelPf\n"));
  CHECK_THAT(join(f.lab.notes, "\n"), ContainsSubstring("memcheck: 3 gate(s) checked"));
}

TEST_CASE("the default checks run memcheck and racecheck at the same time", "[runner][sanitizer]") {
  // Each tool's fake sanitizer says it started, then waits (up to 20 s) for the other tool's start: run one after
  // the other, the first would wait in vain and leave no "overlap" mark.
  Fixture f("");
  make_correctness(f);
  fs::path bin = f.dir.path / "overlap";
  fs::create_directories(bin);
  const fs::path marks = f.dir.path / "marks";
  fs::create_directories(marks);
  std::ofstream(bin / "compute-sanitizer") << "#!/bin/bash\nmarks='" << marks.string() << "'\n" << R"(tool=$2
other=memcheck; [ "$tool" = memcheck ] && other=racecheck
touch "$marks/started-$tool"
for i in $(seq 200); do [ -e "$marks/started-$other" ] && { touch "$marks/overlap-$tool"; break; }; sleep 0.1; done
while [[ "$1" == --* ]]; do shift 2; done
"$@"; rc=$?
echo '========= ERROR SUMMARY: 0 errors'
exit $rc
)";
  fs::permissions(bin / "compute-sanitizer", fs::perms::owner_all);
  PathWith p(bin);
  run_gates(f.lab, f.spec);
  check_with_sanitizers(f.lab, f.spec);
  CHECK(fs::exists(marks / "overlap-memcheck"));
  CHECK(fs::exists(marks / "overlap-racecheck"));
  for (const auto& g : f.lab.gates) CHECK(g.status == Status::passed);
  // The notes come in a fixed order whichever process ended first.
  const std::string notes = join(f.lab.notes, "\n");
  REQUIRE(notes.find("memcheck: 3 gate(s) checked") != std::string::npos);
  CHECK(notes.find("memcheck: 3 gate(s) checked") < notes.find("racecheck: 3 gate(s) checked"));
}

namespace {
// Live (not zombie) processes of `uid`.
std::size_t processes_of_uid(int uid) {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    struct stat st {};
    if (!std::isdigit(static_cast<unsigned char>(e.path().filename().string()[0])) ||
        ::stat(e.path().c_str(), &st) != 0 || static_cast<int>(st.st_uid) != uid)
      continue;
    std::ifstream stat_file(e.path() / "stat");
    std::string line;
    std::getline(stat_file, line);
    const auto close = line.rfind(')');  // "pid (comm) S ...": the state follows the command's parenthesis
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z') ++n;
  }
  return n;
}
}  // namespace

TEST_CASE("a process bomb under a dedicated uid is held by the process limit and ended with its gate",
          "[runner][sandbox]") {
  // The object check refuses fork() and threads in a submission; this is the run-time line behind it. Gate b starts
  // 400 sleeping processes: RLIMIT_NPROC of the uid stops it at the limit, the gate is killed at its time limit,
  // everything it started goes with the sweep, and gate c is graded in a fresh process.
  if (geteuid() != 0) SKIP("needs root: RLIMIT_NPROC binds only a uid of its own");
  Fixture f("procbomb");
  SandboxSettings sandbox;
  sandbox.drop_uid = true;
  reserve_uid_block(sandbox, 1);
  f.spec.process.sandbox = &sandbox;
  f.spec.process.slot = 0;
  f.spec.process.limits.processes = 24;
  const int uid = slot_uid(&sandbox, 0);
  for (auto it = fs::recursive_directory_iterator(f.dir.path); it != fs::recursive_directory_iterator(); ++it)
    fs::permissions(it->path(), fs::perms::all);
  fs::permissions(f.dir.path, fs::perms::all);
  std::atomic<bool> done{false};
  std::size_t most = 0;
  std::thread watcher([&] {
    while (!done) {
      most = std::max(most, processes_of_uid(uid));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  run_gates(f.lab, f.spec);
  done = true;
  watcher.join();
  INFO(f.gate("b").message);
  CHECK((f.status("b") == Status::timeout || f.status("b") == Status::crashed || f.status("b") == Status::failed));
  CHECK(f.status("a") == Status::passed);
  CHECK(f.status("c") == Status::passed);
  CHECK(most > 4);    // the bomb did start processes
  CHECK(most <= 24);  // and no more than the limit
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (processes_of_uid(uid) > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(processes_of_uid(uid) == 0);
}

TEST_CASE("under a dedicated uid, one tool's end does not kill the other tool's gates", "[runner][sanitizer]") {
  // In a batch both tools run as the submission's uid, and the end of a gate process sweeps that uid. Here
  // memcheck ends at once while racecheck waits 2 s before its gates: a sweep at memcheck's end would kill
  // racecheck's process ("not checked: ... crashed"). racecheck also leaves a process outside its group, which
  // the one sweep after both tools must end.
  if (geteuid() != 0) SKIP("needs root: the dedicated uid");
  Fixture f("");
  make_correctness(f);
  SandboxSettings sandbox;
  sandbox.drop_uid = true;
  reserve_uid_block(sandbox, 1);
  f.spec.process.sandbox = &sandbox;
  f.spec.process.slot = 0;
  const int uid = slot_uid(&sandbox, 0);
  fs::path bin = f.dir.path / "slow-racecheck";
  fs::create_directories(bin);
  std::ofstream(bin / "compute-sanitizer") << R"(#!/bin/bash
tool=$2
if [ "$tool" = racecheck ]; then sleep 2; setsid sleep 60 < /dev/null > /dev/null 2>&1 & fi
while [[ "$1" == --* ]]; do shift 2; done
"$@"; rc=$?
echo '========= ERROR SUMMARY: 0 errors'
exit $rc
)";
  // The uid runs the fake gates and the fake sanitizer, and writes its logs, in the test's folder.
  for (auto it = fs::recursive_directory_iterator(f.dir.path); it != fs::recursive_directory_iterator(); ++it)
    fs::permissions(it->path(), fs::perms::all);
  fs::permissions(f.dir.path, fs::perms::all);
  PathWith p(bin);
  run_gates(f.lab, f.spec);
  for (const auto& g : f.lab.gates) REQUIRE(g.status == Status::passed);
  check_with_sanitizers(f.lab, f.spec);
  const std::string notes = join(f.lab.notes, "\n");
  CHECK_THAT(notes, ContainsSubstring("memcheck: 3 gate(s) checked"));
  CHECK_THAT(notes, ContainsSubstring("racecheck: 3 gate(s) checked"));
  CHECK_THAT(notes, !ContainsSubstring("not checked"));
  for (const auto& g : f.lab.gates) CHECK(g.status == Status::passed);
  // Nothing of the uid runs on: the straggler went with the sweep after both tools (a killed process whose new
  // parent has not reaped it yet stays a zombie, state Z, and runs nothing). SIGKILL is delivered when the process
  // is next scheduled, so on a busy machine (CI's two cores under ctest -j2) it can still show as running for a
  // moment after kill() returned: wait for that, up to 10 s. A straggler the sweep missed sleeps for 60 s.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (processes_of_uid(uid) > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(processes_of_uid(uid) == 0);
}

TEST_CASE("the default checks leave out gates that did not pass, cpu-only labs, and can be turned off",
          "[runner][sanitizer]") {
  SECTION("turned off") {
    Fixture f("sanitize");
    make_correctness(f);
    PathWith p(fake_sanitizer(f.dir.path));
    run_gates(f.lab, f.spec);
    f.spec.sanitizer_checks = false;  // --no-sanitizer-checks
    check_with_sanitizers(f.lab, f.spec);
    CHECK(f.status("b") == Status::passed);
    CHECK(logs_starting(f.spec.log_dir, "memcheck") == 0);
  }
  SECTION("no correctness gate passed (no GPU): nothing for a sanitizer to see") {
    Fixture f("sanitize");  // the gates stay `cpu`
    PathWith p(fake_sanitizer(f.dir.path));
    run_gates(f.lab, f.spec);
    check_with_sanitizers(f.lab, f.spec);
    CHECK(f.status("b") == Status::passed);
    CHECK(logs_starting(f.spec.log_dir, "memcheck") == 0);
  }
  SECTION("a failed gate is not run again") {
    Fixture f("sanitize");
    make_correctness(f);
    PathWith p(fake_sanitizer(f.dir.path));
    run_gates(f.lab, f.spec);
    f.lab.gates[1].status = Status::failed;  // b
    f.lab.gates[1].message = "wrong";
    check_with_sanitizers(f.lab, f.spec);
    CHECK(f.gate("b").message == "wrong");
    CHECK(f.gate("b").sanitizer.empty());
  }
  SECTION("without compute-sanitizer: a note, nothing fails") {
    Fixture f("sanitize");
    make_correctness(f);
    const std::string old = std::getenv("PATH");
    setenv("PATH", (f.dir.path / "no-such-folder").c_str(), 1);
    run_gates(f.lab, f.spec);
    check_with_sanitizers(f.lab, f.spec);
    setenv("PATH", old.c_str(), 1);
    bool found = fs::exists("/usr/local/cuda/bin/compute-sanitizer");  // where labgrade also looks
    if (!found) {
      CHECK(f.status("b") == Status::passed);
      CHECK_THAT(join(f.lab.notes, "\n"), ContainsSubstring("compute-sanitizer was not found"));
    }
  }
}

TEST_CASE("a sanitizer that cannot run the gates is a note, not a clean check", "[runner][sanitizer]") {
  Fixture f("sanitize");
  make_correctness(f);
  fs::path bin = f.dir.path / "broken";
  fs::create_directories(bin);
  std::ofstream(bin / "compute-sanitizer") << "#!/bin/bash\necho 'cannot start'\nexit 1\n";
  fs::permissions(bin / "compute-sanitizer", fs::perms::owner_all);
  PathWith p(bin);
  run_gates(f.lab, f.spec);
  check_with_sanitizers(f.lab, f.spec);
  for (const auto& g : f.lab.gates) CHECK(g.status == Status::passed);
  const std::string notes = join(f.lab.notes, "\n");
  CHECK_THAT(notes, ContainsSubstring("memcheck: the memory and race checks could not run the gates"));
  CHECK_THAT(notes, !ContainsSubstring("no error"));
}

TEST_CASE("gates that do not run under the sanitizer are named, and cpu gates alone are no clean check",
          "[runner][sanitizer]") {
  SECTION("b skipped under the sanitizer, a and c checked") {
    Fixture f("sanitize_skip");
    make_correctness(f);
    PathWith p(fake_sanitizer(f.dir.path));
    run_gates(f.lab, f.spec);
    check_with_sanitizers(f.lab, f.spec);
    for (const auto& g : f.lab.gates) CHECK(g.status == Status::passed);
    const std::string notes = join(f.lab.notes, "\n");
    CHECK_THAT(notes, ContainsSubstring("memcheck: 1 gate(s) checked"));
    CHECK_THAT(notes, ContainsSubstring("not checked: b (skipped: no CUDA device); c (skipped: no CUDA device)"));
  }
  SECTION("only a cpu gate got to its end: not a clean check") {
    Fixture f("sanitize_skip");
    make_correctness(f);
    f.lab.gates[0].kind = "cpu";  // a, the only gate that runs under the sanitizer
    PathWith p(fake_sanitizer(f.dir.path));
    run_gates(f.lab, f.spec);
    check_with_sanitizers(f.lab, f.spec);
    const std::string notes = join(f.lab.notes, "\n");
    CHECK_THAT(notes, ContainsSubstring("memcheck: the memory and race checks could not run the gates (no CUDA device)"));
    CHECK_THAT(notes, ContainsSubstring("racecheck: the memory and race checks could not run the gates"));
    CHECK_THAT(notes, !ContainsSubstring("no error"));
  }
}

TEST_CASE("what the checks' time limit leaves unchecked is a note, not a failure", "[runner][sanitizer]") {
  Fixture f("sanitize_hang");
  make_correctness(f);
  f.spec.sanitizer_time_limit_s = 2;
  PathWith p(fake_sanitizer(f.dir.path));
  run_gates(f.lab, f.spec);
  check_with_sanitizers(f.lab, f.spec);
  for (const auto& g : f.lab.gates) CHECK(g.status == Status::passed);
  CHECK_THAT(join(f.lab.notes, "\n"), ContainsSubstring("ran out before every gate was checked"));
}

TEST_CASE("sanitizer logs: errors counted, racecheck warnings and the exit-code line not", "[runner][sanitizer]") {
  CHECK(sanitizer_error_count("========= ERROR SUMMARY: 0 errors\n") == 0);
  CHECK(sanitizer_error_count("========= Invalid __global__ write of size 4 bytes\n"
                              "=========     at 0x70 in step3.cu:12:tiled(float*)\n") == 1);  // killed: no summary
  CHECK(sanitizer_error_count("========= Error: process didn't terminate successfully\n"
                              "========= ERROR SUMMARY: 0 errors\n") == 0);
  CHECK(sanitizer_error_count("========= Warning: Race reported between Write access at x\n"
                              "========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)\n") == 0);
  CHECK(sanitizer_error_count("========= Error: Race reported between Write access at x\n"
                              "========= Error: Race reported between Read access at y\n"
                              "========= RACECHECK SUMMARY: 5 hazards displayed (3 errors, 2 warnings)\n") == 3);
  CHECK(sanitizer_error_count("========= Misaligned Shared or Local Address\n========= ERROR SUMMARY: 1 error\n") ==
        1);
  // The log holds the student's output too: a summary line with a million digits (std::regex's recursion overflowed
  // the grader's stack on it, then std::stoi threw) is read, saturated, and no line of digits alone counts.
  CHECK(sanitizer_error_count("========= ERROR SUMMARY: " + std::string(1000000, '9') + " errors\n") == 1000000);
  CHECK(sanitizer_error_count("ERROR SUMMARY: " + std::string(100000, '7')) == 0);  // no " error" after it
  CHECK(sanitizer_error_count("========= RACECHECK SUMMARY: 2 hazards displayed (" + std::string(40, '1') +
                              " errors, 0 warnings)\n") == 1000000);
  CHECK(sanitizer_error_count("ERROR SUMMARY: x errors\nRACECHECK SUMMARY: 1 hazards shown (2 errors)\n") == 0);
  // A gate's output of 17 MiB before the tool's report and summary (16 MiB were read, and they were lost).
  test::TempDir dir("sanlog");
  const fs::path log = dir.path / "memcheck.log";
  {
    std::ofstream out(log);
    const std::string line(1023, 'x');
    for (int i = 0; i < 17 * 1024; ++i) out << line << "\n";
    out << "========= Invalid __global__ write of size 4 bytes\n========= ERROR SUMMARY: 1 error\n";
  }
  CHECK(sanitizer_error_count(read_sanitizer_log(log)) == 1);
}

// A recipe's launcher (mpirun in lab 09) goes between the prefix and the gate binary; like mpirun, this one keeps the
// channel descriptor to itself, so the gate binary is told "@parent:3" and writes to the launcher's descriptor.
TEST_CASE("a launcher starts the gate binary, which reports through the launcher's descriptor", "[runner]") {
  Fixture f("none");
  fs::path launcher = f.dir.path / "launcher.sh";
  std::ofstream(launcher) << "#!/bin/bash\n\"$@\" 3>&-\n";  // runs the gate as a child with fd 3 closed
  fs::permissions(launcher, fs::perms::owner_all);
  fs::path gate = f.dir.path / "mpi_gate.sh";
  std::ofstream(gate) << R"(#!/bin/bash
[ "$2" = "@parent:3" ] || { echo "channel argument: $2"; exit 9; }
{ [ -e /dev/fd/3 ] && echo "fd 3 leaked to the gate"; } 2>/dev/null
ch=/proc/$PPID/fd/3
echo '{"event":"run_start","lab":"98","seed":7,"device":"none","rubric":"r"}' >> $ch
IFS=, read -ra gates <<< "$5"
for g in "${gates[@]}"; do
  echo "{\"event\":\"gate_start\",\"gate\":\"$g\"}" >> $ch
  echo "{\"event\":\"gate_end\",\"gate\":\"$g\",\"status\":\"passed\",\"message\":\"\",\"seconds\":0}" >> $ch
done
echo '{"event":"run_end","passed":3,"failed":0,"skipped":0}' >> $ch
)";
  fs::permissions(gate, fs::perms::owner_all);
  f.spec.exe = gate;
  f.spec.launcher = {launcher.string()};
  run_gates(f.lab, f.spec);
  for (const char* g : {"a", "b", "c"}) CHECK(f.status(g) == Status::passed);
  CHECK(read_file(f.spec.log_dir / "run1.log").find("leaked") == std::string::npos);
}

TEST_CASE("lab notes: a flood of one kind keeps eight, and never crowds out the grader's own or a request to read code",
          "[runner]") {
  LabResult lab;
  for (int i = 0; i < 30; ++i) detail::add_note(lab, "result channel: a line out of protocol, number " + std::to_string(i));
  for (int i = 0; i < 30; ++i)
    detail::add_note(lab, std::string(kHiddenRunNote) + "result channel: in the hidden run " + std::to_string(i));
  CHECK(lab.notes.size() == 8);  // the hidden run's mark does not make another kind
  // Restarts carry no ':': their first three words make their kind.
  for (int i = 0; i < 30; ++i)
    detail::add_note(lab, "restarted the gate binary for " + std::to_string(i) + " remaining gate(s) after signal 11");
  CHECK(lab.notes.size() == 16);
  detail::add_note(lab, "machine code: 9 gate(s) checked");
  detail::add_note(lab, "memcheck: 12 gate(s) checked in 3.0 s, no error");
  for (int i = 0; i < 50; ++i) detail::add_note(lab, "kind " + std::to_string(i) + ": one of many kinds");
  CHECK(lab.notes.size() == 40);
  detail::add_note(lab, std::string(kObjectReviewNote) + "machine-code checks not done: cuobjdump failed");
  detail::add_note(lab, std::string(kHiddenRunNote) + kObjectReviewNote + "student/step3.cu: bytes of a syscall");
  REQUIRE(lab.notes.size() == 42);
  CHECK(lab.notes[16] == "machine code: 9 gate(s) checked");
  CHECK(starts_with(lab.notes[40], kObjectReviewNote));
}
