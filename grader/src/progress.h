// How much time a process tree has had for itself, as opposed to how much wall-clock time has passed.
//
// A gate's time limit must not punish a submission for a busy grading machine: on two cores shared with compile
// jobs and another student's fork bomb, a healthy gate binary can wait many seconds for a CPU while doing nothing
// wrong. The kernel tells how long each thread has waited on a run queue (/proc/<pid>/task/<tid>/schedstat, second
// field: runnable but not running), so
//
//     progress = wall time - (sum over sampling intervals of the run-queue wait of the tree's most-delayed thread
//                             in that interval, at most the interval)
//
// is the time the tree would have needed on an idle machine: its own computing, and its own waiting for the GPU,
// the disk or a sleep (those are not run-queue waits and still count). Interval by interval, because the waiting
// moves between threads and processes (the sandbox that starts the gate binary, then the binary itself). A hang in host code, a kernel that never
// ends and a sleep all accumulate progress at full speed, so they are still caught by the gate limit; only the
// waiting that other processes caused is forgiven.
//
// One kind of hog slows itself: a fork bomb's processes wait on each other's run queue, so their progress barely
// moves. It is caught by the CPU time the whole tree consumes (utime + stime of every live process, with the
// children it has reaped), which grows at the speed of the whole machine.
//
// Where the kernel has no schedstat (CONFIG_SCHED_INFO off) or /proc hides other users' processes, the run-queue
// wait reads as zero and progress equals wall time: the limits behave as plain wall-clock limits.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <unordered_map>
#include <vector>

namespace labgrade {

class ProgressClock {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ProgressClock(pid_t root);

  // Reads /proc for the tree under `root` (at most every `min_interval`; cheap calls in between).
  void sample(std::chrono::milliseconds min_interval = std::chrono::milliseconds(250));

  double wall_seconds() const;      // since construction
  double progress_seconds() const;  // wall time minus the run-queue wait the machine imposed (never decreasing)
  double cpu_seconds() const;       // CPU time of the whole tree, as of the last sample (never decreasing)
  double waited_seconds() const;    // the run-queue wait forgiven so far
  bool measures_waits() const { return schedstat_ok_; }

 private:
  pid_t root_;
  Clock::time_point start_, last_sample_;
  double waited_s_ = 0;  // the run-queue wait imposed on the tree so far (see above)
  std::unordered_map<pid_t, unsigned long long> last_waits_;  // each live thread's run-queue wait (ns), last sample
  double cpu_s_ = 0;
  mutable double progress_s_ = 0;  // last value handed out: progress never runs backwards
  bool schedstat_ok_ = false;
  bool sampled_ = false;
};

// One interval of progress: a gate, or the silence before the first gate. Stores where the clock stood at start.
struct ProgressMark {
  double wall = 0, progress = 0, cpu = 0;
  static ProgressMark now(const ProgressClock& c) { return {c.wall_seconds(), c.progress_seconds(), c.cpu_seconds()}; }
};

// Whether process `pid` is `ancestor` or one of its descendants now, by the parent links of /proc/<pid>/stat (false
// when a link cannot be read: the process has gone, or /proc hides it). A process that left the tree (a daemon
// reparented to init) is not a descendant any more.
bool descends_from(pid_t pid, pid_t ancestor);

// The number of CPUs this process may run on (sched_getaffinity), at least 1.
int usable_cpus();
// Those CPUs by number, and for each the CPUs of its core (sysfs thread_siblings_list; just itself when unreadable).
std::vector<int> allowed_cpus();
std::vector<int> core_siblings(int cpu);

}  // namespace labgrade
