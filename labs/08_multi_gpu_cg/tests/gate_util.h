// Lab 08 gates: what the gate files share. Describing a matrix and failing with the reproduce hint, the skewed test
// matrix and the brute-force partition (the CPU gates check step 1 against it, the GPU gates distribute by it), the
// teams of devices (kept for the whole run) and the three solvers behind one switch. Files: gate_util.cpp (these
// helpers' bodies), gates_cpu.cpp (the CPU gates: partition and halo plan), gates.cpp (the GPU correctness gates),
// gates_speed.cpp (the speed gates).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "labkit/sparse.h"
#include "multi_cg.h"

namespace lab08_gates {

std::string describe(const labkit::Csr& A);
// Fails the gate with `what`, prefixed by the context and followed by the reproduce hint.
void fail_at(const std::string& ctx, const std::string& what);

// Rows 0..dense-1 hold `width` entries each, the rest only the diagonal: a partition by rows alone puts nearly all
// the work in the first block.
labkit::Csr skewed(int n, int dense, int width);
// The partition of step 1 by brute force: part k starts at the first row i with row_ptr[i] + i >= total * k / parts.
std::vector<int> ref_partition(const labkit::Csr& A, int parts);

int device_count();
// Teams are kept for the whole run: creating NCCL communicators costs up to seconds each time.
const lab08::Team& team_of(const std::vector<int>& devices);
// Skips the gate (with the reason) on a machine with fewer than two GPUs.
void require_two_gpus();

enum class Scheme { allgather, halo, device_scalars };
const char* name(Scheme s);
std::unique_ptr<lab08::Solver> make(Scheme s, const lab08::Team& team, const labkit::Csr& A);

}  // namespace lab08_gates
