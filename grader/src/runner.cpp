// The graded run: starts the gate binary (in the sandbox), reads its result channel, enforces the time limits,
// restarts it after a crash and turns what happened into each gate's verdict. The memory and race checks, which run
// the same loop under compute-sanitizer, are in sanitizers.cpp.
#include "runner.h"
#include "runner_internal.h"

#include "diskuse.h"
#include "progress.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

namespace labgrade {

namespace detail {

void add_note(LabResult& lab, const std::string& note) {
  // A submission can make notes of a few kinds as often as it likes (result-channel anomalies, restarts after
  // crashes): each kind (the text before the first ':', or its first three words) keeps at most 8, and the lab at
  // most 40, so that a flood of one kind never crowds out the grader's own (which checks ran, what could not be
  // checked). A request to read the student's object code is never dropped: the class report lists them.
  const auto kind_of = [](const std::string& n) {
    const std::string b = without_hidden_mark(n);
    std::size_t words = 0, end = 0;
    while (end < b.size() && b[end] != ':' && !(b[end] == ' ' && ++words == 3)) ++end;
    return b.substr(0, end);  // "result channel", "restarted the gate" (restarts carry no ':')
  };
  if (starts_with(without_hidden_mark(note), kObjectReviewNote)) {
    lab.notes.push_back(note);
    return;
  }
  const std::string kind = kind_of(note);
  const auto same =
      std::count_if(lab.notes.begin(), lab.notes.end(), [&](const std::string& n) { return kind_of(n) == kind; });
  if (same < 8 && lab.notes.size() < 40) lab.notes.push_back(note);
}

std::string limit_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

}  // namespace detail

using detail::add_note;
using detail::Clock;
using detail::limit_text;
using detail::secs;

namespace {

enum class Kill { none, gate_timeout, stall_timeout, lab_timeout, disk };

// What the limit that killed a process counted: its own progress, its CPU use, or (backstop) the clock.
enum class Limit { progress, cpu, wall };
struct KillDetail {
  Limit by = Limit::progress;
  double progress = 0, cpu = 0, wall = 0;  // over the interval that ran out (the gate, the silence, the lab)
};

// The lab's budget across attempts: progress used by earlier attempts, and the wall-clock backstop.
struct LabBudget {
  double progress_used = 0;
  Clock::time_point wall_deadline;
};

struct Attempt {
  ChannelParser parser;
  ExitInfo exit;
  Kill killed = Kill::none;
  KillDetail detail;
  double seconds = 0;
  double progress = 0;           // the attempt's own progress (wall time less its CPU waits)
  double waited = 0;             // run-queue wait forgiven
  double open_gate_seconds = 0;  // how long the gate that never ended had been running
  DiskUse disk;                  // with Kill::disk: what the lab's files took when it was ended
  fs::path log;
};

std::string output_tail(const fs::path& log) {
  std::string tail = trim(sanitize_utf8(read_file_limited(log, 4096, true)));
  if (tail.empty()) return "";
  auto lines = split_lines(tail);
  if (lines.size() > 12) lines.erase(lines.begin(), lines.end() - 12);
  return "\n--- last lines of its console output ---\n" + join(lines, "\n");
}

double quiet_limit(const GateRunSpec& spec) {
  return spec.quiet_time_limit_s > 0 ? spec.quiet_time_limit_s : std::max(spec.gate_time_limit_s, 60.0);
}

// Whether an interval that started at `from` has run out of `limit`: by its own progress, by the CPU its processes
// used (`cpu_cores` cores busy for the whole limit), or by the wall-clock backstop.
std::optional<KillDetail> ran_out(const ProgressClock& clock, const ProgressMark& from, double limit,
                                  double wall_factor, int cpu_cores) {
  KillDetail d;
  d.progress = clock.progress_seconds() - from.progress;
  d.cpu = clock.cpu_seconds() - from.cpu;
  d.wall = clock.wall_seconds() - from.wall;
  if (d.progress > limit) d.by = Limit::progress;
  else if (d.cpu > limit * cpu_cores) d.by = Limit::cpu;
  else if (d.wall > limit * wall_factor) d.by = Limit::wall;
  else return std::nullopt;
  return d;
}

// The result channel, its read end non-blocking; fds[1] is the end the gate binary gets as fd 3.
//
// A Unix socket pair, not a pipe: /dev/fd/3 and /proc/self/fd/3 of a pipe can be opened again by path, so code in
// the gate process could write forged lines with nothing but fopen() and fputs(); a socket cannot be opened by path
// (ENXIO). What is left, writing on descriptor 3 itself, takes write(), send(), dup() or fdopen(), which the object
// check refuses (objcheck.cpp). The gate binary uses the inherited descriptor as it is (labkit/report.h).
// Under a launcher the gate binary must open its parent's descriptor by path (/proc/<ppid>/fd/3), which only a
// pipe allows: those runs keep one.
std::optional<labkit::report::auth::Key> open_channel(const GateRunSpec& spec, int fds[2]) {
  std::optional<labkit::report::auth::Key> key;
  if (spec.launcher.empty()) {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw std::runtime_error("socketpair failed");
    if (spec.signed_channel) {
      // The run's key waits in the socket for labkit to read when it opens the channel, before any gate.
      key.emplace();
      if (getrandom(key->data(), key->size(), 0) != static_cast<ssize_t>(key->size()) ||
          ::write(fds[0], key->data(), key->size()) != static_cast<ssize_t>(key->size())) {
        ::close(fds[0]);
        ::close(fds[1]);
        throw std::runtime_error("cannot hand the result channel its key");
      }
    }
    shutdown(fds[0], SHUT_WR);  // from here on one direction: the grader only reads
  } else {
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    // Under a dedicated uid the gate reopens the pipe by path, which checks its owner: give it the write end.
    int uid = slot_uid(spec.process.sandbox, spec.process.slot);
    if (uid >= 0) (void)!fchown(fds[1], uid, uid);
  }
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return key;
}

// How one attempt starts the gate binary: spec.process with the command line for `gates`, the console log and the
// channel's write end.
ProcessSpec attempt_process(const GateRunSpec& spec, const std::vector<std::string>& gates, const fs::path& log,
                            int channel_fd) {
  ProcessSpec ps = spec.process;
  ps.argv = spec.prefix;
  ps.argv.insert(ps.argv.end(), spec.launcher.begin(), spec.launcher.end());
  ps.argv.insert(ps.argv.end(), {spec.exe.string(), "--labkit-results", spec.launcher.empty() ? "/dev/fd/3" : "@parent:3",
                                 "--labkit-rubric", spec.rubric.string()});
  // One argument, names joined with commas (Catch2 ORs them; separate arguments would be ANDed).
  std::vector<std::string> names;
  for (const auto& g : gates) names.push_back(catch2_test_arg(g));
  ps.argv.push_back(join(names, ","));
  ps.output = log;
  ps.channel_fd = channel_fd;
  // The gate binary closes /proc to writes before the student's code runs (labkit's gates_main.cpp): no patching
  // of the gates through /proc/self/mem.
  set_env(ps, "LABKIT_CLOSE_PROC", "1");
  if (ps.cwd.empty()) ps.cwd = spec.log_dir;
  return ps;
}

// What the grader follows while one attempt runs: the channel's read end and what came through it, the gate that
// is open, and the progress clock of the gate binary's processes.
struct AttemptWatch {
  AttemptWatch(const GateRunSpec& s, Attempt& at, int read_fd) : spec(s), a(at), fd(read_fd) {}

