// One untrusted process in the sandbox: the fork and the child's side of it (rlimits, uid, exec), waiting for it,
// and killing everything it started. Separate from sandbox.cpp, which decides what the sandbox is (the bubblewrap
// command line, the uid slots, the cgroup parent).
#include "sandbox.h"
#include "sandbox_internal.h"

#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <ctime>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "diskuse.h"
#include "progress.h"

extern char** environ;

namespace labgrade {

using detail::bwrap_command;
using detail::write_text;

namespace {

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV, segmentation fault";
    case SIGBUS:
      return "SIGBUS, bus error";
    case SIGFPE:
      return "SIGFPE, arithmetic exception";
    case SIGILL:
      return "SIGILL, illegal instruction";
    case SIGABRT:
      return "SIGABRT, abort";
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU, CPU time limit exceeded";
    case SIGXFSZ:
      return "SIGXFSZ, output file size limit exceeded";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGTRAP:
      return "SIGTRAP";
    default:
      return "signal";
  }
}

// The child side of fork(): only async-signal-safe calls from here on (the grader is multi-threaded).
struct ChildPlan {
  std::vector<std::string> argv_storage, env_storage;
  std::vector<char*> argv, envp;
  std::string exec_path, cwd, cgroup_procs;
  int out_fd = -1, null_fd = -1, channel_fd = -1;
  bool switch_uid_here = false;  // sandbox none: switch uid in the child itself
  bool unshare_net = false;
  int uid = -1;
  ResourceLimits limits;
};

void set_limit(int resource, rlim_t value) {
  rlimit rl{value, value};
  setrlimit(resource, &rl);
}

[[noreturn]] void child_main(const ChildPlan& plan) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (!plan.cgroup_procs.empty()) {
    int fd = open(plan.cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      (void)!write(fd, "0", 1);  // "0" moves the writing process itself
      close(fd);
    }
  }
  // Signal state is inherited through exec: start the untrusted program from the defaults.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s : {SIGPIPE, SIGXFSZ, SIGXCPU, SIGINT, SIGTERM, SIGCHLD}) signal(s, SIG_DFL);

  dup2(plan.null_fd, 0);
  dup2(plan.out_fd, 1);
  dup2(plan.out_fd, 2);
  int first_to_close = 3;
  if (plan.channel_fd >= 0) {
    if (plan.channel_fd == 3) {
      int flags = fcntl(3, F_GETFD);
      fcntl(3, F_SETFD, flags & ~FD_CLOEXEC);
    } else {
      dup2(plan.channel_fd, 3);
    }
    first_to_close = 4;
  }
  // Nothing else of the grader's (other students' channels above all) may leak into the child.
  if (syscall(SYS_close_range, first_to_close, ~0U, 0) != 0)
    for (int fd = first_to_close; fd < 65536; ++fd) close(fd);

  set_limit(RLIMIT_CORE, 0);
  if (plan.limits.cpu_seconds > 0) {
    rlimit rl{static_cast<rlim_t>(plan.limits.cpu_seconds), static_cast<rlim_t>(plan.limits.cpu_seconds) + 5};
    setrlimit(RLIMIT_CPU, &rl);
  }
  if (plan.limits.file_size) set_limit(RLIMIT_FSIZE, plan.limits.file_size);
  if (plan.limits.data_bytes) set_limit(RLIMIT_DATA, plan.limits.data_bytes);
  if (plan.limits.address_space) set_limit(RLIMIT_AS, plan.limits.address_space);
  if (plan.limits.open_files) set_limit(RLIMIT_NOFILE, plan.limits.open_files);
  if (plan.uid >= 0 && plan.limits.processes) set_limit(RLIMIT_NPROC, plan.limits.processes);
  if (!plan.limits.cpus.empty()) {
    const cpu_set_t set = cpu_set_of(plan.limits.cpus);
    (void)sched_setaffinity(0, sizeof set, &set);  // inherited by bubblewrap and everything below it
  }
  if (plan.limits.nice > 0) {  // raising needs no privilege; lowering it back does, which the child has not
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, 0);
    if (errno == 0) setpriority(PRIO_PROCESS, 0, std::min(19, now + plan.limits.nice));
  }

  if (plan.switch_uid_here) {
    if (plan.unshare_net && unshare(CLONE_NEWNET) == 0) {
      // An empty network namespace: no network at all, and its own loopback, which starts down. Up, as bubblewrap
      // leaves it: MPI's processes on one machine find each other over it (without, lab 09's mpirun stops with
      // "unable to find network interfaces"); nothing outside the namespace is reachable through it.
      const int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (sock >= 0) {
        ifreq ifr{};
        std::memcpy(ifr.ifr_name, "lo", 3);
        ifr.ifr_flags = IFF_UP | IFF_RUNNING;
        (void)ioctl(sock, SIOCSIFFLAGS, &ifr);
        close(sock);
      }
    }
    if (setgroups(0, nullptr) != 0 || setresgid(plan.uid, plan.uid, plan.uid) != 0 ||
        setresuid(plan.uid, plan.uid, plan.uid) != 0) {
      const char msg[] = "labgrade: cannot switch to the sandbox uid\n";
      (void)!write(2, msg, sizeof msg - 1);
      _exit(126);
    }
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  }
  if (!plan.cwd.empty() && chdir(plan.cwd.c_str()) != 0) {
    const char msg[] = "labgrade: cannot enter the working folder\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(126);
  }
  execve(plan.exec_path.c_str(), plan.argv.data(), plan.envp.data());
  // ETXTBSY: see __sandbox-exec (sandbox.cpp); nanosleep is async-signal-safe, as this forked child needs.
  for (int tries = 0; errno == ETXTBSY && tries < 100; ++tries) {
    const timespec pause{0, 10'000'000};
    nanosleep(&pause, nullptr);
    execve(plan.exec_path.c_str(), plan.argv.data(), plan.envp.data());
  }
  const char msg[] = "labgrade: cannot execute ";
  (void)!write(2, msg, sizeof msg - 1);
  (void)!write(2, plan.exec_path.c_str(), plan.exec_path.size());
  (void)!write(2, "\n", 1);
  _exit(127);
}

