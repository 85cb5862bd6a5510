// The launch recorder (CUPTI) and the classification of the kernels it saw. See labkit/launches.h for the rules.
#include "labkit/launches.h"

#include <cuda_runtime.h>
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "labkit/device.h"

namespace labkit::launches {

// ---- Names ---------------------------------------------------------------------------------------------------

std::string demangle(const std::string& mangled) {
  if (mangled.compare(0, 2, "_Z") != 0) return mangled;  // __cxa_demangle also reads "f" as the type float
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                             std::free);
  return status == 0 && out ? std::string(out.get()) : mangled;
}

std::string header_library(const std::string& mangled) {
  std::string d = demangle(mangled);
  // "(anonymous namespace)::" is part of a qualified name, not a parameter list.
  for (std::size_t at; (at = d.find("(anonymous namespace)")) != std::string::npos;)
    d.replace(at, 21, "anonymous_namespace");
  // The function's own qualified name ends at the first '<' or '(' outside brackets; a template function's
  // demangled name starts with its return type ("void cub::...::DeviceRadixSortOnesweepKernel<...>(...)"), so the
  // name is the last word before that point. Template arguments (a student kernel instantiated with
  // thrust::plus<float>) are never looked at.
  std::size_t end = d.size();
  for (std::size_t i = 0; i < d.size(); ++i)
    if (d[i] == '<' || d[i] == '(') {
      end = i;
      break;
    }
  std::string head = d.substr(0, end);
  const std::size_t space = head.rfind(' ');
  if (space != std::string::npos) head = head.substr(space + 1);
  // Anywhere in the qualified name, not only first: CCCL's THRUST_CUB_WRAPPED_NAMESPACE puts both libraries inside
  // another namespace (lab04::cub::DeviceRadixSortOnesweepKernel). A macro that renames `cub` itself hides even
  // that; the grader's object check refuses such a step by the headers it included.
  for (const char* ns : {"cub", "thrust"}) {
    const std::string part = std::string(ns) + "::";
    for (std::size_t at = head.find(part); at != std::string::npos; at = head.find(part, at + 1))
      if (at == 0 || head.compare(at - 2, 2, "::") == 0) return ns;
  }
  return "";
}

std::string library_of_file(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  const std::string_view file = slash == std::string_view::npos ? path : path.substr(slash + 1);
  auto starts = [&](std::string_view p) { return file.substr(0, p.size()) == p; };
  if (starts("libcublas.so") || starts("libcublasLt.so")) return "cublas";
  if (starts("libcusparse.so")) return "cusparse";
  if (starts("libnccl.so")) return "nccl";
  return "";
}

std::string library_title(std::string_view library) {
  if (library == "cublas") return "cuBLAS";
  if (library == "cusparse") return "cuSPARSE";
  if (library == "nccl") return "NCCL";
  if (library == "cub") return "CUB";
  if (library == "thrust") return "Thrust";
  return "a library (not compiled from your source)";
}

Origin classify(const Kernel& k, const Symbols& own) {
  if (std::string ns = header_library(k.name); !ns.empty()) return {ns};
  if (!k.launched_from.empty()) return {k.launched_from};
  if (!own.contains(k.name)) return {"library"};
  return {};
}

std::string refusal(std::string_view step, const std::vector<Kernel>& ran, const std::vector<std::string>& allowed,
                    const Symbols& own) {
  // Thrust's algorithms run CUB's kernels (thrust::transform launches cub::detail::transform::transform_kernel),
  // so a step that may use Thrust may run CUB kernels too.
  auto allows = [&](const std::string& lib) {
    for (const auto& a : allowed)
      if (a == lib || (a == "thrust" && lib == "cub")) return true;
    return false;
  };
  // A step that may call cuBLAS or cuSPARSE also accepts a foreign kernel whose launch no callback attributed
  // (a library path that CUPTI's launch callbacks do not see): such a step is a library step by design, so the
  // foreign kernel gains nothing; a hand-written step never accepts one.
  const bool library_step = allows("cublas") || allows("cusparse");
  for (const Kernel& k : ran) {
    const Origin o = classify(k, own);
    if (o.own() || allows(o.library) || (o.library == "library" && library_step)) continue;
    std::string name = demangle(k.name);
    if (name.size() > 200) name = name.substr(0, 200) + "...";  // CUB's template arguments run to a page
    std::string msg = std::string(step) + " ran a kernel of " + library_title(o.library) + " (" + name +
                      "): this step must be your own kernel";
    if (!allowed.empty()) {
      msg += " (it may use ";
      for (std::size_t i = 0; i < allowed.size(); ++i) msg += (i ? ", " : "") + library_title(allowed[i]);
      msg += ")";
    }
    return msg;
  }
  return "";
}

