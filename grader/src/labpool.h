// Running several labs of one submission at once on one GPU, without letting that touch a speed gate's timing.
//
// A lab's untimed work (its correctness and cpu gates, the memory and race checks) leaves most of an H100 idle: small
// shapes, CPU references, compute-sanitizer's instrumentation. Labs run side by side for that work. A speed gate
// compares two timings taken on the same GPU and wants it to itself, so a lab's speed gates run in a process of their
// own that takes the GPU's exclusive turn: it starts only when no untimed run of any lab is running on that GPU, and
// none starts until it has ended (GpuTurns). Which lab runs what, and in which order, is run_and_score's (grade.h).
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

namespace labgrade {

// Turns on one GPU: any number of shared holders, or one exclusive holder. A waiting exclusive request goes first:
// once one waits, no new shared turn starts, so a speed gate waits for the untimed runs already started, never for a
// stream of new ones.
//
// A batch on several GPUs also gives each GPU's turns the machine's (set_machine): every gate process of any GPU then
// holds a shared machine turn as well, and a quiet turn (Turn's `quiet`) is the GPU's exclusive turn and the machine's,
// so that no gate process runs anywhere beside it. The GPUs' speed gates still run side by side; a quiet turn is for
// timing a speed gate again when its first timing lost points on an unsteady timing or, with several workers, at all
// (grade.cpp's time_lost_again): processes of other GPUs that take the GPU driver's locks (context creation, pinning
// memory) stalled a healthy lab 07 step 4's calls on two H200s.
// Order: a GPU's turn is taken before the machine's and given back after it, so holders of a machine turn never wait
// for a GPU's.
class GpuTurns {
 public:
  void lock_shared();
  void unlock_shared();
  void lock();
  void unlock();
  int exclusive_waiting();  // how many exclusive requests wait now (the tests' window into the queue)
  void set_machine(GpuTurns* machine) { machine_ = machine; }  // before any turn is taken

  // RAII: a shared turn, or with exclusive = true the exclusive one; with quiet = true the exclusive one and, where
  // there are machine turns, the machine's exclusive turn. A null GpuTurns takes nothing (a lab alone).
  class Turn {
   public:
    Turn(GpuTurns* turns, bool exclusive, bool quiet = false);
    ~Turn();
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    GpuTurns* turns_;
    bool exclusive_, quiet_;
  };

