// `labgrade batch` over the fault fixtures (grader/fixtures) and two copies of the fake lab's solution, without a
// GPU: every student scored as grader/fixtures/EXPECTED.md says, nothing outside a submission's scratch folder
// changed, no network reached, and a killed batch resumes without losing or repeating a student.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "batch_internal.h"
#include "devices.h"
#include "fixtures.h"
#include "recipe.h"
#include "sandbox.h"
#include "test_support.h"

using namespace labgrade;
using Catch::Matchers::ContainsSubstring;

namespace {

// Faults that only a sandbox contains: without one (not root and no bubblewrap) they are left out.
const std::set<std::string> kHostile = {"tamper", "network", "huge_alloc", "read_hidden"};

bool can_contain() { return geteuid() == 0 || bwrap_works(); }
// Only bubblewrap's mounts hide the hidden gates' source from the compile and the run: without it (uid-only
// isolation as root, the fallback an instructor must ask for with --sandbox none) read_hidden finds them.
const std::set<std::string> kNeedBwrap = {"read_hidden"};
// Where bubblewrap is installed but cannot create namespaces (a chroot, a container without user namespaces),
// `auto` refuses to grade: the tests then ask for the uid-only fallback explicitly, as an instructor would.
std::vector<std::string> sandbox_args() {
  return bwrap_works() ? std::vector<std::string>{} : std::vector<std::string>{"--sandbox", "none"};
}

// A private copy of the fake lab (rubric, tests) and a recipe pointing at it: if the sandbox ever failed, the
// tamper fixture could only damage the copy, and the test notices.
struct GraderTree {
  fs::path grading;
  fs::path lab_copy;
  std::vector<fs::path> watched;  // files that must not change
};

GraderTree private_fakelab(const fs::path& dir) {
  GraderTree t;
  t.lab_copy = dir / "fakelab";
  fs::copy(test::fakelab_root(), t.lab_copy, fs::copy_options::recursive);
  auto recipe = nlohmann::json::parse(read_file(test::fakelab_grading() / "lab99.json"));
  fs::path lab_dir = t.lab_copy / "labs/99_fake";
  recipe["lab_dir"] = lab_dir.string();
  recipe["rubric"] = (lab_dir / "rubric.toml").string();
  t.grading = dir / "grading";
  write_file_atomic(t.grading / "lab99.json", recipe.dump(2));
  for (const auto& e : fs::recursive_directory_iterator(t.lab_copy))
    if (e.is_regular_file()) t.watched.push_back(e.path());
  t.watched.push_back(t.grading / "lab99.json");
  for (const auto& o : recipe["gate_objects"]) t.watched.emplace_back(o.get<std::string>());
  for (const auto& l : recipe["link_libraries"]) {
    std::string s = l;
    if (!s.empty() && s[0] == '/' && fs::is_regular_file(s) && !starts_with(s, "/usr")) t.watched.emplace_back(s);
  }
  return t;
}

std::map<fs::path, std::string> snapshot(const std::vector<fs::path>& files) {
  std::map<fs::path, std::string> out;
  for (const auto& f : files) out[f] = fs::exists(f) ? read_file(f) : "<missing>";
  return out;
}

std::vector<fs::path> find_named(const fs::path& root, const std::string& name) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->path().filename() == name) out.push_back(it->path());
  return out;
}

// Processes whose command line contains `path` (a batch's scratch folder) and `also`, and `more`.
int processes_naming(const std::string& path, const std::string& also = "", const std::string& more = "") {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    // istream::read, not an istreambuf_iterator: a process that ends between the open and the read fails the read
    // (ESRCH), which the stream turns into badbit, whereas the iterator let libstdc++'s exception out and ended a
    // test under load ("basic_filebuf::underflow error reading the file: No such process").
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmd(64 << 10, '\0');
    in.read(cmd.data(), static_cast<std::streamsize>(cmd.size()));
    cmd.resize(static_cast<std::size_t>(in.gcount()));
    n += cmd.find(path) != std::string::npos && cmd.find(also) != std::string::npos &&
         cmd.find(more) != std::string::npos;
  }
  return n;
}

// A TCP listener on the grading host's loopback: the network fixture must not reach it.
struct Listener {
  int fd = -1;
  explicit Listener(int port) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<unsigned short>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 16) != 0) {
      close(fd);
      fd = -1;
    }
  }
  int accepted() {
    int n = 0;
    for (int c; fd >= 0 && (c = accept(fd, nullptr, nullptr)) >= 0; ++n) close(c);
    return n;
  }
  ~Listener() {
    if (fd >= 0) close(fd);
  }
};

