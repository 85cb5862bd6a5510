// The batch pipeline: compile jobs and run workers over the pending students, each student's result files, the
// class outputs, and `labgrade merge`. What runs once before it (Batch::setup, Batch::preflight) is in
// batch_setup.cpp.
#include "batch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "batch_internal.h"
#include "devices.h"
#include "grade.h"
#include "objcheck.h"
#include "runner.h"
#include "sandbox.h"
#include "stepbuild.h"
#include "writers.h"

namespace labgrade {

using detail::Batch;
using detail::scan_submissions;
using detail::subfolders;
using detail::SubmissionList;

namespace {

const char* const kReserved[] = {"gradebook.csv", "junit.xml", "report.md"};

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
    std::cerr << "labgrade: warning: unreadable " << printable(f.string()) << ": " << printable(e.what()) << "\n";
    return std::nullopt;
  }
}

void write_class_files(const std::vector<SubmissionResult>& all, const fs::path& out, const std::string& title,
                       const std::vector<std::string>& not_graded = {}) {
  write_outputs(all,
                {"", (out / "junit.xml").string(), (out / "gradebook.csv").string(), (out / "report.md").string()},
                title, not_graded);
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

}  // namespace

// The students (subfolders, dot folders excluded) of a submissions or output folder, sorted.
std::vector<std::string> detail::subfolders(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && !starts_with(e.path().filename().string(), "."))
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

SubmissionList detail::scan_submissions(const fs::path& dir) {
  SubmissionList list;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const std::string shown = printable(name);
    if (!e.is_directory())
      list.not_graded.push_back("not a submission folder: " + shown +
                                (e.is_regular_file() ? " (a file; unpack it into a folder)" : " (not a folder)"));
    else if (starts_with(name, "."))
      list.not_graded.push_back("not a submission folder: " + shown +
                                " (its name starts with '.'; rename it if it is a student's)");
    else
      names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::map<std::string, std::string> why;  // refused name -> the reason
  for (const auto& n : names) {
    bool valid = true, controls = false;
    for (std::size_t i = 0; i < n.size() && valid;) {
      char32_t cp = 0;
      const std::size_t len = utf8_sequence(n, i, &cp);
      valid = len > 0;
      controls = controls || (valid && is_control(cp));
      i += len;
    }
    if (!valid) why[n] = "name is not valid UTF-8";
    else if (controls) why[n] = "name has control characters";
    // The class outputs sit beside the students' result folders: a folder of that name would be in their way.
    else if (std::find(std::begin(kReserved), std::end(kReserved), n) != std::end(kReserved))
      why[n] = "name is one of the class outputs' (" + n + ")";
  }
  // The names left, as the gradebook writes them: two written alike would be one student to whoever reads it.
  std::map<std::string, std::vector<std::string>> written;
  for (const auto& n : names)
    if (!why.count(n)) written[csv_field(n, true)].push_back(n);
  for (const auto& [cell, alike] : written)
    if (alike.size() > 1)
      for (std::size_t k = 0; k < alike.size(); ++k)
        why[alike[k]] = "name is written like '" + printable(alike[k == 0 ? 1 : 0]) + "' in the gradebook";
  for (const auto& n : names) {
    if (!why.count(n)) {
      list.students.push_back(n);
    } else {
      list.not_graded.push_back("submission '" + printable(n) + "': " + why[n] + ", not graded: rename it");
      ++list.refused;
    }
  }
  return list;
}

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

