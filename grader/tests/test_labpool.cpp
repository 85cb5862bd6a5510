// Labs side by side (labpool.h): the GPU's turns, the lab threads, and run_and_score's split of a lab into its
// untimed and speed runs, driven with two scripted stand-in gate binaries. No compiler, no GPU.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "grade.h"
#include "labpool.h"
#include "test_support.h"
#include "util.h"

using namespace labgrade;
using Catch::Matchers::ContainsSubstring;

namespace {

// Waits up to 60 s for `done`: long enough for any loaded machine, and only a broken implementation waits it out.
bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 6000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace

TEST_CASE("the GPU's exclusive turn waits for the shared ones, and a waiting one holds new shared turns back",
          "[labpool]") {
  GpuTurns turns;
  std::atomic<int> stage{0};
  std::atomic<bool> exclusive_in{false}, late_shared_in{false};
  turns.lock_shared();  // an untimed run is on the GPU
  std::thread speed([&] {
    turns.lock();
    exclusive_in = true;
    while (stage < 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    turns.unlock();
  });
  // The speed run has asked (it is waiting) before the next untimed run asks.
  REQUIRE(eventually([&] { return turns.exclusive_waiting() == 1; }));
  std::thread late([&] {
    turns.lock_shared();
    late_shared_in = true;
    turns.unlock_shared();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK_FALSE(exclusive_in);    // the first untimed run still holds the GPU
  CHECK_FALSE(late_shared_in);  // and no new one may start while the speed run waits
  turns.unlock_shared();
  CHECK(eventually([&] { return exclusive_in.load(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(late_shared_in);  // the speed run has the GPU to itself
  stage = 1;
  CHECK(eventually([&] { return late_shared_in.load(); }));
  speed.join();
  late.join();
}

TEST_CASE("a quiet turn waits for every GPU's runs and holds new ones back on every GPU; plain turns of two GPUs "
          "overlap", "[labpool]") {
  GpuTurns machine, gpu0, gpu1;
  gpu0.set_machine(&machine);
  gpu1.set_machine(&machine);
  {  // the usual batch: GPU 0's speed run and GPU 1's untimed runs at once
    GpuTurns::Turn speed(&gpu0, true);
    GpuTurns::Turn untimed(&gpu1, false);
    GpuTurns::Turn untimed_too(&gpu1, false);
  }
  std::atomic<bool> quiet_in{false}, quiet_done{false}, late_in{false};
  std::atomic<int> stage{0};
  auto other = std::make_unique<GpuTurns::Turn>(&gpu1, false);  // an untimed run on GPU 1
  std::thread again([&] {
    GpuTurns::Turn quiet(&gpu0, false, true);  // GPU 0's speed gate timed again
    quiet_in = true;
    while (stage < 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    quiet_done = true;
  });
  REQUIRE(eventually([&] { return machine.exclusive_waiting() == 1; }));
  std::thread late([&] {  // GPU 1's next run asks while the quiet turn waits
    GpuTurns::Turn t(&gpu1, false);
    late_in = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK_FALSE(quiet_in);  // GPU 1's run still holds the machine
  CHECK_FALSE(late_in);   // and no new run starts on any GPU while the quiet turn waits
  other.reset();
  CHECK(eventually([&] { return quiet_in.load(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(late_in);  // the quiet turn has the machine to itself
  stage = 1;
  CHECK(eventually([&] { return late_in.load(); }));
  CHECK(quiet_done);
  again.join();
  late.join();
  // Without machine turns (labgrade on one tree) a quiet turn is the GPU's exclusive turn.
  GpuTurns alone;
  { GpuTurns::Turn quiet(&alone, false, true); }
  CHECK(alone.exclusive_waiting() == 0);
}

TEST_CASE("for_each_concurrently runs every index once, side by side, and passes the first error on", "[labpool]") {
  std::vector<std::atomic<int>> calls(7);
  std::atomic<int> running{0}, most{0};
  for_each_concurrently(calls.size(), 3, [&](std::size_t i) {
    ++calls[i];
    const int now = ++running;
    for (int seen = most; now > seen && !most.compare_exchange_weak(seen, now);) {
    }
    // Each of the first three waits until three run at once: a pool that ran them one by one would not get past.
    if (i < 3) eventually([&] { return most.load() >= 3; });
    --running;
  });
  for (auto& c : calls) CHECK(c == 1);
  CHECK(most == 3);

  std::atomic<int> after{0};
  CHECK_THROWS_WITH(for_each_concurrently(50, 2,
                                          [&](std::size_t i) {
                                            if (i == 1) throw std::runtime_error("lab 1 broke");
                                            std::this_thread::sleep_for(std::chrono::milliseconds(20));
                                            ++after;
                                          }),
                    "lab 1 broke");
  CHECK(after < 49);  // the calls not yet started when it broke were skipped

  std::vector<std::size_t> order;
  for_each_concurrently(4, 1, [&](std::size_t i) { order.push_back(i); });
  CHECK(order == std::vector<std::size_t>{0, 1, 2, 3});
}

TEST_CASE("labs at a time: one per 12 GiB of GPU memory and per 2.5 CPUs, at most the labs, 1 without a GPU",
          "[labpool]") {
  CHECK(default_lab_jobs(79.1, 16, 9) == 6);    // an H100 80GB on 16 cores
  CHECK(default_lab_jobs(139.8, 16, 9) == 6);   // an H200 on 16 cores: bound by the CPUs
  CHECK(default_lab_jobs(139.8, 64, 20) == 11); // ... on 64 cores: by its memory
  CHECK(default_lab_jobs(139.8, 64, 3) == 3);   // ... at most the labs
  CHECK(default_lab_jobs(23.6, 32, 7) == 1);    // a 24 GB card: one at a time, as before
  CHECK(default_lab_jobs(7.6, 8, 7) == 1);      // a student's laptop GPU
  CHECK(default_lab_jobs(0, 2, 7) == 1);        // no GPU (CI)
  CHECK(default_lab_jobs(79.1, 2, 7) == 1);     // two cores
  CHECK(default_lab_jobs(79.1, 8, 7) == 3);
  CHECK(default_lab_jobs(31.7, 64, 9) == 2);    // a 32 GB card
  CHECK(default_lab_jobs(79.1, 16, 0) == 1);
}

namespace {

// A stand-in gate binary for run_and_score: gate `u` (untimed) meets the other lab's `u` (each leaves a mark and
// waits up to 60 s for the other's: only runs side by side pass), gate `s` (speed) sleeps a little. Every process
// appends "<lab> <gates> <start ns> <end ns>" to $MEET/intervals.
const char* kTwoLabScript = R"SH(#!/bin/bash
shift 4  # --labkit-results /dev/fd/3 --labkit-rubric FILE
IFS=, read -ra gates <<< "$1"
emit() { echo "$1" >&3; }
start=$(date +%s%N)
emit "{\"event\":\"run_start\",\"lab\":\"$LAB\",\"seed\":7,\"device\":\"none\",\"rubric\":\"r\"}"
for g in "${gates[@]}"; do
  emit "{\"event\":\"gate_start\",\"gate\":\"$g\"}"
  status=passed message=""
  if [ "$g" = u ]; then
    touch "$MEET/$LAB"
    for i in $(seq 600); do [ -e "$MEET/$OTHER" ] && break; sleep 0.1; done
    [ -e "$MEET/$OTHER" ] || { status=failed; message="lab $OTHER's untimed run never ran beside this one"; }
  else
    sleep 0.3
    emit "{\"event\":\"metric\",\"gate\":\"$g\",\"name\":\"ratio\",\"value\":1,\"unit\":\"x\"}"
  fi
  emit "{\"event\":\"gate_end\",\"gate\":\"$g\",\"status\":\"$status\",\"message\":\"$message\",\"seconds\":0.01}"
done
emit '{"event":"run_end","passed":1,"failed":0,"skipped":0}'
echo "$LAB ${gates[*]} $start $(date +%s%N)" >> "$MEET/intervals"
)SH";

struct Interval {
  std::string lab, gates;
  long long start = 0, end = 0;
};

}  // namespace

TEST_CASE("labs start longest first; labs with no estimate first of all, in their own order", "[labpool]") {
  using V = std::vector<std::size_t>;
  CHECK(longest_first({}) == V{});
  // lab 06 ran longest last time, then 01 and 04 (an H200's figures, one lab at a time)
  CHECK(longest_first({25.6, 8.9, 11.5, 24.0, 13.7, 32.6, 22.4}) == V{5, 0, 3, 6, 4, 2, 1});
  CHECK(longest_first({0, 0, 0}) == V{0, 1, 2});            // no previous run: the labs' own order
  CHECK(longest_first({5, 0, 9, -1}) == V{1, 3, 2, 0});     // a lab never timed could be the longest
  CHECK(longest_first({3, 7, 3, 7}) == V{1, 3, 0, 2});      // ties keep their order
}

TEST_CASE("the untimed runs' order: measured times where there are some, else the rubrics' expected_run_s",
          "[labpool]") {
  using V = std::vector<std::size_t>;
  // a fresh machine: the rubrics' figures (labs 01-09 on an H100) put 04 and 07 first, not 01 02 03
  const std::vector<double> rubric{12, 7, 6, 13, 8, 11, 13, 8, 3};
  CHECK(untimed_order(std::vector<double>(9, 0.0), rubric) == V{3, 6, 0, 5, 4, 7, 1, 2, 8});
  // measured times win over the rubric's; a lab not measured keeps its rubric figure
  CHECK(untimed_order({2, 0, 20}, {12, 7, 6}) == V{2, 1, 0});
  // neither: the lab could be long, so it comes first (longest_first's rule)
  CHECK(untimed_order({0, 5, 0}, {0, 9, 4}) == V{0, 1, 2});
  CHECK(untimed_order({0, 0}, {}) == V{0, 1});  // no rubric figures at all: the labs' own order
}

TEST_CASE("labs side by side: their untimed runs overlap, a speed run has the GPU to itself", "[labpool]") {
  test::TempDir dir("labpool");
  const fs::path script = dir.path / "gates.sh", meet = dir.path / "meet";
  std::ofstream(script) << kTwoLabScript;
  fs::permissions(script, fs::perms::owner_all);
  fs::create_directories(meet);
  std::vector<LabResult> labs(2);
  std::vector<GateRunSpec> specs(2);
  const char* names[] = {"97", "98"};
  for (int i = 0; i < 2; ++i) {
    labs[i].lab = names[i];
    for (const char* id : {"u", "s"}) {
      GateResult g;
      g.id = id;
      g.kind = id[0] == 's' ? "speed" : "correctness";
      g.max_points = 1;
      g.metric_name = "ratio";
      g.threshold = 0.5;
      labs[i].gates.push_back(g);
    }
    GateRunSpec& s = specs[i];
    s.exe = script;
    s.signed_channel = false;  // a shell script does not sign its lines
    s.rubric = dir.path / "rubric.toml";
    s.log_dir = dir.path / ("logs" + std::to_string(i));
    fs::create_directories(s.log_dir);
    s.gate_time_limit_s = 120;
    s.time_limit_s = 300;
    s.sanitizer_checks = false;
    s.process.env = {{"PATH", "/usr/bin:/bin"}, {"LAB", names[i]}, {"OTHER", names[1 - i]}, {"MEET", meet.string()}};
  }
  GpuTurns turns;
  // As labgrade and a batch grade labs side by side: every lab's speed gates first (run_speed_gates), then the rest;
  // and run_and_score alone, which starts each lab with its speed gates.
  const bool speed_first = GENERATE(true, false);
  std::vector<double> used(2, 0.0);
  if (speed_first)
    for (std::size_t i = 0; i < 2; ++i) used[i] = run_speed_gates(labs[i], specs[i], &turns);
  for_each_concurrently(2, 2, [&](std::size_t i) { run_and_score(labs[i], specs[i], false, false, &turns, used[i]); });

  for (const auto& lab : labs)
    for (const auto& g : lab.gates) {
      INFO("lab " << lab.lab << " gate " << g.id << ": " << g.message);
      CHECK(g.status == Status::passed);
    }
  // The untimed and the speed gates ran in processes of their own (console logs run1.log and run-speed1.log).
  for (const auto& s : specs) {
    CHECK(fs::exists(s.log_dir / "run1.log"));
    CHECK(fs::exists(s.log_dir / "run-speed1.log"));
  }
  std::vector<Interval> runs;
  std::istringstream in(read_file(meet / "intervals"));
  for (Interval r; in >> r.lab >> r.gates >> r.start >> r.end;) runs.push_back(r);
  REQUIRE(runs.size() == 4);  // with the speed gates first, run_and_score does not run them again
  if (speed_first) {
    CHECK(used[0] > 0);
    for (const auto& a : runs)
      for (const auto& b : runs)
        if (a.gates == "s" && b.gates == "u") CHECK(a.end <= b.start);
  }
  for (const auto& a : runs) {
    if (a.gates != "s") continue;
    for (const auto& b : runs) {
      if (&a == &b) continue;
      INFO("speed run of lab " << a.lab << " [" << a.start << ", " << a.end << "] and the run of " << b.gates
                               << " in lab " << b.lab << " [" << b.start << ", " << b.end << "]");
      CHECK((b.end <= a.start || b.start >= a.end));
    }
  }
}

namespace {

// A stand-in speed gate `s` whose first timing is unsteady: ratio 0.2 (threshold 0.5), `stalled`, failed; or with
// FIRST=partial, ratio 0.4 and `stalled` but passed (as a gate judged against its floor passes); FIRST=long, as the
// first but reporting 45 s for the gate; with FIRST=steady,
// failed without `stalled`; with FIRST=fast, failed at ratio 0.9 (for something else than its figure), `stalled`.
// Later runs follow MODE: steady (ratio 1, passed), unsteady (0.3, `stalled`, failed), crash (dies inside the gate).
// Every run appends a line to $MEET/runs.
const char* kUnsteadyScript = R"SH(#!/bin/bash
shift 4
emit() { echo "$1" >&3; }
echo run >> "$MEET/runs"
n=$(wc -l < "$MEET/runs")
emit '{"event":"run_start","lab":"97","seed":7,"device":"none","rubric":"r"}'
emit '{"event":"gate_start","gate":"s"}'
metric() { emit "{\"event\":\"metric\",\"gate\":\"s\",\"name\":\"$1\",\"value\":$2,\"unit\":\"\"}"; }
secs=0.01
if [ "$n" = 1 ]; then
  case "$FIRST" in
    long) metric ratio 0.2; metric stalled 1; status=failed; secs=45 ;;
    partial) metric ratio 0.4; metric stalled 1; status=passed ;;
    fast) metric ratio 0.9; metric stalled 1; status=failed ;;
    steady) metric ratio 0.2; status=failed ;;
    *) metric ratio 0.2; metric stalled 1; status=failed ;;
  esac
else
  case "$MODE" in
    steady) metric ratio 1; status=passed ;;
    unsteady) metric ratio 0.3; metric stalled 1; status=failed ;;
    crash) exit 1 ;;
  esac
fi
emit "{\"event\":\"gate_end\",\"gate\":\"s\",\"status\":\"$status\",\"message\":\"measured\",\"seconds\":$secs}"
emit '{"event":"run_end","passed":1,"failed":0,"skipped":0}'
)SH";

}  // namespace

TEST_CASE("a speed gate that would lose points on an unsteady timing is timed once more, and that timing decides; "
          "in a busy batch a few that lost points on a steady one are too",
          "[labpool]") {
  struct Case {
    const char *first, *mode;
    int busy;      // the student's second timings for a busy machine (GateRunSpec::busy_retimes); -1: none (null)
    int unsteady;  // its second timings for unsteady ones (GateRunSpec::unsteady_retimes); -1: none (null, unbounded)
    int runs;
    Status status;
    double ratio;
    const char* says;  // in the gate's message and the lab's note ("" : no second timing, no note)
  };
  const Case c = GENERATE(Case{"unsteady", "steady", -1, -1, 2, Status::passed, 1, "which decides"},
                          Case{"unsteady", "unsteady", -1, -1, 2, Status::failed, 0.3, "still unsteady"},
                          Case{"unsteady", "crash", -1, -1, 2, Status::failed, 0.2, "so the first stands"},
                          Case{"partial", "steady", -1, -1, 2, Status::passed, 1, "ratio 0.4, `stalled`"},
                          Case{"steady", "steady", -1, -1, 1, Status::failed, 0.2, ""},
                          // Failed with its figure above the threshold: not the timing's verdict, not timed again.
                          Case{"fast", "steady", 2, 4, 1, Status::failed, 0.9, ""},
                          // Slowed alike in every call by another worker (no `stalled`): one of the student's few.
                          Case{"steady", "steady", 2, 4, 2, Status::passed, 1, "lost points while other workers"},
                          Case{"steady", "steady", 0, 4, 1, Status::failed, 0.2, ""},
                          // An unsteady timing takes one of the student's unsteady second timings, not a busy one...
                          Case{"unsteady", "steady", 2, 1, 2, Status::passed, 1, "which decides"},
                          Case{"unsteady", "steady", 0, 4, 2, Status::passed, 1, "which decides"},
                          // ...and, those used up, a busy-machine one; with neither left it is not timed again.
                          Case{"unsteady", "steady", 1, 0, 2, Status::passed, 1, "which decides"},
                          Case{"unsteady", "steady", 0, 0, 1, Status::failed, 0.2, ""},
                          // A first timing of 45 s is timed again too (a busy machine lengthens it), within 3x it.
                          Case{"long", "steady", 2, 4, 2, Status::passed, 1, "which decides"});
  INFO("first timing " << c.first << ", then " << c.mode << ", second timings left: busy machine " << c.busy
                       << ", unsteady " << c.unsteady);
  test::TempDir dir("unsteady");
  const fs::path script = dir.path / "gates.sh";
  std::ofstream(script) << kUnsteadyScript;
  fs::permissions(script, fs::perms::owner_all);
  LabResult lab;
  lab.lab = "97";
  GateResult g;
  g.id = "s";
  g.kind = "speed";
  g.max_points = 5;
  g.metric_name = "ratio";
  g.threshold = 0.5;
  g.floor = 0.1;
  lab.gates.push_back(g);
  GateRunSpec spec;
  spec.exe = script;
  spec.signed_channel = false;
  spec.rubric = dir.path / "rubric.toml";
  spec.log_dir = dir.path / "logs";
  fs::create_directories(spec.log_dir);
  spec.gate_time_limit_s = 120;
  spec.time_limit_s = 300;
  spec.sanitizer_checks = false;
  spec.process.env = {{"PATH", "/usr/bin:/bin"}, {"MEET", dir.path.string()}, {"FIRST", c.first}, {"MODE", c.mode}};
  if (c.busy >= 0) spec.busy_retimes = std::make_shared<std::atomic<int>>(c.busy);
  if (c.unsteady >= 0) spec.unsteady_retimes = std::make_shared<std::atomic<int>>(c.unsteady);
  GpuTurns machine, turns;
  turns.set_machine(&machine);
  run_speed_gates(lab, spec, &turns);
  // A second timing is taken from the student's count it was run for: a steady first timing's from the busy-machine
  // ones, an unsteady one's from the unsteady ones while any is left.
  const bool again = c.runs == 2, steady = std::string(c.first) == "steady";
  const bool took_unsteady = again && !steady && c.unsteady != 0;
  if (c.unsteady >= 0) CHECK(spec.unsteady_retimes->load() == c.unsteady - (took_unsteady ? 1 : 0));
  if (c.busy >= 0) CHECK(spec.busy_retimes->load() == c.busy - (again && !took_unsteady ? 1 : 0));
  if (!again && !steady && c.unsteady == 0) CHECK_THAT(lab.gates.front().message, ContainsSubstring("not timed again"));
  apply_rubric(lab);
  const GateResult& s = lab.gates.front();
  INFO(s.message);
  std::istringstream runs(read_file(dir.path / "runs"));
  int n = 0;
  for (std::string line; std::getline(runs, line);) ++n;
  CHECK(n == c.runs);  // never more than one second timing
  CHECK(s.status == c.status);
  REQUIRE(s.measured);
  CHECK(*s.measured == c.ratio);
  CHECK(fs::exists(spec.log_dir / "run-speed-again1.log") == (c.runs == 2));
  const auto note = std::find_if(lab.notes.begin(), lab.notes.end(),
                                 [](const std::string& t) { return starts_with(t, kRetimedNote); });
  if (*c.says) {
    REQUIRE(note != lab.notes.end());
    CHECK_THAT(*note, ContainsSubstring(c.says));
    CHECK_THAT(*note, ContainsSubstring("s: its first timing"));
    if (c.status == Status::passed) CHECK_THAT(s.message, ContainsSubstring("timed twice"));
  } else {
    CHECK(note == lab.notes.end());
  }
  // The partial first timing (0.4 of a 0.5 threshold) would have cost points; the second one earns them all.
  if (c.status == Status::passed) CHECK(s.points == s.max_points);
}

TEST_CASE("job tokens: never more holders than tokens, and all of them in use at once", "[labpool]") {
  JobTokens tokens(3);
  std::atomic<int> holding{0}, most{0}, done{0};
  for_each_concurrently(24, 12, [&](std::size_t) {
    JobTokens::Hold hold(&tokens);
    const int now = ++holding;
    for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
    }
    // Each holder waits until three have held at once (never, if the tokens went out one at a time).
    eventually([&] { return most.load() >= 3; });
    --holding;
    ++done;
  });
  CHECK(done == 24);
  CHECK(most == 3);
  JobTokens::Hold none(nullptr);  // a null pool holds nothing and never waits
}

TEST_CASE("job tokens go to the lowest order waiting, whenever it came", "[labpool]") {
  // A batch's students compile with their place in the queue as the order: the next run's student first.
  const int count = GENERATE(1, 2);
  JobTokens tokens(count);
  std::vector<std::unique_ptr<JobTokens::Hold>> held;
  for (int i = 0; i < count; ++i) held.push_back(std::make_unique<JobTokens::Hold>(&tokens, 100));
  std::mutex mu;
  std::vector<std::size_t> got;
  std::vector<std::thread> threads;
  const std::vector<std::size_t> orders = {7, 3, 9, 0, 5, 3};
  for (const std::size_t order : orders) {
    threads.emplace_back([&, order] {
      JobTokens::Hold hold(&tokens, order);
      std::lock_guard<std::mutex> lock(mu);
      got.push_back(order);
    });
    // One at a time into the queue, so that arrival order and priority differ.
    CHECK(eventually([&] { return tokens.waiting() == static_cast<int>(threads.size()); }));
  }
  held.clear();  // every token free at once: each goes to the lowest order still waiting
  for (auto& t : threads) t.join();
  std::vector<std::size_t> sorted = orders;
  std::sort(sorted.begin(), sorted.end());
  if (count == 1) {
    CHECK(got == sorted);
  } else {  // two tokens: two threads may hold at once, so the records of neighbours may swap
    REQUIRE(got.size() == sorted.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("record " << i);
      CHECK(got[i] <= sorted[std::min(i + 1, sorted.size() - 1)]);
    }
  }
  CHECK(tokens.waiting() == 0);
}

TEST_CASE("ready labs go to the runner in the order they were built, until the builder finishes or fails",
          "[labpool]") {
  SECTION("in order, the runner waiting for each; none once finished") {
    ReadyQueue q;
    std::vector<std::size_t> got;
    std::thread runner([&] {
      while (const auto lab = q.next()) got.push_back(*lab);
    });
    for (const std::size_t lab : {3u, 0u, 2u}) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the runner is waiting in next() by now
      q.push(lab);
    }
    q.finish();
    runner.join();
    CHECK(got == std::vector<std::size_t>{3, 0, 2});
    CHECK_FALSE(q.failed());
    q.wait_finished();  // returns at once
  }
  SECTION("ready_now() takes a lab already built, and never waits") {
    ReadyQueue q;
    CHECK_FALSE(q.ready_now());  // nothing built yet: returns at once
    q.push(4);
    q.push(1);
    CHECK(q.ready_now() == std::optional<std::size_t>(4));
    CHECK(q.next() == std::optional<std::size_t>(1));
    CHECK_FALSE(q.ready_now());
    q.finish();
    CHECK_FALSE(q.next());
  }
  SECTION("a failure ends next() at once, labs still queued or not, and is rethrown") {
    ReadyQueue q;
    q.push(1);
    q.fail(std::make_exception_ptr(std::runtime_error("disk full")));
    q.fail(std::make_exception_ptr(std::runtime_error("later")));  // the first one is kept
    CHECK_FALSE(q.next());
    CHECK(q.failed());
    q.finish();
    q.wait_finished();
    CHECK_THROWS_WITH(q.rethrow(), "disk full");
  }
}

TEST_CASE("the lab with the fewest student files compiles first; ties keep the labs' order", "[labpool]") {
  CHECK(compile_ranks({12, 5, 3, 5, 8}) == std::vector<std::size_t>{4, 1, 0, 2, 3});
  CHECK(compile_ranks({}).empty());
  CHECK(compile_ranks({1}) == std::vector<std::size_t>{0});
}
