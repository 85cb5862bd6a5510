// Batch::setup and Batch::preflight: everything a batch settles before the first student (the output folder, the
// build and the GPUs, the labs, the sandbox and what it hides, the students) and the probe that the sandbox can run
// the build. Separate from batch.cpp, the pipeline that then grades the students.
#include "batch.h"
#include "batch_internal.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "devices.h"
#include "grade.h"
#include "objcheck.h"
#include "progress.h"
#include "sandbox.h"
#include "stepbuild.h"

namespace labgrade::detail {

// In this order: each step uses what the ones before it settled.
void Batch::setup() {
  lock_out_folder();
  BuildOptions bo = find_root_and_gpus();
  build_ = prepare_build(bo);
  load_labs();
  build_gate_objects(bo);
  record_build_inputs();
  prepare_object_checks();
  choose_sandbox();
  hide_from_sandbox(set_read_only_paths());
  plan_slots();
  list_students();
}

void Batch::lock_out_folder() {
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
  end_stragglers();
}

// A batch that was killed (SIGKILL, a lost node) cannot end what it had started. bubblewrap drops its capabilities,
// which clears the parent-death signal the grader gave it, so its sandboxes outlive the grader, with whatever ran
// inside: a gate binary still timing kernels on a GPU the resumed batch is about to time on. With the folder's lock
// held, every process that names this folder's scratch space belongs to a dead batch: end them before grading.
void Batch::end_stragglers() {
  const std::string scratch = (opts_.out / ".work" / "").string();
  int ended = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == getpid()) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);  // a /proc file: its size reads as 0, so stream it
    std::string cmdline(64 << 10, '\0');
    in.read(cmdline.data(), static_cast<std::streamsize>(cmdline.size()));
    cmdline.resize(static_cast<std::size_t>(in.gcount()));
    if (cmdline.find(scratch) == std::string::npos) continue;
    if (::kill(pid, SIGKILL) == 0) ++ended;
  }
  if (ended > 0)
    std::cerr << "labgrade: ended " << ended << " process(es) left running in " << scratch
              << " by an earlier batch that was stopped\n";
}

// The repository root and the GPUs (--gpus, or every one CUDA sees).
BuildOptions Batch::find_root_and_gpus() {
  BuildOptions bo = opts_.build;
  if (bo.root.empty()) {
    auto root = find_repo_root(fs::current_path());
    if (!root) root = find_repo_root(self_exe().parent_path());
    if (!root) throw UserError("run labgrade batch inside the lab workbook (the grader's own tree)");
    bo.root = *root;
  }
  CudaInfo cuda = query_cuda();
  for (const auto& g : cuda.gpus) gpu_gib_ = gpu_gib_ > 0 ? std::min(gpu_gib_, g.memory_gib) : g.memory_gib;
  // CUDA numbers the GPUs it sees from 0. When this process was itself limited to some GPUs (Slurm, a user's
  // CUDA_VISIBLE_DEVICES=2,3), index i is the i-th entry of that list, and that entry is what each worker
  // must be given: "0" would name the machine's first GPU again.
  std::vector<std::string> inherited;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"))
    for (auto& e : split(v, ','))
      if (!trim(e).empty()) inherited.push_back(trim(e));
  const auto id_of = [&](const GpuInfo& g) {
    return static_cast<std::size_t>(g.index) < inherited.size() ? inherited[g.index] : std::to_string(g.index);
  };
  for (const auto& g : cuda.gpus)
    if (!g.uuid.empty()) uuid_of_id_[id_of(g)] = uuid_of_id_[g.uuid] = g.uuid;
  if (!opts_.gpus.empty()) {
    gpus_ = parse_gpu_groups(opts_.gpus);
    bo.have_gpu = !gpus_.empty();
  } else {
    for (const auto& g : cuda.gpus) gpus_.push_back(id_of(g));
    bo.have_gpu = cuda.ok;
    if (!cuda.ok) std::cerr << "labgrade: " << cuda.error << ": GPU gates will be skipped\n";
  }
  return bo;
}

void Batch::load_labs() {
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
}

void Batch::build_gate_objects(const BuildOptions& bo) {
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
}