std::vector<std::string> batch_args(const fs::path& subs, const fs::path& out, const GraderTree& tree,
                                    std::vector<std::string> extra = {}, int workers = 2, int jobs = 2) {
  std::vector<std::string> argv = {test::labgrade_exe().string(),
                                   "--repo",
                                   test::repo_root().string(),
                                   "batch",
                                   subs.string(),
                                   "--out",
                                   out.string(),
                                   "--grading-dir",
                                   tree.grading.string(),
                                   "--no-build",
                                   "--gate-timeout",
                                   "8",
                                   "--memory-gib",
                                   "2",
                                   "--max-processes",
                                   "64",
                                   "-j",
                                   std::to_string(jobs),
                                   "--workers",
                                   std::to_string(workers)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// A shell script every uid can run (the batch's sandboxed processes run under dedicated uids).
void write_script(const fs::path& file, const std::string& text) {
  write_file_atomic(file, text);
  fs::permissions(file, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
}

std::vector<Fixture> fakelab_fixtures(bool hostile) {
  std::vector<Fixture> out;
  for (auto& f : load_fixtures(test::fixtures_dir())) {
    if (f.lab != "99_fake") continue;
    if (!hostile && kHostile.count(f.name)) continue;
    if (kNeedBwrap.count(f.name) && !bwrap_works()) continue;
    out.push_back(std::move(f));
  }
  return out;
}

void check_against_fixtures(const fs::path& out, const std::vector<Fixture>& fixtures,
                            const std::vector<std::string>& solutions) {
  auto checks = check_fixtures(out, fixtures, query_cuda(test::labgrade_exe()).ok, solutions);  // on a GPU machine: the GPU column
  std::ostringstream table;
  bool ok = print_checks(table, checks);
  INFO(table.str());
  CHECK(ok);
  CHECK(checks.size() >= fixtures.size());
}

}  // namespace

TEST_CASE("a batch over every fault fixture scores each one and damages nothing", "[batch]") {
  test::TempDir dir("batch");
  GraderTree tree = private_fakelab(dir.path);
  const bool hostile = can_contain();
  if (!hostile) WARN("no bubblewrap and not root: the hostile fixtures (tamper, network, fork bomb) are left out");
  if (hostile && !bwrap_works())
    WARN("bubblewrap cannot run here: read_hidden is left out (uid-only isolation does not hide the hidden gates)");
  auto fixtures = fakelab_fixtures(hostile);
  fs::path subs = dir.path / "submissions", out = dir.path / "out";
  for (const auto& f : fixtures) materialise(f, subs / f.name, {test::fakelab_root()});
  for (const char* s : {"solution_1", "solution_2"}) materialise_solutions(subs / s, {test::fakelab_root()});

  auto before = snapshot(tree.watched);
  bool tmp_marker_before = fs::exists("/tmp/TAMPERED");
  Listener listener(47999);

  // Without bubblewrap, `auto` refuses: isolation must be asked away explicitly.
  auto r = run_command(batch_args(subs, out, tree, sandbox_args()), 1200);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, ContainsSubstring("[" + std::to_string(fixtures.size() + 2) + "/"));  // progress lines

  check_against_fixtures(out, fixtures, {"solution_1", "solution_2"});

  // Nothing the submissions could reach changed; no marker file outside their (removed) scratch folders.
  auto after = snapshot(tree.watched);
  for (const auto& [file, content] : before) {
    INFO(file.string());
    CHECK(after[file] == content);
  }
  CHECK(find_named(dir.path, "TAMPERED").empty());
  // bubblewrap gives every gate a private /tmp; uid-only isolation (the --sandbox none fallback where bubblewrap
  // cannot run) does not, so there the tamper fixture's marker may land in /tmp: removed again, not a failure.
  if (bwrap_works()) {
    CHECK(fs::exists("/tmp/TAMPERED") == tmp_marker_before);
  } else if (!tmp_marker_before) {
    std::error_code ignored;
    fs::remove("/tmp/TAMPERED", ignored);
  }
  CHECK_FALSE(fs::exists(test::repo_root() / "TAMPERED"));
  CHECK_FALSE(fs::exists(test::build_dir() / "TAMPERED"));
  if (hostile && listener.fd >= 0) CHECK(listener.accepted() == 0);
  CHECK_FALSE(fs::exists(out / ".work"));  // scratch folders are removed

  // Per student: Gradescope results.json, the full result.json, logs; class-wide outputs.
  for (const auto& f : fixtures) {
    INFO(f.name);
    auto gs = nlohmann::json::parse(read_file(out / f.name / "results.json"));
    CHECK(gs["max_score"] == 23.0);  // the grader's rubric, not the one own_tests brought
    CHECK(gs["tests"].size() == 6);
    auto full = nlohmann::json::parse(read_file(out / f.name / "result.json"));
    if (f.name != "not_submitted") CHECK(full["compile_seconds"].get<double>() > 0);
    CHECK(full["isolation"] == (bwrap_works() ? "bwrap" : geteuid() == 0 ? "uid-only" : "none"));
    // Nothing of the hidden gate but its id, status and points reaches the student.
    CHECK_FALSE(contains(gs.dump(), "handles negative numbers"));
  }
  auto sol = nlohmann::json::parse(read_file(out / "solution_1" / "result.json"));
  CHECK(sol["score"] == (query_cuda(test::labgrade_exe()).ok ? 23.0 : 13.0));  // without a GPU step1.correct (10) is skipped
  std::string csv = read_file(out / "gradebook.csv");
  CHECK(csv.rfind("student,lab,gate,status,points,max_points,metric,value,threshold,isolation\n", 0) == 0);
  CHECK_THAT(read_file(out / "report.md"), ContainsSubstring("Isolation: "));
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 6 * static_cast<long>(fixtures.size() + 2));
  CHECK_THAT(read_file(out / "junit.xml"), ContainsSubstring("<testsuite name=\"host_segfault/lab99\""));
  CHECK_THAT(read_file(out / "report.md"), ContainsSubstring("## host_segfault"));
  CHECK_THAT(read_file(out / "compile_error" / "result.json"), ContainsSubstring("student/step2_clamp.cu("));
  // Two workers: a speed gate that lost points on a steady timing is timed again once in the quiet turn (not_faster:
  // slow both times), and an unsteady one whatever the workers (unsteady_first_timing passes the second time); the
  // class report lists both.
  const std::string report = read_file(out / "report.md");
  CHECK_THAT(read_file(out / "not_faster" / "result.json"),
             ContainsSubstring("lost points while other workers of the batch ran on the machine"));
  CHECK_THAT(report, ContainsSubstring("### Speed gates timed again on a quiet machine"));
  CHECK_THAT(report, ContainsSubstring("| not_faster | lab99 cpu.speed: its first timing (ratio"));
  CHECK_THAT(report, ContainsSubstring("| unsteady_first_timing | lab99 cpu.speed: its first timing was unsteady"));
  CHECK_FALSE(contains(report, "| solution_1 | lab99 cpu.speed: its first timing"));

  // Running the batch again repeats nothing.
  auto again = run_command(batch_args(subs, out, tree, sandbox_args()), 600);
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.output, ContainsSubstring(std::to_string(fixtures.size() + 2) + " already graded"));
}

TEST_CASE("without bubblewrap (as root): uid - process limit and network namespace still contain", "[batch]") {
  if (geteuid() != 0) {
    SUCCEED("needs root: the dedicated-uid sandbox");
    return;
  }
  test::TempDir dir("nobwrap");
  GraderTree tree = private_fakelab(dir.path);
  std::vector<Fixture> fixtures;
  for (auto& f : load_fixtures(test::fixtures_dir()))
    if (f.name == "tamper" || f.name == "network" || f.name == "fork_bomb" || f.name == "host_segfault")
      fixtures.push_back(std::move(f));
  fs::path subs = dir.path / "submissions", out = dir.path / "out";
  for (const auto& f : fixtures) materialise(f, subs / f.name, {test::fakelab_root()});
  materialise_solutions(subs / "solution_1", {test::fakelab_root()});
  auto before = snapshot(tree.watched);
  Listener listener(47999);
  auto r = run_command(batch_args(subs, out, tree, {"--sandbox", "none"}), 900);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, ContainsSubstring("sandbox: none"));
  check_against_fixtures(out, fixtures, {"solution_1"});
  auto after = snapshot(tree.watched);
  for (const auto& [file, content] : before) CHECK(after[file] == content);
  CHECK(find_named(dir.path, "TAMPERED").empty());
  if (listener.fd >= 0) CHECK(listener.accepted() == 0);
}

