// Lab 09 gates: what the gate files share. The gate binary is an MPI program (gates.cpp says how its gates agree
// across processes): the process's rank and engine, rank 0's seed for every process, a verdict every process
// shares, a step run on the grid's processes with its exceptions and MPI errors collected, and host arrays in the
// engine's memory. Files: gates.cpp (MPI's lifetime, steps 1-3 correctness), gates_speed.cpp (step3.speed).
#pragma once
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/guard.h"
#include "labkit/gate.h"
#include "labkit/not_implemented.h"
#include "summa.h"

namespace lab09_gates {

int world_rank();
int world_size();

// One engine per process for the whole run: binds the process to its device once, before any other CUDA use.
lab09::Engine& engine();

// Every process uses rank 0's seed, so that all of them build the same global matrices (and rank 0's reproduce
// hint reproduces the whole run).
std::uint64_t shared_seed(std::string_view label);

// Every process's text ("" when it has nothing to say), joined in rank order as "rank r: text" lines; every
// process gets the same result.
std::string agree(const std::string& mine);

// Fails the gate on every process when any process found a problem.
void require_all(const std::string& mine, const std::string& context);

// The MPI errors recorded since the last call (the gate binary's error handler records them instead of aborting),
// as one line; "" when there were none.
std::string take_mpi_errors();

std::string grid_text(const lab09::Grid& g);
std::string where(const lab09::Grid& g);

// A value in [-1, 1) from (seed, matrix, i, j), the same on every process: 24 random bits, exact in a float.
float hashed(std::uint64_t seed, int which, std::int64_t i, std::int64_t j);

// Runs a step on the grid's processes (the others wait). When a process throws, all of them know: a step that is
// not written anywhere is reported as not implemented; anything else, or an MPI error, fails the gate naming the
// ranks.
template <class F>
void collective_call(const lab09::Grid& g, const std::string& context, F&& step) {
  std::string error;
  int not_implemented = 0, threw = 0;
  if (g.member()) {
    try {
      step();
    } catch (const labkit::NotImplemented& e) {
      error = e.what(), not_implemented = 1, threw = 1;
    } catch (const std::exception& e) {
      error = std::string("threw: ") + e.what(), threw = 1;
    } catch (...) {
      error = "threw something that is not a std::exception", threw = 1;
    }
    if (const std::string mpi = take_mpi_errors(); !mpi.empty())
      error = (threw ? error + "; " : std::string()) + mpi, threw = 1, not_implemented = 0;
  }
  int counts[3] = {threw, not_implemented, g.member() ? 1 : 0};
  MPI_Allreduce(MPI_IN_PLACE, counts, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (counts[0] == 0) return;
  const std::string all = agree(error);
  if (counts[1] == counts[2]) throw labkit::NotImplemented(error.empty() ? all : error.substr(17));
  FAIL(context << all);
}

// Host arrays in and out of the engine's memory (device memory with a GPU; the same host arrays without).
// With a name (the correctness gates), the array lies between two guard bands of labkit's pattern (labkit/guard.h):
// a GuardedBuffer on the device, a host copy laid out the same way without a GPU. A step that reads past its
// local block (the last panel taken b wide when b does not divide K) reads guard words, which are NaNs, and C goes
// wrong whatever memory lay there; one that writes past it is named by guards(). Without the bands, such a read was
// caught only when the bytes after the block happened not to be zeros: on the host, a batch's planted fixture failed
// at K = 3 in one run and at K = 11 in the others.
struct EngineArray {
  lab09::Engine& e;
  std::vector<float>& host;
  const char* name;  // nullptr: no guard bands (the speed gate's arrays)
  // At least one element, so that a process with an empty local block still passes the step a valid pointer.
  // DeviceBuffer::upload returns once the copy has landed: the steps work on e.stream and streams of their own, all
  // non-blocking, and the reference's step 3 once computed from inputs not all uploaded yet (one H100, four ranks,
  // a 1 x 4 grid: 512 of 1024 elements of C wrong, in one run of five). GuardedBuffer::upload waits too.
  labkit::DeviceBuffer<float> dev;
  std::optional<labkit::GuardedBuffer<float>> guarded_dev;
  std::vector<float> banded;  // named, without a GPU: band, array, band
  std::size_t band = 0;       // elements in each band of `banded`
  std::uint64_t key = 0;
  EngineArray(lab09::Engine& eng, std::vector<float>& h, const char* guard_name = nullptr)
      : e(eng), host(h), name(guard_name) {
    if (name && e.gpu) {
      guarded_dev.emplace(host.size(), name);
      guarded_dev->upload(host);
    } else if (name) {
      band = labkit::guard_bands_in_use() ? labkit::default_guard_bytes(host.size() * sizeof(float)) / sizeof(float)
                                          : 0;
      key = labkit::guard_key(labkit::next_guard_id());
      banded.resize(std::max<std::size_t>(1, host.size() + 2 * band));
      labkit::fill_guard_host(banded.data(), 0, banded.size(), sizeof(float), key);
      std::copy(host.begin(), host.end(), banded.begin() + std::ptrdiff_t(band));
    } else if (e.gpu) {
      dev = labkit::DeviceBuffer<float>(std::max<std::size_t>(1, host.size()));
      dev.upload(host);
    }
  }
  float* ptr() {
    if (guarded_dev) return guarded_dev->data();
    if (name) return banded.data() + band;
    return e.gpu ? dev.data() : host.data();
  }
  std::vector<float> read() const {
    if (guarded_dev) return guarded_dev->download();
    if (name) return std::vector<float>(banded.begin() + std::ptrdiff_t(band),
                                        banded.begin() + std::ptrdiff_t(band + host.size()));
    if (!e.gpu) return host;
    std::vector<float> h(host.size());
    dev.download(h.data(), h.size());
    return h;
  }
  // Whether the step left the guard bands as they were (always, without a name).
  labkit::GuardReport guards() const {
    if (guarded_dev) return guarded_dev->check_guards();
    if (!name) return {};
    const std::size_t n = host.size();
    return labkit::guard_report(labkit::scan_guard_host(banded.data(), 0, band, sizeof(float), key),
                                labkit::scan_guard_host(banded.data(), band + n, 2 * band + n, sizeof(float), key),
                                labkit::GuardLayout{n, band, sizeof(float), 0}, name);
  }
};

}  // namespace lab09_gates
