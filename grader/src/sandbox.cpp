// What the sandbox is: the bubblewrap command line (and the __sandbox-exec helper at its other end), the dedicated
// uid of each slot, and what this machine offers (bubblewrap, a cgroup v2 parent). Running a process in it is
// sandbox_process.cpp.
#include "sandbox.h"
#include "sandbox_internal.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <utility>

namespace labgrade {

void set_env(ProcessSpec& p, const std::string& key, const std::string& value) {
  p.env.erase(std::remove_if(p.env.begin(), p.env.end(), [&](const auto& kv) { return kv.first == key; }),
              p.env.end());
  p.env.emplace_back(key, value);
}

using detail::write_text;

namespace {

bool is_under(const fs::path& p, const fs::path& dir) {
  auto rel = p.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

// Sandbox uids come in blocks of kUidBlock from kUidFirst; a batch takes as many consecutive blocks as it has slots
// for, and holds each of them twice until it exits: by a lock file, and by an abstract socket named after the block,
// which every process of this network namespace sees whatever its root directory (a grader in a chroot, such as a
// CI rehearsal on a developer's machine, has its own /run/lock, so the lock file alone would let both take the same
// uids and sweep each other's processes). Where no socket can be made, the lock file alone decides. Blocks have one
// size for every batch, so two reservations can only overlap by sharing a block, which the holds refuse.
constexpr int kUidFirst = 61000, kUidBlock = 100, kUidBlocks = 200;

// Takes both holds on block `b`; returns their descriptors (-1 for a socket that could not be made), or nothing
// when another process holds either, or a uid of the block is a real account of this machine.
std::optional<std::pair<int, int>> hold_block(const fs::path& lock_dir, int b) {
  const int base = kUidFirst + b * kUidBlock;
  for (int u = base; u < base + kUidBlock; ++u)
    if (getpwuid(static_cast<uid_t>(u)) != nullptr) return std::nullopt;
  const std::string name = "labgrade-uids-" + std::to_string(base);
  const fs::path lock = lock_dir / (name + ".lock");
  const int lock_fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (lock_fd < 0) return std::nullopt;
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd);
    return std::nullopt;
  }
  const int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return std::make_pair(lock_fd, -1);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());  // sun_path[0] stays 0: the abstract namespace
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::bind(sock, reinterpret_cast<const sockaddr*>(&addr), len) == 0) return std::make_pair(lock_fd, sock);
  const bool held = errno == EADDRINUSE;
  ::close(sock);
  if (!held) return std::make_pair(lock_fd, -1);
  ::close(lock_fd);
  return std::nullopt;
}

}  // namespace

std::vector<std::string> detail::bwrap_command(const SandboxSettings& s, const ProcessSpec& spec, int uid) {
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

bool detail::write_text(const fs::path& p, const std::string& text) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

int slot_uid(const SandboxSettings* sandbox, int slot) {
  return sandbox && sandbox->drop_uid && slot >= 0 ? sandbox->uid_base + slot : -1;
}

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
  // As root, a folder of its own that only root can write: /run/lock is open to everyone (1777), and a submission's
  // process in uid-only mode (which sees the host's /run) could leave a link in the place of each block's lock file,
  // which the O_NOFOLLOW open then refuses, so that no later batch found a free block until the machine restarted.
  fs::path lock_dir = access("/run/lock", W_OK) == 0 ? "/run/lock" : "/tmp";
  if (geteuid() == 0) {
    const fs::path own = "/run/labgrade-locks";
    ::mkdir(own.c_str(), 0700);
    struct stat st {};
    if (::lstat(own.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 && (st.st_mode & 022) == 0)
      lock_dir = own;
  }
  const int need = std::max(1, (slots + kUidBlock - 1) / kUidBlock);  // consecutive blocks for every slot's uid
  for (int first = 0; first + need <= kUidBlocks; ++first) {
    std::vector<std::pair<int, int>> held;
    for (int b = first; b < first + need; ++b) {
      auto h = hold_block(lock_dir, b);
      if (!h) break;
      held.push_back(*h);
    }
    if (int(held.size()) == need) {
      s.uid_base = kUidFirst + first * kUidBlock;  // the descriptors stay open (and held) until the process ends
      for (int slot = 0; slot < need * kUidBlock; ++slot) sweep_uid(&s, slot);  // left over by an earlier holder
      return;
    }
    for (auto [lock_fd, sock] : held) {  // part of the run is taken: let go of the rest and try further on
      ::close(lock_fd);
      if (sock >= 0) ::close(sock);
    }
  }
  throw UserError("no free run of " + std::to_string(need) + " block(s) of " + std::to_string(kUidBlock) +
                  " sandbox uids (" + std::to_string(kUidBlocks) + " blocks in all: many labgrade batches running?)");
}

void take_back(const fs::path& dir, const SandboxSettings* sandbox) {
  if (!sandbox || !sandbox->drop_uid) return;
  std::error_code ec;
  ::lchown(dir.c_str(), 0, 0);
  ::chmod(dir.c_str(), 0755);
  // Nothing here follows a symbolic link the slot's processes left: lchown, and a chmod through a descriptor opened
  // with O_NOFOLLOW (a link to a folder elsewhere would have had root open that folder to everyone; is_directory()
  // and chmod() both follow links).
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    ::lchown(it->path().c_str(), 0, 0);
    if (it->symlink_status(ec).type() != fs::file_type::directory) continue;
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    ::fchmod(fd, 0755);
    ::close(fd);
  }
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
  // ETXTBSY: a process another thread of the grader forked in the instant the binary's copy was written still held
  // its descriptor (closed on exec, so only until it execs): a moment later the binary runs.
  for (int tries = 0; errno == ETXTBSY && tries < 100; ++tries) {
    const timespec pause{0, 10'000'000};
    nanosleep(&pause, nullptr);
    execvp(argv[i], argv + i);
  }
  std::fprintf(stderr, "labgrade: cannot execute %s: %s\n", argv[i], std::strerror(errno));
  return 127;
}

}  // namespace labgrade
