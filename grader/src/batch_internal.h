// What batch.cpp (the pipeline: compile and run workers, results) shares with batch_setup.cpp (Batch::setup and
// Batch::preflight: the build, the labs, the sandbox, the students): the Batch class and the plans it works from.
// Internal to the grader: batch.h is the interface.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "batch.h"
#include "labpool.h"
#include "objcheck.h"
#include "recipe.h"
#include "sandbox.h"
#include "sass.h"
#include "scoring.h"

namespace labgrade::detail {

using Clock = std::chrono::steady_clock;
constexpr std::uint64_t kGiB = 1ull << 30;

struct LabPlan {
  Recipe recipe;
  labkit::Rubric rubric;
  bool hidden = false;
  fs::path gate_rubric;  // what the gate binary reads (gate_rubric_text): OUT/.work/rubrics/labNN.toml
  ObjPolicy objects;     // what the student's objects may define (objcheck.h)
};

// One student on its way through the pipeline. A worker takes it while it still compiles: the compile hands each lab
// on as it is linked (`built`), and the worker times that lab's speed gates while the others compile.
struct Submission {
  std::string student;
  std::size_t order = 0;  // place in the queue
  fs::path folder;      // the submission (never written)
  fs::path scratch;     // OUT/.work/<n>-<student> (scratch_name)
  fs::path result_dir;  // OUT/<student>
  SubmissionResult result;  // its labs are set up before the compile starts, and each belongs to the compile until
                            // `built` hands it on; the rest of it once `built` has finished
  std::vector<fs::path> exes;  // per lab: the gate binary (the grader's copy), empty when the lab did not build
  // Per lab that needs it: the gate binary's machine code (sass.h), read by cuobjdump in the compiles' sandbox.
  std::vector<std::shared_future<SassDump>> sass;
  std::vector<double> untimed_seconds;  // per lab: its run after the speed gates (the later students' lab order)
  ReadyQueue built;
};

inline std::string lab_tag(const Recipe& r) { return "lab" + r.lab; }

// The students (subfolders, dot folders excluded) of a submissions or output folder, sorted.
std::vector<std::string> subfolders(const fs::path& dir);

// What a submissions folder holds: the students to grade (sorted), and a line for each entry that is not graded and
// why (printed at the batch's start and listed in report.md; nothing is skipped without a word). A loose file
// ("carol.zip") or a dot folder is not a submission. A folder whose name is not valid UTF-8, has control characters
// (C0, DEL, C1) or is written like another's in the class files (the gradebook's "'=x" for "=x") is refused
// (`refused` counts them): the class files could not tell it apart from another student, or would run its escape
// sequences, and two students must never merge into one row.
struct SubmissionList {
  std::vector<std::string> students;
  std::vector<std::string> not_graded;
  std::size_t refused = 0;
};
SubmissionList scan_submissions(const fs::path& dir);

// Seconds until the batch is done, from what the students graded so far took: their mean compile time (the wall
// time of one student's compiles) and mean run time. `remaining` students pass through `jobs` compiles (students
// compiled at once) and `workers` runs at once; `running` holds how long each student being run now (counted in
// `remaining`) has run so far. The workers take the students in queue order, each as soon as it is free and the
// student compiled; the estimate is when the last of them ends. (Elapsed time over students done, the first
// estimate, also counted the pipeline filling up and the students finishing in bursts of `jobs`: off by 30-130 % on
// a batch of 16 on 2 cores. Leaving out the runs under way was 34-40 % off on two GPUs, where students end in
// pairs: after the first of a pair it counted a whole run for the second, already most of the way through.)
double batch_eta(std::size_t remaining, std::size_t to_compile, double mean_compile_s, double mean_run_s, int jobs,
                 int workers, const std::vector<double>& running = {});

// The uid slots of a batch (sandbox.h: one uid per slot): the students compiled at once take the first
// `compilers`, each worker the next, `compilers + worker`; `reserved` in all. A slot's processes are swept (killed)
// after every compile and around every speed run, so no compile may share a worker's slot. Students compiled at once:
// a quarter of the compile jobs, at least 2 (one links or is inspected while the other compiles), so there can be more
// of them than jobs (with -j 1, numbering the workers' slots after the jobs gave compile slot 1 the first worker's
// uid: a compile's sweep killed that worker's gate runs, and its sweeps the compiles).
struct BatchSlots {
  int compilers = 2;
  int reserved = 3;
  int worker_slot(int worker) const { return compilers + worker; }
};
BatchSlots batch_slots(int jobs, int workers);

// Which CPUs a batch's processes run on. A speed gate's host side (its launches, its host round trips between
// kernels: lab 07's CG waits for alpha and beta every iteration) is timed with the kernels, and a CPU shared with the
// next students' compiles or another worker's CPU references makes it wait now and then: on two H200s with 32 compile
// jobs a healthy lab 07 step 4 once ran at 0.39x of the bytes-moved floor (1.02x alone) and lost its 10 points. So on
// a machine with CPUs to spare, each worker keeps `speed[w]` (whole cores) for its speed gates alone; its other runs
// may use them too (a worker's speed process runs only while nothing else of its GPU does), and the compiles and
// every other worker's runs keep to `shared`. `speed` is empty (nothing kept) with fewer than 8 CPUs per worker: 4
// kept from 16 CPUs per worker, else 2. `core_of(cpu)`: the CPUs of that CPU's core (hyper-threads), kept together.
struct CpuPlan {
  std::vector<int> shared;
  std::vector<std::vector<int>> speed;  // per worker; empty: none kept
  std::vector<int> runs_of(int worker) const;  // a worker's untimed runs: shared and its own
};
CpuPlan plan_cpus(const std::vector<int>& allowed, int workers,
                  const std::function<std::vector<int>(int)>& core_of);

// `--gpus`: the workers' GPUs, comma-separated; GPUs joined by '+' go to one worker, which sees them all (for labs
// whose multi-GPU gates need them): "0,1" is two workers of one GPU each, "0+1" one worker of two. Returns each
// worker's CUDA_VISIBLE_DEVICES ("0", "0,1"). Throws UserError for an empty entry or a GPU named twice (two workers
// on one GPU would each take "exclusive" turns of their own on it, and time their speed gates side by side).
std::vector<std::string> parse_gpu_groups(const std::string& spec);

// The CUDA_VISIBLE_DEVICES of a lab that needs `needs` GPUs, on a worker that has `worker_gpus` ("0,1"): the first
// `needs` of them (all of them when it has fewer; "" stays "", no GPU).
std::string gpus_for_lab(const std::string& worker_gpus, int needs);

// What a batch says before it starts about the labs whose rubric asks for more GPUs (`gpus`) than its workers see
// (`gpus_per_worker`, the fewest of any worker; 0: no GPU, nothing to say): their multi-GPU gates would report
// `skipped` for every student.
struct LabGpus {
  std::string lab;
  int gpus = 1;
  fs::path rubric;
};
std::vector<std::string> multi_gpu_warnings(const std::vector<LabGpus>& labs, std::size_t gpus_per_worker);

// What a batch says before it starts when the output folder's disk (`available` bytes) could not hold every lab
// folder that can be full at once, each to the disk watch's limit (--disk-gib, GateRunSpec::disk_limit_bytes): a
// folder is emptied only when it passes the limit, and a student's folders stay until the student is done, so that
// is the workers times the labs (`lab_folders`). The compiles of the students ahead come on top. "" when it could,
// or when the watch is off (disk_gib <= 0).
std::string disk_space_warning(std::uintmax_t available, double disk_gib, int lab_folders);

// The files a batch grades with, as the file system had them when it started: the recipes, the gate, skeleton and
// library objects, the compiler and linker, and the headers a student's compile can include. A rebuild or an update
// of the workbook while a batch runs grades the students after it with another build than those before it, and the
// ones it meets half-way with a mix (a link against a half-written library, new headers against old gate objects):
// the batch looks again around every student and stops at the first change (Batch::build_unchanged).
class BuildInputs {
 public:
  void add(const fs::path& file);
  // Every header (.h, .hpp, .cuh, ...) below `dir`, at most `depth` folders down.
  void add_headers(const fs::path& dir, int depth = 3);
  std::size_t size() const { return stamps_.size(); }
  // The first input that is no longer the file recorded, and how ("... was rewritten"); empty when none changed.
  // Stat only (inode, size, modification and change times): a file rewritten with the same bytes counts as changed,
  // which costs a rerun and never a grade.
  std::string first_change() const;

