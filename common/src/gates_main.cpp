// main() of every gate binary: Catch2 with two extra options and a listener that writes the structured result
// channel (see labkit/report.h) for the grader.
#include <catch2/catch_session.hpp>
#include <catch2/catch_test_case_info.hpp>
#include <catch2/catch_translate_exception.hpp>
#include <catch2/reporters/catch_reporter_event_listener.hpp>
#include <catch2/reporters/catch_reporter_registrars.hpp>
#include <catch2/catch_get_random_seed.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <new>
#include <nlohmann/json.hpp>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "labkit/check.h"
#include "labkit/device.h"
#include "labkit/gate.h"
#include "labkit/not_implemented.h"
#include "labkit/report.h"

namespace labkit::detail {
extern const char* const gate_lab_id;
extern const char* const gate_default_rubric;
extern std::string gate_binary;
extern std::string gate_rubric_path;
}  // namespace labkit::detail

namespace {

// ---- /proc closed to writes -------------------------------------------------------------------------------------
// The student's object shares this process, and /proc/self/mem writes ignore page protections (the kernel breaks
// copy-on-write for them): fopen + fwrite, nothing the object check can refuse, would patch the gates' code or
// their read-only data. Under the grader (LABKIT_CLOSE_PROC=1), before any static initialiser of the student's
// object runs, Landlock takes away the right to open files for writing anywhere below /proc: every other top-level
// directory keeps it (the scratch folder, /dev's GPU nodes, /tmp). A plain constructor of the student's runs after
// this one (priority 101 comes first); the object check refuses earlier ones (.preinit_array, prioritised
// constructors, ifuncs). Files already open (the console log, the result channel) are untouched. It lives in this
// file, main()'s, because a constructor alone in an archive member would never be linked in.
//
// What run_start reports: a plain array, because the constructor runs before this file's dynamic initialisation (a
// std::string here would not have been constructed yet).
char g_proc_writes[512] = "open (not asked for)";

std::string close_proc_to_writes() {
#if defined(SYS_landlock_create_ruleset) && defined(LANDLOCK_ACCESS_FS_WRITE_FILE)
  const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) return std::string("Landlock is not available (") + std::strerror(errno) + ")";
  landlock_ruleset_attr attr{};
  std::uint64_t rights = LANDLOCK_ACCESS_FS_WRITE_FILE;
#ifdef LANDLOCK_ACCESS_FS_REFER
  // From ABI 2 on, moving a file to another directory is refused unless the ruleset grants it: grant it wherever
  // writing is granted, so that nothing but /proc changes.
  if (abi >= 2) rights |= LANDLOCK_ACCESS_FS_REFER;
#endif
  attr.handled_access_fs = rights;
  const int ruleset = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
  if (ruleset < 0) return std::string("landlock_create_ruleset: ") + std::strerror(errno);
  std::string problem;
  if (DIR* root = opendir("/")) {
    while (dirent* e = readdir(root)) {
      const std::string name = e->d_name;
      if (name == "." || name == ".." || name == "proc") continue;
      const int fd = open(("/" + name).c_str(), O_PATH | O_CLOEXEC);  // follows /lib -> usr/lib
      if (fd < 0) continue;
      struct stat st {};
      if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        landlock_path_beneath_attr beneath{};
        beneath.allowed_access = rights;
        beneath.parent_fd = fd;
        if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0 && problem.empty())
          problem = "landlock_add_rule /" + name + ": " + std::strerror(errno);
      }
      close(fd);
    }
    closedir(root);
  } else {
    problem = std::string("cannot list /: ") + std::strerror(errno);
  }
  if (problem.empty() && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    problem = std::string("PR_SET_NO_NEW_PRIVS: ") + std::strerror(errno);
  if (problem.empty() && syscall(SYS_landlock_restrict_self, ruleset, 0) != 0)
    problem = std::string("landlock_restrict_self: ") + std::strerror(errno);
  close(ruleset);
  return problem;
#else
  return "this build has no Landlock headers";
#endif
}

// Under an MPI launcher only world rank 0 writes the result channel (the lab's gates agree on one verdict across
// processes). The launcher sets the rank in the environment before this process starts, so no code of the
// submission decides it.
bool world_rank_zero() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* r = std::getenv(v)) return std::string(r) == "0";
  return true;
}

// A launcher (mpirun) does not pass the channel on: the grader names it "@parent:N", descriptor N of this process's
// parent, which is opened through /proc/<ppid>/fd/N. Once Landlock is in force that is refused (the parent lies
// outside this process's domain), so the constructor below opens it first and main() takes it from here.
int g_parent_channel_fd = -1;

// The value of --labkit-results as the constructors see main()'s arguments, or nullptr.
const char* results_arg(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--labkit-results") == 0) return argv[i + 1];
  return nullptr;
}

