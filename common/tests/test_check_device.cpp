#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "labkit/buffer.h"
#include "labkit/check.h"
#include "labkit/cublas.h"
#include "labkit/device.h"
#include "labkit/not_implemented.h"

using Catch::Matchers::ContainsSubstring;

TEST_CASE("a failed CUDA call throws with file, line, the call and a hint", "[cpu][check]") {
  try {
    LABKIT_CUDA(cudaErrorIllegalAddress);
    FAIL("no exception");
  } catch (const labkit::CudaError& e) {
    CHECK(e.code() == cudaErrorIllegalAddress);
    CHECK(e.sticky());
    CHECK_THAT(e.what(), ContainsSubstring("test_check_device.cpp:") && ContainsSubstring("failed:"));
    CHECK_THAT(e.what(), ContainsSubstring("cudaErrorIllegalAddress") && ContainsSubstring("compute-sanitizer"));
  }
}

TEST_CASE("only context-destroying errors are sticky", "[cpu][check]") {
  CHECK(labkit::is_sticky(cudaErrorIllegalAddress));
  CHECK(labkit::is_sticky(cudaErrorLaunchFailure));
  CHECK_FALSE(labkit::is_sticky(cudaErrorMemoryAllocation));
  CHECK_FALSE(labkit::is_sticky(cudaErrorInvalidConfiguration));
  CHECK_FALSE(labkit::is_sticky(cudaSuccess));
}

TEST_CASE("a failed cuBLAS call throws with the status name", "[cpu][check]") {
  try {
    LABKIT_CUBLAS(CUBLAS_STATUS_INVALID_VALUE);
    FAIL("no exception");
  } catch (const labkit::LibraryError& e) {
    CHECK(e.status() == CUBLAS_STATUS_INVALID_VALUE);
    CHECK_THAT(e.what(), ContainsSubstring("cuBLAS CUBLAS_STATUS_INVALID_VALUE"));
  }
}

TEST_CASE("NotImplemented says which step", "[cpu][check]") {
  labkit::NotImplemented e("step 3: matmul_tiled");
  CHECK(std::string(e.what()) == "not implemented: step 3: matmul_tiled");
}

TEST_CASE("without a device the reason is given; with one, the query works", "[cpu][device]") {
  if (labkit::has_device()) {
    CHECK(labkit::no_device_reason().empty());
    auto d = labkit::device_info();
    CHECK(d.sm_count > 0);
    CHECK_THAT(labkit::describe(d), ContainsSubstring("sm_"));
  } else {
    CHECK_THAT(labkit::no_device_reason(), ContainsSubstring("no CUDA device"));
  }
}

TEST_CASE("an empty device buffer allocates nothing and needs no device", "[cpu][buffer]") {
  labkit::DeviceBuffer<float> b(0);
  CHECK(b.size() == 0);
  CHECK(b.data() == nullptr);
  CHECK(b.download().empty());
  labkit::DeviceBuffer<float> moved(std::move(b));
  CHECK(moved.data() == nullptr);
}