void Batch::compile(Submission& s, int slot, std::size_t order) {
  const auto started = Clock::now();
  fs::path build = s.scratch / "build";
  for (const char* d : {"home", "tmp", "bin"}) fs::create_directories(build / d);
  // The gate binaries the runs start: the grader's copies, made as each lab is linked, in a folder that is never the
  // slot's (the build folder stays the compiles' until they have all ended).
  const fs::path gates = s.scratch / "gates";
  fs::create_directories(gates);
  s.exes.assign(labs_.size(), {});
  s.sass.assign(labs_.size(), {});
  // First every lab's files are copied and its build set up, one lab after another (the copies are the grader's,
  // handed to the slot once); then the labs build side by side, their compiles taking the batch's compile jobs
  // (compile_tokens_) in the student's `order`: the student next in line for a GPU keeps every job busy, as if it
  // were alone, instead of waiting for a lab's slowest file before the next lab starts or sharing the machine
  // evenly with students whose runs come later. Each lab goes to the worker (s.built) as soon as it is linked.
  std::vector<LabResult>& results = s.result.labs;
  results.clear();
  for (const auto& plan : labs_) results.push_back(make_lab_result(plan.rubric, plan.recipe.name, plan.hidden));
  std::vector<std::optional<LabBuildSpec>> specs(labs_.size());
  // What the object check asks the instructor to read (find_hidden_syscalls), per lab: its files are inspected
  // side by side.
  std::vector<std::vector<std::string>> object_notes(labs_.size());
  std::mutex object_notes_mu;
  for (std::size_t i = 0; i < labs_.size(); ++i) {
    const LabPlan& plan = labs_[i];
    const Recipe& r = plan.recipe;
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
      set_all(results[i], absent ? Status::not_submitted : Status::build_failed, problem);
      continue;
    }
    spec.process.cwd = src_dir;
    spec.process.writable = build;
    spec.process.env = environment(build, "");
    spec.process.slot = slot;
    spec.process.sandbox = &sandbox_;
    // The labs build side by side in the one slot: no process's end may sweep it (done once below).
    spec.process.sweep_uid = false;
    // Compilers do not touch the GPU, so an address-space limit is safe for them (and catches runaway
    // template instantiation).
    spec.process.limits.cpu_seconds = opts_.compile_timeout;
    spec.process.limits.address_space = 16 * kGiB;
    spec.process.limits.file_size = 512u << 20;
    spec.process.limits.processes = 256;
    // Compiles of later students run beside the gate runs of earlier ones: they get the CPUs those leave. 5 (a third
    // of a nice-0 process's CPU share), not 10 (a tenth): at 10 a machine busy with anything else starved them, and
    // the batch tests under full load on 2 cores took 1,150-1,350 s against 944 s at 5.
    spec.process.limits.nice = 5;
    if (!cpus_.speed.empty()) spec.process.limits.cpus = cpus_.shared;  // never on a worker's speed CPUs
    spec.timeout_s = opts_.compile_timeout;
    spec.jobs = jobs_;  // every file at once if the tokens allow
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
    spec.write_dependencies = true;
    for (std::size_t k = 0; k < r.student_sources.size(); ++k) {  // made before the build folder goes to the slot
      spec.compile_tmp.push_back(build / "tmp" / (lab_tag(r) + "." + std::to_string(k + 1)));
      fs::create_directories(spec.compile_tmp.back());
    }
    spec.inspect = [this, &plan, ps = spec.process, notes = &object_notes[i], mu = &object_notes_mu](
                       const std::string& src, const fs::path& obj) {
      std::vector<std::string> found;
      std::string refusal = inspect_object(ps, plan, src, obj, &found);
      std::lock_guard<std::mutex> lock(*mu);
      notes->insert(notes->end(), found.begin(), found.end());
      return refusal;
    };
    specs[i] = std::move(spec);
  }
  give_to_slot(build, &sandbox_, slot);
  std::vector<std::size_t> files;
  for (const auto& plan : labs_) files.push_back(plan.recipe.student_sources.size());
  const std::vector<std::size_t> rank = compile_ranks(files);
  try {
    for_each_concurrently(labs_.size(), static_cast<int>(labs_.size()), [&](std::size_t i) {
      if (!specs[i]) return;
      specs[i]->tokens = compile_tokens_;
      specs[i]->token_order = order * labs_.size() + rank[i];  // the student's place first, then the lab's
      const LabBuild built = build_lab(labs_[i].recipe, *specs[i]);
      apply_build(results[i], built);
      {
        std::lock_guard<std::mutex> lock(object_notes_mu);
        results[i].notes.insert(results[i].notes.end(), object_notes[i].begin(), object_notes[i].end());
      }
      if (!built.lab_problem.empty()) return;
      // Copied by the grader, so the copy is the grader's: the slot's processes (the other labs' compiles) cannot
      // change it, and code in attempt 1 cannot replace the binary attempt 2 starts. With descriptors closed on
      // exec: std::filesystem::copy_file's were inherited by the compilers other threads started meanwhile, and the
      // worker that started the lab's speed gates at once got ETXTBSY (a healthy fake lab's cpu.speed graded
      // crashed, exit 127, in the batch test under load).
      const fs::path exe = gates / built.exe.filename();
      copy_file_for_exec(built.exe, exe, 0755);
      s.exes[i] = exe;
      if (needs_machine_code(results[i]))
        s.sass[i] = read_machine_code(specs[i]->process, exe, lab_tag(labs_[i].recipe));
      s.built.push(i);
    });
  } catch (...) {
    wait_for_machine_code(s);
    sweep_uid(&sandbox_, slot);
    throw;
  }
  wait_for_machine_code(s);  // cuobjdump runs under the slot's uid: the sweep would end it
  sweep_uid(&sandbox_, slot);
  // What the compiles wrote becomes the grader's again: nothing of the slot's may change it from now on.
  take_back(build, &sandbox_);
  // The student's compile time is the clock's: the labs' own times overlap.
  s.result.compile_seconds = std::chrono::duration<double>(Clock::now() - started).count();
}

