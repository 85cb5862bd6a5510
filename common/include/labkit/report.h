// The structured result channel. Gate binaries write one JSON object per line (JSON Lines) to the file given
// by --labkit-results (the grader passes a socket, a pipe or a file of its own); nothing is ever parsed from console text.
//
//   {"event":"run_start","lab":"01","seed":123,"device":"NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)","rubric":"..."}
//   {"event":"gate_start","gate":"step3.correct"}
//   {"event":"metric","gate":"step3.speed","name":"ratio","value":1.42,"unit":"x"}
//   {"event":"names","gate":"step3.correct","name":"shared_memory_kernels","values":["_Z12tiled_kernelPKfPfi"]}
//   {"event":"gate_end","gate":"step3.correct","status":"passed","message":"","seconds":0.8}
//   {"event":"run_end","passed":10,"failed":2,"skipped":0}
//
// status is one of passed, failed, skipped, not_implemented, crashed (a fatal signal or a CUDA error that
// destroys the context; the binary exits right after writing it so that the grader can restart it for the
// remaining gates). A gate_start without its gate_end means the process died or was killed inside that gate.
// Each line is flushed when written.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace labkit::report {

// Record a measured figure of the current gate (also printed to the console for the student).
void metric(std::string_view name, double value, std::string_view unit = "");

// Record a list of names for the current gate, for the grader rather than the student (not printed): the last list
// written under a name is the gate's. From labkit::gate::own_kernels: "step_kernels", every kernel the step ran
// (allowed library kernels too), the kernels the grader's memcheck instruments; "shared_memory_kernels", the step's
// own kernels that use shared memory, the only ones its racecheck needs to instrument.
void names(std::string_view name, const std::vector<std::string>& values);

// The id of the gate being run ("" outside a gate).
std::string current_gate();

// Used by labkit's Catch2 main and listener.
namespace detail {
void open(const std::string& path);   // "" or "-": no channel (console only)
// Takes the run's key out of the channel socket `fd` (labkit/channel_auth.h) for open(), which calls it too: called
// first by the gate binary's first constructor, before any static initialiser of the student's code could read it and
// sign lines of its own. Allocates nothing (it runs before the C++ library's own initialisation is certain); a second
// call, or a descriptor that is not a socket holding a key, takes nothing.
void take_key_early(int fd) noexcept;
bool is_open();
void write_line(const std::string& json_object);  // appends '\n' and flushes
void set_current_gate(std::string_view gate);
// LABKIT_GATE_TRACE (see report.cpp): time since the gate began or the previous checkpoint, with its context.
void trace_checkpoint(std::string_view context, bool ok);
void set_lab(std::string_view lab);  // the lab the trace lines name (the gate binary's main sets it)
}  // namespace detail

}  // namespace labkit::report