std::atomic<int> g_cgroup_counter{0};

}  // namespace

std::string ExitInfo::describe() const {
  if (exited) return "exit code " + std::to_string(code);
  return "signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
}

namespace {
// Processes that left the group (setsid) and, without bubblewrap, the PID namespace: everything a dedicated uid
// still runs belongs to the submission that had it, so kill(-1) as that uid ends all of it (Linux spares the
// caller). Then the same child removes what the uid left in /tmp, /var/tmp and /dev/shm, which would otherwise
// outlive the submission (bubblewrap's are the sandbox's own): as that uid, so that it can remove nothing the
// submission could not.
void kill_uid(int uid) {
  const auto& temp_dirs = shared_temp_dirs();  // made here: the child must not be the one to initialise a static
  run_as_uid(uid, [&] {
    ::kill(-1, SIGKILL);
    remove_own_entries(temp_dirs);
  });
}
}  // namespace

bool run_as_uid(int uid, const std::function<void()>& fn) {
  if (uid < 0 || geteuid() != 0) return false;
  const pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) == 0 && setresgid(uid, uid, uid) == 0 && setresuid(uid, uid, uid) == 0) fn();
    _exit(0);
  }
  if (child > 0)
    while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
  return child > 0;
}

void sweep_uid(const SandboxSettings* sandbox, int slot) { kill_uid(slot_uid(sandbox, slot)); }

