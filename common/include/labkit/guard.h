// Guard bands and poison. A GuardedBuffer is a device array with a guard band before and after it, in the same
// allocation. poison() fills the array itself with a value no correct kernel produces (a NaN with a payload, or
// an unlikely integer), so that an element the kernel never wrote is told apart from one it computed wrongly.
//
// The guard bands are what catch out-of-bounds writes, and two things decide whether they catch all of them:
// - Contents. Every guard word is a different value: a hash of the buffer's own id and the word's position in
//   the allocation. A single byte pattern everywhere hides a kernel that copies guard bytes onto guard bytes
//   (a tile copied one row too far, out-of-range input copied to out-of-range output); with a per-position,
//   per-buffer pattern any moved word is a changed word. Each word is also a signalling NaN (of the element's
//   width), so arithmetic on it (`C[i] += 0.0f` past the edge) always changes its bits.
// - Width. Each band is max(1 MiB, the array's own size capped at 64 MiB), so a store one whole tile row too far
//   lands in it (see default_guard_bytes()); a gate that knows a wider stride can ask for more.
// check_guards() compares the bands on the device and copies back only a summary (count, first and last changed
// word), so checking a 64 MiB band costs a kernel launch, not a 64 MiB transfer.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/random.h"

namespace labkit {

template <class T>
T poison_value() {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "poison is defined for 4- and 8-byte elements");
  T v;
  if constexpr (sizeof(T) == 4) {
    std::uint32_t bits = std::is_floating_point_v<T> ? 0x7FC0DEADu : 0x7EADBEEFu;
    std::memcpy(&v, &bits, 4);
  } else {
    std::uint64_t bits = std::is_floating_point_v<T> ? 0x7FF8DEADDEADDEADull : 0x7EADBEEFDEADBEEFull;
    std::memcpy(&v, &bits, 8);
  }
  return v;
}

template <class T>
bool is_poison(const T& v) {
  T p = poison_value<T>();
  return std::memcmp(&v, &p, sizeof(T)) == 0;
}

// Fill `count` elements of `elem_size` bytes (4 or 8) with a bit pattern, on the device.
void fill_pattern_device(void* dev, std::size_t count, std::size_t elem_size, std::uint64_t pattern);

// Fills the shared memory of every SM of the current device with 0xFF bytes (a NaN as float or double, -1 as an
// int), as much as one block may have, and waits for it. Shared memory keeps what the last kernel on an SM left,
// so a step's kernel that reads a tile element it never wrote reads these: a NaN that reaches the output, where
// a stale finite value times a zero (an out-of-range tile entry zeroed on one side only) used to vanish.
// labkit::gate::own_kernels runs it before every correctness call of a step, and a gate's batch of calls in one
// scope before each call; inside a launch recorder's scope its kernel is left out of the step's records
// (is_shared_poison).
void poison_shared_memory();
// Whether a kernel record (CUPTI's name) is poison_shared_memory's, labkit::poison_shared: a name in namespace
// labkit, where a student's object may define nothing (the grader's object check).
bool is_shared_poison(const std::string& kernel_name);

// Queues a kernel that spins for `ms` milliseconds on each (device, stream) of `where`, and returns at once. Work a
// step queues on such a stream then waits behind it, while its work on other streams does not: a step that counts
// on two streams being ordered when they are not (x zeroed with cudaMemsetAsync on the legacy default stream, then
// read by a kernel on a stream created with cudaStreamNonBlocking; or a kernel on such a stream, then its result
// read by work on the legacy stream, which does not wait for it) gets it wrong every time the spin sits on the
// stream it wrote with, not only when a timing happens to go wrong. Called inside a launch recorder's scope (its
// start waits for the device), whose records leave the spin out (is_stream_spin). The current device is kept.
void spin_on_streams(const std::vector<std::pair<int, cudaStream_t>>& where, double ms);
// Whether a kernel record (CUPTI's name) is spin_on_streams's: its name is in namespace labkit, where a student's
// object may define nothing (the grader's object check).
bool is_stream_spin(const std::string& kernel_name);

// ---- the guard pattern ------------------------------------------------------------------------------------
// key: derived once per buffer from its id; word i: the i-th elem_size-byte word of the allocation (the lower
// band starts at 0, the array at the band's width, the upper band right after the array), so that the lower
// band, the upper band and every other buffer's bands all hold different words.
LABKIT_HD inline std::uint64_t guard_key(std::uint64_t buffer_id) { return mix64(buffer_id ^ 0x6775617264ull); }