TEST_CASE("a killed batch resumes without losing or repeating a student", "[batch]") {
  test::TempDir dir("resume");
  GraderTree tree = private_fakelab(dir.path);
  std::vector<Fixture> fixtures;
  for (auto& f : load_fixtures(test::fixtures_dir()))
    if (f.name == "host_segfault" || f.name == "compile_error" || f.name == "host_hang" || f.name == "not_faster")
      fixtures.push_back(std::move(f));
  fs::path subs = dir.path / "submissions", out = dir.path / "out";
  for (const auto& f : fixtures) materialise(f, subs / f.name, {test::fakelab_root()});
  for (const char* s : {"solution_1", "solution_2"}) materialise_solutions(subs / s, {test::fakelab_root()});
  const std::size_t total = fixtures.size() + 2;

  // Start a batch with one worker and kill it (the whole process group) once a student is done and host_hang's gate
  // binary is in its endless loop: that sandbox outlives the grader (bubblewrap drops the parent-death signal).
  auto count_done = [&] {
    std::size_t n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out, ec)) n += fs::exists(e.path() / "result.json");
    return n;
  };
  ProcessSpec ps;
  ps.argv = batch_args(subs, out, tree, sandbox_args(), 1);
  ps.inherit_env = true;
  ps.output = dir.path / "first.log";
  std::map<std::string, fs::file_time_type> done_first;
  std::string how_first_ended;  // for the failure message: why the wait below ended, and after how long
  {
    Process first(ps);
    const auto started = std::chrono::steady_clock::now();
    const auto deadline = started + std::chrono::minutes(10);
    const std::string scratch = (fs::weakly_canonical(out) / ".work" / "").string();
    bool seen = false;
    std::optional<ExitInfo> ended;
    // The worker takes the students in the folders' order (compile_error, host_hang, ...): one is done before
    // host_hang's gate hangs.
    while (!(seen = count_done() >= 1 && processes_naming(scratch, "host_hang/gates/", "--labkit-results")) &&
           !(ended = first.poll()) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ostringstream how;
    how << "the first batch was killed after "
        << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() << " s: "
        << (seen ? "a student done and host_hang's gate running"
                 : ended ? "it had ended by itself (" + ended->describe() + ")" : "10 minutes passed");
    how_first_ended = how.str();
    first.kill_all();
    first.wait();
  }
  INFO(how_first_ended);
  INFO("the first batch's output:\n" << read_file(dir.path / "first.log"));
  std::string first_errors;  // a grader error writes no result.json (a rerun retries the student)
  for (const auto& e : fs::directory_iterator(out))
    if (fs::exists(e.path() / "grader-error.txt"))
      first_errors += e.path().filename().string() + ": " + read_file(e.path() / "grader-error.txt");
  INFO("grader errors of the first batch: " << (first_errors.empty() ? "none" : "\n" + first_errors));
  // What the killed batch left running: its sandboxes outlive it (bubblewrap drops the parent-death signal).
  const std::string scratch = (fs::canonical(out) / ".work" / "").string();
  // The kill above leaves real sandboxes behind when it lands in host_hang's gate run (nearly always); a stand-in
  // makes sure there is one: a process of its own session whose command line names the scratch folder.
  const pid_t stand_in = fork();
  if (stand_in == 0) {
    setsid();
    // Not on the test's output: a stand-in left behind by a failed check below must not keep ctest waiting on it.
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
    const std::string name = scratch + "stand-in";
    execl("/bin/sleep", name.c_str(), "600", static_cast<char*>(nullptr));  // argv[0] names the folder
    _exit(127);
  }
  // Ended on every way out of the test, a failed REQUIRE included.
  struct EndStandIn {
    pid_t pid;
    ~EndStandIn() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } end_stand_in{stand_in};
  for (int i = 0; i < 100 && processes_naming(scratch, "stand-in") == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(processes_naming(scratch, "stand-in") == 1);
  for (const auto& e : fs::directory_iterator(out))
    if (fs::exists(e.path() / "result.json"))
      done_first[e.path().filename().string()] = fs::last_write_time(e.path() / "result.json");
  REQUIRE(done_first.size() >= 1);
  REQUIRE(done_first.size() < total);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // distinguishable modification times

  auto r = run_command(batch_args(subs, out, tree, sandbox_args()), 900);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, ContainsSubstring(std::to_string(done_first.size()) + " already graded"));
  CHECK(count_done() == total);
  CHECK(processes_naming(scratch) == 0);  // the resumed batch ended what the killed one had left running
  CHECK_THAT(r.output, ContainsSubstring("left running"));  // the stand-in among them
  for (const auto& [student, mtime] : done_first) {
    INFO(student);
    CHECK(fs::last_write_time(out / student / "result.json") == mtime);  // not graded twice
  }
  check_against_fixtures(out, fixtures, {"solution_1", "solution_2"});
}

TEST_CASE("with one compile job every healthy student of a batch still gets full marks", "[batch_slots]") {
  // -j 1 (a machine of one CPU, or an instructor's choice) still compiles two students at once: under a dedicated uid
  // per slot their slots must not be a worker's, whose gate runs each end with a sweep of their uid (it killed the
  // compile beside them: the student's steps were graded build_failed).
  test::TempDir dir("onejob");
  GraderTree tree = private_fakelab(dir.path);
  fs::path subs = dir.path / "submissions", out = dir.path / "out";
  std::vector<std::string> names;
  for (int k = 1; k <= 4; ++k) {
    names.push_back("solution_" + std::to_string(k));
    materialise_solutions(subs / names.back(), {test::fakelab_root()});
  }
  auto r = run_command(batch_args(subs, out, tree, sandbox_args(), 1, 1), 1200);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  check_against_fixtures(out, {}, names);
}

TEST_CASE("each compile of a batch has a temporary folder of its own: nvcc's files of one compile are not another's",
          "[batch_slots]") {
  // nvcc names its temporary files after its process id and deletes every file of that prefix as it exits; in a PID
  // namespace (bubblewrap) every compiler has the same id, so the files of a student compiled side by side in one
  // TMPDIR deleted each other's ("tmpxft_00000002_..._fake.compute_90.ptx could not be opened": healthy steps
  // build_failed, two of nine healthy students here at -j 4, more on a GPU machine's 32 jobs). The compiles run
  // through a wrapper that writes the TMPDIR it was given next to its object.
  test::TempDir dir("compiletmp");
  GraderTree tree = private_fakelab(dir.path);
  auto recipe = nlohmann::json::parse(read_file(tree.grading / "lab99.json"));
  const std::string nvcc = load_recipe(tree.grading / "lab99.json").compiler();
  const fs::path wrapper = dir.path / "bin" / "compile-and-record-tmpdir";
  write_script(wrapper, "#!/bin/sh\nobj= prev=\nfor a do [ \"$prev\" = -o ] && obj=$a; prev=$a; done\n"
                        "printf '%s' \"$TMPDIR\" > \"$obj.tmpdir\"\nexec " + nvcc + " \"$@\"\n");
  auto db = nlohmann::json::parse(read_file(recipe["compile_commands"].get<std::string>()));
  for (auto& e : db)
    if (e.contains("command") && starts_with(e["command"].get<std::string>(), nvcc + " "))
      e["command"] = wrapper.string() + e["command"].get<std::string>().substr(nvcc.size());
  write_file_atomic(dir.path / "compile_commands.json", db.dump());
  recipe["compile_commands"] = (dir.path / "compile_commands.json").string();
  write_file_atomic(tree.grading / "lab99.json", recipe.dump(2));
  REQUIRE(load_recipe(tree.grading / "lab99.json").compiler() == wrapper.string());

  fs::path subs = dir.path / "submissions", out = dir.path / "out";
  std::vector<std::string> names;
  for (int k = 1; k <= 6; ++k) {
    names.push_back("solution_" + std::to_string(k));
    materialise_solutions(subs / names.back(), {test::fakelab_root()});
  }
  auto args = batch_args(subs, out, tree, sandbox_args(), 1, 4);  // three files of a student compile side by side
  args.push_back("--keep-scratch");
  auto r = run_command(args, 1200);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  check_against_fixtures(out, {}, names);
  std::size_t seen = 0;
  for (const auto& e : fs::directory_iterator(out / ".work")) {
    if (!fs::is_directory(e.path() / "build" / "obj")) continue;
    std::set<std::string> tmpdirs;
    std::size_t compiles = 0;
    for (const auto& f : fs::recursive_directory_iterator(e.path() / "build" / "obj"))
      if (f.path().extension() == ".tmpdir") {
        ++compiles;
        const std::string t = read_file(f.path());
        INFO(f.path() << ": TMPDIR " << t);
        CHECK(starts_with(t, (e.path() / "build" / "tmp" / "").string()));
        tmpdirs.insert(t);
      }
    CHECK(compiles == 3);
    CHECK(tmpdirs.size() == compiles);  // none shared
    seen += compiles > 0;
  }
  CHECK(seen == names.size());
}