SassRunner detail::sandboxed_sass_runner(ProcessSpec ps, fs::path output) {
  ps.output = std::move(output);
  ps.limits.file_size = kSassDumpLimit + 1;  // the most of the dump that is read: a longer one is "over 64 MiB"
  return [ps](const std::vector<std::string>& argv, double timeout_s) mutable {
    ps.argv = argv;
    Completed c;
    try {
      c = run_limited(ps, timeout_s);
    } catch (const std::exception& e) {  // no process (fork failed, no output file): a note, not the student's end
      return CommandResult{-1, std::string("cuobjdump could not be started: ") + e.what(), false};
    }
    CommandResult r;
    r.timed_out = c.timed_out;
    r.exit_code = c.exit.exited && !c.timed_out ? c.exit.code : -1;
    r.output = read_file_limited(ps.output, kSassDumpLimit + 1, false);
    if (!c.exit.exited && !c.timed_out) r.output = "cuobjdump ended by " + c.exit.describe() + "\n" + r.output;
    std::error_code ec;
    fs::remove(ps.output, ec);
    return r;
  };
}

// The machine-code checks (sass.h) read the linked gate binary with cuobjdump, a parser of the student's objects like
// nm and objdump: it runs in the compiles' sandbox, under their uid slot, where nothing of the student's runs (the
// gate runs have a slot of their own), in a thread, so the lab's gates start at once. It reads the grader's copy of
// the binary, which is what runs, and writes to a file the grader opens in the grader's folder.
std::shared_future<SassDump> Batch::read_machine_code(ProcessSpec ps, const fs::path& exe, const std::string& tag) {
  ps.extra_ro = {exe.parent_path()};
  return start_sass_dump(exe, sandboxed_sass_runner(std::move(ps), exe.parent_path() / (tag + ".sass.txt")));
}

void Batch::wait_for_machine_code(Submission& s) {
  for (const auto& f : s.sass)
    if (f.valid()) f.wait();
}

// nm and objdump run in the sandbox like the compiler (the object is the student's); their output goes to the
// scratch folder and is read back here. Returns "" or the refusal message; `notes` gets what is not refused but
// should be read (hidden system-call bytes).
std::string Batch::inspect_object(ProcessSpec ps, const LabPlan& plan, const std::string& src, const fs::path& obj,
                                  std::vector<std::string>* notes) {
  auto run_tool = [&](std::vector<std::string> argv, const std::string& what) -> std::optional<std::string> {
    ps.argv = std::move(argv);
    ps.output = obj.string() + "." + what + ".txt";
    auto c = run_limited(ps, opts_.compile_timeout);
    if (c.timed_out || !c.exit.exited || c.exit.code != 0) return std::nullopt;
    return read_file_limited(ps.output, 256u << 20, false);
  };
  auto nm = run_tool({nm_, "-P", obj.string()}, "nm");
  auto dis = run_tool({objdump_, "-d", obj.string()}, "objdump");
  auto headers = run_tool({objdump_, "-h", obj.string()}, "sections");
  if (!nm || !dis || !headers)
    return "refused: student/" + src + " could not be inspected (nm or objdump failed on its object)";
  auto findings = check_symbols(parse_nm_posix(*nm), plan.objects);
  for (auto more : {find_raw_syscalls(*dis), find_early_code(*headers)})
    findings.insert(findings.end(), more.begin(), more.end());
  // Not a refusal (a constant can hold the same bytes): a note for the instructor, on the lab and in report.md.
  if (notes)
    for (const auto& f : find_hidden_syscalls(*dis))
      notes->push_back(std::string(kObjectReviewNote) + "student/" + src + ", " + f.symbol + ": " + f.reason);
  // The headers the file included (the compile's -MD list, written by the compiler, not the student): a library
  // that none of the file's gates allows. A missing list (a compiler that could not write it) is a refusal too,
  // since its absence would let any library in.
  const fs::path deps = obj.string() + ".d";
  if (!fs::is_regular_file(deps))
    return "refused: student/" + src + " could not be inspected (the compiler wrote no list of included headers)";
  const std::string step = step_of_source(src);
  std::set<std::string> allowed;
  for (const auto& g : plan.rubric.gates)
    if (step.empty() || step_of_gate(g.id) == step) allowed.insert(g.allow_libraries.begin(), g.allow_libraries.end());
  auto libs = find_library_headers(read_file_limited(deps, 16u << 20, false), allowed);
  findings.insert(findings.end(), libs.begin(), libs.end());
  return findings.empty() ? "" : describe_refusal(src, findings);
}

