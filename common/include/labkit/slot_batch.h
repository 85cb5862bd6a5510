// Many small calls of one step, checked together. A gate's small case is microseconds of kernel and a dozen round
// trips to the device (allocations, fills, copies, guard scans, a wait for the step), and each round trip waits for
// the GPU's time slice when other processes share it: beside the other labs on one H200, lab 03's 99 small offset
// copies took 5.8 s of the lab's run against 0.5 s alone. A SlotBatch gives every call a slot of its own in one
// input buffer and one output buffer, so the gate makes all the calls back to back and checks them in one download:
//
//   input:  [slot 0: in_shift floats, the call's in_count floats, 64 or more floats of gap] [slot 1 ...] ...
//   output: [slot 0: out_shift floats, the call's out_count floats, 64 or more floats of gap] [slot 1 ...] ...
//
// Each slot starts 256-byte aligned (as cudaMalloc's pointers, so a shift of 1-3 floats puts a pointer off every
// 16-byte boundary, as the gates' misaligned cases want). The input is random floats, gaps included; the output is
// poisoned before every run, and everything a call must not write (shifts, gaps, another call's slot) must still be
// poison after it. Both buffers are GuardedBuffers, so a write past either end of the whole batch shows in the guard
// bands too.
//
// What a batch does not see, the gates leave to the cases on their own buffers: a read past the end of a call's
// input reads its gap here (random values, which a copy then writes where they do not belong, but a read that
// changes nothing goes unseen), and memcheck needs each case at its exact size. So under a sanitizer a gate runs its
// cases one by one, and when a batch fails it checks each case on its own, whose message names what went wrong.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "labkit/guard.h"

namespace labkit {

class SlotBatch {
 public:
  struct Call {
    std::size_t in_count = 0, out_count = 0;
    std::size_t in_shift = 0, out_shift = 0;  // floats between the slot's aligned start and the call's pointer
  };
  static constexpr std::size_t kGapFloats = 64;

  SlotBatch(std::vector<Call> calls, std::uint64_t seed);

  int calls() const { return static_cast<int>(calls_.size()); }
  const float* in(int k) const { return din_.data() + in_at_[std::size_t(k)]; }
  float* out(int k) { return dout_.data() + out_at_[std::size_t(k)]; }
  // Call k's input element i is in_host()[in_index(k) + i].
  const std::vector<float>& in_host() const { return in_host_; }
  std::size_t in_index(int k) const { return in_at_[std::size_t(k)]; }

  // Poisons the output, calls `launch_all` (which makes every call, on in(k) and out(k)), waits for the device and
  // returns the whole output buffer.
  std::vector<float> run(const std::function<void()>& launch_all);
  // True when, in `out` (from run()), call k's out[j] holds its own in[source(k, j)] bit for bit for every j below
  // its out_count (source < 0: stays poison), and every other float of the buffer is still poison.
  bool matches(const std::vector<float>& out, const std::function<long long(int k, std::size_t j)>& source) const;
  // The input unchanged and both buffers' guard bands intact.
  bool intact() const;

 private:
  std::vector<Call> calls_;
  std::size_t in_total_ = 0, out_total_ = 0;  // before in_at_ and out_at_: the layout sets them
  std::vector<std::size_t> in_at_, out_at_;
  std::vector<float> in_host_;
  GuardedBuffer<float> din_, dout_;
};

// True when two runs' outputs are the same bit for bit (NaN payloads included).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace labkit