TEST_CASE("a batch grades with the build it started with: a relinked labgrade changes nothing, a rebuilt gate object "
          "stops it before any grade mixes two builds",
          "[batch_build]") {
  // Seven healthy students, one worker. The batch runs from a copy of labgrade and a recipe whose gate objects are
  // copies, so that the test can "rebuild" them without touching the build the other tests use.
  test::TempDir dir("rebuild");
  GraderTree tree = private_fakelab(dir.path);
  auto recipe = nlohmann::json::parse(read_file(tree.grading / "lab99.json"));
  fs::create_directories(dir.path / "objects");
  std::vector<fs::path> objects;
  for (auto& o : recipe["gate_objects"]) {
    objects.push_back(dir.path / "objects" / fs::path(o.get<std::string>()).filename());
    fs::copy_file(o.get<std::string>(), objects.back());
    o = objects.back().string();
  }
  write_file_atomic(tree.grading / "lab99.json", recipe.dump(2));
  const fs::path exe = dir.path / "bin" / "labgrade";
  fs::create_directories(exe.parent_path());
  fs::copy_file(test::labgrade_exe(), exe);
  fs::path subs = dir.path / "submissions", out = dir.path / "out";
  std::vector<std::string> names;
  for (int k = 1; k <= 7; ++k) {
    names.push_back("solution_" + std::to_string(k));
    materialise_solutions(subs / names.back(), {test::fakelab_root()});
  }
  auto done = [&] {
    std::vector<std::string> d;
    for (const auto& n : names)
      if (fs::exists(out / n / "result.json")) d.push_back(n);
    return d;
  };
  ProcessSpec ps;
  ps.argv = batch_args(subs, out, tree, sandbox_args(), 1);
  ps.argv[0] = exe.string();
  ps.inherit_env = true;
  ps.output = dir.path / "first.log";
  std::optional<ExitInfo> ended;
  std::string steps;  // what happened when, for the failure message
  {
    Process first(ps);
    const auto started = std::chrono::steady_clock::now();
    const auto deadline = started + std::chrono::minutes(10);
    auto wait_for = [&](std::size_t n) {
      while (done().size() < n && !(ended = first.poll()) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      steps += std::to_string(done().size()) + " done after " +
               std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()) +
               " s" + (ended ? " (the batch had ended: " + ended->describe() + ")" : "") + "; ";
    };
    // A relink of labgrade: the linker writes a new file in the old one's place. The batch's sandboxed processes
    // start through its private copy, so what comes after grades as before.
    wait_for(1);
    fs::remove(exe);
    write_script(exe, "#!/bin/sh\necho 'a relinked labgrade ran' >&2\nexit 1\n");
    // A rebuilt gate object (same bytes, a new file): the students from here on would link with another build.
    wait_for(3);
    write_file_atomic(objects.front(), read_file(objects.front()));
    steps += "gate object rewritten; ";
    while (!ended && std::chrono::steady_clock::now() < deadline) {
      ended = first.poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!ended) first.kill_all();
  }
  const std::string log = read_file(dir.path / "first.log");
  INFO(steps);
  INFO("the first batch's output:\n" << log);
  REQUIRE(ended);
  const auto graded = done();
  CHECK(graded.size() >= 3);
  REQUIRE(graded.size() < names.size());  // else the rebuild came after the last student: nothing was tested
  CHECK(ended->exited);
  CHECK(ended->code == 1);
  CHECK_THAT(log, ContainsSubstring(objects.front().string() + " was replaced while the batch ran"));
  CHECK_THAT(log, ContainsSubstring("stopped early"));
  CHECK_THAT(log, !ContainsSubstring("a relinked labgrade ran"));
  check_against_fixtures(out, {}, graded);  // every grade written is full marks: none from a mixed build
  std::map<std::string, fs::file_time_type> first_times;
  for (const auto& n : graded) first_times[n] = fs::last_write_time(out / n / "result.json");
  for (const auto& n : names) {
    if (std::count(graded.begin(), graded.end(), n)) continue;
    INFO(n);
    // Left for the rerun: never started, or stopped with a grader error that names the change.
    if (fs::exists(out / n / "grader-error.txt"))
      CHECK_THAT(read_file(out / n / "grader-error.txt"), ContainsSubstring("the build changed"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // distinguishable modification times

  // The rerun (the build done) grades the rest, and only them.
  auto r = run_command(batch_args(subs, out, tree, sandbox_args()), 900);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, ContainsSubstring(std::to_string(graded.size()) + " already graded"));
  check_against_fixtures(out, {}, names);
  for (const auto& [n, t] : first_times) CHECK(fs::last_write_time(out / n / "result.json") == t);
}

TEST_CASE("the inputs a batch grades with: a rewritten, replaced, deleted or new file is a change; others are not",
          "[batch_eta]") {
  test::TempDir dir("inputs");
  fs::create_directories(dir.path / "lab" / "tests" / "deep" / "er" / "still");
  for (const char* f : {"lab/gate.o", "lab/lab.h", "lab/tests/util.cuh", "lab/README.md",
                        "lab/tests/deep/er/still/too_deep.h"})
    write_file_atomic(dir.path / f, "x");
  auto inputs = [&] {
    detail::BuildInputs in;
    in.add(dir.path / "lab/gate.o");
    in.add(dir.path / "lab/later.o");  // not there yet
    in.add_headers(dir.path / "lab");
    return in;
  };
  CHECK(inputs().size() == 4);  // gate.o, later.o, lab.h, util.cuh: no README, nothing four folders down
  CHECK(inputs().first_change().empty());
  {
    auto in = inputs();
    write_file_atomic(dir.path / "lab/README.md", "edited");  // not something a grade comes from
    write_file_atomic(dir.path / "lab/tests/deep/er/still/too_deep.h", "edited");
    CHECK(in.first_change().empty());
  }
  {
    auto in = inputs();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ofstream(dir.path / "lab/lab.h", std::ios::app) << "";  // opened for writing, then closed: no change
    CHECK(in.first_change().empty());
    std::ofstream(dir.path / "lab/lab.h", std::ios::trunc) << "x";  // the same bytes written again in place
    CHECK_THAT(in.first_change(), ContainsSubstring("lab.h was rewritten"));
  }
  {
    auto in = inputs();
    write_file_atomic(dir.path / "lab/tests/util.cuh", "x");  // a new file renamed into place, as a build writes
    CHECK_THAT(in.first_change(), ContainsSubstring("util.cuh was replaced"));
  }
  {
    auto in = inputs();
    write_file_atomic(dir.path / "lab/later.o", "x");
    CHECK_THAT(in.first_change(), ContainsSubstring("later.o appeared"));
  }
  {
    auto in = inputs();
    fs::remove(dir.path / "lab/gate.o");
    CHECK_THAT(in.first_change(), ContainsSubstring("gate.o was deleted"));
  }
}

TEST_CASE("without bubblewrap the batch refuses to grade unless told --sandbox none, and then every report says so", "[batch]") {
  test::TempDir dir("nosandbox");
  GraderTree tree = private_fakelab(dir.path);
  fs::path subs = dir.path / "submissions", out = dir.path / "out";
  materialise_solutions(subs / "solution_1", {test::fakelab_root()});
  // A PATH with the tools labgrade needs but no bwrap: bubblewrap "cannot run here".
  fs::path bin = dir.path / "bin";
  fs::create_directories(bin);
  std::error_code ec;
  for (const char* from : {"/usr/local/cuda/bin", "/usr/local/bin", "/usr/bin", "/bin"})
    for (const auto& e : fs::directory_iterator(from, ec))
      if (e.path().filename() != "bwrap" && !fs::exists(bin / e.path().filename(), ec))
        fs::create_symlink(e.path(), bin / e.path().filename(), ec);
  REQUIRE_FALSE(fs::exists(bin / "bwrap"));
  auto with_path = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"env", "PATH=" + bin.string()});
    return argv;
  };
  auto refused = run_command(with_path(batch_args(subs, out, tree)), 600);
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, ContainsSubstring("refusing to grade untrusted submissions without isolation"));
  CHECK_THAT(refused.output, ContainsSubstring("--sandbox none"));
  CHECK_FALSE(fs::exists(out / "solution_1" / "result.json"));

  auto r = run_command(with_path(batch_args(subs, out, tree, {"--sandbox", "none"})), 600);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string iso = geteuid() == 0 ? "uid-only" : "none";
  CHECK_THAT(r.output, ContainsSubstring("isolation: " + iso));
  CHECK(nlohmann::json::parse(read_file(out / "solution_1" / "result.json"))["isolation"] == iso);
  CHECK_THAT(read_file(out / "solution_1" / "results.json"), ContainsSubstring("Isolation: " + iso));
  CHECK_THAT(read_file(out / "gradebook.csv"), ContainsSubstring("," + iso + "\n"));
  CHECK_THAT(read_file(out / "report.md"), ContainsSubstring("Isolation: " + iso));
}

