#include "batch.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "devices.h"
#include "grade.h"
#include "objcheck.h"
#include "runner.h"
#include "sandbox.h"
#include "stepbuild.h"
#include "writers.h"

namespace labgrade {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint64_t kGiB = 1ull << 30;
const char* const kReserved[] = {"gradebook.csv", "junit.xml", "report.md"};

struct LabPlan {
  Recipe recipe;
  labkit::Rubric rubric;
  bool hidden = false;
  fs::path gate_rubric;  // what the gate binary reads (gate_rubric_text): OUT/.work/rubrics/labNN.toml
  ObjPolicy objects;     // what the student's objects may define (objcheck.h)
};

// One student on its way through the pipeline.
struct Submission {
  std::string student;
  fs::path folder;      // the submission (never written)
  fs::path scratch;     // OUT/.work/<n>-<student> (scratch_name)
  fs::path result_dir;  // OUT/<student>
  SubmissionResult result;
  std::vector<fs::path> exes;  // per lab: the linked gate binary, empty when the lab did not build
};

std::string lab_tag(const Recipe& r) { return "lab" + r.lab; }

// OUT/.work/<n>-<student as a safe file name>: unique by n, readable.
std::string scratch_name(std::size_t n, const std::string& student) {
  return std::to_string(n) + "-" + safe_file_name(student);
}

// OUT/<student>/result.json of a batch, when the student has been graded and it can be read.
std::optional<SubmissionResult> read_result(const fs::path& out, const std::string& student) {
  fs::path f = out / student / "result.json";
  if (!fs::exists(f)) return std::nullopt;
  try {
    return submission_from_json(nlohmann::json::parse(read_file(f)));
  } catch (const std::exception& e) {
    std::cerr << "labgrade: warning: unreadable " << f.string() << ": " << e.what() << "\n";
    return std::nullopt;
  }
}

void write_class_files(const std::vector<SubmissionResult>& all, const fs::path& out, const std::string& title) {
  write_outputs(all,
                {"", (out / "junit.xml").string(), (out / "gradebook.csv").string(), (out / "report.md").string()},
                title);
}

// The students (subfolders, dot folders excluded) of a submissions or output folder, sorted.
std::vector<std::string> subfolders(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && !starts_with(e.path().filename().string(), "."))
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void copy_file_limited(const fs::path& from, const fs::path& to, std::size_t max_bytes) {
  int in = ::open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return;
  struct stat st {};
  if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(in);
    return;
  }
  std::string data(std::min<std::size_t>(static_cast<std::size_t>(st.st_size), max_bytes), '\0');
  ssize_t got = ::read(in, data.data(), data.size());
  ::close(in);
  data.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  write_file_atomic(to, data);
}

class Batch {
 public:
  explicit Batch(const BatchOptions& o) : opts_(o) {}
  int run();

 private:
  void setup();
  void preflight();
  std::vector<std::pair<std::string, std::string>> environment(const fs::path& writable, const std::string& gpu) const;
  void compile(Submission& s, int slot);
  std::string inspect_object(ProcessSpec ps, const LabPlan& plan, const std::string& src, const fs::path& obj);
  void run_gates_of(Submission& s, int slot, const std::string& gpu);
  void finish(Submission& s);
  void write_class_outputs();

  BatchOptions opts_;
  Build build_;
  std::vector<LabPlan> labs_;
  SandboxSettings sandbox_;
  std::vector<std::string> gpus_;
  int jobs_ = 1, workers_ = 1;
  std::vector<std::string> students_, pending_;
  int lock_fd_ = -1;
  std::string nm_, objdump_;

  std::mutex mu_;
  std::size_t done_ = 0, not_full_ = 0, errors_ = 0;
  Clock::time_point start_;
};

}  // namespace

