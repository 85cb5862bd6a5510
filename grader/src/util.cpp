#include "util.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "progress.h"

namespace labgrade {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw UserError("cannot read " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string read_file_limited(const fs::path& p, std::size_t max_bytes, bool tail) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  auto size = static_cast<std::size_t>(std::max<std::streamoff>(0, in.tellg()));
  std::size_t n = std::min(size, max_bytes);
  in.seekg(tail ? static_cast<std::streamoff>(size - n) : 0);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

void copy_file_for_exec(const fs::path& from, const fs::path& to, unsigned mode) {
  // The source may lie in a folder another uid wrote into (a batch's build folder): never a link, a FIFO (which
  // would hang the grader) or anything but a regular file.
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (in < 0) throw std::runtime_error("cannot read " + from.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(in);
    throw std::runtime_error("cannot read " + from.string() + ": not a regular file");
  }
  fs::path tmp = to;
  tmp += ".tmp" + std::to_string(getpid());
  const int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (out < 0) {
    const int e = errno;
    ::close(in);
    throw std::runtime_error("cannot write " + tmp.string() + ": " + std::strerror(e));
  }
  std::vector<char> buf(std::size_t(1) << 20);
  bool ok = true;
  int err = 0;
  for (;;) {
    const ssize_t got = ::read(in, buf.data(), buf.size());
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      ok = got == 0;
      err = errno;
      break;
    }
    for (ssize_t off = 0; off < got;) {
      const ssize_t w = ::write(out, buf.data() + off, static_cast<std::size_t>(got - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        ok = false;
        err = errno;
        break;
      }
      off += w;
    }
    if (!ok) break;
  }
  ::close(in);
  if (::close(out) != 0 && ok) ok = false, err = errno;
  if (ok) ::chmod(tmp.c_str(), mode);  // the umask may have narrowed open's mode
  if (!ok || ::rename(tmp.c_str(), to.c_str()) != 0) {
    if (ok) err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot copy " + from.string() + " to " + to.string() + ": " + std::strerror(err));
  }
}

void write_file_atomic(const fs::path& p, std::string_view content) {
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  fs::path tmp = p;
  tmp += ".tmp" + std::to_string(getpid()) + "." + std::to_string(rng() % 1000000);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp.string() + ": " + std::strerror(errno));
  std::size_t off = 0;
  while (off < content.size()) {
    ssize_t w = ::write(fd, content.data() + off, content.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::runtime_error("cannot write " + tmp.string() + ": " + std::strerror(e));
    }
    off += static_cast<std::size_t>(w);
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), p.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp.string() + " to " + p.string() + ": " + std::strerror(e));
  }
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split_lines(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) {
      if (start < s.size()) out.emplace_back(s.substr(start));
      break;
    }
    std::string_view line = s.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.emplace_back(line);
    start = nl + 1;
  }
  return out;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t p = s.find(sep, start);
    out.emplace_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool contains(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  if (from.empty()) return s;
  std::size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

std::size_t utf8_sequence(std::string_view s, std::size_t i, char32_t* cp) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = byte(0);
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range: narrower after E0, ED, F0 and F4
  if (c < 0x80) {
    len = 1;
  } else if (c >= 0xC2 && c <= 0xDF) {  // C0 and C1 lead only overlong forms
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (len > 1 && (byte(1) < lo || byte(1) > hi)) return 0;
  for (std::size_t k = 2; k < len; ++k)
    if ((byte(k) & 0xC0) != 0x80) return 0;
  if (cp) {
    char32_t v = len == 1 ? c : c & (0x7F >> len);
    for (std::size_t k = 1; k < len; ++k) v = (v << 6) | (byte(k) & 0x3F);
    *cp = v;
  }
  return len;
}

bool is_control(char32_t cp) { return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F); }