  // Reads everything the channel holds now into the parser; true at end of file (every writer is gone).
  bool drain() {
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        a.parser.feed(std::string_view(buf, static_cast<std::size_t>(n)));
        continue;
      }
      return n == 0;  // true: end of file (every writer is gone)
    }
  }
  // Reads until end of file, for `span` at most.
  void drain_for(std::chrono::milliseconds span) {
    auto until = Clock::now() + span;
    while (Clock::now() < until && !drain()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // After new gate events: the silence starts again, and so does the gate interval when another gate opened.
  void track() {
    if (a.parser.gate_events() == seen_events) return;
    seen_events = a.parser.gate_events();
    quiet_from = ProgressMark::now(*clock);
    if (a.parser.open_gate() != current_open) {
      current_open = a.parser.open_gate();
      open_since = Clock::now();
      open_from = quiet_from;
      if (!current_open.empty() && spec.on_gate_start) spec.on_gate_start(current_open);
    }
  }

  const GateRunSpec& spec;
  Attempt& a;
  const int fd;
  const Clock::time_point start = Clock::now();
  Clock::time_point open_since = start;
  std::string current_open;
  std::size_t seen_events = 0;
  std::optional<ProgressClock> clock;  // set once the process has started
  ProgressMark quiet_from, open_from;  // where the clock stood at the last event and when the open gate started
  const int cores = usable_cpus();
  char buf[65536];
};

// Which limit the running attempt has passed, if any: the open gate's (between gates, the silence's), then the
// lab's, which takes precedence. With one passed, `detail` says what it counted.
Kill over_limit(const AttemptWatch& w, const LabBudget& lab_budget, KillDetail& detail) {
  const GateRunSpec& spec = w.spec;
  Kill killed = Kill::none;
  std::optional<KillDetail> out;
  if (!w.current_open.empty()) {
    if ((out = ran_out(*w.clock, w.open_from, spec.gate_time_limit_s, spec.wall_factor, w.cores)))
      killed = Kill::gate_timeout;
  } else if ((out = ran_out(*w.clock, w.quiet_from, quiet_limit(spec), spec.wall_factor, w.cores))) {
    killed = Kill::stall_timeout;
  }
  const double lab_progress = lab_budget.progress_used + w.clock->progress_seconds();
  if (lab_progress > spec.time_limit_s || Clock::now() > lab_budget.wall_deadline) {
    killed = Kill::lab_timeout;
    out = KillDetail{lab_progress > spec.time_limit_s ? Limit::progress : Limit::wall, lab_progress,
                     w.clock->cpu_seconds(), w.clock->wall_seconds()};
  }
  if (killed != Kill::none) detail = *out;
  return killed;
}

// What the lab's files take now (diskuse.h): its writable folder and, under a dedicated uid, what the uid owns in
// the shared temporary folders. More than kDiskEntries entries count as over any limit.
constexpr std::uintmax_t kDiskEntries = 200000;
DiskUse lab_disk_use(const GateRunSpec& spec) {
  DiskUse use = disk_use(spec.process.writable, kDiskEntries);
  const int uid = slot_uid(spec.process.sandbox, spec.process.slot);
  // Under bubblewrap the sandbox's /tmp and /dev/shm are its own, and the host's are not writable from it.
  const bool host_temp = uid >= 0 && spec.process.sandbox->mode != SandboxMode::bwrap;
  if (host_temp && !use.stopped) {
    const DiskUse tmp = disk_use_of_uid(shared_temp_dirs(), static_cast<unsigned>(uid), kDiskEntries - use.entries);
    use.bytes += tmp.bytes;
    use.entries += tmp.entries;
    use.stopped = tmp.stopped;
  }
  return use;
}

std::string disk_text(const DiskUse& use, const GateRunSpec& spec) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "its files took %s%.2f GiB in %s%ju files and folders (its working folder, and /tmp, /var/tmp and "
                "/dev/shm under its uid), past the batch's limit of %.2f GiB (--disk-gib)",
                use.stopped ? "over " : "", double(use.bytes) / double(1ull << 30), use.stopped ? "over " : "",
                use.entries, double(spec.disk_limit_bytes) / double(1ull << 30));
  return buf;
}