void Batch::record_build_inputs() {
  std::set<fs::path> include_dirs;  // common/include is every lab's: walked once
  for (const auto& l : labs_) {
    const Recipe& r = l.recipe;
    inputs_.add(r.file);
    for (const auto* list : {&r.gate_objects, &r.skeleton_objects, &r.link_libraries})
      for (const auto& f : *list)
        if (!f.empty() && f[0] == '/') inputs_.add(f);
    for (const auto& tool : {r.compiler(), r.link.empty() ? std::string() : r.link.front()})
      if (!tool.empty() && tool[0] == '/') inputs_.add(tool);
    // The headers of the workbook a student's file can include (its -I folders, the lab's folder): not those of
    // the system or of the build folder (whose objects are already counted).
    for (const auto& dir : r.referenced_paths())
      if (starts_with(dir.string(), (build_.root / "").string()) && !starts_with(dir.string(), (build_.dir / "").string()))
        include_dirs.insert(dir);
  }
  for (const auto& dir : include_dirs) inputs_.add_headers(dir);
}

BuildInputs::Stamp BuildInputs::stamp_of(const fs::path& file) {
  Stamp s;
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return s;
  s.exists = true;
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.size = static_cast<std::uint64_t>(st.st_size);
  s.mtime_ns = std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.ctime_ns = std::int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return s;
}

void BuildInputs::add(const fs::path& file) { stamps_.emplace(file, stamp_of(file)); }

void BuildInputs::add_headers(const fs::path& dir, int depth) {
  static const std::set<std::string> kHeader = {".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc", ".tpp"};
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() >= depth) it.disable_recursion_pending();
    if (it->is_regular_file(ec) && kHeader.count(it->path().extension().string())) add(it->path());
  }
}

std::string BuildInputs::first_change() const {
  for (const auto& [file, was] : stamps_) {
    const Stamp now = stamp_of(file);
    if (now == was) continue;
    const char* how = !was.exists ? "appeared"
                      : !now.exists ? "was deleted"
                      : now.dev != was.dev || now.ino != was.ino ? "was replaced"
                                                                 : "was rewritten";
    return file.string() + " " + how;
  }
  return {};
}

void Batch::prepare_object_checks() {
  // The static check of student objects (objcheck.h) needs binutils, and the names the gate binary's shared
  // libraries export (a weak definition of one of those in a student object would replace it).
  auto nm = find_program("nm"), objdump = find_program("objdump");
  if (!nm || !objdump) throw UserError("nm and objdump (binutils) are needed to check student objects before linking");
  nm_ = nm->string();
  objdump_ = objdump->string();
  // The C and C++ libraries each linker will use, asked once per linker.
  std::map<std::string, std::vector<std::string>> c_libraries;
  for (const auto& l : labs_) {
    if (l.recipe.link.empty() || c_libraries.count(l.recipe.link.front())) continue;
    auto& found = c_libraries[l.recipe.link.front()];
    for (const char* lib : {"libstdc++.so", "libc.so.6", "libm.so.6"}) {
      auto r = run_command({l.recipe.link.front(), std::string("-print-file-name=") + lib}, 30);
      // (A library the linker does not know comes back as its bare name: it is not linked either.)
      if (r.exit_code != 0)
        throw UserError("cannot ask " + l.recipe.link.front() + " where " + lib + " is, which the check of student " +
                        "objects needs (" + (r.timed_out ? "no answer in 30 s" : trim_message(r.output, 3, 400)) + ")");
      if (fs::path(trim(r.output)).is_absolute()) found.push_back(trim(r.output));
    }
  }
  std::vector<std::vector<std::string>> shared(labs_.size());
  std::vector<std::string> all;
  for (std::size_t i = 0; i < labs_.size(); ++i) {
    const auto& r = labs_[i].recipe;
    for (const auto& f : r.link_libraries)
      if (!f.empty() && f[0] == '/' && contains(fs::path(f).filename().string(), ".so")) shared[i].push_back(f);
    if (!r.link.empty())
      for (const auto& f : c_libraries[r.link.front()]) shared[i].push_back(f);
    all.insert(all.end(), shared[i].begin(), shared[i].end());
  }
  const int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const auto exports = exported_symbols_each(all, nm_, jobs);
  // What each gate binary's own objects and static libraries define: linked before the student's objects
  // (stepbuild's link_argv), their copies of a template instance are the process's. The libraries once for all labs.
  std::vector<std::vector<std::string>> gate_side(labs_.size());
  std::vector<std::string> all_gate_side;
  for (std::size_t i = 0; i < labs_.size(); ++i) {
    gate_side[i] = labs_[i].recipe.gate_objects;
    for (const auto& f : labs_[i].recipe.link_libraries)
      if (is_static_library(f)) gate_side[i].push_back(f);
    all_gate_side.insert(all_gate_side.end(), gate_side[i].begin(), gate_side[i].end());
  }
  const auto gate_defines = defined_symbols_each(all_gate_side, nm_, jobs);
  for (std::size_t i = 0; i < labs_.size(); ++i) {
    auto& l = labs_[i];
    l.objects.lab_namespace = "lab" + l.recipe.lab;
    for (const auto& f : shared[i]) {
      const auto& names = exports.at(f);
      l.objects.shared_exports.insert(names.begin(), names.end());
    }
    for (const auto& f : gate_side[i]) {
      const auto& names = gate_defines.at(f);
      l.objects.gate_defines.insert(names.begin(), names.end());
    }
    l.objects.gate_defines_known = true;
  }
}