// ---- The binary's own functions ----------------------------------------------------------------------------------

Symbols::Symbols(const std::vector<std::string>& mangled_names) {
  for (const auto& n : mangled_names) names_.insert(demangle(n));
}

bool Symbols::contains(const std::string& mangled_name) const { return names_.count(demangle(mangled_name)) != 0; }

Symbols read_function_symbols(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < off_t(sizeof(Elf64_Ehdr))) {
    ::close(fd);
    throw std::runtime_error(path + ": not an ELF file");
  }
  const std::size_t size = std::size_t(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw std::runtime_error(path + ": cannot map: " + std::strerror(errno));
  std::unique_ptr<void, std::function<void(void*)>> guard(map, [size](void* p) { ::munmap(p, size); });
  const auto* base = static_cast<const unsigned char*>(map);
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
    throw std::runtime_error(path + ": not a 64-bit ELF file");
  if (eh->e_shoff == 0 || eh->e_shoff + std::size_t(eh->e_shnum) * sizeof(Elf64_Shdr) > size)
    throw std::runtime_error(path + ": no section table");
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
  std::vector<std::string> names;
  for (int pass = 0; pass < 2 && names.empty(); ++pass) {  // .symtab (local symbols too); .dynsym if stripped
    const Elf64_Word want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
    for (unsigned i = 0; i < eh->e_shnum; ++i) {
      if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum) continue;
      const Elf64_Shdr& strs = sh[sh[i].sh_link];
      if (sh[i].sh_offset + sh[i].sh_size > size || strs.sh_offset + strs.sh_size > size) continue;
      const auto* syms = reinterpret_cast<const Elf64_Sym*>(base + sh[i].sh_offset);
      const std::size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
      const char* str = reinterpret_cast<const char*>(base + strs.sh_offset);
      for (std::size_t s = 0; s < count; ++s) {
        // Defined functions only: an undefined reference (a cuBLAS entry point the binary calls) is not its own.
        if (ELF64_ST_TYPE(syms[s].st_info) != STT_FUNC || syms[s].st_shndx == SHN_UNDEF) continue;
        if (syms[s].st_name >= strs.sh_size) continue;
        names.emplace_back(str + syms[s].st_name);
      }
    }
  }
  return Symbols(names);
}

const Symbols& own_symbols() {
  static const Symbols symbols = read_function_symbols("/proc/self/exe");
  return symbols;
}

// ---- The recorder (CUPTI) ------------------------------------------------------------------------------------------

namespace {

struct Raw {
  std::string name;
  std::uint32_t correlation;
  std::int64_t shared_bytes;
};

std::mutex g_mutex;  // CUPTI delivers buffers and callbacks on threads of its own
std::vector<Raw> g_raw;
std::unordered_map<std::uint32_t, std::string> g_launched_from;  // correlation id -> library that made the launch
std::atomic<bool> g_active{false};
CUpti_SubscriberHandle g_subscriber = nullptr;

std::string cupti_error(const char* call, CUptiResult r) {
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  return std::string(call) + ": " + (text ? text : "unknown CUPTI error");
}

// The launch entry points that a library could call, in both domains (the runtime one for libraries that link
// the CUDA runtime statically, the driver one for those that call the driver). Only used to attribute a launch
// to a library; which kernels ran comes from the activity records.
const CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
};
const CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = std::size_t(1) << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::vector<Raw> got;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    got.push_back({k->name ? k->name : "", k->correlationId,
                   std::int64_t(k->staticSharedMemory) + std::int64_t(k->dynamicSharedMemory)});
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_raw.insert(g_raw.end(), got.begin(), got.end());
}

