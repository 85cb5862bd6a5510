// Running one untrusted process: process group, rlimits, optional bubblewrap namespaces, a dedicated uid and a
// cgroup v2 leaf, and killing everything it started.
//
// Layers, each used when it is available (labgrade doctor says which are):
//   - always: its own process group (killed as a whole), core dumps off, CPU time, file size, open files,
//     RLIMIT_DATA for host memory (RLIMIT_AS only for compilers: CUDA reserves terabytes of address space, so an
//     address-space limit breaks every GPU program, while RLIMIT_DATA counts only writable private memory).
//   - when the grader runs as root: the process runs as a dedicated uid per concurrent slot (61000 + slot), so
//     RLIMIT_NPROC really limits it (root ignores that limit), it cannot write the repository, the build or other
//     students' folders (owned by root or by other slot uids, mode 0700), and everything it left behind is killed
//     by uid at the end. Without bubblewrap it also gets its own network namespace (no network).
//   - bubblewrap (--sandbox bwrap|auto): a read-only view of the system, the repository and the build, a fresh
//     /tmp, /proc and /dev (plus the NVIDIA device nodes), no network, its own PID namespace (a fork bomb dies with
//     it), and only the submission's scratch folder writable. solutions/ and other students' folders are masked.
//   - cgroup v2 (when a delegated, writable hierarchy with the memory and pids controllers exists): memory.max and
//     pids.max for the whole process tree, and cgroup.kill.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util.h"

namespace labgrade {

struct ResourceLimits {
  double cpu_seconds = 0;           // RLIMIT_CPU (0: none)
  std::uint64_t file_size = 0;      // RLIMIT_FSIZE, bytes
  std::uint64_t processes = 0;      // RLIMIT_NPROC, only applied under a dedicated uid
  std::uint64_t data_bytes = 0;     // RLIMIT_DATA
  std::uint64_t address_space = 0;  // RLIMIT_AS: never for processes that touch the GPU
  std::uint64_t open_files = 4096;
  // Added to the grader's niceness: a batch's compiles of the next students yield the CPUs to the gate runs beside
  // them (their CPU references, the sanitizers, a speed gate's launches). An unprivileged child cannot lower it again.
  int nice = 0;
  // The CPUs the process and everything it starts may run on (sched_setaffinity; empty: the grader's own). A batch
  // keeps some CPUs for its speed gates alone (plan_cpus, batch_internal.h).
  std::vector<int> cpus;
};

enum class SandboxMode { none, bwrap };

// Decided once per batch by detect_sandbox().
struct SandboxSettings {
  SandboxMode mode = SandboxMode::none;
  std::vector<fs::path> ro_paths;  // bound read-only besides the system folders (repo, build, toolkit...)
  // Applied in order after the read-only binds: mask hides a path (an empty tmpfs, or /dev/null for a file),
  // rebind shows a path read-only again (the build folder in use, inside a masked build/).
  struct Overlay {
    enum Kind { mask, rebind } kind;
    fs::path path;
  };
  std::vector<Overlay> overlays;
  bool drop_uid = false;  // run as a dedicated uid (needs root)
  int uid_base = 61000;
  fs::path helper;                        // this labgrade executable (does the uid switch inside bwrap)
  std::optional<fs::path> cgroup_parent;  // a cgroup v2 folder whose children get memory and pids controllers
  std::uint64_t cgroup_memory = 0, cgroup_pids = 0;
  std::vector<std::string> notes;  // what is and is not enforced, for the report and doctor
};

// What can be enforced on this machine. mode: "auto" | "bwrap" | "none" (bwrap when it is asked for but does
// not work: UserError).
SandboxSettings detect_sandbox(const std::string& mode, std::uint64_t memory_limit, std::uint64_t pids_limit);
// The isolation in force, as every report states it: "bwrap" (bubblewrap namespaces, with or without the
// dedicated uid), "uid-only" (no bubblewrap, a dedicated uid and an empty network namespace: the submission can
// still read whatever is world-readable, solutions/ included) or "none" (runs as the grader's own user).
std::string isolation_name(const SandboxSettings& s);
bool bwrap_works();
// The cgroup v2 folder labgrade would create its leaves in, or why there is none.
std::optional<fs::path> find_cgroup_parent(std::string* why_not);

struct ProcessSpec {
  std::vector<std::string> argv;
  fs::path cwd;
  fs::path writable;               // the submission's scratch folder: the only writable place inside the sandbox
  std::vector<fs::path> extra_ro;  // bound read-only for this process only (the built gate binary's folder)
  std::vector<std::pair<std::string, std::string>> env;  // the whole environment, or with inherit_env: set on top
  bool inherit_env = false;  // local grading: the student's own environment
  ResourceLimits limits;
  int channel_fd = -1;                       // becomes fd 3 in the child (the result channel)
  fs::path output;                           // stdout and stderr go here
  int slot = -1;                             // the concurrency slot: selects the dedicated uid
  const SandboxSettings* sandbox = nullptr;  // nullptr: run directly (grading one's own tree)
  // At the end, kill every process of the dedicated uid (what left the process group). False only while another
  // process of the same submission runs under the same uid and must live on (the default checks' two tools); the
  // caller then calls sweep_uid once both have ended.
  bool sweep_uid = true;
};
// Sets one variable of the process's environment, replacing an earlier value (on top of the inherited one in local
// grading).
void set_env(ProcessSpec& p, const std::string& key, const std::string& value);

struct ExitInfo {
  bool exited = false;  // normal exit (code) vs killed by a signal
  int code = 0;
  int signal = 0;
  std::string describe() const;  // "exit code 1", "signal 11 (SIGSEGV)"
};

// A running child. Destroying it kills and reaps everything it started.
class Process {
 public:
  explicit Process(const ProcessSpec& spec);
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  pid_t pid() const { return pid_; }
  std::optional<ExitInfo> poll();  // non-blocking
  ExitInfo wait();
  // SIGKILL to the process group, the cgroup and (under a dedicated uid) every process of that uid.
  void kill_all();

