// The launch recorder (CUPTI): which kernels ran inside a scope, and which library launched each. See
// labkit/launches.h for the rules; the classification of what it saw is in launches.cpp. Here too: the binary's own
// functions and the check that a kernel of one of their names is the code compiled under it (own_symbols).
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "labkit/device.h"
#include "labkit/launches.h"

namespace labkit::launches {

// ---- The recorder (CUPTI) ------------------------------------------------------------------------------------------

namespace {

struct Raw {
  std::string name;
  std::uint32_t correlation;
  std::int64_t shared_bytes;
  int registers;
  std::int64_t static_shared;
  long long blocks;
  int threads;
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
                   std::int64_t(k->staticSharedMemory) + std::int64_t(k->dynamicSharedMemory),
                   int(k->registersPerThread), std::int64_t(k->staticSharedMemory),
                   (long long)k->gridX * k->gridY * k->gridZ, int(k->blockX * k->blockY * k->blockZ)});
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

Recorder::Recorder(Attribution attribution) {
  // The gate's fills and copies before the scope have finished before the step is called, whether or not CUPTI can
  // record here: a step on a non-blocking stream of its own is not ordered after them (and a kernel still running
  // from before the scope must not be counted in it). A failure of this wait is left for the next checked call.
  if (cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
  if (g_active.exchange(true)) {
    reason_ = "another launch recorder is already running";
    return;
  }
  reason_ = setup();
  if (reason_.empty()) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_raw.clear();
      g_launched_from.clear();
    }
    if (attribution == Attribution::by_launch_callbacks) reason_ = enable_launch_callbacks(1);
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

namespace {
// The kernels recorded since the recorder started or last delivered them, with the library that launched each.
// Every kernel launched so far must have finished for its record to exist: the caller has waited for the device.
std::vector<Kernel> collect() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<Kernel> out;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const Raw& r : g_raw) {
    auto it = g_launched_from.find(r.correlation);
    out.push_back({r.name, it == g_launched_from.end() ? std::string() : it->second, r.shared_bytes, r.registers,
                   r.static_shared, r.blocks, r.threads});
  }
  g_raw.clear();
  g_launched_from.clear();
  return out;
}
}  // namespace

std::vector<Kernel> Recorder::take() {
  if (!available_ || stopped_) return {};
  cudaDeviceSynchronize();
  return collect();
}

std::vector<Kernel> Recorder::stop() {
  if (!available_ || stopped_) return {};
  stopped_ = true;
  // Every kernel of the call must have finished for its record to exist; the gates synchronise after a step
  // anyway, so this costs nothing extra.
  cudaDeviceSynchronize();
  std::vector<Kernel> out = collect();
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  enable_launch_callbacks(0);
  g_active = false;
  return out;
}

Recorder::~Recorder() {
  try {
    stop();
  } catch (...) {  // a destructor, possibly while a step's exception unwinds: never throw from here
  }
}

// ---- The binary's own kernels -------------------------------------------------------------------------------------

namespace {
// Where the running binary was loaded: a position-independent executable's symbol values are offsets from it.
std::uintptr_t own_load_address() {
  std::uintptr_t address = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        *static_cast<std::uintptr_t*>(out) = info->dlpi_addr;
        return 1;  // the first object is the program itself
      },
      &address);
  return address;
}
}  // namespace

// A plain host function is no kernel; a kernel compiled under the same name as a library's differs in its code. Local
// memory is not compared: CUPTI reports what the context has reserved per thread when the kernel ran, which grows with
// the kernels run before (lab 01's healthy step 5e and 5f kernels differed from their compiled figure on an H100).
// Answers are kept: a step may make thousands of recorded launches.
bool registered_kernel_matches(const void* address, const Kernel& ran) {
  using Key = std::tuple<const void*, int, std::int64_t>;
  static std::mutex mutex;
  static std::map<Key, bool> known;
  const Key key{address, ran.registers, ran.static_shared};
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(key); it != known.end()) return it->second;
  const cudaError_t pending = cudaPeekAtLastError();
  cudaFuncAttributes a{};
  bool match = false;
  const cudaError_t e = cudaFuncGetAttributes(&a, address);
  if (e == cudaSuccess) {
    // CUPTI reports no fewer than 16 registers per thread: on an H100 and an H200 every kernel compiled to fewer
    // (lab 03's copies, lab 05's saxpy, lab 07's and 08's vector updates) ran as 16. GPUs not measured may have
    // another floor, so a small recorded count (up to 32) accepts any smaller compiled one: a healthy kernel must
    // never be refused, and a library kernel that small does no step's work (cuBLAS's GEMM kernels use far more).
    constexpr int kSmallRegisterCount = 32;
    const bool registers = a.numRegs == ran.registers ||
                           (ran.registers <= kSmallRegisterCount && a.numRegs < ran.registers);
    match = registers && std::int64_t(a.sharedSizeBytes) == ran.static_shared;
  } else if (e == cudaErrorInvalidDeviceFunction || e == cudaErrorInvalidResourceHandle || e == cudaErrorInvalidValue ||
             e == cudaErrorSymbolNotFound) {
    // Not a kernel (an H100 with CUDA 13 answers cudaErrorInvalidResourceHandle for a plain host function).
    // Leave behind no error of ours for the gates' next launch check (one the step left stays).
    if (pending == cudaSuccess) cudaGetLastError();
  } else {
    return true;  // the context is lost (a sticky error): the gate's own checks report that; the name decides
  }
  known.emplace(key, match);
  return match;
}

const Symbols& own_symbols() {
  static const Symbols symbols = [] {
    const std::uintptr_t base = own_load_address();
    std::vector<std::pair<std::string, const void*>> functions;
    for (auto& f : read_functions("/proc/self/exe"))
      functions.emplace_back(std::move(f.name), reinterpret_cast<const void*>(base + f.value));
    return Symbols(functions, registered_kernel_matches);
  }();
  return symbols;
}

}  // namespace labkit::launches