std::string copy_student_sources(const fs::path& submission, const Recipe& recipe, const fs::path& dest,
                                 bool* not_submitted, std::vector<bool>* present) {
  if (not_submitted) *not_submitted = false;
  if (present) present->assign(recipe.student_sources.size(), false);
  // A lab of which the submission has no student file at all was not submitted: that is not a build failure.
  bool any = false;
  std::vector<std::string> expected;
  for (const auto& src : recipe.student_sources) {
    struct stat st {};
    expected.push_back("labs/" + recipe.name + "/student/" + src);
    any = any || ::lstat((submission / expected.back()).c_str(), &st) == 0;
  }
  if (!any) {
    if (not_submitted) *not_submitted = true;
    return "not submitted: the submission has no " + join(expected, ", ") + " (lab " + recipe.lab + ")";
  }
  for (std::size_t k = 0; k < recipe.student_sources.size(); ++k) {
    const std::string& src = recipe.student_sources[k];
    // Each step is checked with lstat: a symbolic link anywhere (labs/, the lab folder, student/) could point at
    // the solutions or at another student's work.
    fs::path rel = fs::path("labs") / recipe.name / "student" / src;
    fs::path at = submission;
    bool absent_step = false;
    std::string shown = "labs/" + recipe.name + "/student/" + src;
    for (auto it = rel.begin(); it != rel.end(); ++it) {
      at /= *it;
      struct stat st {};
      const bool last = std::next(it) == rel.end();
      if (::lstat(at.c_str(), &st) != 0) {
        // A missing step file costs that step only (build_lab links the skeleton's in its place); a missing file
        // of the whole lab, the lab.
        if (last && present && !step_of_source(src).empty()) {
          absent_step = true;
          break;
        }
        return shown + " is missing (the lab's other student files are there)";
      }
      if (S_ISLNK(st.st_mode)) return at.lexically_relative(submission).string() + " is a symbolic link: not accepted";
      if (!last && !S_ISDIR(st.st_mode)) return at.lexically_relative(submission).string() + " is not a folder";
      if (last && !S_ISREG(st.st_mode)) return shown + " is not a regular file";
      if (last && st.st_size > (4 << 20)) return shown + " is larger than 4 MiB";
    }
    if (absent_step) continue;
    fs::create_directories((dest / src).parent_path());
    copy_file_limited(at, dest / src, 4 << 20);
    if (present) (*present)[k] = true;
  }
  return "";
}

