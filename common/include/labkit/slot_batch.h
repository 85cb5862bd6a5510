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

// Where each call's pointers land in the two buffers, and the host side of the checks (no device needed: the CPU
// tests run them on made-up outputs).
struct SlotCall {
  std::size_t in_count = 0, out_count = 0;
  std::size_t in_shift = 0, out_shift = 0;  // floats between the slot's aligned start and the call's pointer
};
class SlotLayout {
 public:
  static constexpr std::size_t kAlignFloats = 64;  // 256 bytes, cudaMalloc's alignment
  static constexpr std::size_t kGapFloats = 64;    // at least this many floats after each call's input and output
  explicit SlotLayout(std::vector<SlotCall> calls);

  int calls() const { return static_cast<int>(calls_.size()); }
  const SlotCall& call(int k) const { return calls_[std::size_t(k)]; }
  std::size_t in_at(int k) const { return in_at_[std::size_t(k)]; }    // call k's in[0] in the input buffer
  std::size_t out_at(int k) const { return out_at_[std::size_t(k)]; }  // call k's out[0] in the output buffer
  std::size_t in_total() const { return in_total_; }
  std::size_t out_total() const { return out_total_; }

  // "" when, in `out`, call k's out[j] holds its own in[source(k, j)] (from `in`, the whole input) bit for bit for
  // every j below its out_count (source < 0: stays poison), and every other float of `out` is still poison; else
  // what differs first ("call 3's out[17] is 0.25, where its in[17] = -0.5 belongs").
  std::string mismatch(const std::vector<float>& in, const std::vector<float>& out,
                       const std::function<long long(int k, std::size_t j)>& source) const;
  // "" when `now` is `before` bit for bit, else the first call whose input changed.
  std::string changed_input(const std::vector<float>& before, const std::vector<float>& now) const;
  // "" when two runs' outputs are the same bit for bit (NaN payloads included), else where they first differ.
  std::string runs_differ(const std::vector<float>& first, const std::vector<float>& second) const;

 private:
  std::vector<SlotCall> calls_;
  std::size_t in_total_ = 0, out_total_ = 0;  // before in_at_ and out_at_: the layout sets them
  std::vector<std::size_t> in_at_, out_at_;
};

// The calls' buffers on the device: a random input (uploaded once) and an output poisoned before every run.
class SlotBatch {
 public:
  using Call = SlotCall;
  SlotBatch(std::vector<Call> calls, std::uint64_t seed);

  int calls() const { return layout_.calls(); }
  const float* in(int k) const { return din_.data() + layout_.in_at(k); }
  float* out(int k) { return dout_.data() + layout_.out_at(k); }
  // Call k's input element i is in_host()[layout().in_at(k) + i].
  const std::vector<float>& in_host() const { return in_host_; }
  const SlotLayout& layout() const { return layout_; }

  // Poisons the output, calls `launch_all` (which makes every call, on in(k) and out(k)), waits for the device and
  // returns the whole output buffer.
  std::vector<float> run(const std::function<void()>& launch_all);
  // run(launch_all), then every check below in turn, and with `twice` a second run the same bit for bit: what a
  // gate's batch does. False at the first check that fails, with why() saying what it found.
  bool run_and_check(const std::function<void()>& launch_all,
                     const std::function<long long(int k, std::size_t j)>& source, bool twice);
  // The checks; each false one leaves what it found in why(): SlotLayout::mismatch on `out` (from run()); the input
  // unchanged and both buffers' guard bands intact; two runs the same bit for bit.
  bool matches(const std::vector<float>& out, const std::function<long long(int k, std::size_t j)>& source);
  bool intact();
  bool same_runs(const std::vector<float>& first, const std::vector<float>& second);
  const std::string& why() const { return why_; }
  // A gate's message for a batch that failed while every case passed on buffers of its own: `what` names the
  // step and the cases.
  std::string failure(const std::string& what) const;

 private:
  SlotLayout layout_;
  std::vector<float> in_host_;
  GuardedBuffer<float> din_, dout_;
  std::string why_;
};

// True when two runs' outputs are the same bit for bit (NaN payloads included).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace labkit