void open_parent_channel(int argc, char** argv) {
  const char* v = results_arg(argc, argv);
  if (!v || std::strncmp(v, "@parent:", 8) != 0 || !world_rank_zero()) return;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%s", static_cast<int>(getppid()), v + 8);
  g_parent_channel_fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
}

// The CUDA driver names the threads it starts while it initialises by writing /proc/self/task/<tid>/comm, and takes a
// refusal as a fatal error (cuInit returns CUDA_ERROR_OPERATING_SYSTEM): it is initialised first, while /proc is
// still open. (The CUDA runtime may be linked statically and not be initialised this early, so the driver is
// reached directly.)
void initialise_cuda_driver() {
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) {
    using CuInit = int (*)(unsigned);
    if (auto cu_init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"))) (void)cu_init(0);
  }
}

// LABKIT_HOLD_START=FILE: the grader started this process ahead of its turn on the GPU (a speed gate's process,
// started while the previous lab's speed gates are timed) and holds an exclusive lock on FILE until the turn is
// this process's. The wait is here, after the loading of the libraries and cuInit (0.4 s of every gate process on an
// H100, now spent beside the other lab's timing) and before any code of the student's runs: nothing of this process
// touches the GPU before its turn. A file that cannot be opened or locked holds nothing up.
void wait_for_turn(const char* file) {
  const int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  while (flock(fd, LOCK_SH) != 0 && errno == EINTR) {
  }
  close(fd);
}

// The run's key, out of the result channel (--labkit-results /dev/fd/N, a socket the grader wrote it into) before
// any static initialiser of the student's code can read it: a constructor of the student's that took it could sign a
// whole forged run with it (read() on descriptor 3 is not refused; the grader half-closed its end, so a later read
// finds nothing and returns at once).
void take_run_key(int argc, char** argv) {
  const char* v = results_arg(argc, argv);
  if (!v || std::strncmp(v, "/dev/fd/", 8) != 0 || !v[8]) return;
  int fd = 0;
  for (const char* p = v + 8; *p; ++p) {
    if (*p < '0' || *p > '9' || fd > 100000) return;
    fd = fd * 10 + (*p - '0');
  }
  labkit::report::detail::take_key_early(fd);
}

// glibc passes main()'s arguments to the constructors of the program.
__attribute__((constructor(101))) void close_proc_before_student_code(int argc, char** argv, char**) {
  take_run_key(argc, argv);
  const char* ask = std::getenv("LABKIT_CLOSE_PROC");
  if (!ask || std::string(ask) != "1") return;
  open_parent_channel(argc, argv);
  initialise_cuda_driver();
  if (const char* hold = std::getenv("LABKIT_HOLD_START")) wait_for_turn(hold);
  const std::string problem = close_proc_to_writes();
  std::snprintf(g_proc_writes, sizeof g_proc_writes, "%s%s", problem.empty() ? "closed" : "open: ", problem.c_str());
  // stdio, not iostreams: std::cerr may not be constructed this early.
  if (!problem.empty())
    std::fprintf(stderr, "labkit: /proc stays writable (%s): code in this process could patch the gates\n",
                 problem.c_str());
}

}  // namespace

// Threads that the CUDA driver, CUPTI or NCCL start later are named the same way, from the thread that started them
// (glibc's pthread_setname_np writes /proc/self/task/<tid>/comm for another thread). The gate binary's own
// definition takes the place of glibc's for every library of the process: a thread names itself as before
// (PR_SET_NAME, no file), another thread's name is left as it is, and the call succeeds either way, since a name
// changes nothing a gate checks and a refusal could stop a library.
extern "C" int pthread_setname_np(pthread_t thread, const char* name) noexcept {
  if (pthread_equal(thread, pthread_self())) return prctl(PR_SET_NAME, name, 0, 0, 0) == 0 ? 0 : errno;
  return 0;
}