// After its gate binary was killed for its files: the lab's working folder emptied (home/ and tmp/ kept, empty), as
// the slot's uid where there is one (so that it removes nothing that uid could not), so that the restart and the
// lab's later runs start from a clean folder and the other students' compiles and logs get the space back at once.
void clear_lab_files(const GateRunSpec& spec) {
  if (spec.process.writable.empty()) return;
  const std::vector<std::string> keep{"home", "tmp"};
  const auto clear = [&] { clear_folder(spec.process.writable, keep); };
  if (!run_as_uid(slot_uid(spec.process.sandbox, spec.process.slot), clear)) clear();
}

// Whether the lab's files are within the limit, after clearing its folder (clear_lab_files) if they were not.
bool disk_room(const GateRunSpec& spec) {
  const auto within = [&](const DiskUse& use) { return !use.stopped && use.bytes <= spec.disk_limit_bytes; };
  if (within(lab_disk_use(spec))) return true;
  clear_lab_files(spec);
  return within(lab_disk_use(spec));
}

// Follows the started process until it exits or passes a limit (then it is killed), reading the channel as it
// goes; stores how it ended in w.a (exit, killed, detail). The disk is looked at about once a second (more often
// once past half the limit).
void watch(Process& p, AttemptWatch& w, const LabBudget& lab_budget) {
  auto disk_due = Clock::now();
  for (;;) {
    pollfd pfd{w.fd, POLLIN, 0};
    ::poll(&pfd, 1, 50);
    w.drain();
    w.clock->sample();
    w.track();
    if (auto e = p.poll()) {
      w.a.exit = *e;
      break;
    }
    w.a.killed = over_limit(w, lab_budget, w.a.detail);
    if (w.a.killed == Kill::none && w.spec.disk_limit_bytes > 0 && Clock::now() >= disk_due) {
      const DiskUse use = lab_disk_use(w.spec);
      // Past half the limit, ten looks a second: a process writing at a fast disk's speed (over 1 GB/s on the
      // GPU machine) went 1.2 GiB past 2 GiB between two looks a second apart.
      disk_due = Clock::now() + (use.bytes > w.spec.disk_limit_bytes / 2 ? std::chrono::milliseconds(100)
                                                                          : std::chrono::milliseconds(1000));
      if (use.stopped || use.bytes > w.spec.disk_limit_bytes) {
        w.a.killed = Kill::disk;
        w.a.disk = use;
      }
    }
    if (w.a.killed != Kill::none) {
      p.kill_all();
      w.a.exit = p.wait();
      break;
    }
  }
}