void Batch::run_gates_of(Submission& s, int slot, const std::string& gpu, int worker) {
  std::optional<Clock::time_point> started;  // when the first of its gates started (the ETA's run under way)
  const auto start = [&] {
    if (started) return;
    started = Clock::now();
    set_running(worker, true);
  };
  // Each lab writes only in a folder of its own (run/labNN: its working folder, HOME and TMPDIR), and in the sandbox
  // sees no other lab's: what the student's code wrote during one lab's hidden gates (their inputs) cannot reach
  // another lab's visible gates, which run side by side with them or after them.
  fs::path run = s.scratch / "run";
  for (const auto& plan : labs_)
    for (const char* d : {"home", "tmp"}) fs::create_directories(run / lab_tag(plan.recipe) / d);
  give_to_slot(run, &sandbox_, slot);
  // run/ itself stays root's, open to the slot's group: the labs' processes can neither leave files beside their
  // folders, where the disk watch (GateRunSpec::disk_limit_bytes) does not look, nor move a folder away from it.
  if (const int uid = slot_uid(&sandbox_, slot); uid >= 0) {
    ::lchown(run.c_str(), 0, static_cast<gid_t>(uid));
    ::chmod(run.c_str(), 0750);
  }
  GpuTurns* turns = turns_.at(gpu).get();
  // Labs side by side share the student's uid slot: a process's end must not sweep the slot while another lab's
  // runs in it. run_and_score sweeps before and after each speed run, when no other lab runs; the last sweep is here.
  const bool shared_slot = lab_jobs_ > 1;
  // The longest labs start first, so that none starts late and ends alone: longest in the students graded so far
  // (the untimed part, which is what runs side by side), or before the first of them by the rubrics' figures.
  std::vector<double> mean(labs_.size()), prior(labs_.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::size_t i = 0; i < labs_.size(); ++i) {
      const auto it = lab_run_sum_.find(labs_[i].recipe.lab);
      mean[i] = it == lab_run_sum_.end() || lab_runs_ == 0 ? 0 : it->second / static_cast<double>(lab_runs_);
      prior[i] = labs_[i].rubric.expected_run_s;
    }
  }
  const std::vector<std::size_t> order = untimed_order(mean, prior);
  // Each lab's run, set once for both phases, as soon as its binary is there.
  std::vector<GateRunSpec> specs(labs_.size());
  // The student's second timings for a busy machine (grade.cpp's time_lost_again), shared by its labs.
  const auto busy_retimes =
      workers_ > 1 ? std::make_shared<std::atomic<int>>(std::max(0, opts_.busy_retimes)) : nullptr;
  const auto unsteady_retimes = std::make_shared<std::atomic<int>>(std::max(0, opts_.unsteady_retimes));
  const auto prepare = [&](std::size_t i) {
    const LabPlan& plan = labs_[i];
    GateRunSpec& spec = specs[i];
    spec.exe = s.exes[i];
    spec.launcher = plan.recipe.launcher;
    spec.rubric = plan.gate_rubric;
    spec.log_dir = s.result_dir / "logs" / lab_tag(plan.recipe);
    fs::create_directories(spec.log_dir);
    apply_time_limits(spec, plan.rubric, opts_.gate_timeout);
    spec.sanitizer_checks = !opts_.no_sanitizer_checks;
    spec.busy_retimes = busy_retimes;
    spec.unsteady_retimes = unsteady_retimes;
    const fs::path lab_run = run / lab_tag(plan.recipe);
    spec.process.cwd = lab_run;
    spec.process.writable = lab_run;
    spec.process.extra_ro = {s.exes[i].parent_path()};
    if (i < s.sass.size()) spec.sass = s.sass[i];
    // A lab sees only the GPUs its rubric asks for: on a worker of two (--gpus 0+1), a lab of one GPU that saw both
    // could split a timed step over them and pass a speed gate at twice its real speed.
    const std::string lab_gpus = gpus_for_lab(gpu, plan.rubric.gpus);
    spec.process.env = environment(lab_run, lab_gpus);
    skip_gates_needing_more_gpus(s.result.labs[i], gpu.empty() ? 0 : static_cast<int>(split(lab_gpus, ',').size()));
    spec.process.slot = slot;
    spec.process.sandbox = &sandbox_;
    spec.process.sweep_uid = !shared_slot;
    // CPU time is summed over threads (the CPU references use every core): a backstop, the wall clock decides.
    spec.process.limits.cpu_seconds =
        (spec.time_limit_s * (opts_.sanitize ? 10 : 1) + 60) * std::max(1u, std::thread::hardware_concurrency());
    spec.process.limits.data_bytes = static_cast<std::uint64_t>(opts_.memory_gib * kGiB);
    // RLIMIT_NPROC counts the uid's processes and threads: labs side by side share it.
    spec.process.limits.processes =
        static_cast<std::uint64_t>(opts_.max_processes) * static_cast<std::uint64_t>(lab_jobs_);
    spec.process.limits.file_size = 64u << 20;
    spec.disk_limit_bytes = static_cast<std::uintmax_t>(std::max(0.0, opts_.disk_gib) * kGiB);
    if (!cpus_.speed.empty()) {
      spec.process.limits.cpus = cpus_.runs_of(worker);
      // A launcher's ranks (lab 09: four MPI ranks, each busy-polling) need more CPUs than are kept: their speed
      // process runs where the lab's other runs do, the kept CPUs first (they are the idle ones).
      if (plan.recipe.launcher.empty())
        spec.speed_cpus = cpus_.speed.at(static_cast<std::size_t>(worker) % cpus_.speed.size());
    }
  };
  // Every lab's speed gates first, one lab after another with the GPU to itself (run_speed_gates, grade.h), each as
  // soon as the lab is built, while the student's other labs still compile (at niceness +5, as the next students'
  // compiles do beside every run): one workbook no longer waits for its slowest lab's compile before any timing.
  // Then, once the compiles have all ended, the rest of each lab, the labs side by side.
  std::vector<double> speed_used(labs_.size(), 0.0);
  s.untimed_seconds.assign(labs_.size(), 0.0);
  // Other processes on this worker's GPUs, looked for before the first speed gate and after the last (nothing of
  // this worker runs there at either moment, and the runs of workers that share its GPU are left out): one computing
  // there shared the GPU with the timing by time slices.
  std::vector<std::string> shared_gpu;
  const auto look_for_others = [&](const char* when) {
    const auto it = gpu_uuids_.find(gpu);
    if (it == gpu_uuids_.end() || it->second.empty()) return;
    auto others = on_gpus(gpu_processes(10), it->second);
    // Workers that share a GPU (more workers than GPU groups) see each other's runs there: the batch's own.
    if (workers_ > static_cast<int>(gpus_.size())) others = others_than(others, getpid());
    if (!others.empty()) shared_gpu.push_back(std::string(when) + ": " + describe_gpu_processes(others));
  };
  look_for_others("before the speed gates");
  if (shared_slot)
    while (const std::optional<std::size_t> i = s.built.next()) {
      start();
      prepare(*i);
      speed_used[*i] = run_speed_gates(s.result.labs[*i], specs[*i], turns);
    }
  s.built.wait_finished();
  if (s.built.failed()) return;  // the compile could not go on (the grader's fault): the caller says why
  if (shared_slot) look_for_others("after the speed gates");
  start();
  for (std::size_t i = 0; i < labs_.size(); ++i)
    if (!s.exes[i].empty() && specs[i].exe.empty()) prepare(i);
  for_each_concurrently(labs_.size(), lab_jobs_, [&](std::size_t k) {
    const std::size_t i = order[k];
    LabResult& lab = s.result.labs[i];
    if (s.exes[i].empty()) {
      apply_rubric(lab);
      return;
    }
    run_and_score(lab, specs[i], opts_.sanitize, opts_.sanitize_strict, turns, speed_used[i]);
    s.untimed_seconds[i] = std::max(0.0, lab.run_seconds - speed_used[i]);
  });
  if (shared_slot) sweep_uid(&sandbox_, slot);
  if (!shared_slot) look_for_others("after the gates");  // one lab at a time: the speed gates ran among the others
  if (!shared_gpu.empty()) {
    std::cerr << "labgrade: warning: " << printable(s.student) << ": other processes computed on GPU " << gpu << " ("
              << join(shared_gpu, "; ") << ")\n";
    for (auto& lab : s.result.labs)
      if (std::any_of(lab.gates.begin(), lab.gates.end(), [](const GateResult& g) { return g.kind == "speed"; }))
        lab.notes.push_back(std::string(kSharedGpuNote) + "other processes computed on this student's GPU when its "
                            "speed gates were timed (" + join(shared_gpu, "; ") + "): they shared the GPU, and a "
                            "failed speed gate may be the machine's, not the student's. To grade the student "
                            "again: remove its result.json from the batch's output folder and run the same "
                            "labgrade batch command");
  }
  // The student's run time is the clock's, from its first gate: with labs side by side, less than the labs' own
  // times added up.
  s.result.run_seconds = std::chrono::duration<double>(Clock::now() - *started).count();
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
    try {
      // json_text: a student's binary output (invalid UTF-8) made dump() throw, and the student had no result.
      write_file_atomic(s.result_dir / "results.json", json_text(gradescope_json(s.result)));
      // Written last: its presence is what "this student is done" means to a restarted batch.
      write_file_atomic(s.result_dir / "result.json", json_text(to_json(s.result)));
    } catch (const std::exception& e) {
      // A result that cannot be written is a grader error like any other: named, counted, retried by a rerun.
      ok = false;
      s.result.error = std::string("cannot write its result: ") + e.what();
      std::error_code ec;
      fs::remove(s.result_dir / "results.json", ec);
    }
  }
  if (!ok) write_file_atomic(s.result_dir / "grader-error.txt", s.result.error + "\n");
  if (!opts_.keep_scratch) {
    std::error_code ec;
    fs::remove_all(s.scratch, ec);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  if (!ok) ++errors_;
  if (ok && !s.result.all_passed()) ++not_full_;
  compile_sum_ += s.result.compile_seconds;
  run_sum_ += s.result.run_seconds;
  if (ok) {
    for (std::size_t i = 0; i < s.untimed_seconds.size() && i < labs_.size(); ++i)
      lab_run_sum_[labs_[i].recipe.lab] += s.untimed_seconds[i];
    ++lab_runs_;
  }
  double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double n = static_cast<double>(done_);
  const std::size_t remaining = pending_.size() - done_;
  const std::size_t waiting_compiled = compiled_ > done_ ? compiled_ - done_ : 0;  // compiled, not yet run
  std::vector<double> running;  // how long each student being run now has run
  for (const auto& since : running_since_)
    if (since) running.push_back(std::chrono::duration<double>(Clock::now() - *since).count());
  double eta = batch_eta(remaining, remaining - std::min(remaining, waiting_compiled), compile_sum_ / n, run_sum_ / n,
                         compilers_, workers_, running);
  std::string score = ok ? format_points(s.result.score()) + "/" + format_points(s.result.max_score()) : "GRADER ERROR";
  std::cerr << "[" << done_ << "/" << pending_.size() << "] " << printable(s.student) << ": " << score << " (compile "
            << format_seconds(s.result.compile_seconds) << ", run " << format_seconds(s.result.run_seconds)
            << ") | not full marks: " << not_full_ << ", grader errors: " << errors_ << " | elapsed "
            << format_seconds(elapsed) << ", ETA " << format_seconds(eta) << "\n";
  if (!ok) std::cerr << "  grader error: " << printable(s.result.error, true) << "\n";
}