Process::Process(const ProcessSpec& spec) {
  if (spec.argv.empty()) throw std::runtime_error("empty command");
  ChildPlan plan;
  plan.limits = spec.limits;
  plan.cwd = spec.cwd.string();
  plan.uid = slot_uid(spec.sandbox, spec.slot);
  uid_ = plan.uid;
  sweep_uid_ = spec.sweep_uid;

  std::vector<std::string> argv = spec.argv;
  if (spec.sandbox && spec.sandbox->mode == SandboxMode::bwrap) {
    argv = bwrap_command(*spec.sandbox, spec, plan.uid);
    via_bwrap_ = true;
  } else if (plan.uid >= 0) {
    plan.switch_uid_here = true;
    plan.unshare_net = geteuid() == 0;
  }
  plan.exec_path = argv[0];
  if (plan.exec_path.find('/') == std::string::npos) {
    auto found = find_program(plan.exec_path);
    if (found) plan.exec_path = found->string();
  }
  plan.argv_storage = argv;
  for (auto& s : plan.argv_storage) plan.argv.push_back(s.data());
  plan.argv.push_back(nullptr);
  // With inherit_env the child gets this process's environment with spec.env's variables set on top of it.
  if (spec.inherit_env)
    for (char** e = environ; e && *e; ++e) {
      const std::string kv = *e;
      const std::string key = kv.substr(0, kv.find('='));
      const bool overridden =
          std::any_of(spec.env.begin(), spec.env.end(), [&](const auto& o) { return o.first == key; });
      if (!overridden) plan.env_storage.push_back(kv);
    }
  for (const auto& [k, v] : spec.env) plan.env_storage.push_back(k + "=" + v);
  for (auto& s : plan.env_storage) plan.envp.push_back(s.data());
  plan.envp.push_back(nullptr);

  if (spec.sandbox && spec.sandbox->cgroup_parent) {
    fs::path leaf = *spec.sandbox->cgroup_parent /
                    ("labgrade-" + std::to_string(getpid()) + "-" + std::to_string(g_cgroup_counter++));
    std::error_code ec;
    if (fs::create_directory(leaf, ec)) {
      if (spec.sandbox->cgroup_memory) {
        write_text(leaf / "memory.max", std::to_string(spec.sandbox->cgroup_memory));
        write_text(leaf / "memory.swap.max", "0");
      }
      if (spec.sandbox->cgroup_pids) write_text(leaf / "pids.max", std::to_string(spec.sandbox->cgroup_pids));
      cgroup_ = leaf;
      plan.cgroup_procs = (leaf / "cgroup.procs").string();
    }
  }

  plan.out_fd = ::open(spec.output.empty() ? "/dev/null" : spec.output.c_str(),
                       O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (plan.out_fd < 0) throw std::runtime_error("cannot create " + spec.output.string() + ": " + std::strerror(errno));
  plan.null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  plan.channel_fd = spec.channel_fd;

  pid_ = fork();
  if (pid_ == 0) child_main(plan);
  int fork_errno = errno;
  ::close(plan.out_fd);
  ::close(plan.null_fd);
  if (pid_ < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(fork_errno));
  setpgid(pid_, pid_);  // also here: no window in which a kill of the group misses the child
}

namespace {
ExitInfo decode(int status, bool via_bwrap) {
  ExitInfo e;
  e.exited = WIFEXITED(status);
  e.code = e.exited ? WEXITSTATUS(status) : 0;
  e.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  // bwrap reports a child killed by signal N as exit code 128 + N (gate binaries exit with the number of failed
  // tests, far below 128).
  if (via_bwrap && e.exited && e.code > 128 && e.code <= 128 + 64) {
    e.exited = false;
    e.signal = e.code - 128;
    e.code = 0;
  }
  return e;
}
}  // namespace

Process::~Process() {
  if (pid_ > 0) {
    kill_all();
    if (!exit_) wait();
    kill_all();  // whatever was forked between the first kill and the exit
  }
  if (cgroup_) {
    for (int i = 0; i < 50; ++i) {
      if (::rmdir(cgroup_->c_str()) == 0 || errno == ENOENT) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

std::optional<ExitInfo> Process::poll() {
  if (exit_) return exit_;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return std::nullopt;
  exit_ = decode(status, via_bwrap_);
  return exit_;
}

ExitInfo Process::wait() {
  while (!exit_) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, 0);
    if (r < 0 && errno == EINTR) continue;
    ExitInfo e;
    if (r == pid_) {
      e = decode(status, via_bwrap_);
    } else {
      e.signal = SIGKILL;  // lost track of it: treat as killed
    }
    exit_ = e;
  }
  return *exit_;
}

void Process::kill_all() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  if (!exit_) ::kill(pid_, SIGKILL);
  if (cgroup_ && !write_text(*cgroup_ / "cgroup.kill", "1")) {
    std::ifstream procs(*cgroup_ / "cgroup.procs");
    for (pid_t p; procs >> p;) ::kill(p, SIGKILL);
  }
  if (sweep_uid_) kill_uid(uid_);
}

Completed run_limited(const ProcessSpec& spec, double wall_limit_s) {
  Completed c;
  auto start = std::chrono::steady_clock::now();
  Process p(spec);
  // The limit counts the process tree's own progress (progress.h): a compile on a busy machine is slow, not
  // broken. Ten times the limit on the clock is the last resort.
  ProgressClock clock(p.pid());
  for (;;) {
    if (auto e = p.poll()) {
      c.exit = *e;
      break;
    }
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    clock.sample();
    if (wall_limit_s > 0 && (clock.progress_seconds() > wall_limit_s || t > 10 * wall_limit_s)) {
      p.kill_all();
      c.exit = p.wait();
      c.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(t < 1 ? 5 : 25));
  }
  p.kill_all();
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return c;
}

}  // namespace labgrade