// The library (or "") of the file that holds a return address. dladdr searches the loaded objects' symbol tables,
// ~70 us for a deep stack; lab 04's step 2 makes ~31 000 recorded launches (2.2 s of the gate in dladdr alone).
// The answers are kept per address: an address keeps its file while that file stays loaded, and the gates never
// unload one (a student's object may not call dlopen at all: the grader's object check refuses it).
std::string library_of_frame(void* frame) {
  static std::mutex cache_mutex;
  static std::unordered_map<void*, std::string> cache;
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (auto it = cache.find(frame); it != cache.end()) return it->second;
  }
  Dl_info info{};
  std::string lib;
  if (dladdr(frame, &info) && info.dli_fname) lib = library_of_file(info.dli_fname);
  std::lock_guard<std::mutex> lock(cache_mutex);
  cache.emplace(frame, lib);
  return lib;
}

// On entry to a launch API: which library, if any, is on the calling thread's stack. A launch made by cuBLAS has
// frames of libcublas(Lt) above the driver's; the student's own <<<>>> has none.
void CUPTIAPI on_launch(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite != CUPTI_API_ENTER || !g_active.load()) return;
  void* frames[128];
  const int n = backtrace(frames, 128);
  for (int i = 1; i < n; ++i) {
    std::string lib = library_of_frame(frames[i]);
    if (lib.empty()) continue;
    std::lock_guard<std::mutex> lock(g_mutex);
    g_launched_from[cb->correlationId] = std::move(lib);
    return;
  }
}

// Once per process: "" when CUPTI is ready, else why not.
const std::string& setup() {
  static const std::string error = []() -> std::string {
    if (!has_device()) return "no CUDA device";
    if (cudaFree(nullptr) != cudaSuccess) return "no CUDA context";
    // The first backtrace() loads libgcc_s: do it here, not inside a driver call (the launch callback).
    void* frame[1];
    backtrace(frame, 1);
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) return cupti_error("cuptiActivityRegisterCallbacks", r);
    r = cuptiSubscribe(&g_subscriber, on_launch, nullptr);
    if (r != CUPTI_SUCCESS) return cupti_error("cuptiSubscribe", r);
    return "";
  }();
  return error;
}

// An entry point this CUPTI does not know (an old one such as cudaLaunch, gone from a newer toolkit) is skipped:
// the attribution needs the ones libraries use today, and which kernels ran never depends on it.
std::string enable_launch_callbacks(uint32_t on) {
  int enabled = 0;
  CUptiResult last = CUPTI_SUCCESS;
  for (CUpti_CallbackId id : kRuntimeLaunches) {
    last = cuptiEnableCallback(on, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
    enabled += last == CUPTI_SUCCESS;
  }
  for (CUpti_CallbackId id : kDriverLaunches) {
    last = cuptiEnableCallback(on, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
    enabled += last == CUPTI_SUCCESS;
  }
  return enabled > 0 ? "" : cupti_error("cuptiEnableCallback (launch APIs)", last);
}

}  // namespace

bool Recorder::active() { return g_active.load(); }

Recorder::Recorder() {
  if (g_active.exchange(true)) {
    reason_ = "another launch recorder is already running";
    return;
  }
  reason_ = setup();
  if (reason_.empty()) {
    // Kernels still running from before the scope (the gate's poison fills) must not be counted in it.
    cudaDeviceSynchronize();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_raw.clear();
      g_launched_from.clear();
    }
    reason_ = enable_launch_callbacks(1);
    if (reason_.empty())
      if (CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); r != CUPTI_SUCCESS)
        reason_ = cupti_error("cuptiActivityEnable(CONCURRENT_KERNEL)", r);
  }
  available_ = reason_.empty();
  if (!available_) {
    if (g_subscriber) enable_launch_callbacks(0);
    g_active = false;
  }
}

std::vector<Kernel> Recorder::stop() {
  if (!available_ || stopped_) return {};
  stopped_ = true;
  // Every kernel of the call must have finished for its record to exist; the gates synchronise after a step
  // anyway, so this costs nothing extra.
  cudaDeviceSynchronize();
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  enable_launch_callbacks(0);
  std::vector<Kernel> out;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (const Raw& r : g_raw) {
      auto it = g_launched_from.find(r.correlation);
      out.push_back({r.name, it == g_launched_from.end() ? std::string() : it->second, r.shared_bytes});
    }
    g_raw.clear();
    g_launched_from.clear();
  }
  g_active = false;
  return out;
}

Recorder::~Recorder() {
  try {
    stop();
  } catch (...) {  // a destructor, possibly while a step's exception unwinds: never throw from here
  }
}

}  // namespace labkit::launches