void Batch::setup() {
  std::error_code ec;
  if (!fs::is_directory(opts_.submissions, ec)) throw UserError(opts_.submissions.string() + " is not a folder");
  fs::create_directories(opts_.out);
  opts_.out = fs::canonical(opts_.out);
  opts_.submissions = fs::canonical(opts_.submissions);
  if (opts_.out == opts_.submissions || starts_with(opts_.out.string(), (opts_.submissions / "").string()))
    throw UserError("--out must not be inside the submissions folder");

  // Two batches writing the same folder would grade students twice and race on the files.
  lock_fd_ = ::open((opts_.out / ".labgrade.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0 || flock(lock_fd_, LOCK_EX | LOCK_NB) != 0)
    throw UserError("another labgrade batch is writing " + opts_.out.string());

  BuildOptions bo = opts_.build;
  if (bo.root.empty()) {
    auto root = find_repo_root(fs::current_path());
    if (!root) root = find_repo_root(self_exe().parent_path());
    if (!root) throw UserError("run labgrade batch inside the lab workbook (the grader's own tree)");
    bo.root = *root;
  }
  if (!opts_.gpus.empty()) {
    for (auto& g : split(opts_.gpus, ','))
      if (!trim(g).empty()) gpus_.push_back(trim(g));
    bo.have_gpu = true;
  } else {
    CudaInfo cuda = query_cuda();
    // CUDA numbers the GPUs it sees from 0. When this process was itself limited to some GPUs (Slurm, a user's
    // CUDA_VISIBLE_DEVICES=2,3), index i is the i-th entry of that list, and that entry is what each worker
    // must be given: "0" would name the machine's first GPU again.
    std::vector<std::string> inherited;
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"))
      for (auto& e : split(v, ','))
        if (!trim(e).empty()) inherited.push_back(trim(e));
    for (const auto& g : cuda.gpus)
      gpus_.push_back(static_cast<std::size_t>(g.index) < inherited.size() ? inherited[g.index]
                                                                          : std::to_string(g.index));
    bo.have_gpu = cuda.ok;
    if (!cuda.ok) std::cerr << "labgrade: " << cuda.error << ": GPU gates will be skipped\n";
  }
  build_ = prepare_build(bo);
  for (const auto& r : select_labs(load_recipes(build_.grading_dirs), opts_.labs)) {
    LabPlan p;
    p.recipe = r;
    try {
      p.rubric = labkit::load_rubric(r.rubric.string());
    } catch (const labkit::RubricError& e) {
      throw UserError(std::string("lab ") + r.lab + ": " + e.what());
    }
    p.hidden = lab_has_hidden_tests(r) && !opts_.no_hidden;
    labs_.push_back(std::move(p));
  }
  if (labs_.empty()) throw UserError("no grading recipes in " + build_.grading_dirs.front().string());

  // The gate objects and libraries are built once, here; per submission only its own files are compiled.
  if (!bo.no_build) {
    for (const auto& l : labs_) {
      for (const auto& t : {l.recipe.grading_target, l.recipe.solution_target}) {
        if (t.empty()) continue;
        std::cerr << "labgrade: building " << t << "\n";
        auto b = build_target(build_, t);
        // Not fatal: only the gate objects and libraries matter here, and they may have built even when the
        // skeleton or the solution of a lab that is being written does not.
        if (!b.ok) std::cerr << "labgrade: warning: " << t << " does not build:\n" << b.diagnostics << "\n";
      }
    }
  }
  for (const auto& l : labs_)
    for (const auto* list : {&l.recipe.gate_objects, &l.recipe.skeleton_objects, &l.recipe.link_libraries})
      for (const auto& f : *list)
        if (!f.empty() && f[0] == '/' && !fs::exists(f))
          throw UserError("lab " + l.recipe.lab + ": " + f +
                          " does not exist (build the lab first, or drop --no-build)");

  // The static check of student objects (objcheck.h) needs binutils, and the names the gate binary's shared
  // libraries export (a weak definition of one of those in a student object would replace it).
  auto nm = find_program("nm"), objdump = find_program("objdump");
  if (!nm || !objdump) throw UserError("nm and objdump (binutils) are needed to check student objects before linking");
  nm_ = nm->string();
  objdump_ = objdump->string();
  for (auto& l : labs_) {
    std::vector<std::string> shared;
    for (const auto& f : l.recipe.link_libraries)
      if (!f.empty() && f[0] == '/' && contains(fs::path(f).filename().string(), ".so")) shared.push_back(f);
    if (!l.recipe.link.empty())  // the C and C++ libraries the linker will use
      for (const char* lib : {"libstdc++.so", "libc.so.6", "libm.so.6"}) {
        auto r = run_command({l.recipe.link.front(), std::string("-print-file-name=") + lib}, 30);
        if (r.exit_code == 0 && fs::path(trim(r.output)).is_absolute()) shared.push_back(trim(r.output));
      }
    l.objects.lab_namespace = "lab" + l.recipe.lab;
    l.objects.shared_exports = exported_symbols(shared, nm_);
  }

  // The CPU references start a thread per core, and the default memory and race checks run two gate processes
  // (memcheck and racecheck) at once under the same uid: room for both, each with a thread per core.
  if (opts_.max_processes <= 0)
    opts_.max_processes = std::max(256, 4 * static_cast<int>(std::thread::hardware_concurrency()) + 64);
  std::uint64_t mem = static_cast<std::uint64_t>(opts_.memory_gib * kGiB);
  sandbox_ = detect_sandbox(opts_.sandbox, mem, static_cast<std::uint64_t>(opts_.max_processes));
  // "auto" must never quietly mean "nothing": without bubblewrap a submission can #include the reference
  // solution or read the hidden gates, so grading untrusted work that way takes an explicit --sandbox none.
  if (opts_.sandbox == "auto" && sandbox_.mode != SandboxMode::bwrap)
    throw UserError("refusing to grade untrusted submissions without isolation: bubblewrap cannot run here (" +
                    (sandbox_.notes.empty() ? std::string("see labgrade doctor") : sandbox_.notes.front()) +
                    "). Without it a submission can read solutions/ and the hidden gates. Fix bubblewrap, or pass "
                    "--sandbox none to grade anyway (" +
                    (sandbox_.drop_uid ? "as root: a dedicated uid and no network, nothing more"
                                       : "not root: no isolation at all") +
                    "; every report will say so)");
  std::set<fs::path> ro = {build_.root, build_.dir, sandbox_.helper.parent_path()};
  for (const auto& l : labs_)
    for (const auto& p : l.recipe.referenced_paths()) ro.insert(p);
  fs::path nvcc = labs_.front().recipe.compiler();  // the toolkit (when it is not below /usr)
  if (nvcc.is_absolute() && fs::exists(nvcc, ec)) ro.insert(fs::canonical(nvcc, ec).parent_path().parent_path());
  if (const char* ld = std::getenv("LD_LIBRARY_PATH"))
    for (const auto& d : split(ld, ':'))
      if (!d.empty() && d[0] == '/') ro.insert(d);
  // Library folders the dynamic linker is configured with (containers put the driver's libcuda in places like
  // /usr/local/nvidia/lib64).
  for (const auto& conf : fs::directory_iterator("/etc/ld.so.conf.d", ec)) {
    std::ifstream in(conf.path());
    for (std::string line; std::getline(in, line);)
      if (starts_with(trim(line), "/") && fs::is_directory(trim(line), ec)) ro.insert(trim(line));
  }
  sandbox_.ro_paths.assign(ro.begin(), ro.end());
  // Inside the sandbox: no solutions (sources, objects, libraries, binaries of any build), no other student's
  // work, no grading outputs.
  using Overlay = SandboxSettings::Overlay;
  std::set<fs::path> hide = {opts_.out, opts_.submissions, build_.root / "solutions",
                             build_.root / "grader" / "fixtures"};
  for (const auto& l : labs_) hide.insert(l.recipe.lab_dir.parent_path().parent_path() / "solutions");
  // The hidden gates' sources and the rubric files (titles, hints and thresholds of the hidden gates) of every
  // lab: the gate binary reads its own copy (gate_rubric_text, below), compilers need neither.
  std::set<fs::path> lab_dirs;
  for (const auto& e : fs::directory_iterator(build_.root / "labs", ec))
    if (e.is_directory(ec)) lab_dirs.insert(e.path());
  for (const auto& l : labs_) {
    lab_dirs.insert(l.recipe.lab_dir);
    hide.insert(l.recipe.rubric);
  }
  for (const auto& p : ro) lab_dirs.insert(p);  // the recipes' -I folders: `#include "tests/hidden/..."` finds them
  for (const auto& d : lab_dirs)
    for (const auto& p : {d / "tests" / "hidden", d / "rubric.toml"})
      if (fs::exists(p, ec)) hide.insert(p);
  fs::path rubrics = opts_.out / ".work" / "rubrics";
  fs::create_directories(rubrics);
  for (auto& l : labs_) {
    l.gate_rubric = rubrics / (lab_tag(l.recipe) + ".toml");
    write_file_atomic(l.gate_rubric, gate_rubric_text(read_file(l.recipe.rubric), true));
    ::chmod(l.gate_rubric.c_str(), 0644);
  }
  for (const auto& e : fs::directory_iterator(build_.root, ec))  // every build folder but the one in use
    if (starts_with(e.path().filename().string(), "build") && e.is_directory(ec) && e.path() != build_.dir)
      hide.insert(e.path());
  for (const auto& p : hide) sandbox_.overlays.push_back({Overlay::mask, p});
  // What the recipes and the sandbox helper need comes back on top (read-only) when it was under a mask.
  std::set<fs::path> back = {build_.dir, sandbox_.helper, rubrics};
  for (const auto& p : sandbox_.ro_paths)
    for (const auto& h : hide)
      if (starts_with(p.string(), (h / "").string())) back.insert(p);
  for (const auto& p : back)
    if (fs::exists(p, ec)) sandbox_.overlays.push_back({Overlay::rebind, p});
  for (auto it = fs::recursive_directory_iterator(build_.dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 5) it.disable_recursion_pending();
    if (contains(it->path().filename().string(), "_solution")) {  // lab01_solution.dir, liblab01_solution.a, ...
      sandbox_.overlays.push_back({Overlay::mask, it->path()});
      it.disable_recursion_pending();
    }
  }

  jobs_ = opts_.jobs > 0 ? opts_.jobs : std::max(1u, std::thread::hardware_concurrency());
  workers_ = opts_.workers > 0 ? opts_.workers : std::max<int>(1, static_cast<int>(gpus_.size()));
  reserve_uid_block(sandbox_, jobs_ + workers_);
  if (!gpus_.empty() && workers_ > static_cast<int>(gpus_.size()))
    std::cerr << "labgrade: warning: " << workers_ << " workers share " << gpus_.size()
              << " GPU(s): speed gates will time each other\n";

  students_ = subfolders(opts_.submissions);
  for (const auto& s : students_)
    if (!fs::exists(opts_.out / s / "result.json")) pending_.push_back(s);
  std::cerr << "labgrade: sandbox: " << (sandbox_.mode == SandboxMode::bwrap ? "bubblewrap" : "none")
            << " (isolation: " << isolation_name(sandbox_) << ")\n";
  for (const auto& n : sandbox_.notes) std::cerr << "  - " << n << "\n";
}

std::vector<std::pair<std::string, std::string>> Batch::environment(const fs::path& writable,
                                                                    const std::string& gpu) const {
  const char* path = std::getenv("PATH");
  std::vector<std::pair<std::string, std::string>> env = {
      {"PATH", path ? path : "/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin"},
      {"HOME", (writable / "home").string()},
      {"TMPDIR", (writable / "tmp").string()},
      {"LANG", "C.UTF-8"},
  };
  if (const char* ld = std::getenv("LD_LIBRARY_PATH")) env.emplace_back("LD_LIBRARY_PATH", ld);
  if (!gpu.empty()) env.emplace_back("CUDA_VISIBLE_DEVICES", gpu);
  return env;
}

// A probe in the real sandbox, as the dedicated uid: can it read everything the build and the run need?
void Batch::preflight() {
  fs::path scratch = opts_.out / ".work" / ".preflight";
  fs::remove_all(scratch);
  fs::create_directories(scratch / "home");
  fs::create_directories(scratch / "tmp");
  std::vector<std::string> argv = {"/bin/sh", "-c",
                                   "for f do [ -r \"$f\" ] || echo \"cannot read $f\"; done; "
                                   "[ -w \"$HOME\" ] || echo \"cannot write the scratch folder\"",
                                   "sh"};
  for (const auto& l : labs_) {
    argv.push_back(l.gate_rubric.string());
    argv.push_back(l.recipe.compiler());
    for (const auto& f : l.recipe.gate_objects) argv.push_back(f);
    for (const auto& f : l.recipe.skeleton_objects) argv.push_back(f);
    for (const auto& f : l.recipe.link_libraries)
      if (!f.empty() && f[0] == '/') argv.push_back(f);
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    give_to_slot(scratch, &sandbox_, 0);
    ProcessSpec ps;
    ps.argv = argv;
    ps.cwd = scratch;
    ps.writable = scratch;
    ps.env = environment(scratch, "");
    ps.output = opts_.out / ".work" / "preflight.log";
    ps.slot = 0;
    ps.sandbox = &sandbox_;
    auto c = run_limited(ps, 60);
    std::string out = trim(read_file_limited(ps.output, 1 << 16, false));
    if (c.exit.exited && c.exit.code == 0 && out.empty()) break;
    if (attempt == 0 && sandbox_.drop_uid) {
      std::cerr << "labgrade: warning: the dedicated uid cannot use the build (" << trim_message(out, 3, 400)
                << "): running submissions as root"
                << (sandbox_.mode == SandboxMode::bwrap ? " without capabilities" : "")
                << " (make the repository and build world-readable to get uid isolation back)\n";
      sandbox_.drop_uid = false;
      continue;
    }
    throw UserError("the sandbox cannot run the build's tools (" + c.exit.describe() + "):\n" +
                    trim_message(out, 10, 2000) + "\n(try --sandbox none, and run labgrade doctor)");
  }
  // A GPU hidden by the sandbox (a device node or a driver library not bound) would turn every GPU gate into
  // "skipped" for every student: check that CUDA sees the GPU from inside.
  if (!gpus_.empty()) {
    auto probe = [&](std::string* output) {
      give_to_slot(scratch, &sandbox_, 0);
      ProcessSpec ps;
      ps.argv = {sandbox_.helper.string(), "__probe-cuda"};
      ps.cwd = scratch;
      ps.writable = scratch;
      ps.env = environment(scratch, gpus_.front());
      ps.output = opts_.out / ".work" / "probe.log";
      ps.slot = 0;
      ps.sandbox = &sandbox_;
      run_limited(ps, 120);
      *output = read_file_limited(ps.output, 1 << 16, false);
      auto start = output->find('{');
      auto j =
          start == std::string::npos ? nlohmann::json() : nlohmann::json::parse(output->substr(start), nullptr, false);
      return !j.is_discarded() && j.is_object() && !j.value("gpus", nlohmann::json::array()).empty();
    };
    std::string out;
    bool seen = probe(&out);
    if (!seen && sandbox_.drop_uid) {
      // Device nodes readable only by root or a group (0660) are common in containers.
      sandbox_.drop_uid = false;
      seen = probe(&out);
      if (seen)
        std::cerr << "labgrade: warning: the dedicated uid cannot open the GPU (/dev/nvidia* permissions): "
                     "running submissions as root without capabilities (no process limit)\n";
    }
    if (!seen)
      throw UserError("CUDA sees no GPU inside the sandbox (" + trim_message(out, 4, 600) +
                      "): every GPU gate would be skipped. Check that /dev/nvidia* and the driver's libraries are "
                      "visible (labgrade binds /usr, /etc, /opt, LD_LIBRARY_PATH and ld.so.conf folders), or use "
                      "--sandbox none");
  }
  fs::remove_all(scratch);
}

void Batch::compile(Submission& s, int slot) {
  fs::path build = s.scratch / "build";
  for (const char* d : {"home", "tmp", "bin"}) fs::create_directories(build / d);
  give_to_slot(build, &sandbox_, slot);
  s.exes.assign(labs_.size(), {});
  for (std::size_t i = 0; i < labs_.size(); ++i) {
    const LabPlan& plan = labs_[i];
    const Recipe& r = plan.recipe;
    LabResult lab = make_lab_result(plan.rubric, r.name, plan.hidden);
    fs::path src_dir = build / "src" / "labs" / r.name / "student";
    fs::path obj_dir = build / "obj" / lab_tag(r);
    fs::path logs = s.result_dir / "logs";
    fs::create_directories(src_dir);
    fs::create_directories(obj_dir);
    fs::create_directories(logs);
    bool absent = false;
    LabBuildSpec spec;
    std::string problem = copy_student_sources(s.folder, r, src_dir, &absent, &spec.present);
    if (!problem.empty()) {
      set_all(lab, absent ? Status::not_submitted : Status::build_failed, problem);
      s.result.labs.push_back(std::move(lab));
      continue;
    }
    give_to_slot(build, &sandbox_, slot);
    spec.process.cwd = src_dir;
    spec.process.writable = build;
    spec.process.env = environment(build, "");
    spec.process.slot = slot;
    spec.process.sandbox = &sandbox_;
    // Compilers do not touch the GPU, so an address-space limit is safe for them (and catches runaway
    // template instantiation).
    spec.process.limits.cpu_seconds = opts_.compile_timeout;
    spec.process.limits.address_space = 16 * kGiB;
    spec.process.limits.file_size = 512u << 20;
    spec.process.limits.processes = 256;
    spec.timeout_s = opts_.compile_timeout;
    spec.src_dir = src_dir;
    spec.obj_dir = obj_dir;
    spec.exe = build / "bin" / (lab_tag(r) + "_gates");
    spec.log_dir = logs;
    spec.log_prefix = lab_tag(r);
    spec.path_rewrites = {{(src_dir / "").string(), "student/"}, {(build / "").string(), ""}};
    // Grader-only flags, on top of the build's own compile command: NVTX's header-only loader (pulled in by
    // Thrust and CUB) defines C symbols and calls dlopen/dlsym; off, so that whatever the object check finds is
    // the student's own.
    spec.extra_compile_flags = {"-DCCCL_DISABLE_NVTX", "-DNVTX_DISABLE"};
    spec.inspect = [&, ps = spec.process](const std::string& src, const fs::path& obj) {
      return inspect_object(ps, plan, src, obj);
    };
    LabBuild built = build_lab(r, spec);
    apply_build(lab, built);
    if (built.lab_problem.empty()) s.exes[i] = built.exe;
    s.result.compile_seconds += built.seconds;
    s.result.labs.push_back(std::move(lab));
  }
}

// nm and objdump run in the sandbox like the compiler (the object is the student's); their output goes to the
// scratch folder and is read back here. Returns "" or the refusal message.
std::string Batch::inspect_object(ProcessSpec ps, const LabPlan& plan, const std::string& src, const fs::path& obj) {
  auto run_tool = [&](std::vector<std::string> argv, const std::string& what) -> std::optional<std::string> {
    ps.argv = std::move(argv);
    ps.output = obj.string() + "." + what + ".txt";
    auto c = run_limited(ps, opts_.compile_timeout);
    if (c.timed_out || !c.exit.exited || c.exit.code != 0) return std::nullopt;
    return read_file_limited(ps.output, 256u << 20, false);
  };
  auto nm = run_tool({nm_, "-P", obj.string()}, "nm");
  auto dis = run_tool({objdump_, "-d", obj.string()}, "objdump");
  if (!nm || !dis) return "refused: student/" + src + " could not be inspected (nm or objdump failed on its object)";
  auto findings = check_symbols(parse_nm_posix(*nm), plan.objects);
  auto raw = find_raw_syscalls(*dis);
  findings.insert(findings.end(), raw.begin(), raw.end());
  return findings.empty() ? "" : describe_refusal(src, findings);
}

void Batch::run_gates_of(Submission& s, int slot, const std::string& gpu) {
  fs::path run = s.scratch / "run";
  for (const char* d : {"home", "tmp"}) fs::create_directories(run / d);
  // The built binaries become the grader's (root's) again: code running in attempt 1 must not be able to swap
  // the gate binary that attempt 2 starts.
  take_back(s.scratch / "build", &sandbox_);
  give_to_slot(run, &sandbox_, slot);
  for (std::size_t i = 0; i < labs_.size(); ++i) {
    LabResult& lab = s.result.labs[i];
    if (s.exes[i].empty()) {
      apply_rubric(lab);
      continue;
    }
    const LabPlan& plan = labs_[i];
    GateRunSpec spec;
    spec.exe = s.exes[i];
    spec.launcher = plan.recipe.launcher;
    spec.rubric = plan.gate_rubric;
    spec.log_dir = s.result_dir / "logs" / lab_tag(plan.recipe);
    fs::create_directories(spec.log_dir);
    apply_time_limits(spec, plan.rubric, opts_.gate_timeout);
    spec.sanitizer_checks = !opts_.no_sanitizer_checks;
    spec.process.cwd = run;
    spec.process.writable = run;
    spec.process.extra_ro = {s.exes[i].parent_path()};
    spec.process.env = environment(run, gpu);
    spec.process.slot = slot;
    spec.process.sandbox = &sandbox_;
    // CPU time is summed over threads (the CPU references use every core): a backstop, the wall clock decides.
    spec.process.limits.cpu_seconds =
        (spec.time_limit_s * (opts_.sanitize ? 10 : 1) + 60) * std::max(1u, std::thread::hardware_concurrency());
    spec.process.limits.data_bytes = static_cast<std::uint64_t>(opts_.memory_gib * kGiB);
    spec.process.limits.processes = static_cast<std::uint64_t>(opts_.max_processes);
    spec.process.limits.file_size = 64u << 20;
    run_and_score(lab, spec, opts_.sanitize, opts_.sanitize_strict);
    s.result.run_seconds += lab.run_seconds;
  }
}

// Console logs are capped at the sandbox's file size limit; keep only the end of big ones in OUT.
static void shorten_logs(const fs::path& dir) {
  constexpr std::uintmax_t kKeep = 1u << 20;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->file_size(ec) <= 2 * kKeep) continue;
    std::string tail = read_file_limited(it->path(), kKeep, true);
    write_file_atomic(it->path(), "[... labgrade kept the last 1 MiB of this log ...]\n" + tail);
  }
}