 private:
  pid_t pid_ = -1;
  int uid_ = -1;
  bool sweep_uid_ = true;
  bool via_bwrap_ = false;
  std::optional<fs::path> cgroup_;
  std::optional<ExitInfo> exit_;
};

// Runs a process to completion with a time limit on its own progress (compiling, linking, probes): wall time less
// the time it waited for a CPU, so a busy machine does not make it time out; 10x the limit on the clock at most.
struct Completed {
  ExitInfo exit;
  bool timed_out = false;
  double seconds = 0;
};
Completed run_limited(const ProcessSpec& spec, double wall_limit_s);

// Reserves dedicated uids for `slots` slots (uid_base .. uid_base + slots - 1) for this process: as many consecutive
// blocks of 100 uids as that takes, each held until exit by a lock file and by an abstract socket named after it
// (the socket is what a grader in a chroot, with its own lock folder, also sees). Two batches running at the same
// time must not share uids, since everything a uid runs is killed when a submission ends. The reserved uids are swept
// once taken: a grader that ended without its sweeps (killed, crashed) may have left processes running under them,
// which would otherwise share the next submission's uid, and with it its files.
void reserve_uid_block(SandboxSettings& s, int slots);

// The dedicated uid of a slot (or -1 when the sandbox does not switch uid), and making the scratch folder
// belong to it.
int slot_uid(const SandboxSettings* sandbox, int slot);
// Kills every process of the slot's dedicated uid (nothing without one, or when not root).
void sweep_uid(const SandboxSettings* sandbox, int slot);
// Runs fn in a child process switched to `uid` (its own group, no supplementary ones) and waits for it: whatever fn
// does to files, it can do no more than that uid could. Only as root and for uid >= 0; false (fn not run) otherwise.
// fn runs after a fork of a threaded process: no locks another thread may hold, and no first use of a static.
bool run_as_uid(int uid, const std::function<void()>& fn);
void give_to_slot(const fs::path& dir, const SandboxSettings* sandbox, int slot);
// Back to the grader (root, mode 0755): the slot uid can read and run, not change.
void take_back(const fs::path& dir, const SandboxSettings* sandbox);

// Internal: `labgrade __sandbox-exec --uid N -- cmd...` runs inside bubblewrap (as root there) and switches to the
// dedicated uid before exec. Returns only on error.
int sandbox_exec_main(int argc, char** argv);

}  // namespace labgrade
