#include "doctor.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <regex>

#include "devices.h"
#include "recipe.h"
#include "sandbox.h"

namespace labgrade {

namespace {

struct Report {
  int fatal = 0, warnings = 0;
  void ok(const std::string& what) { std::cout << "  ok    " << what << "\n"; }
  void info(const std::string& what) { std::cout << "  info  " << what << "\n"; }
  void warn(const std::string& what, const std::string& todo) {
    ++warnings;
    std::cout << "  warn  " << what << "\n        -> " << todo << "\n";
  }
  void fail(const std::string& what, const std::string& todo) {
    ++fatal;
    std::cout << "  FAIL  " << what << "\n        -> " << todo << "\n";
  }
};

std::string first_match(const std::string& text, const std::regex& re) {
  std::smatch m;
  return std::regex_search(text, m, re) ? m[1].str() : "";
}

// (major, minor) from "3.25.1"
std::pair<int, int> version_pair(const std::string& v) {
  auto parts = split(v, '.');
  int major = parts.size() > 0 ? std::atoi(parts[0].c_str()) : 0;
  int minor = parts.size() > 1 ? std::atoi(parts[1].c_str()) : 0;
  return {major, minor};
}

// Does a build for these CMAKE_CUDA_ARCHITECTURES run on compute capability major.minor? Real code (sm_XY) runs
// only on exactly that capability; PTX (compute_XY, kept by plain "90" and "90-virtual") is compiled by the
// driver for any capability >= XY, except the architecture-specific "a" variants.
std::string arch_verdict(const std::string& archs, int major, int minor) {
  int cc = major * 10 + minor;
  if (archs.empty()) return "unknown (no CMAKE_CUDA_ARCHITECTURES)";
  for (const auto& raw : split(archs, ';')) {
    std::string a = trim(raw);
    if (a == "native" || a == "all" || a == "all-major") return "covered (" + a + ")";
    std::smatch m;
    static const std::regex re(R"(^(\d+)(a?)(-real|-virtual)?$)");
    if (!std::regex_match(a, m, re)) continue;
    int v = std::stoi(m[1].str());
    bool specific = !m[2].str().empty();
    bool real = m[3].str() != "-virtual", ptx = m[3].str() != "-real";
    if (real && v == cc) return "covered (sm_" + a + ")";
    if (ptx && !specific && v <= cc) return "covered by PTX " + a + " (JIT-compiled at first run)";
  }
  return "NOT covered";
}

bool header_present(const std::string& header) {
  std::vector<fs::path> roots = {"/usr/include", "/usr/local/include"};
  if (const char* prefix = std::getenv("CMAKE_PREFIX_PATH"))
    for (const auto& p : split(prefix, ':'))
      if (!p.empty()) roots.push_back(fs::path(p) / "include");
  for (const auto& r : roots)
    if (fs::exists(r / header)) return true;
  return false;
}

// The repository to report on: --repo, else the one around the current folder, else the one around labgrade.
std::optional<fs::path> find_root(const DoctorOptions& opts) {
  std::optional<fs::path> root;
  if (!opts.root.empty()) root = opts.root;
  if (!root) root = find_repo_root(fs::current_path());
  if (!root) root = find_repo_root(self_exe().parent_path());
  return root;
}

// The configured builds to inspect: --build-dir, else the repository's build/gpu and build/ci that exist.
std::vector<fs::path> configured_builds(const DoctorOptions& opts, const std::optional<fs::path>& root) {
  std::vector<fs::path> builds;
  if (!opts.build_dir.empty())
    builds.push_back(fs::absolute(opts.build_dir));
  else if (root)
    for (const char* p : {"gpu", "ci"})
      if (fs::exists(*root / "build" / p / "CMakeCache.txt")) builds.push_back(*root / "build" / p);
  return builds;
}

// Reports nvcc and its version; without it nothing builds (fatal).
void check_nvcc(Report& rep, const std::vector<fs::path>& builds) {
  // nvcc: PATH, $CUDACXX, the usual toolkit folder, or what a configured build uses.
  std::optional<fs::path> nvcc;
  if (const char* cxx = std::getenv("CUDACXX")) nvcc = fs::path(cxx);
  if (!nvcc) nvcc = find_program("nvcc", {"/usr/local/cuda/bin"});
  for (const auto& b : builds)
    if (!nvcc) {
      std::string c = cmake_cache_value(b, "CMAKE_CUDA_COMPILER");
      if (!c.empty() && fs::exists(c)) nvcc = fs::path(c);
    }
  if (nvcc && fs::exists(*nvcc)) {
    auto r = run_command({nvcc->string(), "--version"}, 30);
    std::string v = first_match(r.output, std::regex(R"(release [0-9.]+, V([0-9.]+))"));
    rep.ok("nvcc " + (v.empty() ? std::string("(version unknown)") : v) + " (" + nvcc->string() + ")");
    if (!find_program("nvcc"))
      rep.info("nvcc is not on PATH: add " + nvcc->parent_path().string() +
               " to PATH for compute-sanitizer and ncu too");
  } else {
    rep.fail("nvcc not found (PATH, $CUDACXX, /usr/local/cuda/bin)",
             "install the CUDA toolkit (13.x) and put its bin/ folder on PATH");
  }
}

// Reports cmake and whether it is new enough for the presets (fatal if missing or too old).
void check_cmake(Report& rep) {
  if (auto cmake = find_program("cmake")) {
    auto r = run_command({cmake->string(), "--version"}, 30);
    std::string v = first_match(r.output, std::regex(R"(cmake version ([0-9.]+))"));
    auto [major, minor] = version_pair(v);
    // CMakePresets.json is version 6 (workflow presets: cmake --workflow --preset gpu|ci), read from 3.25 on.
    if (major > 3 || (major == 3 && minor >= 25))
      rep.ok("cmake " + v);
    else
      rep.fail("cmake " + v + " is too old (the presets need 3.25)",
               "install a newer CMake (pip install cmake, or Kitware's APT repository)");
  } else {
    rep.fail("cmake not found", "install CMake >= 3.25 (tools/setup.sh does on Debian 12 and Ubuntu 24.04)");
  }
}

// Warns about other processes computing on the GPUs: speed gates share a GPU with them by time slices.
void check_gpu_processes(Report& rep) {
  const std::vector<GpuProcess> busy = gpu_processes();
  if (busy.empty()) {
    rep.ok("no other process computes on the GPUs now (nvidia-smi)");
    return;
  }
  rep.warn("other processes compute on the GPUs now: " + describe_gpu_processes(busy),
           "a speed gate timed beside another process shares the GPU with it and can fail through no fault of the "
           "submission: stop them before grading, or give the batch only idle GPUs (--gpus)");
}

// Reports the GPUs and driver that nvidia-smi lists.
void check_nvidia_smi(Report& rep) {
  // nvidia-smi first: it tells "no driver" from "a driver but no GPU" from "a GPU the runtime cannot use".
  if (auto smi = find_program("nvidia-smi")) {
    auto r = run_command({smi->string(), "--query-gpu=name,driver_version", "--format=csv,noheader"}, 30);
    if (r.exit_code == 0 && !trim(r.output).empty()) {
      for (const auto& line : split_lines(r.output)) {
        if (!trim(line).empty()) rep.ok("nvidia-smi: " + trim(line) + " (name, driver)");
      }
      check_gpu_processes(rep);
    } else
      rep.warn("nvidia-smi is installed but lists no GPU (" + trim(r.output).substr(0, 200) + ")",
               "reboot after installing the driver; in a container, start it with GPU access (docker run --gpus "
               "all); check CUDA_VISIBLE_DEVICES");
  } else {
    rep.info("no NVIDIA driver (nvidia-smi not found): fine for building and the CPU tests");
  }
}

// Reports what the CUDA runtime sees (driver and runtime versions, each GPU) and returns it.
CudaInfo check_cuda_runtime(Report& rep) {
  CudaInfo cuda = query_cuda();
  if (cuda.driver_version > 0)
    rep.ok("CUDA driver supports CUDA " + cuda_version_text(cuda.driver_version) + ", runtime " +
           cuda_version_text(cuda.runtime_version));
  if (!cuda.ok) {
    rep.warn(cuda.error,
             "no GPU: GPU gates will be skipped, right or wrong (compiling and the CPU gates still work); for GPU "
             "feedback grade on a machine with an NVIDIA GPU and a driver of the R580 branch or newer, or submit to "
             "the course's autograder");
  } else {
    if (cuda.driver_version < cuda.runtime_version)
      rep.warn("the driver (CUDA " + cuda_version_text(cuda.driver_version) + ") is older than the runtime (" +
                   cuda_version_text(cuda.runtime_version) + ")",
               "update the NVIDIA driver");
    for (const auto& g : cuda.gpus) {
      char mem[32];
      std::snprintf(mem, sizeof mem, "%.0f GiB", g.memory_gib);
      rep.ok("GPU " + std::to_string(g.index) + ": " + g.name + " (compute capability " + std::to_string(g.major) +
             "." + std::to_string(g.minor) + ", " + std::to_string(g.sm_count) + " SMs, " + mem + ")");
    }
  }
  return cuda;
}

// Reports, per configured build, whether its CUDA architectures run on each GPU found.
void check_build_architectures(Report& rep, const std::vector<fs::path>& builds, const CudaInfo& cuda) {
  for (const auto& b : builds) {
    std::string archs = cmake_cache_value(b, "CMAKE_CUDA_ARCHITECTURES");
    if (cuda.gpus.empty()) {
      rep.info(b.filename().string() + " build: CUDA architectures " + (archs.empty() ? "?" : archs));
      continue;
    }
    for (const auto& g : cuda.gpus) {
      std::string verdict = arch_verdict(archs, g.major, g.minor);
      std::string line = b.filename().string() + " build (" + archs + ") on sm_" + std::to_string(g.major) +
                         std::to_string(g.minor) + ": " + verdict;
      if (starts_with(verdict, "NOT"))
        rep.warn(line, "reconfigure with -DCMAKE_CUDA_ARCHITECTURES=native (the gpu preset does), or add " +
                           std::to_string(g.major) + std::to_string(g.minor));
      else
        rep.ok(line);
    }
  }
  if (builds.empty()) rep.info("no configured build yet (labgrade configures build/gpu or build/ci when grading)");
}

// Reports where each library the build needs comes from: a configured build, installed headers, or a download.
void check_libraries(Report& rep, const std::vector<fs::path>& builds) {
  struct Lib {
    const char* name;
    const char* cache_var;
    const char* header;
    const char* package;
  };
  for (const Lib& lib :
       {Lib{"Catch2 v3", "Catch2_DIR", "catch2/catch_test_macros.hpp", "libcatch2-dev (Debian 12: bookworm-backports)"},
        Lib{"CLI11", "CLI11_DIR", "CLI/CLI.hpp", "libcli11-dev"},
        Lib{"toml++", "LABS_TOMLPP_INCLUDE_DIR", "toml++/toml.h", "libtomlplusplus-dev"},
        Lib{"nlohmann-json", "nlohmann_json_DIR", "nlohmann/json.hpp", "nlohmann-json3-dev"},
        Lib{"fmt", "fmt_DIR", "fmt/format.h", "libfmt-dev"}}) {
    std::string where;
    for (const auto& b : builds) {
      std::string v = cmake_cache_value(b, lib.cache_var);
      if (!v.empty() && !contains(v, "NOTFOUND")) where = v;
    }
    if (!where.empty() && contains(where, "_deps"))
      rep.ok(std::string(lib.name) + ": downloaded by CMake (" + where + ")");
    else if (!where.empty() || header_present(lib.header))
      rep.ok(std::string(lib.name) + (where.empty() ? ": headers installed" : ": " + where));
    else
      rep.warn(std::string(lib.name) + " not installed",
               std::string("CMake will download it at configure time (needs network); or install ") + lib.package);
  }
}

// Reports Open MPI when the repository has lab 09.
void check_open_mpi(Report& rep, const std::optional<fs::path>& root) {
  // Lab 09 distributes over MPI ranks: its build needs Open MPI (mpicxx, mpirun); the other labs do not.
  std::error_code ec;
  bool has_mpi_lab = false;
  if (root)
    for (const auto& e : fs::directory_iterator(*root / "labs", ec))
      if (starts_with(e.path().filename().string(), "09_")) has_mpi_lab = true;
  if (has_mpi_lab) {
    if (find_program("mpirun") && find_program("mpicxx"))
      rep.ok("Open MPI (lab 09): mpirun and mpicxx found");
    else
      rep.warn("Open MPI not found (mpirun, mpicxx): lab 09 does not build",
               "install openmpi-bin libopenmpi-dev (tools/setup.sh does)");
  }
}

// Reports what batch grading and --sanitize need: bubblewrap, root, binutils, cgroup v2, compute-sanitizer, and
// cuobjdump for the machine-code checks (sass.h).
void check_batch_and_sanitize(Report& rep) {
  if (!find_program("bwrap"))
    rep.warn("bubblewrap (bwrap) not installed",
             "install bubblewrap for isolated batch grading (without it labgrade batch refuses to run unless "
             "given --sandbox none, which keeps only rlimits and, as root, a dedicated uid)");
  else if (!bwrap_works())
    rep.warn("bubblewrap is installed but cannot create namespaces here",
             "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) or run the batch as "
             "root; until then labgrade batch refuses to run unless given --sandbox none");
  else
    rep.ok("bubblewrap works: batch submissions run in a read-only, network-less sandbox");
  if (geteuid() == 0)
    rep.ok("running as root: each concurrent submission runs as its own uid (61000+), process limits enforced");
  else
    rep.info("not root: submissions run as your uid (RLIMIT_NPROC cannot contain a fork bomb without cgroups)");
  if (!find_program("nm") || !find_program("objdump"))
    rep.warn("nm or objdump (binutils) not found", "labgrade batch needs them to check student objects before linking");
  std::string why;
  if (auto cg = find_cgroup_parent(&why))
    rep.ok("cgroup v2 memory and pids limits available (" + cg->string() + ")");
  else
    rep.info("no cgroup v2 limits: " + why + " (host memory is limited with RLIMIT_DATA instead)");
  if (auto cs = find_program("compute-sanitizer", {"/usr/local/cuda/bin", "/usr/local/cuda/compute-sanitizer"}))
    rep.ok("compute-sanitizer: " + cs->string());
  else
    rep.warn("compute-sanitizer not found (on PATH or in /usr/local/cuda/bin)",
             "install the toolkit's sanitizer (Debian/Ubuntu: cuda-sanitizer-13-0) and put it on PATH; only "
             "--sanitize needs it");
  if (auto co = find_program("cuobjdump", {"/usr/local/cuda/bin"}))
    rep.ok("cuobjdump: " + co->string());
  else
    rep.warn("cuobjdump not found (on PATH or in /usr/local/cuda/bin)",
             "install the toolkit's cuobjdump (Debian/Ubuntu: cuda-cuobjdump-13-0): without it the machine-code "
             "checks are not done (a step about shared memory or tensor cores is then judged by its values alone)");
}

// Prints the totals and what to run next; returns the exit status (1 when a problem stops grading).
int print_summary(const Report& rep, const DoctorOptions& opts, const CudaInfo& cuda) {
  std::cout << "\n"
            << (rep.fatal ? std::to_string(rep.fatal) + " problem(s) stop grading; " : std::string("ready to grade; "))
            << rep.warnings << " warning(s)\n";
  if (!rep.fatal) {
    const std::string preset = !opts.preset.empty() ? opts.preset : cuda.ok ? "gpu" : "ci";
    std::cout << "next: cmake --workflow --preset " << preset << "   (configure, build, test), then build/" << preset
              << "/labgrade\n";
  } else {
    std::cout << "tools/setup.sh installs the packages on Debian 12 and Ubuntu 24.04 and says what else is missing\n";
  }
  return rep.fatal ? 1 : 0;
}

}  // namespace

int doctor_main(const DoctorOptions& opts) {
  Report rep;
  const std::optional<fs::path> root = find_root(opts);
  std::cout << "labgrade doctor" << (root ? " (repository " + root->string() + ")" : "") << "\n\ntoolchain\n";
  const std::vector<fs::path> builds = configured_builds(opts, root);
  check_nvcc(rep, builds);
  check_cmake(rep);

  std::cout << "\nGPU\n";
  check_nvidia_smi(rep);
  const CudaInfo cuda = check_cuda_runtime(rep);
  check_build_architectures(rep, builds, cuda);

  std::cout << "\nlibraries\n";
  check_libraries(rep, builds);
  check_open_mpi(rep, root);

  std::cout << "\nbatch grading and --sanitize\n";
  check_batch_and_sanitize(rep);

  return print_summary(rep, opts, cuda);
}

}  // namespace labgrade