// A negative signalling NaN with a hashed, non-zero payload: 21 random bits for 4-byte words, 50 for 8-byte words.
// Signalling, because every arithmetic operation returns a quiet NaN (the GPU's canonical 0x7fffffff, or the
// payload with the quiet bit set): the result of `guard + x` can never equal the guard word it replaces.
LABKIT_HD inline std::uint64_t guard_word(std::uint64_t key, std::uint64_t i, unsigned elem_size) {
  const std::uint64_t h = mix64(key ^ i);
  if (elem_size == 4) return 0xFF800000ull | 0x00200000ull | (h & 0x001FFFFFull);  // quiet bit 22 clear
  return 0xFFF0000000000000ull | 0x0004000000000000ull | (h & 0x0003FFFFFFFFFFFFull);  // quiet bit 51 clear
}

// True for any word of that form (a guard word of some buffer at some position): lets a diagnosis say "guard
// bytes were copied here" rather than "a value was computed here".
LABKIT_HD inline bool has_guard_form(std::uint64_t word, unsigned elem_size) {
  if (elem_size == 4) return (word & 0xFFE00000ull) == 0xFFA00000ull && (word >> 32) == 0;
  return (word & 0xFFFC000000000000ull) == 0xFFF4000000000000ull;
}

// Changed words in a range [begin, end) of word indices: how many, the first and the last (valid when count > 0),
// and the contents of the first one.
struct GuardScan {
  std::uint64_t count = 0, first = 0, last = 0;
  std::uint64_t first_word = 0;
};

// Fill words [begin, end) of `base` with the guard pattern of `key`, on the device.
void fill_guard_device(void* base, std::size_t begin, std::size_t end, unsigned elem_size, std::uint64_t key);
// Compare words [begin, end) of `base` with the pattern on the device; copies back only the summary.
GuardScan scan_guard_device(const void* base, std::size_t begin, std::size_t end, unsigned elem_size,
                            std::uint64_t key);
// The same on host memory (what the device scan computes, for tests and host-side copies).
void fill_guard_host(void* base, std::size_t begin, std::size_t end, unsigned elem_size, std::uint64_t key);
GuardScan scan_guard_host(const void* base, std::size_t begin, std::size_t end, unsigned elem_size,
                          std::uint64_t key);

// ---- guard width ------------------------------------------------------------------------------------------
// The width of each band: at least kMinGuardBytes, at least the array itself up to kMaxGuardBytes, and at least
// what the gate asks for; rounded up to 256 bytes so that the array keeps cudaMalloc's alignment (16-byte vector
// loads and stores stay legal on it).
//   Why the array's own size: a tile row of an M x N matrix (T rows of N elements) is at most the whole matrix
//   when M >= T, and the 1 MiB floor covers it when M < T for every tile the labs use (128 rows x 2048 floats,
//   64 x 2048 doubles). It also catches a store at twice the right index, or one matrix too far.
//   Why the cap: the largest arrays the gates allocate are 256-512 MiB (lab 05's timed 2^26 floats, lab 03's
//   8192 x 8192 floats, lab 06's 8192 x 8192 doubles): a band as large as the array would double what a gate
//   allocates; 64 MiB a side adds 25-50 % there, and at most 3x for arrays under 64 MiB, whose total is small.
//   Time: filling and checking are one device pass over the bands each (128 MiB at most: well under a
//   millisecond at HBM bandwidth) and 48 bytes copied back.
constexpr std::size_t kMinGuardBytes = std::size_t(1) << 20;
constexpr std::size_t kMaxGuardBytes = std::size_t(64) << 20;
std::size_t default_guard_bytes(std::size_t array_bytes, std::size_t requested_bytes = 0);
// False under compute-sanitizer's memcheck (LABKIT_SANITIZER=memcheck): there a GuardedBuffer is an allocation of
// exactly its array, no bands. Memcheck checks an access against the allocations, and a band inside the same
// allocation made a READ past the end legal to it: a tile kernel whose loads skip the bounds test (its stores keep
// it) read the band, dropped what it read, and passed both the band check (writes only) and memcheck. A write past
// the end is memcheck's finding there too.
bool guard_bands_in_use();

// A process-wide counter: every GuardedBuffer gets its own id, hence its own pattern.
std::uint64_t next_guard_id();