namespace {

struct GateState {
  bool not_implemented = false;
  bool context_lost = false;
  bool crashed = false;
  std::string messages;
  std::chrono::steady_clock::time_point start;
};
GateState g_state;

void add_message(const std::string& m) {
  if (m.empty()) return;
  if (!g_state.messages.empty()) g_state.messages += "\n";
  g_state.messages += m;
}

bool context_lost_now() {
  if (!labkit::has_device()) return false;
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaGetLastError();
  return labkit::is_sticky(e);
}

// A gate with no failed and no skipped check passes only if its body returned (labkit/gate.h's TEST_CASE counts
// the body's starts and returns). A body left by an exception that no check reported is the work of an object
// thrown under the name of one of Catch2's own exceptions, which Catch2 takes silently: "passed" would be the
// student's word, not the gate's. "passed" or "failed" with the message.
std::string unreported_end() {
  const auto& runs = labkit::gate::detail::body_runs();
  if (runs.started == 0) {
    add_message("this gate did not run through labkit's TEST_CASE (its file must include labkit/gate.h), so the "
                "binary cannot tell whether it ended normally");
    return "failed";
  }
  if (runs.returned < runs.started) {
    add_message("the gate was left by an exception that no check reported: something in the step's code threw an "
                "object under the name of one of the test framework's own exceptions, which the framework takes "
                "without a word; a gate counts as passed only when its checks ran to the end");
    return "failed";
  }
  // Every check passed, but a step that the gate ran in the launch recorder may not have used the GPU at all: the
  // answers computed on the host and copied into the outputs pass any check of values.
  const auto& work = labkit::gate::detail::recorded_work();
  if (work.scopes > 0 && work.kernels == 0) {
    add_message(work.step + " ran no kernel in any of the gate's " + std::to_string(work.scopes) +
                " recorded calls: its answers came from host code and copies, and the step's work must run on the "
                "GPU, in a kernel (or in the library the step is about)");
    return "failed";
  }
  // One function of several the gate records that ran none, while the others did: its answers came from the host.
  for (const auto& [function, f] : work.functions)
    if (f.scopes > 0 && f.kernels == 0 && !work.copies_only.count(function)) {
      add_message(function + " ran no kernel in any of its " + std::to_string(f.scopes) +
                  " recorded calls, while the gate's other functions did: its answers came from host code and "
                  "copies, and this function's work must run on the GPU too, in a kernel (or in the library the "
                  "step is about)");
      return "failed";
    }
  // A step whose idea is a tile in shared memory (the rubric's needs_shared_memory) that used none: an earlier
  // step's kernel copied into its file passes every check of values, and only this tells it from the step.
  const labkit::RubricGate* rg = labkit::gate::rubric().find(labkit::report::current_gate());
  if (rg && rg->needs_shared_memory && work.scopes > 0 && work.own_shared_memory_kernels == 0) {
    add_message(work.step + " ran no kernel of your own that uses shared memory in any of the gate's " +
                std::to_string(work.scopes) +
                " recorded calls: every value is right, but this step is about staging tiles in shared memory, and "
                "a kernel that reads every operand from global memory (an earlier step's, copied here) is not it");
    return "failed";
  }
  return "passed";
}

class ResultChannelListener : public Catch::EventListenerBase {
 public:
  using Catch::EventListenerBase::EventListenerBase;

  void testRunStarting(const Catch::TestRunInfo&) override {
    labkit::report::detail::set_lab(labkit::detail::gate_lab_id);
    nlohmann::json j{{"event", "run_start"},
                     {"lab", labkit::detail::gate_lab_id},
                     {"seed", Catch::getSeed()},
                     {"secret", labkit::gate::secret()},
                     {"rubric", labkit::detail::gate_rubric_path},
                     {"proc_writes", g_proc_writes}};
    j["device"] = labkit::has_device() ? labkit::describe(labkit::device_info()) : labkit::no_device_reason();
    labkit::report::detail::write_line(j.dump());
  }

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    g_state = GateState{};
    g_state.start = std::chrono::steady_clock::now();
    labkit::gate::detail::body_runs() = {};
    labkit::gate::detail::recorded_work() = {};
    labkit::report::detail::set_current_gate(info.name);
    labkit::report::detail::write_line(nlohmann::json{{"event", "gate_start"}, {"gate", info.name}}.dump());
  }

  void assertionEnded(const Catch::AssertionStats& stats) override {
    const auto& r = stats.assertionResult;
    if (r.isOk() && r.getResultType() != Catch::ResultWas::ExplicitSkip) return;
    // AssertionStats already carries the assertion's own message (FAIL, SKIP, a translated exception) among
    // infoMessages, after the INFO/CAPTURE context; only a failed expression needs its expansion added.
    std::string text;
    for (const auto& info : stats.infoMessages) {
      if (!text.empty()) text += "\n";
      text += info.message;
    }
    if (r.hasExpression() && r.getResultType() == Catch::ResultWas::ExpressionFailed)
      text += (text.empty() ? "" : "\n") + std::string("check failed: ") + r.getExpressionInMacro() + " with " +
              r.getExpandedExpression();
    add_message(text);
  }