TEST_CASE("the submissions folder: odd names are refused with a line each, loose entries are named, none merge",
          "[batch_names]") {
  test::TempDir dir("names");
  const fs::path subs = dir.path / "submissions";
  for (const std::string n : {"alice", "bob\x01", "bob\x02", "jos\xE9", "zz", "zz\r", "=x", "'=x", "\x1b[2Jesc",
                              "c1\xC2\x9B", "del\x7F", "tab\tname", ".dave", "junit.xml", "report.md"})
    fs::create_directories(subs / n);
  write_file_atomic(subs / "carol.zip", "PK");
  const detail::SubmissionList list = detail::scan_submissions(subs);
  CHECK(list.students == std::vector<std::string>{"alice", "zz"});  // zz's twin with a \r is refused, not zz
  CHECK(list.refused == 12);
  const std::string lines = join(list.not_graded, "\n");
  INFO(lines);
  CHECK(list.not_graded.size() == 14);
  // A folder named like a class output would stand where that output is written (no class file was written at all).
  CHECK_THAT(lines, ContainsSubstring("submission 'junit.xml': name is one of the class outputs' (junit.xml)"));
  CHECK_THAT(lines, ContainsSubstring("submission 'report.md': name is one of the class outputs'"));
  CHECK_THAT(lines, ContainsSubstring("submission 'bob\\x01': name has control characters, not graded: rename it"));
  CHECK_THAT(lines, ContainsSubstring("submission 'bob\\x02': name has control characters"));
  CHECK_THAT(lines, ContainsSubstring("submission 'jos\\xe9': name is not valid UTF-8, not graded: rename it"));
  CHECK_THAT(lines, ContainsSubstring("submission 'zz\\x0d': name has control characters"));
  CHECK_THAT(lines, ContainsSubstring("submission '=x': name is written like ''=x' in the gradebook"));
  CHECK_THAT(lines, ContainsSubstring("submission ''=x': name is written like '=x' in the gradebook"));
  CHECK_THAT(lines, ContainsSubstring("submission '\\x1b[2Jesc': name has control characters"));
  CHECK_THAT(lines, ContainsSubstring("submission 'c1\\xc2\\x9b': name has control characters"));
  CHECK_THAT(lines, ContainsSubstring("submission 'del\\x7f': name has control characters"));
  CHECK_THAT(lines, ContainsSubstring("submission 'tab\\x09name': name has control characters"));
  CHECK_THAT(lines, ContainsSubstring("not a submission folder: carol.zip (a file; unpack it into a folder)"));
  CHECK_THAT(lines, ContainsSubstring("not a submission folder: .dave (its name starts with '.'"));
  for (char c : lines) CHECK((static_cast<unsigned char>(c) >= 0x20 && c != 0x7F || c == '\n' || c == '\t'));
}