// ---- the report -------------------------------------------------------------------------------------------
struct GuardReport {
  bool ok = true;
  std::size_t before = 0, after = 0;  // elements changed in each band
  std::ptrdiff_t first_before = 0;    // offset (in elements, negative) of the lowest changed element before the array
  std::size_t first_after = 0;        // offset (in elements) past the end of the first changed element after it
  std::size_t last_after = 0;         // ... and of the last one
  std::string message;                // empty when ok
};

// Where the bands lie, in elements, and what the gate knows about the array's shape (row_length 0: unknown).
struct GuardLayout {
  std::size_t n = 0;            // elements in the array
  std::size_t guard_elems = 0;  // elements in each band
  unsigned elem_size = 4;
  std::size_t row_length = 0;
};

// Turns the two scans (word indices as in guard_word(): the lower band is [0, guard_elems), the upper band
// [guard_elems + n, 2 guard_elems + n)) into the verdict and its diagnosis.
GuardReport guard_report(const GuardScan& lower, const GuardScan& upper, const GuardLayout& layout,
                         const std::string& name);

template <class T>
class GuardedBuffer {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "guard words are 4 or 8 bytes wide");

 public:
  // guard_bytes: the least width of each band the gate needs (e.g. rows * row_bytes for its widest stride);
  // the default already covers one tile row (default_guard_bytes()).
  explicit GuardedBuffer(std::size_t n, std::string name = "output", std::size_t guard_bytes = 0)
      : n_(n),
        guard_(guard_bands_in_use() ? default_guard_bytes(n * sizeof(T), guard_bytes) / sizeof(T) : 0),
        key_(labkit::guard_key(next_guard_id())),
        name_(std::move(name)),
        storage_(std::max<std::size_t>(n + 2 * guard_, 1)) {  // (an empty array still has an address)
    // The array gets the pattern too (as it got the guard byte before): never zeros, and overwritten by
    // upload() or poison() before any gate reads it.
    fill_guard_device(storage_.data(), 0, storage_.size(), sizeof(T), key_);
    ready();
  }
  T* data() noexcept { return storage_.data() + guard_; }
  const T* data() const noexcept { return storage_.data() + guard_; }
  std::size_t size() const noexcept { return n_; }
  const std::string& name() const noexcept { return name_; }
  std::size_t guard_elems() const noexcept { return guard_; }
  std::uint64_t guard_key() const noexcept { return key_; }  // for tests that predict the pattern

  // The array's row length in elements, when it is a matrix: the diagnosis then names rows past the last one.
  void set_row_length(std::size_t elems) noexcept { row_length_ = elems; }

  void poison() {
    fill_pattern_device(data(), n_, sizeof(T), bits(poison_value<T>()));
    ready();
  }
  void upload(const std::vector<T>& host) {
    if (n_) LABKIT_CUDA(cudaMemcpy(data(), host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    ready();
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_) LABKIT_CUDA(cudaMemcpy(host.data(), data(), n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // The same into `host`, resized to size(): a caller that downloads many large outputs keeps one vector, whose
  // pages the kernel maps once (a fresh 64 MB vector costs ~45 ms of page faults before the copy even starts).
  void download_into(std::vector<T>& host) const {
    host.resize(n_);
    if (n_) LABKIT_CUDA(cudaMemcpy(host.data(), data(), n_ * sizeof(T), cudaMemcpyDeviceToHost));
  }
  GuardReport check_guards() const {
    const GuardScan lo = scan_guard_device(storage_.data(), 0, guard_, sizeof(T), key_);
    const GuardScan hi = scan_guard_device(storage_.data(), guard_ + n_, 2 * guard_ + n_, sizeof(T), key_);
    return guard_report(lo, hi, GuardLayout{n_, guard_, unsigned(sizeof(T)), row_length_}, name_);
  }

 private:
  // The fills and the copy above go through the default stream, and a step may run on non-blocking streams of its
  // own (lab 08 does), which do not wait for it: a poison fill still running would overwrite the step's output.
  // So each returns with its work done (a pageable cudaMemcpy may return before its DMA has landed, too).
  static void ready() { LABKIT_CUDA(cudaStreamSynchronize(0)); }

  static std::uint64_t bits(T v) {
    std::uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
  }
  std::size_t n_;
  std::size_t guard_;  // elements in each band
  std::uint64_t key_;
  std::string name_;
  std::size_t row_length_ = 0;
  DeviceBuffer<T> storage_;
};

}  // namespace labkit