double detail::batch_eta(std::size_t remaining, std::size_t to_compile, double mean_compile_s, double mean_run_s,
                         int jobs, int workers, const std::vector<double>& running) {
  if (remaining == 0) return 0;
  // The workers, each free once its current run has had its mean time (a run past the mean ends any moment).
  std::vector<double> free_at(static_cast<std::size_t>(std::max(1, workers)), 0.0);
  const std::size_t busy = std::min({running.size(), free_at.size(), remaining});
  for (std::size_t k = 0; k < busy; ++k) free_at[k] = std::max(0.0, mean_run_s - running[k]);
  // The students not started yet, in queue order: the compiled ones first, then those still to compile, the m-th of
  // them ready once m + 1 compiles of `jobs` at a time are through.
  const std::size_t queued = remaining - busy, c = std::min(to_compile, queued);
  const double j = std::min(std::max(static_cast<double>(c), 1.0), static_cast<double>(std::max(1, jobs)));
  for (std::size_t q = 0; q < queued; ++q) {
    const double ready = q < queued - c ? 0.0 : static_cast<double>(q - (queued - c) + 1) * mean_compile_s / j;
    auto worker = std::min_element(free_at.begin(), free_at.end());
    *worker = std::max(*worker, ready) + mean_run_s;
  }
  return *std::max_element(free_at.begin(), free_at.end());
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
        throw UserError("student " + printable(s) + " was graded in two parts: " + it->second.string() + " and " +
                        part.string());
      all.push_back(std::move(*r));
    }
  }
  // The submissions folder's entries that no batch grades (loose files, refused names) are listed as a batch lists
  // them: on the console and in report.md.
  const SubmissionList list = submissions.empty() ? SubmissionList{} : scan_submissions(submissions);
  for (const auto& line : list.not_graded) std::cerr << "labgrade: " << line << "\n";
  fs::create_directories(out);
  write_class_files(all, out,
                    "Grading report: " + std::to_string(all.size()) + " students from " +
                        std::to_string(parts.size()) + " parts",
                    list.not_graded);
  std::cerr << "labgrade: merged " << all.size() << " students from " << parts.size() << " parts into "
            << (out / "gradebook.csv").string() << ", junit.xml, report.md\n";
  if (submissions.empty()) return 0;
  std::vector<std::string> missing;
  for (const auto& s : list.students)
    if (!owner.count(s)) missing.push_back(s);
  for (const auto& s : missing)
    std::cerr << "labgrade: no result for " << printable(s) << " (not graded yet, or a grader error)\n";
  return missing.empty() && list.refused == 0 ? 0 : 1;
}