TEST_CASE("a student's binary output still gives a result; odd folder names and loose files are named, not lost",
          "[batch]") {
  test::TempDir dir("oddnames");
  GraderTree tree = private_fakelab(dir.path);
  fs::path subs = dir.path / "submissions", out = dir.path / "out";
  materialise_solutions(subs / "solution_1", {test::fakelab_root()});
  // add() writes bytes that are no UTF-8 (overlong, surrogate, above U+10FFFF, cut off, C1, U+FFFF) and exits.
  const fs::path dump = subs / "af_binary_dump";
  materialise_solutions(dump, {test::fakelab_root()});
  const fs::path fake = dump / "labs/99_fake/student/fake.cu";
  const std::string body =
      "#include <cstdio>\n#include <cstdlib>\nnamespace {\nconst unsigned char kDump[] = {0x41, 0xC0, 0x80, 0xED, 0xA0, "
      "0x80, 0xF4, 0x90, 0x80, 0x80, 0xC2, 0x9B, 0xEF, 0xBF, 0xBF, 0x1B, 0x5B, 0x32, 0x4A, 0x0A, 0xE2, 0x82};\n}\n";
  std::string text = read_file(fake);
  REQUIRE(contains(text, "int add(int a, int b) { return a + b; }"));
  text = replace_all(text, "int add(int a, int b) { return a + b; }",
                     "int add(int a, int b) {\n  for (int k = 0; k < 100; ++k) std::fwrite(kDump, 1, sizeof kDump, "
                     "stdout);\n  std::fflush(stdout);\n  std::exit(3);\n  return a + b;\n}");
  write_file_atomic(fake, body + text);
  for (const std::string n : {"bob\x01", "jos\xE9"}) materialise_solutions(subs / n, {test::fakelab_root()});
  fs::create_directories(subs / ".dave");
  write_file_atomic(subs / "carol.zip", "PK");

  auto r = run_command(batch_args(subs, out, tree, sandbox_args(), 1), 900);
  INFO(r.output);
  CHECK(r.exit_code == 1);  // two folders were not graded
  CHECK_THAT(r.output, ContainsSubstring("submission 'bob\\x01': name has control characters, not graded: rename it"));
  CHECK_THAT(r.output, ContainsSubstring("submission 'jos\\xe9': name is not valid UTF-8"));
  CHECK_THAT(r.output, ContainsSubstring("not a submission folder: carol.zip (a file; unpack it into a folder)"));
  CHECK_THAT(r.output, ContainsSubstring("not a submission folder: .dave"));
  CHECK_FALSE(contains(r.output, "cannot write"));
  REQUIRE(fs::exists(out / "af_binary_dump" / "result.json"));
  const auto result = submission_from_json(nlohmann::json::parse(read_file(out / "af_binary_dump" / "result.json")));
  CHECK(result.score() > 0);
  CHECK(fs::exists(out / "solution_1" / "result.json"));
  CHECK_FALSE(fs::exists(out / "bob\x01"));
  const std::string csv = read_file(out / "gradebook.csv");
  CHECK_THAT(csv, ContainsSubstring("af_binary_dump,99,cpu.add,crashed"));
  CHECK_FALSE(contains(csv, "bob"));
  const std::string md = read_file(out / "report.md");
  CHECK_THAT(md, ContainsSubstring("## Not graded"));
  CHECK_THAT(md, ContainsSubstring("carol.zip"));
  CHECK_THAT(md, ContainsSubstring("name has control characters"));
  CHECK_THAT(md, ContainsSubstring("## af_binary_dump"));
}

TEST_CASE("a process's niceness is raised by its limits, and unprivileged it cannot lower it", "[sandbox]") {
  // A batch's compiles run at niceness +5 beside the gate runs of earlier students.
  test::TempDir dir("nice");
  errno = 0;
  const int own = getpriority(PRIO_PROCESS, 0);
  REQUIRE(errno == 0);
  ProcessSpec ps;
  ps.cwd = dir.path;
  ps.output = dir.path / "out.txt";
  ps.inherit_env = true;
  ps.limits.nice = 7;
  // The child's own niceness, then what an attempt to lower it gives (refused without privilege, and GNU nice runs
  // the command anyway; root may, which is why a batch's compiles run under a dedicated uid where it has one).
  ps.argv = {"/bin/sh", "-c", "nice; nice -n -5 nice 2>/dev/null"};
  const auto done = run_limited(ps, 30);
  REQUIRE(done.exit.exited);
  const auto lines = split_lines(read_file(ps.output));
  REQUIRE(lines.size() >= 2);
  CHECK(lines[0] == std::to_string(std::min(19, own + 7)));
  if (geteuid() != 0) CHECK(lines[1] == lines[0]);
  ps.limits.nice = 0;  // the default leaves it as it is
  ps.argv = {"/bin/sh", "-c", "nice"};
  run_limited(ps, 30);
  CHECK(split_lines(read_file(ps.output)).at(0) == std::to_string(own));
}

TEST_CASE("a batch with more slots than one block of uids holds every block its uids fall in", "[sandbox]") {
  // 150 slots take two blocks of 100; a second reservation (1 slot, or 150) must not start inside the first's range.
  SandboxSettings wide, narrow, wide2;
  wide.drop_uid = narrow.drop_uid = wide2.drop_uid = true;
  reserve_uid_block(wide, 150);
  reserve_uid_block(narrow, 1);
  reserve_uid_block(wide2, 150);
  auto disjoint = [](int a, int na, int b, int nb) { return a + na <= b || b + nb <= a; };
  CHECK(disjoint(wide.uid_base, 150, narrow.uid_base, 1));
  CHECK(disjoint(wide.uid_base, 150, wide2.uid_base, 150));
  CHECK(disjoint(narrow.uid_base, 1, wide2.uid_base, 150));
}

TEST_CASE("a block of sandbox uids is swept when taken: a dead grader's stragglers do not live on", "[sandbox]") {
  // A child reserves a block, leaves a process running under its first uid (an exec'd program, as a gate would
  // be: the block's lock descriptors close on exec) and ends without its sweeps, as a killed grader would. The next
  // reservation of that block must end the straggler, which would otherwise share the next submission's uid.
  if (geteuid() != 0) SKIP("needs root: the dedicated uids");
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    SandboxSettings s;
    s.drop_uid = true;
    reserve_uid_block(s, 1);
    const pid_t straggler = fork();
    if (straggler == 0) {
      if (setsid() < 0 || setresgid(s.uid_base, s.uid_base, s.uid_base) != 0 ||
          setresuid(s.uid_base, s.uid_base, s.uid_base) != 0)
        _exit(1);
      execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
      _exit(1);
    }
    const int msg[2] = {s.uid_base, static_cast<int>(straggler)};
    (void)!write(fds[1], msg, sizeof msg);
    _exit(0);
  }
  close(fds[1]);
  int msg[2] = {-1, -1};
  const bool got = read(fds[0], msg, sizeof msg) == static_cast<ssize_t>(sizeof msg);
  close(fds[0]);
  waitpid(child, nullptr, 0);
  REQUIRE(got);
  const pid_t straggler = msg[1];
  REQUIRE(straggler > 0);
  auto alive = [straggler] {  // running, not a zombie waiting for init
    std::ifstream stat_file("/proc/" + std::to_string(straggler) + "/stat");
    std::string line;
    if (!std::getline(stat_file, line)) return false;
    const auto close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
  };
  SandboxSettings next;
  next.drop_uid = true;
  reserve_uid_block(next, 1);
  if (next.uid_base != msg[0]) {
    kill(straggler, SIGKILL);
    SKIP("another process took the block in between (uids " << msg[0] << " and " << next.uid_base << ")");
  }
  // SIGKILL is delivered when the straggler is next scheduled: allow a busy machine a moment.
  for (int i = 0; i < 500 && alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const bool survived = alive();
  if (survived) kill(straggler, SIGKILL);
  CHECK_FALSE(survived);
}