namespace {
// Walks `s` by character: a valid character that keep(cp) accepts is copied; anything else (a byte that starts no
// valid UTF-8 sequence, len 0, or a character keep refuses) is written by bad(out, i, len).
template <class Keep, class Bad>
std::string map_characters(std::string_view s, Keep keep, Bad bad) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    char32_t cp = 0;
    const std::size_t len = utf8_sequence(s, i, &cp);
    if (len > 0 && keep(cp)) out.append(s.substr(i, len));
    else bad(out, i, len);
    i += len > 0 ? len : 1;
  }
  return out;
}
}  // namespace

std::string sanitize_utf8(std::string_view s) {
  return map_characters(
      s, [](char32_t cp) { return !is_control(cp) || cp == '\n' || cp == '\t'; },
      [&](std::string& out, std::size_t i, std::size_t) {
        out += (s[i] == '\r') ? "" : "\xEF\xBF\xBD";  // U+FFFD, for the byte (or the control character)
      });
}

std::string printable(std::string_view s, bool keep_newlines) {
  return map_characters(
      s, [&](char32_t cp) { return !is_control(cp) || (keep_newlines && (cp == '\n' || cp == '\t')); },
      [&](std::string& out, std::size_t i, std::size_t len) {
        for (std::size_t k = 0; k < (len > 0 ? len : 1); ++k) {  // a C1 control is two bytes: both shown
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i + k]));
          out += buf;
        }
      });
}

std::string safe_file_name(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  return out;
}

std::string trim_message(std::string_view s, std::size_t max_lines, std::size_t max_chars) {
  auto lines = split_lines(trim(s));
  std::string out;
  std::size_t shown = 0;
  for (const auto& l : lines) {
    if (shown == max_lines || out.size() + l.size() > max_chars) break;
    if (shown) out += '\n';
    out += l;
    ++shown;
  }
  if (shown == 0 && !lines.empty()) {  // one enormous line
    // Back to a character's start: half of a UTF-8 sequence is invalid text that JSON writers refuse.
    std::size_t cut = std::min(max_chars, lines[0].size());
    while (cut > 0 && cut < lines[0].size() && (static_cast<unsigned char>(lines[0][cut]) & 0xC0) == 0x80) --cut;
    out = lines[0].substr(0, cut);
    shown = 1;
  }
  if (shown < lines.size()) out += "\n[... " + std::to_string(lines.size() - shown) + " more lines]";
  return out;
}

std::string format_seconds(double s) {
  char buf[64];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%d min %02d s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%d h %02d min", static_cast<int>(s) / 3600, (static_cast<int>(s) % 3600) / 60);
  return buf;
}

std::string format_points(double p) {
  char buf[64];
  if (p == static_cast<double>(static_cast<long long>(p)))
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(p));
  else
    std::snprintf(buf, sizeof buf, "%.2f", p);
  return buf;
}

std::optional<fs::path> find_repo_root(fs::path start) {
  std::error_code ec;
  start = fs::absolute(start, ec);
  for (fs::path p = start; !p.empty(); p = p.parent_path()) {
    if (fs::is_directory(p / "labs", ec) && fs::is_directory(p / "common", ec) && fs::exists(p / "CMakeLists.txt", ec))
      return p;
    if (p == p.parent_path()) break;
  }
  return std::nullopt;
}

fs::path self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path("labgrade") : p;
}

namespace {
// argv/envp as the char* arrays execvp wants, built before fork (the child may not allocate).
struct CArgv {
  std::vector<std::string> storage;
  std::vector<char*> ptrs;
  explicit CArgv(const std::vector<std::string>& v) : storage(v) {
    for (auto& s : storage) ptrs.push_back(s.data());
    ptrs.push_back(nullptr);
  }
};
}  // namespace

cpu_set_t cpu_set_of(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return set;
}