 private:
  struct Stamp {
    bool exists = false;
    std::uint64_t dev = 0, ino = 0, size = 0;
    std::int64_t mtime_ns = 0, ctime_ns = 0;
    bool operator==(const Stamp& o) const {
      return exists == o.exists && dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns &&
             ctime_ns == o.ctime_ns;
    }
  };
  static Stamp stamp_of(const fs::path& file);
  std::map<fs::path, Stamp> stamps_;
};

// cuobjdump for the machine-code checks (sass.h) as a batch runs it: as the process `ps` (a compile's: its sandbox,
// uid slot and limits; the gate binary's folder must be among its extra_ro), its output in `output`, a file the grader
// opens (so none of the slot's processes can), read back and removed.
SassRunner sandboxed_sass_runner(ProcessSpec ps, fs::path output);

class Batch {
 public:
  explicit Batch(const BatchOptions& o) : opts_(o) {}
  int run();

 private:
  // batch_setup.cpp: setup() runs these in this order.
  void setup();
  void lock_out_folder();
  void end_stragglers();
  BuildOptions find_root_and_gpus();
  void load_labs();
  void build_gate_objects(const BuildOptions& bo);
  void record_build_inputs();
  void prepare_object_checks();
  void choose_sandbox();
  std::set<fs::path> set_read_only_paths();
  void hide_from_sandbox(const std::set<fs::path>& ro);
  void plan_slots();
  void list_students();
  void preflight();
  std::vector<std::pair<std::string, std::string>> environment(const fs::path& writable, const std::string& gpu) const;
  // batch.cpp
  void compile(Submission& s, int slot, std::size_t order);
  static std::shared_future<SassDump> read_machine_code(ProcessSpec ps, const fs::path& exe, const std::string& tag);
  static void wait_for_machine_code(Submission& s);
  std::string inspect_object(ProcessSpec ps, const LabPlan& plan, const std::string& src, const fs::path& obj,
                             std::vector<std::string>* notes);
  void run_gates_of(Submission& s, int slot, const std::string& gpu, int worker);
  void finish(Submission& s);
  void set_running(int worker, bool running);  // for the ETA: when the worker's current run started
  // False once any of inputs_ changed (the first change is kept in build_change_): no grade of this batch may then
  // come from the build as it is now.
  bool build_unchanged();
  void write_class_outputs();