bool Batch::build_unchanged() {
  if (build_changed_) return false;
  std::string change = inputs_.first_change();
  if (change.empty()) return true;
  std::lock_guard<std::mutex> lock(mu_);
  if (!build_changed_) {
    build_change_ = change;
    build_changed_ = true;
    std::cerr << "labgrade: " << change << " while the batch ran: no student is graded from here on (a grade must "
              << "come from one build)\n";
  }
  return false;
}

void Batch::set_running(int worker, bool running) {
  std::lock_guard<std::mutex> lock(mu_);
  running_since_.at(static_cast<std::size_t>(worker)) = running ? std::optional<Clock::time_point>(Clock::now())
                                                                : std::nullopt;
}

void Batch::write_class_outputs() {
  std::vector<SubmissionResult> all;
  for (const auto& s : students_)
    if (auto r = read_result(opts_.out, s)) all.push_back(std::move(*r));
  write_class_files(all, opts_.out, "Grading report: " + opts_.submissions.filename().string(), not_graded_);
  std::cerr << "labgrade: " << all.size() << " of " << students_.size() << " students graded; wrote "
            << (opts_.out / "gradebook.csv").string() << ", junit.xml, report.md\n";
  if (!not_graded_.empty())
    std::cerr << "labgrade: " << not_graded_.size() << " entr" << (not_graded_.size() == 1 ? "y" : "ies")
              << " of the submissions folder not graded (" << refused_ << " refused name(s)): listed at the start "
              << "and in report.md\n";
}