void Batch::choose_sandbox() {
  // The CPU references start a thread per core, and the default memory and race checks run two gate processes
  // (memcheck and racecheck) at once under the same uid: room for both, each with a thread per core.
  if (opts_.max_processes <= 0)
    opts_.max_processes = std::max(256, 4 * static_cast<int>(std::thread::hardware_concurrency()) + 64);
  std::uint64_t mem = static_cast<std::uint64_t>(opts_.memory_gib * kGiB);
  sandbox_ = detect_sandbox(opts_.sandbox, mem, static_cast<std::uint64_t>(opts_.max_processes));
  // Every sandboxed process (compiler, nm, gate binary) starts through this executable (`__sandbox-exec`): a private
  // copy, so that relinking labgrade while a batch runs (the linker writes a new file in its place) cannot make
  // those starts fail, or run another grader's code, half-way through a student.
  fs::path helper = opts_.out / ".work" / "bin" / "labgrade";
  fs::create_directories(helper.parent_path());
  ::chmod(helper.parent_path().c_str(), 0755);
  copy_file_for_exec(sandbox_.helper, helper, 0755);  // every sandboxed start execs it (see batch.cpp's gate copies)
  sandbox_.helper = helper;
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
}

// What the sandbox binds read-only on top of the system's folders (sandbox_.ro_paths, also returned).
std::set<fs::path> Batch::set_read_only_paths() {
  std::error_code ec;
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
  return ro;
}

void Batch::hide_from_sandbox(const std::set<fs::path>& ro) {
  std::error_code ec;
  // Inside the sandbox: no solutions (sources, objects, libraries, binaries of any build), no other student's
  // work, no grading outputs.
  using Overlay = SandboxSettings::Overlay;
  std::set<fs::path> hide = {opts_.out, opts_.submissions, build_.root / "solutions",
                             build_.root / "grader" / "fixtures"};
  for (const auto& l : labs_) hide.insert(l.recipe.lab_dir.parent_path().parent_path() / "solutions");
  // A submission that is a link (grade-array.sbatch's parts link each student's folder of the real submissions
  // folder): where the link points is hidden too, with the folder that holds it, since that folder may lie under a
  // path the sandbox binds (/opt, a library folder) and hold every other student's work.
  {
    // Paths compared in one form (the workbook's may run through a link). Neither a folder that holds the workbook
    // nor one that lies in it is masked (a link into the repository would hide its labs); the folder holding the
    // target covers the target.
    const fs::path root = fs::weakly_canonical(build_.root, ec);
    const auto within = [](const fs::path& p, const fs::path& dir) {
      return p == dir || starts_with(p.string(), (dir / "").string());
    };
    const auto maskable = [&](const fs::path& p) {
      return !p.empty() && p != p.root_path() && !within(root, p) && !within(p, root);
    };
    std::set<fs::path> linked;
    for (const auto& e : fs::directory_iterator(opts_.submissions, ec))
      if (e.is_symlink(ec))
        if (const fs::path target = fs::canonical(e.path(), ec); !ec) {
          if (maskable(target.parent_path())) linked.insert(target.parent_path());
          else if (maskable(target)) linked.insert(target);
        }
    hide.insert(linked.begin(), linked.end());
    ec.clear();
  }
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
}