CommandResult run_command(const std::vector<std::string>& argv, double timeout_s, const fs::path& cwd, bool echo,
                          const std::vector<int>& cpus) {
  CommandResult r;
  if (argv.empty()) return r;
  const cpu_set_t cpu_set = cpu_set_of(cpus);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return r;
  CArgv a(argv);
  std::string dir = cwd.string();
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return r;
  }
  if (pid == 0) {
    // The child has a process group of its own (a terminal's Ctrl-C and a kill of ours do not reach it), so it ends
    // with this process instead: a killed labgrade left its cmake build running, and a killed test its whole batch,
    // which loaded every test after it. (This thread waits for the child below, so the signal, which follows the
    // thread that forked, comes only with the process.)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // already gone before the line above
    setpgid(0, 0);
    if (!cpus.empty()) (void)sched_setaffinity(0, sizeof cpu_set, &cpu_set);  // inherited by what it starts
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    if (!dir.empty() && chdir(dir.c_str()) != 0) _exit(127);
    execvp(a.ptrs[0], a.ptrs.data());
    _exit(127);
  }
  setpgid(pid, pid);
  close(fds[1]);
  // The limit counts the child tree's own progress (progress.h), as run_limited's does: on a machine busy with
  // other work a probe (bwrap, the CUDA query, nm) is slow, not broken, and a wall-clock limit turned a busy
  // grading machine into "bubblewrap cannot run here" (a batch that refused to start) or a library whose exports
  // could not be read. Ten times the limit on the clock is the last resort.
  ProgressClock clock(pid);
  char buf[8192];
  auto keep = [&](ssize_t got) {
    if (r.output.size() < (64u << 20)) r.output.append(buf, static_cast<std::size_t>(got));
    if (echo) std::cerr.write(buf, got);
  };
  // Until the child is reaped, under the time limit the whole way: a child that closes stdout/stderr and keeps
  // running is still timed, and one that exits while something it started holds the pipe open is not waited for
  // (that descendant is killed with the group below).
  bool eof = false, reaped = false;
  int status = 0;
  for (;;) {
    if (!eof) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 200) > 0) {
        ssize_t got = read(fds[0], buf, sizeof buf);
        if (got > 0) keep(got);
        else if (got == 0 || (errno != EINTR && errno != EAGAIN)) eof = true;
      }
    } else {
      pollfd none{-1, 0, 0};
      poll(&none, 1, 50);
    }
    if (!reaped && waitpid(pid, &status, WNOHANG) == pid) reaped = true;
    if (reaped) {
      for (pollfd p{fds[0], POLLIN, 0}; !eof && poll(&p, 1, 0) > 0;) {  // what is already in the pipe
        ssize_t got = read(fds[0], buf, sizeof buf);
        if (got <= 0) break;
        keep(got);
      }
      break;
    }
    if (timeout_s > 0) clock.sample();
    if (timeout_s > 0 && (clock.progress_seconds() > timeout_s || clock.wall_seconds() > 10 * timeout_s)) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);  // also when it left its process group
      r.timed_out = true;
      break;
    }
  }
  close(fds[0]);
  if (!reaped)
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  kill(-pid, SIGKILL);  // anything it left behind in its group
  if (WIFEXITED(status) && !r.timed_out) r.exit_code = WEXITSTATUS(status);
  if (r.exit_code == 127 && r.output.empty()) r.output = "cannot run " + argv[0];
  return r;
}

int run_interactive(const std::vector<std::string>& argv, const fs::path& cwd) {
  CArgv a(argv);
  std::string dir = cwd.string();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (!dir.empty() && chdir(dir.c_str()) != 0) _exit(127);
    execvp(a.ptrs[0], a.ptrs.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::optional<fs::path> find_program(const std::string& name, const std::vector<fs::path>& extra) {
  std::vector<fs::path> dirs;
  if (const char* path = std::getenv("PATH"))
    for (auto& d : split(path, ':'))
      if (!d.empty()) dirs.emplace_back(d);
  dirs.insert(dirs.end(), extra.begin(), extra.end());
  for (const auto& d : dirs) {
    fs::path p = d / name;
    if (access(p.c_str(), X_OK) == 0 && !fs::is_directory(p)) return p;
  }
  return std::nullopt;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:=+@%") ==
                        std::string::npos)
    return s;
  return "'" + replace_all(s, "'", "'\\''") + "'";
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

}  // namespace labgrade