// A started attempt: the process, the channel's read end and the key it was handed. With `hold_file`, the process
// waits for that file's lock before any student code (start_held).
struct Launched {
  std::unique_ptr<Process> process;
  int read_fd = -1;
  std::optional<labkit::report::auth::Key> key;
};
Launched launch_attempt(const GateRunSpec& spec, const std::vector<std::string>& gates, const fs::path& log,
                        const fs::path& hold_file = {}) {
  Launched l;
  int fds[2];
  l.key = open_channel(spec, fds);
  ProcessSpec ps = attempt_process(spec, gates, log, fds[1]);
  if (!hold_file.empty()) set_env(ps, "LABKIT_HOLD_START", hold_file.string());
  try {
    l.process = std::make_unique<Process>(ps);
  } catch (...) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw;
  }
  ::close(fds[1]);
  l.read_fd = fds[0];
  return l;
}

}  // namespace

// What run_attempt takes over from a held start.
struct HeldAccess {
  static std::unique_ptr<Process> take(HeldStart& h, Attempt& a, int& read_fd) {
    if (h.key_) a.parser.require_key(*h.key_);
    a.log = h.log_;
    read_fd = h.read_fd_;
    h.read_fd_ = -1;
    std::unique_ptr<Process> p = std::move(h.process_);
    release(h);
    return p;
  }
  // The process's turn: the lock goes, and so does the file (a rank of a launcher that has not opened it yet then
  // finds none and goes on).
  static void release(HeldStart& h) {
    if (h.turn_fd_ < 0) return;
    ::flock(h.turn_fd_, LOCK_UN);
    ::close(h.turn_fd_);
    h.turn_fd_ = -1;
    std::error_code ec;
    fs::remove(h.turn_file_, ec);
  }
};

HeldStart::~HeldStart() {
  process_.reset();  // kills and reaps an unused process before its lock goes
  HeldAccess::release(*this);
  if (read_fd_ >= 0) ::close(read_fd_);
}