TEST_CASE("a block of sandbox uids held from another lock folder (a chroot) is not taken again", "[sandbox]") {
  // A grader in a chroot (a CI rehearsal on the same machine) has its own /run/lock: it holds a block through the
  // block's abstract socket, which this process sees, and not through a lock file this process could see.
  SandboxSettings first;
  first.drop_uid = true;
  reserve_uid_block(first, 1);
  const int next = first.uid_base + 100;  // the block a second reservation would otherwise get (blocks of 100 uids)
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = "labgrade-uids-" + std::to_string(next);
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const bool held = bind(fd, reinterpret_cast<const sockaddr*>(&addr),
                         static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())) == 0;
  SandboxSettings second;
  second.drop_uid = true;
  reserve_uid_block(second, 1);
  close(fd);
  CHECK(second.uid_base != first.uid_base);
  if (held) CHECK(second.uid_base != next);  // else someone else holds it, and it is skipped anyway
}

TEST_CASE("the batch option --gpus: a worker per entry, GPUs joined by + go to one worker, no GPU belongs to two",
          "[batch_gpus]") {
  using detail::parse_gpu_groups;
  using V = std::vector<std::string>;
  CHECK(parse_gpu_groups("0,1") == V{"0", "1"});
  CHECK(parse_gpu_groups("0+1") == V{"0,1"});  // CUDA_VISIBLE_DEVICES of the one worker
  CHECK(parse_gpu_groups(" 2 + 3 , 0+1 ,") == V{"2,3", "0,1"});
  CHECK(parse_gpu_groups("GPU-8f2e+GPU-a1b0") == V{"GPU-8f2e,GPU-a1b0"});  // UUIDs as CUDA_VISIBLE_DEVICES takes them
  CHECK(parse_gpu_groups("") == V{});
  CHECK_THROWS_AS(parse_gpu_groups("0,0"), UserError);  // the user's mistake, said as such
  CHECK_THROWS_WITH(parse_gpu_groups("0+1,1"), ContainsSubstring("GPU 1 is named twice"));
  CHECK_THROWS_WITH(parse_gpu_groups("0,0"), ContainsSubstring("GPU 0 is named twice"));
  CHECK_THROWS_WITH(parse_gpu_groups("0+0"), ContainsSubstring("GPU 0 is named twice"));
  CHECK_THROWS_WITH(parse_gpu_groups("0+,1"), ContainsSubstring("`0+` has an empty GPU"));
}

TEST_CASE("a lab sees only the GPUs its rubric asks for, of its worker's", "[batch_gpus]") {
  using detail::gpus_for_lab;
  CHECK(gpus_for_lab("0,1", 1) == "0");  // lab 01 on a worker of two: one GPU, nothing to split a timed step over
  CHECK(gpus_for_lab("0,1", 2) == "0,1");
  CHECK(gpus_for_lab("3", 2) == "3");  // fewer than it needs: its multi-GPU gates skip (and the batch warned)
  CHECK(gpus_for_lab("2,3,4,5", 2) == "2,3");
  CHECK(gpus_for_lab("", 2) == "");  // no GPU
  CHECK(gpus_for_lab("0,1", 0) == "0");
}

TEST_CASE("a batch warns when a lab needs more GPUs than its workers see", "[batch_gpus]") {
  using detail::multi_gpu_warnings;
  const std::vector<detail::LabGpus> labs = {{"01", 1, "labs/01_matmul/rubric.toml"},
                                             {"08", 2, "labs/08_multi_gpu_cg/rubric.toml"},
                                             {"09", 2, "labs/09_summa/rubric.toml"}};
  const auto one = multi_gpu_warnings(labs, 1);
  REQUIRE(one.size() == 2);
  CHECK_THAT(one[0], ContainsSubstring("lab 08 needs 2 GPUs"));
  CHECK_THAT(one[0], ContainsSubstring("a worker here sees 1"));
  CHECK_THAT(one[0], ContainsSubstring("--gpus 0+1"));
  CHECK_THAT(one[0], ContainsSubstring("labs/08_multi_gpu_cg/rubric.toml"));
  CHECK_THAT(one[1], ContainsSubstring("lab 09 needs 2 GPUs"));
  CHECK(multi_gpu_warnings(labs, 2).empty());  // --gpus 0+1
  CHECK(multi_gpu_warnings(labs, 0).empty());  // no GPU: every GPU gate says it was skipped, and why
}

TEST_CASE("a batch warns when its output disk cannot hold every lab at once filled to --disk-gib", "[batch_gpus]") {
  using detail::disk_space_warning;
  constexpr std::uintmax_t GiB = 1ull << 30;
  // Two workers, nine labs a student: 18 folders, 36 GiB at 2 GiB a lab.
  CHECK(disk_space_warning(40 * GiB, 2, 18).empty());
  const std::string w = disk_space_warning(30 * GiB, 2, 18);
  CHECK_THAT(w, ContainsSubstring("30.0 GiB free"));
  CHECK_THAT(w, ContainsSubstring("18 lab folder(s)"));
  CHECK_THAT(w, ContainsSubstring("36.0 GiB"));
  CHECK(disk_space_warning(1 * GiB, 0, 12).empty());  // --disk-gib 0: not watched, nothing to promise
  CHECK_FALSE(disk_space_warning(1 * GiB, 2, 0).empty());  // at least one run
}

TEST_CASE("a batch's compiles and its workers never share a uid slot for any -j or --workers", "[batch_eta]") {
  // Every slot's processes are swept after each compile and around each speed run: a compile slot that was also a
  // worker's would kill that worker's gate runs (with -j 1 it was: the workers' slots began at the number of jobs).
  for (int jobs = 1; jobs <= 130; ++jobs)
    for (int workers = 1; workers <= 8; ++workers) {
      INFO("-j " << jobs << " --workers " << workers);
      const auto s = detail::batch_slots(jobs, workers);
      CHECK(s.compilers >= 2);  // one student links or is inspected while the next compiles
      CHECK(s.compilers == std::max(2, jobs / 4));
      std::set<int> used;
      for (int c = 0; c < s.compilers; ++c) used.insert(c);
      for (int w = 0; w < workers; ++w) {
        CHECK(s.worker_slot(w) < s.reserved);
        CHECK(used.insert(s.worker_slot(w)).second);
      }
      CHECK(static_cast<int>(used.size()) == s.reserved);
    }
}