void Batch::finish(Submission& s) {
  shorten_logs(s.result_dir / "logs");
  bool ok = s.result.error.empty();
  if (ok) {
    write_file_atomic(s.result_dir / "results.json", gradescope_json(s.result).dump(2) + "\n");
    // Written last: its presence is what "this student is done" means to a restarted batch.
    write_file_atomic(s.result_dir / "result.json", to_json(s.result).dump(2) + "\n");
  } else {
    write_file_atomic(s.result_dir / "grader-error.txt", s.result.error + "\n");
  }
  if (!opts_.keep_scratch) {
    std::error_code ec;
    fs::remove_all(s.scratch, ec);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  if (!ok) ++errors_;
  if (ok && !s.result.all_passed()) ++not_full_;
  double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  double eta = elapsed / static_cast<double>(done_) * static_cast<double>(pending_.size() - done_);
  std::string score = ok ? format_points(s.result.score()) + "/" + format_points(s.result.max_score()) : "GRADER ERROR";
  std::cerr << "[" << done_ << "/" << pending_.size() << "] " << s.student << ": " << score << " (compile "
            << format_seconds(s.result.compile_seconds) << ", run " << format_seconds(s.result.run_seconds)
            << ") | not full marks: " << not_full_ << ", grader errors: " << errors_ << " | elapsed "
            << format_seconds(elapsed) << ", ETA " << format_seconds(eta) << "\n";
  if (!ok) std::cerr << "  grader error: " << s.result.error << "\n";
}

int merge_main(const fs::path& out, const std::vector<fs::path>& parts, const fs::path& submissions) {
  std::map<std::string, fs::path> owner;  // student -> the part that graded them
  std::vector<SubmissionResult> all;
  for (const auto& part : parts) {
    if (!fs::is_directory(part)) throw UserError(part.string() + ": not a folder");
    if (fs::exists(out) && fs::equivalent(part, out)) throw UserError("the merged folder must not be one of the parts");
    for (const auto& s : subfolders(part)) {
      auto r = read_result(part, s);
      if (!r) continue;
      auto [it, fresh] = owner.emplace(s, part);
      if (!fresh)
        throw UserError("student " + s + " was graded in two parts: " + it->second.string() + " and " + part.string());
      all.push_back(std::move(*r));
    }
  }
  fs::create_directories(out);
  write_class_files(all, out, "Grading report: " + std::to_string(all.size()) + " students from " +
                                  std::to_string(parts.size()) + " parts");
  std::cerr << "labgrade: merged " << all.size() << " students from " << parts.size() << " parts into "
            << (out / "gradebook.csv").string() << ", junit.xml, report.md\n";
  if (submissions.empty()) return 0;
  std::vector<std::string> missing;
  for (const auto& s : subfolders(submissions))
    if (!owner.count(s)) missing.push_back(s);
  for (const auto& s : missing) std::cerr << "labgrade: no result for " << s << " (not graded yet, or a grader error)\n";
  return missing.empty() ? 0 : 1;
}

void Batch::write_class_outputs() {
  std::vector<SubmissionResult> all;
  for (const auto& s : students_)
    if (auto r = read_result(opts_.out, s)) all.push_back(std::move(*r));
  write_class_files(all, opts_.out, "Grading report: " + opts_.submissions.filename().string());
  std::cerr << "labgrade: " << all.size() << " of " << students_.size() << " students graded; wrote "
            << (opts_.out / "gradebook.csv").string() << ", junit.xml, report.md\n";
}

int Batch::run() {
  setup();
  preflight();
  std::cerr << "labgrade: " << students_.size() << " submissions, " << (students_.size() - pending_.size())
            << " already graded, " << labs_.size() << " lab(s); " << jobs_ << " compile job(s), " << workers_
            << " run worker(s)" << (gpus_.empty() ? " (no GPU)" : " on GPU(s) " + join(gpus_, ",")) << "\n";
  start_ = Clock::now();

  std::mutex qmu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Submission>> ready;
  std::atomic<std::size_t> next{0};
  int compiling = std::min<int>(jobs_, static_cast<int>(std::max<std::size_t>(1, pending_.size())));
  const std::size_t max_ready = static_cast<std::size_t>(2 * workers_ + 1);  // don't compile far ahead (disk)

  auto compiler = [&](int slot) {
    for (;;) {
      std::size_t i = next++;
      if (i >= pending_.size()) break;
      auto s = std::make_unique<Submission>();
      s->student = pending_[i];
      s->folder = opts_.submissions / s->student;
      // The scratch folder's name holds no character of the student's name that a tool could misread: nvcc
      // splits its fatbinary arguments at commas ("Last, First" failed to compile).
      s->scratch = opts_.out / ".work" / scratch_name(i, s->student);
      s->result_dir = opts_.out / s->student;
      s->result.student = s->student;
      s->result.isolation = isolation_name(sandbox_);  // after preflight, which may have given up the uid
      try {
        if (std::find(std::begin(kReserved), std::end(kReserved), s->student) != std::end(kReserved))
          throw std::runtime_error("a submission folder may not be named " + s->student);
        std::error_code ec;
        fs::remove_all(s->scratch, ec);
        fs::remove_all(s->result_dir, ec);  // a half-graded attempt of a stopped batch
        fs::create_directories(s->scratch);
        fs::create_directories(s->result_dir);
        if (sandbox_.drop_uid) ::chmod(s->result_dir.c_str(), 0700);
        compile(*s, slot);
      } catch (const std::exception& e) {
        s->result.error = std::string("while compiling: ") + e.what();
      }
      std::unique_lock<std::mutex> lock(qmu);
      cv.wait(lock, [&] { return ready.size() < max_ready; });
      ready.push_back(std::move(s));
      cv.notify_all();
    }
    std::lock_guard<std::mutex> lock(qmu);
    --compiling;
    cv.notify_all();
  };
  auto runner = [&](int worker) {
    const int slot = jobs_ + worker;
    const std::string gpu = gpus_.empty() ? "" : gpus_[static_cast<std::size_t>(worker) % gpus_.size()];
    for (;;) {
      std::unique_ptr<Submission> s;
      {
        std::unique_lock<std::mutex> lock(qmu);
        cv.wait(lock, [&] { return !ready.empty() || compiling == 0; });
        if (ready.empty()) break;
        s = std::move(ready.front());
        ready.pop_front();
        cv.notify_all();
      }
      if (s->result.error.empty()) {
        try {
          run_gates_of(*s, slot, gpu);
        } catch (const std::exception& e) {
          s->result.error = std::string("while running: ") + e.what();
        }
      }
      try {
        finish(*s);
      } catch (const std::exception& e) {
        std::cerr << "labgrade: cannot write the result of " << s->student << ": " << e.what() << "\n";
      }
    }
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < compiling; ++c) threads.emplace_back(compiler, c);
  for (int w = 0; w < workers_; ++w) threads.emplace_back(runner, w);
  for (auto& t : threads) t.join();
  std::error_code ec;
  if (!opts_.keep_scratch) fs::remove_all(opts_.out / ".work", ec);
  write_class_outputs();
  return errors_ == 0 ? 0 : 1;
}

int batch_main(const BatchOptions& opts) {
  Batch b(opts);
  return b.run();
}

}  // namespace labgrade