std::shared_ptr<HeldStart> start_held(const GateRunSpec& spec, const std::vector<std::string>& gate_ids) {
  if (spec.process.sandbox || gate_ids.empty()) return nullptr;
  std::shared_ptr<HeldStart> h(new HeldStart());
  h->gates_ = gate_ids;
  h->turn_file_ = spec.log_dir / (spec.log_tag + ".turn");
  h->turn_fd_ = ::open(h->turn_file_.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
  if (h->turn_fd_ < 0) return nullptr;
  if (::flock(h->turn_fd_, LOCK_EX | LOCK_NB) != 0) return nullptr;  // the destructor closes and removes it
  h->log_ = spec.log_dir / (spec.log_tag + "1.log");
  Launched l = launch_attempt(spec, gate_ids, h->log_, h->turn_file_);
  h->process_ = std::move(l.process);
  h->read_fd_ = l.read_fd;
  h->key_ = l.key;
  return h;
}

namespace {

// One start of the gate binary for `gates` (attempt `number`, logged as <log_tag><number>.log), within what is left
// of the lab's budget: starts it (or takes over `held`, started earlier and waiting for its turn), follows it to its
// end and reads its channel to the last line. The clocks start here, when the process may run.
Attempt run_attempt(const GateRunSpec& spec, const std::vector<std::string>& gates, int number,
                    const LabBudget& lab_budget, HeldStart* held) {
  Attempt a;
  int read_fd = -1;
  std::unique_ptr<Process> p;
  if (held) {
    p = HeldAccess::take(*held, a, read_fd);
  } else {
    a.log = spec.log_dir / (spec.log_tag + std::to_string(number) + ".log");
    Launched l = launch_attempt(spec, gates, a.log);
    if (l.key) a.parser.require_key(*l.key);
    p = std::move(l.process);
    read_fd = l.read_fd;
  }
  AttemptWatch w(spec, a, read_fd);
  w.clock.emplace(p->pid());
  watch(*p, w, lab_budget);
  // Lines written just before the exit are still in the pipe; a leftover grandchild may hold it open, so read
  // for a moment, then kill everything and read what remains.
  w.drain_for(std::chrono::milliseconds(200));
  p->kill_all();
  p.reset();
  w.drain_for(std::chrono::milliseconds(500));
  ::close(read_fd);
  w.track();
  a.parser.finish();
  if (!w.current_open.empty()) a.open_gate_seconds = secs(Clock::now() - w.open_since);
  a.seconds = secs(Clock::now() - w.start);
  a.progress = w.clock->progress_seconds();
  a.waited = w.clock->waited_seconds();
  return a;
}

std::string kill_text(Kill k, const KillDetail& d, const GateRunSpec& spec) {
  std::string limit, what;
  switch (k) {
    case Kill::gate_timeout:
      limit = limit_text(spec.gate_time_limit_s);
      what = "the gate time limit of " + limit;
      break;
    case Kill::stall_timeout:
      limit = limit_text(quiet_limit(spec));
      what = "the limit of " + limit + " for start-up or between gates (the gate binary reported nothing)";
      break;
    case Kill::lab_timeout:
      limit = limit_text(spec.time_limit_s);
      what = "the lab's time limit of " + limit;
      break;
    case Kill::disk:
    case Kill::none:
      return "";
  }
  char buf[256];
  switch (d.by) {
    case Limit::progress:
      std::snprintf(buf, sizeof buf, "%.1f s of its own time (%.1f s on the clock, less the time it waited for a CPU)",
                    d.progress, d.wall);
      break;
    case Limit::cpu:
      std::snprintf(buf, sizeof buf,
                    "%.1f s of CPU time in %.1f s: its processes kept every core busy (a fork bomb, or runaway "
                    "threads)",
                    d.cpu, d.wall);
      break;
    case Limit::wall:
      std::snprintf(buf, sizeof buf, "%.1f s on the clock, %g times the limit (the last-resort wall-clock limit)",
                    d.wall, spec.wall_factor);
      break;
  }
  return "it ran past " + what + " after " + buf + " and was killed";
}

// Stores what an attempt says about the gates still to do; returns how many got an outcome.
std::size_t resolve(LabResult& lab, const Attempt& a, const GateRunSpec& spec, std::set<std::string>& remaining) {
  std::size_t resolved = 0;
  auto find = [&](const std::string& id) -> GateResult* {
    if (!remaining.count(id)) return nullptr;
    for (auto& g : lab.gates)
      if (g.id == id) return &g;
    return nullptr;
  };
  const auto& p = a.parser;
  std::string last_ended;
  for (const auto& id : p.ended_order()) {
    GateResult* g = find(id);
    if (!g) continue;
    const GateOutcome& o = p.ended().at(id);
    g->status = o.status;
    g->message = o.message;
    g->seconds = o.seconds;
    g->metrics = o.metrics;
    g->names = o.names;
    if (o.tainted) {
      if (g->status == Status::passed) g->status = Status::failed;
      g->message = "the result channel was written to by the submission during this gate (" + o.taint_reason +
                   "); its outcome is not trusted" + (o.message.empty() ? "" : "\n" + o.message);
    }
    remaining.erase(id);
    ++resolved;
    last_ended = id;
  }
  if (GateResult* g = find(p.open_gate())) {
    g->metrics = p.open_metrics();
    g->seconds = a.open_gate_seconds;
    if (a.killed == Kill::gate_timeout || a.killed == Kill::lab_timeout) {
      g->status = Status::timeout;
      g->message = "timeout: " + kill_text(a.killed, a.detail, spec) +
                   " (an endless loop in a kernel or in host code, a deadlock at a barrier, or far too slow)";
    } else if (a.killed == Kill::disk) {
      g->status = Status::crashed;
      g->message = "the gate binary wrote too much to disk: " + disk_text(a.disk, spec) +
                   "; it was killed. A gate's work stays in memory: look for files written in a loop";
    } else {
      g->status = Status::crashed;
      g->message = "the gate binary died inside this gate (" + a.exit.describe() + ")" + output_tail(a.log);
    }
    if (!p.open_taint().empty()) g->message += "\n(the result channel was also written to by the submission)";
    remaining.erase(g->id);
    ++resolved;
  }
  // A gate that started and vanished without an end while another gate ran: forged lines on the channel.
  for (const auto& id : p.started()) {
    if (id == p.open_gate() || p.ended().count(id)) continue;
    if (GateResult* g = find(id)) {
      g->status = Status::failed;
      g->message = "the result channel was written to by the submission (the gate's end was never reported)";
      remaining.erase(id);
      ++resolved;
    }
  }
  // Catch2 always finishes a run with run_end; a normal exit without it right after a gate means code in the
  // process called exit() (or forged the gate's end and left): that gate's outcome is not trusted.
  if (a.killed == Kill::none && a.exit.exited && a.exit.code != 3 && p.run_started() && !p.run_ended() &&
      p.open_gate().empty() && !last_ended.empty()) {
    for (auto& g : lab.gates) {
      if (g.id != last_ended || g.status != Status::passed) continue;
      g.status = Status::failed;
      g.message = "the gate binary exited (" + a.exit.describe() +
                  ") right after this gate without finishing its run: code in the process called exit()";
    }
  }
  return resolved;
}

// The attempt loop shared by the graded run and the sanitizer runs.
// Returns the lab time the attempts used: their progress, not the clock.
double run_loop(LabResult& lab, const GateRunSpec& spec, std::vector<std::string> gate_ids,
                std::vector<Attempt>* attempts) {
  std::vector<std::string> order = gate_ids;
  std::set<std::string> remaining(order.begin(), order.end());
  double waited = 0;
  LabBudget budget;
  budget.wall_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(spec.time_limit_s * spec.wall_factor));
  auto set_rest = [&](Status s, const std::string& msg) {
    for (auto& g : lab.gates)
      if (remaining.count(g.id)) {
        g.status = s;
        g.message = msg;
      }
    remaining.clear();
  };
  const std::size_t max_attempts = order.size() + 2;
  for (std::size_t n = 1; !remaining.empty(); ++n) {
    if (n > max_attempts) {
      set_rest(Status::crashed, "not run: the gate binary kept dying (" + std::to_string(n - 1) + " attempts)");
      break;
    }
    if (budget.progress_used >= spec.time_limit_s || Clock::now() >= budget.wall_deadline) {
      set_rest(Status::timeout, "not run: the lab's time limit of " + limit_text(spec.time_limit_s) + " was used up");
      break;
    }
    // Files an earlier run of the lab left past the limit (one that passed it in its last second, between two
    // looks) are cleared before this one starts, so that it is not killed at its first look for them; files that
    // cannot be (its uid's in the shared temporary folders, after a disk kill) end the lab here.
    if (spec.disk_limit_bytes > 0 && !disk_room(spec)) {
      set_rest(Status::crashed, "not run: the lab's files on disk could not be cleared (" +
                                    disk_text(lab_disk_use(spec), spec) + ")");
      break;
    }
    std::vector<std::string> todo;
    for (const auto& id : order)
      if (remaining.count(id)) todo.push_back(id);
    HeldStart* held =
        n == 1 && spec.held && spec.held->waiting() && spec.held->gates() == todo ? spec.held.get() : nullptr;
    Attempt a = run_attempt(spec, todo, static_cast<int>(n), budget, held);
    budget.progress_used += a.progress;
    lab.run_seconds += a.seconds;
    waited += a.waited;
    if (lab.device.empty() && !a.parser.device().empty()) lab.device = a.parser.device();
    if (starts_with(a.parser.proc_writes(), "open: ")) {
      const std::string note = "the gate binary could not close /proc to writes (" + a.parser.proc_writes().substr(6) +
                               "): code of the submission could have patched the gates through /proc/self/mem";
      if (std::find(lab.notes.begin(), lab.notes.end(), note) == lab.notes.end()) add_note(lab, note);
    }
    if (!lab.seed && a.parser.seed()) lab.seed = a.parser.seed();
    for (std::size_t i = 0; i < a.parser.anomalies().size() && i < 3; ++i)
      add_note(lab, "result channel: " + a.parser.anomalies()[i]);
    std::size_t resolved = resolve(lab, a, spec, remaining);
    Kill killed = a.killed;
    KillDetail detail = a.detail;
    const DiskUse disk = a.disk;
    bool run_ended = a.parser.run_ended(), run_started = a.parser.run_started();
    const std::size_t unsigned_lines = a.parser.unsigned_lines();
    ExitInfo exit = a.exit;
    fs::path log = a.log;
    std::string open_gate = a.parser.open_gate();
    if (attempts) attempts->push_back(std::move(a));
    // Its files go at once, whatever comes next: the lab's next process (the hidden gates', the checks') starts
    // from a clean folder, and the other students' compiles and logs get the space back.
    if (killed == Kill::disk) clear_lab_files(spec);
    if (remaining.empty()) break;
    if (killed == Kill::lab_timeout) {
      set_rest(Status::timeout, "not run: " + kill_text(killed, detail, spec));
      break;
    }
    // A run that finished (run_end, then a normal exit) without a gate: the binary has no such gate. After a
    // crash Catch2 still writes run_end from its signal handler, so a signal means "restart", not "missing".
    if (run_ended && killed == Kill::none && exit.exited && exit.code != 3) {
      for (auto& g : lab.gates)
        if (remaining.count(g.id)) {
          g.status = Status::missing;
          g.message = "the gate binary has no gate named `" + g.id +
                      "` (the rubric lists it: is the lab's test source out of date, or the rubric?)";
        }
      remaining.clear();
      break;
    }
    if (resolved == 0) {
      const std::string why = killed == Kill::disk   ? disk_text(disk, spec)
                              : killed != Kill::none ? kill_text(killed, detail, spec)
                                                     : exit.describe();
      const Status status = killed != Kill::none && killed != Kill::disk ? Status::timeout : Status::crashed;
      if (!run_started && unsigned_lines > 0)
        set_rest(status,
                 "the gate binary stopped before running any gate (" + why + "): none of the " +
                     std::to_string(unsigned_lines) +
                     " lines on the result channel carried the run's key, which code at start-up (a global "
                     "constructor reading descriptor 3?) must have taken" + output_tail(log));
      else if (!run_started)
        set_rest(status,
                 "the gate binary stopped before running any gate (" + why +
                     "): code that runs at start-up (a global constructor?) or a broken binary" + output_tail(log));
      else
        set_rest(status,
                 "the gate binary stopped without running this gate (" + why + ")" + output_tail(log));
      break;
    }
    add_note(lab, "restarted the gate binary for " + std::to_string(remaining.size()) + " remaining gate(s) after " +
                      (killed == Kill::disk   ? std::string("a kill for its files on disk (their folder emptied)")
                       : killed != Kill::none ? std::string("a timeout")
                                              : exit.describe()) +
                      (open_gate.empty() ? "" : " in " + open_gate));
  }
  if (waited >= 1) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "the grading machine was busy: %.0f s spent waiting for a CPU were not counted against the time "
                  "limits",
                  waited);
    add_note(lab, buf);
  }
  return budget.progress_used;
}

}  // namespace

std::string catch2_test_arg(const std::string& gate_id) {
  std::string out;
  for (char c : gate_id) {
    if (c == '\\' || c == ',' || c == '[' || c == ']' || c == '*' || c == '~' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

double run_gates(LabResult& lab, const GateRunSpec& spec, std::vector<std::string> gate_ids) {
  if (gate_ids.empty())
    for (const auto& g : lab.gates) gate_ids.push_back(g.id);
  if (gate_ids.empty()) return 0;
  return run_loop(lab, spec, gate_ids, nullptr);
}

std::vector<detail::AttemptLog> detail::run_gates_logged(LabResult& lab, const GateRunSpec& spec,
                                                          const std::vector<std::string>& gate_ids) {
  std::vector<Attempt> attempts;
  run_loop(lab, spec, gate_ids, &attempts);
  std::vector<AttemptLog> logs;
  for (const auto& a : attempts) logs.push_back({a.seconds, a.log});
  return logs;
}

}  // namespace labgrade