TEST_CASE("a batch keeps whole cores for each worker's speed gates where it has CPUs to spare", "[batch_eta]") {
  auto range = [](int a, int b) {
    std::vector<int> v;
    for (int c = a; c < b; ++c) v.push_back(c);
    return v;
  };
  const auto alone = [](int c) { return std::vector<int>{c}; };
  const auto ht16 = [](int c) { return std::vector<int>{c % 16, c % 16 + 16}; };  // CPU c and c+16 share a core
  SECTION("two CPUs (CI), or fewer than 8 per worker: nothing kept") {
    for (const auto& [n, workers] : std::vector<std::pair<int, int>>{{2, 1}, {7, 1}, {12, 2}, {30, 4}}) {
      auto p = detail::plan_cpus(range(0, n), workers, alone);
      CHECK(p.speed.empty());
      CHECK(p.shared == range(0, n));
      CHECK(p.runs_of(0) == range(0, n));
    }
  }
  SECTION("one GPU, 16 CPUs: 4 kept, the highest") {
    auto p = detail::plan_cpus(range(0, 16), 1, alone);
    REQUIRE(p.speed.size() == 1);
    CHECK(p.speed[0] == range(12, 16));
    CHECK(p.shared == range(0, 12));
    CHECK(p.runs_of(0) == range(0, 16));
  }
  SECTION("8 CPUs: 2 kept") {
    auto p = detail::plan_cpus(range(0, 8), 1, alone);
    CHECK(p.speed == std::vector<std::vector<int>>{{6, 7}});
  }
  SECTION("two workers on 32 hyper-threads: whole cores, none in two sets") {
    auto p = detail::plan_cpus(range(0, 32), 2, ht16);
    REQUIRE(p.speed.size() == 2);
    CHECK(p.speed[0] == std::vector<int>{14, 15, 30, 31});
    CHECK(p.speed[1] == std::vector<int>{12, 13, 28, 29});
    CHECK(p.shared.size() == 24);
    std::set<int> seen;
    for (const auto& set : {p.shared, p.speed[0], p.speed[1]})
      for (int c : set) CHECK(seen.insert(c).second);
    auto r1 = p.runs_of(1);
    CHECK(std::count(r1.begin(), r1.end(), 28) == 1);
    CHECK(std::count(r1.begin(), r1.end(), 30) == 0);  // not the other worker's
  }
  SECTION("only the CPUs the grader may use") {
    std::vector<int> odd;
    for (int c = 1; c < 40; c += 2) odd.push_back(c);  // 20 CPUs
    auto p = detail::plan_cpus(odd, 1, alone);
    CHECK(p.speed == std::vector<std::vector<int>>{{33, 35, 37, 39}});
  }
}

TEST_CASE("the batch's ETA follows the slower stage of the pipeline", "[batch_eta]") {
  using detail::batch_eta;
  // Measured on 2 cores (16 copies of the fake lab's solution, -j 2, one worker): every student compiled in about
  // 4.4 s and ran in 0.3 s; after the first, the other 15 took 33.1 s. Elapsed over done had said 76 s.
  CHECK(batch_eta(15, 15, 4.4, 0.3, 2, 1) == Catch::Approx(33.3).margin(0.1));
  // One GPU, runs of 90 s: the compiles keep ahead and the GPU sets the pace; two GPUs halve it (the last of an odd
  // count runs alone).
  CHECK(batch_eta(99, 97, 45, 90, 16, 1) == Catch::Approx(99 * 90.0));
  CHECK(batch_eta(99, 97, 45, 90, 16, 2) == Catch::Approx(50 * 90.0));
  // Fewer students left than jobs: each still needs its own compile, then its run.
  CHECK(batch_eta(1, 1, 45, 90, 16, 2) == Catch::Approx(135));
  CHECK(batch_eta(0, 0, 45, 90, 16, 2) == 0);
  // Measured on an H200 (three reference workbooks, 16 jobs, one GPU): all three compiled at once (49 s), then ran
  // one after another (88 s each). After the first, the two left were compiled already and took 177 s; counting
  // their compiles again had said 179 s, and after the second 137 s for a run of 90 s.
  CHECK(batch_eta(2, 0, 48.6, 88.5, 16, 1) == Catch::Approx(177));
  CHECK(batch_eta(1, 0, 48.8, 88, 16, 1) == Catch::Approx(88));
  // Measured on two H100s (six reference workbooks, labs 01-07, one worker per GPU): the students end in pairs.
  // After the third, the fourth had run 45.8 s of a mean 59.3 s, and the last two were compiled; the batch ended
  // 63 s later (without the run under way, 89 s had been the estimate). After the fifth, the sixth had run 43.8 s of
  // a mean 57.2 s and ended 10 s later (estimated 57 s before).
  CHECK(batch_eta(3, 0, 32.7, 59.3, 4, 2, {45.8}) == Catch::Approx(59.3 - 45.8 + 59.3));
  CHECK(batch_eta(1, 0, 39.2, 57.2, 4, 2, {43.8}) == Catch::Approx(57.2 - 43.8));
  // A run past the mean ends any moment; the running list never counts more students than remain or workers.
  CHECK(batch_eta(1, 0, 10, 60, 4, 2, {75}) == 0);
  CHECK(batch_eta(2, 0, 10, 60, 4, 1, {30, 30}) == Catch::Approx(30 + 60));
}

TEST_CASE("a batch's cuobjdump writes to a file the grader opens, read back and removed; past the size limit or "
          "ended by a signal, a note asks to read the code", "[sass]") {
  test::TempDir dir{"sass_runner"};
  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  const fs::path fake = dir.path / "cuobjdump";
  const auto dump_with = [&](const std::string& body) {
    std::ofstream(fake) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(fake, fs::perms::owner_all);
    setenv("PATH", (dir.path.string() + ":" + saved).c_str(), 1);
    ProcessSpec ps;
    ps.cwd = dir.path;
    ps.inherit_env = true;
    const SassDump d = dump_sass(dir.path / "gates", detail::sandboxed_sass_runner(ps, dir.path / "lab01.sass.txt"));
    setenv("PATH", saved.c_str(), 1);
    CHECK_FALSE(fs::exists(dir.path / "lab01.sass.txt"));
    return d;
  };
  const SassDump good = dump_with(
      "[ \"$1\" = --dump-sass ] && [ \"$2\" = '" + (dir.path / "gates").string() + "' ] || exit 2\n"
      "printf 'arch = sm_90\\n\\t\\tFunction : _Z1kv\\n        /*0000*/   LDS R1, [R2] ;\\n'");
  REQUIRE(good.code);
  CHECK(good.code->at("_Z1kv").at("sm_90").opcodes.count("LDS") == 1);
  const SassDump crashed = dump_with("echo 'reading the ELF'; kill -SEGV $$");
  CHECK_FALSE(crashed.code);
  CHECK(crashed.review);
  CHECK_THAT(crashed.why_not, Catch::Matchers::ContainsSubstring("signal 11"));
  // The file-size limit ends a dump one byte past what is read (SIGXFSZ); what was written says why.
  const SassDump big = dump_with("head -c 67108865 /dev/zero; echo more");
  CHECK_FALSE(big.code);
  CHECK(big.review);
  CHECK_THAT(big.why_not, Catch::Matchers::ContainsSubstring("over 64 MiB"));
}

TEST_CASE("take_back never follows a link the slot's processes left: a folder elsewhere keeps its mode",
          "[sandbox]") {
  test::TempDir dir("take_back");
  const fs::path build = dir.path / "build", victim = dir.path / "elsewhere";
  fs::create_directories(build / "obj");
  fs::create_directories(victim);
  ::chmod(victim.c_str(), 01700);
  ::chmod((build / "obj").c_str(), 0700);
  fs::create_directory_symlink(victim, build / "obj" / "link");
  SandboxSettings s;
  s.drop_uid = true;
  s.uid_base = 61900;
  take_back(build, &s);
  struct stat st {};
  REQUIRE(::lstat(victim.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 01700);  // root opened it to everyone and dropped the sticky bit through the link
  REQUIRE(::lstat((build / "obj").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);  // the build's own folders are the grader's again
}
