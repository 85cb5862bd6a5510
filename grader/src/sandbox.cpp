#include "sandbox.h"

#include "progress.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

extern char** environ;

namespace labgrade {

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

  if (plan.switch_uid_here) {
    if (plan.unshare_net) unshare(CLONE_NEWNET);  // an empty network namespace: no network at all
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
  const char msg[] = "labgrade: cannot execute ";
  (void)!write(2, msg, sizeof msg - 1);
  (void)!write(2, plan.exec_path.c_str(), plan.exec_path.size());
  (void)!write(2, "\n", 1);
  _exit(127);
}

bool is_under(const fs::path& p, const fs::path& dir) {
  auto rel = p.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

std::vector<std::string> bwrap_command(const SandboxSettings& s, const ProcessSpec& spec, int uid) {
  static const std::string bwrap = find_program("bwrap").value_or("bwrap").string();
  std::vector<std::string> a = {bwrap,           "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
                                "--unshare-ipc", "--unshare-uts",     "--hostname",    "sandbox"};
  // bwrap creates missing parents of a mount point with mode 0700, which the dedicated uid cannot traverse:
  // create them first, 0755.
  auto mount = [&](const char* how, const fs::path& src, const fs::path& dst) {
    std::vector<fs::path> parents;
    for (fs::path p = dst.parent_path(); p.has_relative_path(); p = p.parent_path()) parents.push_back(p);
    for (auto it = parents.rbegin(); it != parents.rend(); ++it)
      a.insert(a.end(), {"--perms", "0755", "--dir", it->string()});
    a.push_back(how);
    if (!src.empty()) a.push_back(src.string());
    a.push_back(dst.string());
  };
  std::vector<fs::path> bound;
  std::error_code ec;
  for (const char* d : {"/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}) {
    if (fs::is_symlink(d, ec)) {
      a.insert(a.end(), {"--symlink", fs::read_symlink(d, ec).string(), d});
    } else if (fs::is_directory(d, ec)) {
      a.insert(a.end(), {"--ro-bind", d, d});
      bound.emplace_back(d);
    }
  }
  // CUDA reads the PCI topology from /sys; the kernel exposes no secrets there that /proc does not already.
  if (fs::is_directory("/sys", ec)) a.insert(a.end(), {"--ro-bind", "/sys", "/sys"});
  // /tmp and /dev/shm world-writable (sticky) like on a normal system: CUDA tools keep sockets and locks there,
  // and the dedicated uid must be able to create them.
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp", "--perms", "1777",
                     "--tmpfs", "/dev/shm"});
  for (const auto& p : s.ro_paths) {
    bool covered = false;
    for (const auto& b : bound) covered = covered || is_under(p, b) || p == b;
    if (covered || !fs::exists(p, ec)) continue;
    mount("--ro-bind", p, p);
    bound.push_back(p);
  }
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (starts_with(name, "nvidia")) a.insert(a.end(), {"--dev-bind", e.path().string(), e.path().string()});
  }
  for (const auto& o : s.overlays) {
    if (o.kind == SandboxSettings::Overlay::rebind) {
      if (fs::exists(o.path, ec)) mount("--ro-bind", o.path, o.path);
    } else if (fs::is_directory(o.path, ec)) {
      mount("--tmpfs", {}, o.path);
    } else if (fs::exists(o.path, ec)) {
      mount("--ro-bind", "/dev/null", o.path);
    }
  }
  for (const auto& p : spec.extra_ro) mount("--ro-bind", p, p);
  if (!spec.writable.empty()) mount("--bind", spec.writable, spec.writable);
  // Under a dedicated uid the scratch folder is that uid's (mode 0700): bwrap, still root but without
  // CAP_DAC_OVERRIDE, cannot enter it, so the helper changes directory after switching uid.
  if (!spec.cwd.empty()) a.insert(a.end(), {"--chdir", uid >= 0 ? "/" : spec.cwd.string()});
  // bwrap started by root keeps every capability (CAP_SYS_ADMIN could remount the read-only binds): keep only
  // what the helper needs to switch to the dedicated uid, which then clears them all.
  a.insert(a.end(), {"--cap-drop", "ALL"});
  if (uid >= 0) a.insert(a.end(), {"--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"});
  a.push_back("--");
  if (uid >= 0) {
    a.insert(a.end(), {s.helper.string(), "__sandbox-exec", "--uid", std::to_string(uid)});
    if (!spec.cwd.empty()) a.insert(a.end(), {"--chdir", spec.cwd.string()});
    a.push_back("--");
  }
  a.insert(a.end(), spec.argv.begin(), spec.argv.end());
  return a;
}