void Batch::plan_slots() {
  jobs_ = opts_.jobs > 0 ? opts_.jobs : std::max(1u, std::thread::hardware_concurrency());
  workers_ = opts_.workers > 0 ? opts_.workers : std::max<int>(1, static_cast<int>(gpus_.size()));
  slots_ = batch_slots(jobs_, workers_);
  if (!gpus_.empty()) cpus_ = plan_cpus(allowed_cpus(), workers_, core_siblings);  // (no GPU: no speed gate)
  for (std::size_t w = 0; w < cpus_.speed.size(); ++w) {
    std::vector<std::string> ids;
    for (int c : cpus_.speed[w]) ids.push_back(std::to_string(c));
    std::cerr << "labgrade: worker " << w << "'s speed gates run on CPU(s) " << join(ids, ",")
              << " (no compile or other worker's run uses them)\n";
  }
  reserve_uid_block(sandbox_, slots_.reserved);
  lab_jobs_ = opts_.lab_jobs > 0 ? opts_.lab_jobs
                                 : default_lab_jobs(gpus_.empty() ? 0 : gpu_gib_, usable_cpus() / workers_, labs_.size());
  {
    std::error_code ec;
    const auto space = fs::space(opts_.out, ec);
    const std::string disk =
        ec ? "" : disk_space_warning(space.available, opts_.disk_gib, workers_ * static_cast<int>(labs_.size()));
    if (!disk.empty()) std::cerr << "labgrade: warning: " << disk << "\n";
  }
  if (!gpus_.empty() && workers_ > static_cast<int>(gpus_.size()))
    std::cerr << "labgrade: warning: " << workers_ << " workers share " << gpus_.size()
              << " GPU(s): their speed gates take turns on it, but their other runs share its memory, and a "
                 "student's gates can fail for memory another student's run holds\n";
  // Each worker's GPUs by UUID, nvidia-smi's key, so that CUDA's numbering and nvidia-smi's never have to agree: from
  // the CUDA query above where it saw every member of the worker's CUDA_VISIBLE_DEVICES, else asked of CUDA in a
  // child started with it. Where workers share a GPU, another worker's runs are on it: the look then counts only
  // processes outside the batch (others_than).
  if (!gpus_.empty() && find_program("nvidia-smi"))
    for (const auto& g : gpus_) {
      std::vector<std::string> uuids;
      for (const auto& member : split(g, ','))
        if (const auto it = uuid_of_id_.find(trim(member)); it != uuid_of_id_.end()) uuids.push_back(it->second);
      gpu_uuids_[g] = uuids.size() == split(g, ',').size() ? uuids : gpu_uuids(g);
    }
  // Nothing of the batch runs on a GPU yet (the CUDA queries' children have exited): whatever computes there now is
  // someone else's, and would share the GPU with the speed gates by time slices.
  if (!gpus_.empty())
    if (const auto busy = gpu_processes(); !busy.empty())
      std::cerr << "labgrade: warning: other processes compute on this machine's GPUs: "
                << describe_gpu_processes(busy)
                << ". A speed gate timed beside one of them shares the GPU and can fail through no fault of the "
                   "submission: stop them, or give the batch only idle GPUs (--gpus)\n";
}