 private:
  GpuTurns* machine_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  int shared_ = 0;
  int exclusive_waiting_ = 0;
  bool exclusive_ = false;
};

// A fixed number of tokens shared by several pools of threads: the compiles of all the labs of one submission, or of
// every submission a batch compiles at once, hold one token per compiler (or nm, objdump, linker) process, so that
// the machine runs `count` of them at once whichever lab or student they belong to. A lab alone with many files then
// uses every token; labs with few files leave theirs to the others.
//
// A waiter asks with an `order`, and a free token goes to the lowest order waiting (among equal orders, to any of
// them). A batch passes each student's place in the queue: the student the next GPU run needs compiles as fast as
// if it were alone, and the students after it take only the tokens it leaves idle (its links, its slowest files),
// instead of all of them sharing the machine and the first run waiting for the slowest of them.
class JobTokens {
 public:
  explicit JobTokens(int count) : free_(count < 1 ? 1 : count) {}
  void acquire(std::size_t order = 0);
  void release();
  int waiting();  // how many threads wait for a token now (the tests' window into the queue)
  class Hold {  // RAII; a null JobTokens holds nothing
   public:
    explicit Hold(JobTokens* tokens, std::size_t order = 0) : tokens_(tokens) {
      if (tokens_) tokens_->acquire(order);
    }
    ~Hold() {
      if (tokens_) tokens_->release();
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    JobTokens* tokens_;
  };

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
  std::multiset<std::size_t> waiting_;  // the orders of the threads waiting for a token
};

// Which lab of a submission gets the compile jobs first (JobTokens' order, after the student's place in a batch):
// the one with the fewest student files, then the next (ties keep the given order). The labs are then linked one
// after another from the first seconds on, and the runner times each one's speed gates while the rest compile;
// with the jobs shared evenly every lab was linked near the end (a batch of one on an H100: the first of nine after
// 10-15 s of a 20-28 s compile). The jobs stay busy either way: a later lab's files take whatever tokens the earlier
// labs leave. Returns each lab's rank (0: first).
std::vector<std::size_t> compile_ranks(const std::vector<std::size_t>& files_per_lab);

// The labs of one submission handed from the threads that build them to the one that runs them, each as soon as it
// is built, in the order they are ready: that thread times a lab's speed gates while the other labs still compile
// (local labgrade, and a batch's worker). The builder calls finish() once it is done with every lab (a batch: after
// the uid slot is swept and the build folder given back to the grader), or fail() if it could not go on; the runner
// waits for that before anything that needs every lab or the compiles' end (the untimed gates, which use every CPU).
class ReadyQueue {
 public:
  void push(std::size_t lab);
  void finish();
  void fail(std::exception_ptr error);  // keeps the first error; the builder still calls finish()
  // The next lab built, waiting for it; none once the builder has finished and every lab was taken, or failed.
  std::optional<std::size_t> next();
  // The next lab built, if one is ready now; none without waiting.
  std::optional<std::size_t> ready_now();
  void wait_finished();
  bool failed();
  // Rethrows the first failure, if any.
  void rethrow();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::size_t> pop_locked();  // the first lab ready (mu_ held); none after a failure
  std::deque<std::size_t> ready_;
  bool finished_ = false;
  std::exception_ptr error_;
};

// Calls fn(i) for every i in [0, n) on up to `jobs` threads (jobs <= 1: in order, on this thread). Indices are taken
// in increasing order. The first exception thrown is rethrown once every started call has returned; calls not yet
// started then are skipped.
void for_each_concurrently(std::size_t n, int jobs, const std::function<void(std::size_t)>& fn);

// How many labs of one submission run at once on a GPU by default: one per 12 GiB of GPU memory (labs 01-07 all at
// once peaked at 10 GiB in all on an H200), one per 2.5 CPUs a worker has (a lab runs two compute-sanitizer
// processes and multi-threaded CPU references), at most the number of labs, at least 1; 6 on an 80 GB H100 with 16
// cores. No GPU (gpu_memory_gib <= 0): 1. `--solutions` on one H100 with 16 cores took 3-6 % less with 6 labs at a
// time than with 4 in three sets of interleaved runs (2026-11-26: 62.4 s with 4, 58.6 with 6, 57.9 with 9;
// 2026-11-27: 53.4, 51.8, 52.7; 2026-11-28: 55.2 and 56.4 with 4, 53.4 and 54.8 with 6, 52.1 with 8); on an H200
// with 16 cores labs 01-07 took 93 s with 4, 88 s with 7, 124 s with one: more labs at once gain little past 6, the
// untimed work being bound by the GPU's time slices.
// Beside each other every lab's run is 2-4 times slower than alone (one H200, 2026-11-28, gate trace timelines: lab
// 04's memcheck 3.3 s alone, 13 s beside five labs); what shortens a workbook is less work per round trip to the
// device (labkit::SlotBatch), not more processes. Tried the same day and reverted: the untimed gates of labs 01, 04
// and 07 in two processes each. Those labs' runs got shorter (lab 07 31 to 28 s), but every lab's checks then ran at
// once and the labs started last (02, 03) waited for a free place until 41 s: `--solutions` took 47.9, 48.0 and
// 50.8 s against 45.6-46.4 s with one process per lab. memcheck and racecheck one after the other: 44.6, 47.9, 47.9 s.
// Since then the untimed part is bound by the GPU's own work (tools/gpu_share.py, one H200, 2026-11-28: busy 21 of
// its 24 s, racecheck 10.8 GPU-seconds of it): lab 07's plain run 6.6 s shorter (a cheaper unreachable-tolerance
// problem) left the total where it was, its checks starting earlier and taking the GPU time it gave back.
int default_lab_jobs(double gpu_memory_gib, int cpus_per_worker, std::size_t labs);

// The order in which to start labs so that the last to finish ends soon after the others: the longest first
// (expected_seconds, e.g. the same labs' times in the previous run), so that a long lab never starts when the short
// ones are done and runs alone at the end. Labs with no estimate (<= 0) could be long: they come first, in their
// own order; equal estimates keep theirs. Returns indices into expected_seconds.
std::vector<std::size_t> longest_first(const std::vector<double>& expected_seconds);
// longest_first for the labs' untimed runs: each lab's measured time (its previous run, or the mean over the students
// graded so far; <= 0: none) or, for a lab without one, its rubric's expected_run_s. Without the rubric's figure a
// fresh machine started the labs in their numbers' order, and lab 07, among the longest, last.
std::vector<std::size_t> untimed_order(const std::vector<double>& measured_seconds,
                                       const std::vector<double>& rubric_seconds);

}  // namespace labgrade