std::atomic<int> g_cgroup_counter{0};

bool write_text(const fs::path& p, const std::string& text) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

}  // namespace

std::string ExitInfo::describe() const {
  if (exited) return "exit code " + std::to_string(code);
  return "signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
}

namespace {
// Processes that left the group (setsid) and, without bubblewrap, the PID namespace: everything a dedicated uid
// still runs belongs to the submission that had it, so kill(-1) as that uid ends all of it.
void kill_uid(int uid) {
  if (uid < 0 || geteuid() != 0) return;
  pid_t sweeper = fork();
  if (sweeper == 0) {
    if (setresgid(uid, uid, uid) == 0 && setresuid(uid, uid, uid) == 0) ::kill(-1, SIGKILL);
    _exit(0);
  }
  if (sweeper > 0)
    while (waitpid(sweeper, nullptr, 0) < 0 && errno == EINTR) {
    }
}
}  // namespace

int slot_uid(const SandboxSettings* sandbox, int slot) {
  return sandbox && sandbox->drop_uid && slot >= 0 ? sandbox->uid_base + slot : -1;
}

void sweep_uid(const SandboxSettings* sandbox, int slot) { kill_uid(slot_uid(sandbox, slot)); }

void give_to_slot(const fs::path& dir, const SandboxSettings* sandbox, int slot) {
  int uid = slot_uid(sandbox, slot);
  if (uid < 0) return;
  std::error_code ec;
  ::lchown(dir.c_str(), uid, uid);
  ::chmod(dir.c_str(), 0700);
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    ::lchown(it->path().c_str(), uid, uid);
}

void reserve_uid_block(SandboxSettings& s, int slots) {
  if (!s.drop_uid) return;
  const int block = std::max(100, slots);
  fs::path lock_dir = access("/run/lock", W_OK) == 0 ? "/run/lock" : "/tmp";
  for (int k = 0; k < 200; ++k) {
    int base = 61000 + k * block;
    bool taken = false;  // by a real account of this machine
    for (int u = base; u < base + slots && !taken; ++u) taken = getpwuid(static_cast<uid_t>(u)) != nullptr;
    if (taken) continue;
    fs::path lock = lock_dir / ("labgrade-uids-" + std::to_string(base) + ".lock");
    int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      s.uid_base = base;  // the descriptor stays open (and locked) until the process ends
      return;
    }
    ::close(fd);
  }
  throw UserError("no free block of sandbox uids (200 labgrade batches running?)");
}

void take_back(const fs::path& dir, const SandboxSettings* sandbox) {
  if (!sandbox || !sandbox->drop_uid) return;
  std::error_code ec;
  ::lchown(dir.c_str(), 0, 0);
  ::chmod(dir.c_str(), 0755);
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    ::lchown(it->path().c_str(), 0, 0);
    if (it->is_directory(ec)) ::chmod(it->path().c_str(), 0755);
  }
}

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

bool bwrap_works() {
  auto bwrap = find_program("bwrap");
  if (!bwrap) return false;
  auto r = run_command({bwrap->string(), "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--die-with-parent",
                        "--new-session", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "true"},
                       20);
  return r.exit_code == 0;
}

std::optional<fs::path> find_cgroup_parent(std::string* why_not) {
  auto fail = [&](const std::string& w) -> std::optional<fs::path> {
    if (why_not) *why_not = w;
    return std::nullopt;
  };
  std::ifstream mi("/proc/self/mountinfo");
  std::string line, mount;
  while (std::getline(mi, line)) {
    auto sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    auto fields = split(line.substr(0, sep), ' ');
    if (starts_with(line.substr(sep + 3), "cgroup2 ") && fields.size() > 4) {
      mount = fields[4];
      break;
    }
  }
  if (mount.empty()) return fail("no cgroup v2 hierarchy is mounted");
  std::ifstream cg("/proc/self/cgroup");
  std::string rel;
  while (std::getline(cg, line))
    if (starts_with(line, "0::")) rel = line.substr(3);
  fs::path dir = fs::path(mount) / fs::path(rel).relative_path();
  std::error_code ec;
  std::string controllers;
  try {
    controllers = read_file(dir / "cgroup.controllers");
  } catch (...) {
    return fail("cannot read " + (dir / "cgroup.controllers").string());
  }
  if (!contains(controllers, "memory") || !contains(controllers, "pids"))
    return fail("the cgroup v2 hierarchy at " + dir.string() +
                " has no memory/pids controller (controllers: " + trim(controllers) + ")");
  if (access((dir / "cgroup.procs").c_str(), W_OK) != 0) return fail(dir.string() + " is not writable");
  std::string subtree;
  try {
    subtree = read_file(dir / "cgroup.subtree_control");
  } catch (...) {
  }
  if (!contains(subtree, "memory") || !contains(subtree, "pids")) {
    // Only possible when no process lives in `dir` itself (cgroup v2's no-internal-process rule).
    if (!write_text(dir / "cgroup.subtree_control", "+memory +pids"))
      return fail("cannot enable the memory and pids controllers below " + dir.string() +
                  " (processes live in that cgroup; run labgrade in a delegated cgroup, e.g. systemd-run --scope -p "
                  "Delegate=yes)");
  }
  fs::path probe = dir / ("labgrade-probe-" + std::to_string(getpid()));
  if (!fs::create_directory(probe, ec)) return fail("cannot create a cgroup below " + dir.string());
  bool ok = fs::exists(probe / "memory.max", ec) && fs::exists(probe / "pids.max", ec);
  ::rmdir(probe.c_str());
  if (!ok) return fail("cgroups below " + dir.string() + " get no memory.max/pids.max");
  return dir;
}