void Batch::list_students() {
  SubmissionList list = scan_submissions(opts_.submissions);
  students_ = std::move(list.students);
  not_graded_ = std::move(list.not_graded);
  refused_ = list.refused;
  for (const auto& line : not_graded_) std::cerr << "labgrade: " << line << "\n";
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
  // An instructor's diagnosis of a speed gate's spread (labkit/timing.cpp): every timed call appended to this file,
  // which every dedicated uid must be able to write. Only labgrade's own environment sets it, never a submission.
  if (const char* trace = std::getenv("LABKIT_TIMING_TRACE")) env.emplace_back("LABKIT_TIMING_TRACE", trace);
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

CpuPlan plan_cpus(const std::vector<int>& allowed, int workers, const std::function<std::vector<int>(int)>& core_of) {
  CpuPlan p;
  p.shared = allowed;
  workers = std::max(1, workers);
  const std::size_t per_worker = allowed.size() / static_cast<std::size_t>(workers);
  const std::size_t keep = per_worker >= 16 ? 4 : per_worker >= 8 ? 2 : 0;
  if (keep == 0) return p;
  // Whole cores from the highest-numbered CPUs down (the first CPUs take the system's interrupts and daemons).
  std::set<int> free(allowed.begin(), allowed.end());
  p.speed.assign(static_cast<std::size_t>(workers), {});
  for (auto& mine : p.speed) {
    for (auto it = free.rbegin(); it != free.rend() && mine.size() < keep;) {
      std::vector<int> core;
      for (int c : core_of(*it))
        if (free.count(c)) core.push_back(c);
      if (core.empty()) core = {*it};
      for (int c : core) free.erase(c);
      mine.insert(mine.end(), core.begin(), core.end());
      it = free.rbegin();
    }
    std::sort(mine.begin(), mine.end());
  }
  p.shared.assign(free.begin(), free.end());
  if (p.shared.empty()) return CpuPlan{allowed, {}};  // (not with 8 or more per worker)
  return p;
}

std::vector<int> CpuPlan::runs_of(int worker) const {
  if (speed.empty()) return shared;
  std::vector<int> all = shared;
  const auto& mine = speed.at(static_cast<std::size_t>(worker) % speed.size());
  all.insert(all.end(), mine.begin(), mine.end());
  std::sort(all.begin(), all.end());
  return all;
}

BatchSlots batch_slots(int jobs, int workers) {
  BatchSlots s;
  s.compilers = std::max(2, jobs / 4);
  s.reserved = s.compilers + std::max(1, workers);
  return s;
}

std::vector<std::string> parse_gpu_groups(const std::string& spec) {
  std::vector<std::string> groups;
  std::set<std::string> seen;
  for (const auto& entry : split(spec, ',')) {
    if (trim(entry).empty()) continue;  // "0,1," as "0,1"
    std::vector<std::string> members;
    for (const auto& g : split(entry, '+')) {
      const std::string id = trim(g);
      if (id.empty()) throw UserError("--gpus " + spec + ": `" + trim(entry) + "` has an empty GPU (write 0+1)");
      if (!seen.insert(id).second)
        throw UserError("--gpus " + spec + ": GPU " + id +
                        " is named twice (a GPU goes to one worker, once: two workers on one GPU would time their "
                        "speed gates side by side)");
      members.push_back(id);
    }
    groups.push_back(join(members, ","));
  }
  return groups;
}

std::string gpus_for_lab(const std::string& worker_gpus, int needs) {
  std::vector<std::string> members = split(worker_gpus, ',');
  const auto keep = static_cast<std::size_t>(std::max(1, needs));
  if (members.size() > keep) members.resize(keep);
  return join(members, ",");
}

std::string disk_space_warning(std::uintmax_t available, double disk_gib, int lab_folders) {
  const double need = disk_gib * double(kGiB) * std::max(1, lab_folders);
  if (disk_gib <= 0 || double(available) >= need) return "";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "the output folder's disk has %.1f GiB free, less than the %d lab folder(s) of the students graded at "
                "once may fill under --disk-gib %g (%.1f GiB, the compiles of the students ahead not counted): "
                "submissions that fill their share could leave the others' compiles, logs and results no room. Free "
                "space, grade on a larger disk, or lower --disk-gib",
                double(available) / double(kGiB), std::max(1, lab_folders), disk_gib, need / double(kGiB));
  return buf;
}

std::vector<std::string> multi_gpu_warnings(const std::vector<LabGpus>& labs, std::size_t gpus_per_worker) {
  std::vector<std::string> out;
  if (gpus_per_worker == 0) return out;  // no GPU: every GPU gate is skipped anyway, and says so
  for (const auto& l : labs) {
    if (static_cast<std::size_t>(l.gpus) <= gpus_per_worker) continue;
    std::string plus;
    for (int k = 0; k < l.gpus; ++k) plus += (k ? "+" : "") + std::to_string(k);
    out.push_back("lab " + l.lab + " needs " + std::to_string(l.gpus) + " GPUs for its multi-GPU gates (its rubric's " +
                  "`gpus`) and a worker here sees " + std::to_string(gpus_per_worker) +
                  ": those gates will report `skipped`, with 0 points, for every student. Give each worker " +
                  std::to_string(l.gpus) + " GPUs (--gpus " + plus + ": one worker that grades on all of them), or " +
                  "set those gates' points to 0 in " + l.rubric.string());
  }
  return out;
}

}  // namespace labgrade::detail