  void fatalErrorEncountered(Catch::StringRef error) override {
    g_state.crashed = true;
    add_message("the gate binary crashed: " + std::string(error));
  }

  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    const auto& a = stats.totals.assertions;
    if (!g_state.crashed && context_lost_now()) {
      g_state.context_lost = true;
      add_message("the CUDA context was destroyed (an illegal address or a trap in a kernel)");
    }
    std::string status;
    if (g_state.crashed)
      status = "crashed";
    else if (g_state.not_implemented)
      status = "not_implemented";
    else if (a.failed > 0)
      status = g_state.context_lost ? "crashed" : "failed";
    else if (a.skipped > 0)
      status = "skipped";
    else
      status = unreported_end();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_state.start).count();
    nlohmann::json j{{"event", "gate_end"}, {"gate", stats.testInfo->name}, {"status", status},
                     {"message", g_state.messages}, {"seconds", seconds}};
    labkit::report::detail::write_line(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    labkit::report::detail::set_current_gate("");
    if (g_state.context_lost) {
      std::cerr << "labkit: the CUDA context is lost; stopping here (the grader restarts the remaining gates in a "
                   "fresh process)"
                << std::endl;
      std::_Exit(3);
    }
  }

  void testRunEnded(const Catch::TestRunStats& stats) override {
    const auto& t = stats.totals.testCases;
    labkit::report::detail::write_line(nlohmann::json{{"event", "run_end"},
                                                      {"passed", t.passed},
                                                      {"failed", t.failed},
                                                      {"skipped", t.skipped}}
                                           .dump());
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(ResultChannelListener)

CATCH_TRANSLATE_EXCEPTION(const labkit::NotImplemented& e) {
  g_state.not_implemented = true;
  return e.what();
}

CATCH_TRANSLATE_EXCEPTION(const labkit::CudaError& e) {
  if (e.sticky()) g_state.context_lost = true;
  return e.what();
}

// std::bad_alloc alone says nothing of why: a host allocation failed, most often under the grader's bound on a gate
// binary's host memory (RLIMIT_DATA: `labgrade batch --memory-gib`, 16 GiB by default), which a step that copies a
// large device array to the host meets first (lab 05's past-2^32 case needs 34 GB for x and y). Thrust reports a
// failed cudaMalloc (a device_vector, an algorithm's temporary storage) with its own bad_alloc, derived from
// std::bad_alloc, whose what() carries the CUDA error after "std::bad_alloc: ": device memory, not host memory.
CATCH_TRANSLATE_EXCEPTION(const std::bad_alloc& e) {
  const std::string what = e.what();
  if (what != "std::bad_alloc")
    return what + ": an allocation failed; a CUDA error named here means device memory ran out (Thrust's "
                  "device_vector or an algorithm's temporary storage)";
  std::string m = what + ": a host allocation failed, the step's or the gate's";
  rlimit data{};
  if (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY)
    m += " (this process may use " + std::to_string((data.rlim_cur + (rlim_t(1) << 29)) >> 30) +
         " GiB of host memory: labgrade batch --memory-gib)";
  return m + ". A step's work belongs on the GPU: look for host copies of large device arrays or host vectors the "
             "size of the input";
}

// Under an MPI launcher every process of the job runs this binary; only world rank 0 writes the result channel.
// mpirun does not pass its own descriptors on to the processes it starts: the grader then names the channel
// "@parent:N", descriptor N of this process's parent (the launcher), opened already if /proc is closed.
static std::string channel_of_this_process(const std::string& results) {
  if (!world_rank_zero()) return "";
  if (results.rfind("@parent:", 0) == 0) {
    if (g_parent_channel_fd >= 0) return "/dev/fd/" + std::to_string(g_parent_channel_fd);
    return "/proc/" + std::to_string(getppid()) + "/fd/" + results.substr(8);
  }
  return results;
}

int main(int argc, char** argv) {
  Catch::Session session;
  std::string results, rubric, secret;
  using namespace Catch::Clara;
  auto cli = session.cli() |
             Opt(results, "path")["--labkit-results"]("append each gate's result as a JSON line to this file") |
             Opt(rubric, "path")["--labkit-rubric"]("the rubric.toml with the speed thresholds (default: the lab's)") |
             Opt(secret, "number")["--labkit-secret"]("the per-run secret mixed into the input seeds (default: random; "
                                                      "given to reproduce a run, see labkit/gate.h)");
  session.cli(cli);
  if (int rc = session.applyCommandLine(argc, argv)) return rc;
  if (!secret.empty()) {
    try {
      std::size_t used = 0;
      labkit::gate::detail::set_secret(std::stoull(secret, &used, 0));
      if (used != secret.size()) throw std::invalid_argument(secret);
    } catch (const std::exception&) {
      std::cerr << "--labkit-secret takes an unsigned 64-bit number, not '" << secret << "'" << std::endl;
      return 2;
    }
  }
  labkit::detail::gate_binary = argv[0];
  labkit::detail::gate_rubric_path = rubric.empty() ? labkit::detail::gate_default_rubric : rubric;
  try {
    labkit::report::detail::open(channel_of_this_process(results));
  } catch (const std::exception& e) {
    std::cerr << e.what() << std::endl;
    return 2;
  }
  return session.run();
}