SandboxSettings detect_sandbox(const std::string& mode, std::uint64_t memory_limit, std::uint64_t pids_limit) {
  SandboxSettings s;
  s.helper = self_exe();
  if (mode == "bwrap" || mode == "auto") {
    if (bwrap_works()) {
      s.mode = SandboxMode::bwrap;
      s.notes.push_back("bubblewrap: read-only system and repository, no network, own PID namespace");
    } else if (mode == "bwrap") {
      throw UserError(
          "--sandbox bwrap: bubblewrap is not installed or cannot create namespaces here "
          "(try `bwrap --ro-bind / / true`; use --sandbox none to grade without it)");
    } else {
      // Two different causes, two different remedies (labgrade doctor says the same).
      s.notes.push_back(find_program("bwrap")
                            ? "bubblewrap is installed but cannot create namespaces here: no filesystem/PID namespace "
                              "isolation (allow unprivileged user namespaces, or run the batch as root)"
                            : "bubblewrap unavailable: no filesystem/PID namespace isolation (install bubblewrap)");
    }
  } else if (mode != "none") {
    throw UserError("--sandbox must be auto, bwrap or none");
  }
  s.drop_uid = geteuid() == 0;
  if (s.drop_uid)
    s.notes.push_back("dedicated uid per slot (61000+): RLIMIT_NPROC enforced, repository not writable");
  else
    s.notes.push_back("not running as root: submissions run as your own uid (RLIMIT_NPROC not enforceable" +
                      std::string(s.mode == SandboxMode::bwrap ? ")" : ", repository writable by them)"));
  std::string why;
  s.cgroup_parent = find_cgroup_parent(&why);
  if (s.cgroup_parent) {
    s.cgroup_memory = memory_limit;
    s.cgroup_pids = pids_limit;
    s.notes.push_back("cgroup v2 limits in " + s.cgroup_parent->string());
  } else {
    s.notes.push_back("no cgroup v2 limits (" + why + "): host memory bounded by RLIMIT_DATA only");
  }
  return s;
}

std::string isolation_name(const SandboxSettings& s) {
  if (s.mode == SandboxMode::bwrap) return "bwrap";
  return s.drop_uid ? "uid-only" : "none";
}

int sandbox_exec_main(int argc, char** argv) {
  int uid = -1;
  const char* dir = nullptr;
  int i = 2;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--uid" && i + 1 < argc)
      uid = std::atoi(argv[++i]);
    else if (a == "--chdir" && i + 1 < argc)
      dir = argv[++i];
    else if (a == "--") {
      ++i;
      break;
    }
  }
  if (i >= argc) {
    std::fprintf(stderr, "usage: labgrade __sandbox-exec [--uid N] [--chdir DIR] -- command...\n");
    return 126;
  }
  if (uid >= 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) {
      std::fprintf(stderr, "labgrade: cannot switch to uid %d: %s\n", uid, std::strerror(errno));
      return 126;
    }
  }
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);  // no setuid binary can give root back
  if (dir && chdir(dir) != 0) {
    std::fprintf(stderr, "labgrade: cannot enter %s: %s\n", dir, std::strerror(errno));
    return 126;
  }
  execvp(argv[i], argv + i);
  std::fprintf(stderr, "labgrade: cannot execute %s: %s\n", argv[i], std::strerror(errno));
  return 127;
}

}  // namespace labgrade