int Batch::run() {
  setup();
  preflight();
  // A worker's GPUs as --gpus names them ("0+1"), the workers apart by commas.
  std::vector<std::string> shown;
  std::size_t per_worker = gpus_.empty() ? 0 : std::numeric_limits<std::size_t>::max();
  for (const auto& g : gpus_) {
    const auto members = split(g, ',');
    shown.push_back(join(members, "+"));
    per_worker = std::min(per_worker, members.size());
  }
  std::cerr << "labgrade: " << students_.size() << " submissions, " << (students_.size() - pending_.size())
            << " already graded, " << labs_.size() << " lab(s); " << jobs_ << " compile job(s), " << workers_
            << " run worker(s)" << (gpus_.empty() ? " (no GPU)" : " on GPU(s) " + join(shown, ",")) << ", "
            << lab_jobs_ << " lab(s) of a student at a time\n";
  std::vector<LabGpus> needs;
  for (const auto& plan : labs_) needs.push_back({plan.recipe.lab, plan.rubric.gpus, plan.recipe.rubric});
  for (const auto& w : multi_gpu_warnings(needs, per_worker)) std::cerr << "labgrade: warning: " << w << "\n";
  start_ = Clock::now();
  for (const auto& g : gpus_) turns_[g] = std::make_unique<GpuTurns>();
  if (gpus_.empty()) turns_[""] = std::make_unique<GpuTurns>();
  // Every gate process of every worker also holds the machine's shared turn, so that a speed gate timed again after
  // a first timing that lost points (grade.cpp's time_lost_again) has the whole machine quiet: other workers' gate
  // processes slowed a healthy student's timed calls through the GPU driver's locks (labpool.h).
  for (auto& [gpu, t] : turns_) t->set_machine(&machine_turns_);

  std::mutex qmu;
  std::condition_variable cv;
  // The students a worker may take, in queue order: each is handed on when its compile starts, and the worker times
  // each lab's speed gates as the compile hands it on (Submission::built).
  std::deque<std::shared_ptr<Submission>> ready;
  std::atomic<std::size_t> next{0};
  // Students compiled at once. The compile jobs go to the first of them in the queue (JobTokens' order), so more
  // of them do not slow the next run's student; a few keep the jobs busy while one of them copies, inspects or
  // links; each holds a uid slot, a scratch folder and a thread per file waiting for a job.
  int compiling = std::min<int>(slots_.compilers, static_cast<int>(std::max<std::size_t>(1, pending_.size())));
  compilers_ = compiling;
  running_since_.assign(static_cast<std::size_t>(workers_), std::nullopt);
  JobTokens tokens(jobs_);
  compile_tokens_ = &tokens;
  const std::size_t max_ready = static_cast<std::size_t>(2 * workers_ + 1);  // don't compile far ahead (disk)
  // To the workers, in queue order: a compile thread whose student comes later waits for the ones before it to be
  // handed on. Without that, a worker took whichever student was handed on first: the second compile thread often
  // won, and the worker then waited on the compile that JobTokens serves second (a grader test that kills a batch
  // after its first student saw host_hang run before compile_error, on two CI runs of 2026-11-28).
  std::size_t handed = 0;
  const auto hand_on = [&](std::shared_ptr<Submission> s) {
    std::unique_lock<std::mutex> lock(qmu);
    cv.wait(lock, [&] { return ready.size() < max_ready && handed == s->order; });
    ready.push_back(std::move(s));
    ++handed;
    cv.notify_all();
  };

  auto compiler = [&](int slot) {
    for (;;) {
      if (build_changed_) break;  // what is left waits for a rerun on the new build
      std::size_t i = next++;
      if (i >= pending_.size()) break;
      auto s = std::make_shared<Submission>();
      s->student = pending_[i];
      s->order = i;
      s->folder = opts_.submissions / s->student;
      // The scratch folder's name holds no character of the student's name that a tool could misread: nvcc
      // splits its fatbinary arguments at commas ("Last, First" failed to compile).
      s->scratch = opts_.out / ".work" / scratch_name(i, s->student);
      s->result_dir = opts_.out / s->student;
      s->result.student = s->student;
      s->result.isolation = isolation_name(sandbox_);  // after preflight, which may have given up the uid
      try {
        std::error_code ec;
        fs::remove_all(s->scratch, ec);
        fs::remove_all(s->result_dir, ec);  // a half-graded attempt of a stopped batch
        fs::create_directories(s->scratch);
        fs::create_directories(s->result_dir);
        if (sandbox_.drop_uid) ::chmod(s->result_dir.c_str(), 0700);
      } catch (const std::exception& e) {
        s->result.error = std::string("while compiling: ") + e.what();
      }
      // From here on the worker owns s->result.error: a failed compile goes through s->built.
      hand_on(s);
      if (s->result.error.empty()) {
        try {
          compile(*s, slot, i);
        } catch (...) {
          s->built.fail(std::current_exception());
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++compiled_;  // for the ETA: this student needs only its run now
      }
      s->built.finish();
    }
    std::lock_guard<std::mutex> lock(qmu);
    --compiling;
    cv.notify_all();
  };
  auto runner = [&](int worker) {
    const int slot = slots_.worker_slot(worker);
    const std::string gpu = gpus_.empty() ? "" : gpus_[static_cast<std::size_t>(worker) % gpus_.size()];
    for (;;) {
      std::shared_ptr<Submission> s;
      {
        std::unique_lock<std::mutex> lock(qmu);
        cv.wait(lock, [&] { return !ready.empty() || compiling == 0; });
        if (ready.empty()) break;
        s = std::move(ready.front());
        ready.pop_front();
        cv.notify_all();
      }
      const auto not_graded = [&](const char* when) {
        return std::string("not graded: the build changed ") + when + " (" + build_change_ +
               "); run the batch again once the build is done";
      };
      if (s->result.error.empty() && !build_unchanged()) {
        s->built.wait_finished();
        s->result.error = not_graded("before this student's run");
      }
      if (s->result.error.empty()) {
        std::string run_error;
        try {
          run_gates_of(*s, slot, gpu, worker);
        } catch (const std::exception& e) {
          run_error = std::string("while running: ") + e.what();
        }
        s->built.wait_finished();  // the compile has ended (and with it every write of its to s), whatever happened
        try {
          s->built.rethrow();
        } catch (const std::exception& e) {
          s->result.error = std::string("while compiling: ") + e.what();
        }
        if (s->result.error.empty()) s->result.error = run_error;
        set_running(worker, false);
        // Checked after the run: a change during the compile or the run may have given this student a mix of two
        // builds (or a link against a half-written library), and nothing in the result would show it.
        if (s->result.error.empty() && !build_unchanged())
          s->result.error = not_graded("while this student was graded");
      }
      s->built.wait_finished();
      try {
        finish(*s);
      } catch (const std::exception& e) {
        // Not even grader-error.txt could be written: still a grader error, named and in the exit status.
        std::cerr << "labgrade: grader error: cannot write the result of " << printable(s->student) << ": "
                  << printable(e.what()) << "\n";
        std::lock_guard<std::mutex> lock(mu_);
        ++done_;
        ++errors_;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < compiling; ++c) threads.emplace_back(compiler, c);
  for (int w = 0; w < workers_; ++w) threads.emplace_back(runner, w);
  for (auto& t : threads) t.join();
  compile_tokens_ = nullptr;
  std::error_code ec;
  if (!opts_.keep_scratch) fs::remove_all(opts_.out / ".work", ec);
  write_class_outputs();
  if (build_changed_)
    std::cerr << "labgrade: stopped early: " << build_change_ << " while the batch ran (a rebuild, or an update of the "
              << "workbook). The students graded before it keep their results; " << (pending_.size() - (done_ - errors_))
              << " are left for a rerun: run the same command again once the build is done (or into a new --out, to "
              << "grade every student with the new build)\n";
  // A refused submission folder was not graded either: the exit status says so, as for a grader error.
  return errors_ == 0 && refused_ == 0 && !build_changed_ ? 0 : 1;
}

int batch_main(const BatchOptions& opts) {
  Batch b(opts);
  return b.run();
}

}  // namespace labgrade