  BatchOptions opts_;
  Build build_;
  std::vector<LabPlan> labs_;
  SandboxSettings sandbox_;
  std::vector<std::string> gpus_;
  // Per worker GPU group (an entry of gpus_), the UUIDs of its GPUs, where each group has a worker of its own and
  // nvidia-smi is there: what other processes on them are looked for around a student's speed gates.
  std::map<std::string, std::vector<std::string>> gpu_uuids_;
  std::map<std::string, std::string> uuid_of_id_;  // a CUDA_VISIBLE_DEVICES entry (index or UUID) -> its UUID
  double gpu_gib_ = 0;  // the smallest GPU's memory (0: unknown), for default_lab_jobs
  int jobs_ = 1, workers_ = 1;
  int lab_jobs_ = 1;  // labs of one student run at once (labpool.h)
  std::map<std::string, std::unique_ptr<GpuTurns>> turns_;  // per GPU (run() fills it): the speed gates' turns
  GpuTurns machine_turns_;  // every GPU's turns take the machine's too: a quiet turn for timing a gate again
  std::vector<std::string> students_, pending_;
  std::vector<std::string> not_graded_;  // the submissions folder's entries not graded (scan_submissions)
  std::size_t refused_ = 0;              // of them, folders whose names were refused
  int lock_fd_ = -1;
  JobTokens* compile_tokens_ = nullptr;  // the compile jobs, shared by every student compiling (run() sets it)
  BatchSlots slots_;                     // which uid slot compiles and runs use (plan_slots)
  CpuPlan cpus_;                         // which CPUs compiles and runs use (plan_slots)
  int compilers_ = 1;                    // students compiled at once (run() sets it)
  std::vector<std::optional<Clock::time_point>> running_since_;  // per worker, its run under way (guarded by mu_)
  std::string nm_, objdump_;
  BuildInputs inputs_;  // what the grades come from (record_build_inputs), checked around every student
  std::atomic<bool> build_changed_{false};
  std::string build_change_;  // the first change seen (guarded by mu_)

  std::mutex mu_;
  std::size_t done_ = 0, not_full_ = 0, errors_ = 0, compiled_ = 0;
  double compile_sum_ = 0, run_sum_ = 0;  // over the students done, for the ETA
  std::map<std::string, double> lab_run_sum_;  // each lab's untimed run time over the students done: the labs' order
  std::size_t lab_runs_ = 0;                    // the students in lab_run_sum_
  Clock::time_point start_;
};

}  // namespace labgrade::detail
