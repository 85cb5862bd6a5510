// Device side of labkit/relabel.h: P A P^T for a seed's window permutation, in four steps (labels, row lengths,
// their prefix sum, the rows), each a kernel or a CUB scan.
#include <cub/device/device_scan.cuh>

#include <stdexcept>
#include <string>

#include "labkit/check.h"
#include "labkit/relabel.h"

namespace labkit {
namespace {

unsigned blocks_for(std::int32_t n) { return unsigned((std::int64_t(n) + 255) / 256); }

// new_label[i] and its inverse. Each thread ranks its key against its window's 32: a few hundred integer
// operations, far below the cost of the rows' copy.
__global__ void window_labels_kernel(std::int32_t n, std::uint64_t seed, std::int32_t* new_label,
                                     std::int32_t* old_label) {
  const std::int32_t i = std::int32_t(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const std::int32_t l = window_label(seed, n, i);
  new_label[i] = l;
  old_label[l] = i;
}

// lengths[r] = the length of the old row that becomes row r; lengths[n] = 0, so that the exclusive scan's last
// entry is nnz.
__global__ void relabelled_lengths_kernel(std::int32_t n, const std::int32_t* row_ptr, const std::int32_t* old_label,
                                          std::int32_t* lengths) {
  const std::int32_t r = std::int32_t(blockIdx.x * blockDim.x + threadIdx.x);
  if (r > n) return;
  lengths[r] = r == n ? 0 : row_ptr[old_label[r] + 1] - row_ptr[old_label[r]];
}

// One thread per new row: its old row's entries with their columns relabelled, insertion-sorted by column in place
// (rows of a handful of entries; a long row would want a segmented sort instead).
__global__ void relabelled_rows_kernel(std::int32_t n, const std::int32_t* row_ptr, const std::int32_t* col_idx,
                                       const double* values, const std::int32_t* new_label,
                                       const std::int32_t* old_label, const std::int32_t* out_row_ptr,
                                       std::int32_t* out_col_idx, double* out_values) {
  const std::int32_t r = std::int32_t(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= n) return;
  const std::int32_t o = old_label[r];
  const std::int32_t begin = row_ptr[o], end = row_ptr[o + 1], out = out_row_ptr[r];
  for (std::int32_t k = begin; k < end; ++k) {
    const std::int32_t c = new_label[col_idx[k]];
    const double v = values ? values[k] : 0.0;
    std::int32_t at = out + (k - begin);
    while (at > out && out_col_idx[at - 1] > c) {
      out_col_idx[at] = out_col_idx[at - 1];
      if (out_values) out_values[at] = out_values[at - 1];
      --at;
    }
    out_col_idx[at] = c;
    if (out_values) out_values[at] = v;
  }
}

}  // namespace

DeviceRelabel::DeviceRelabel(const Csr& A) : n_(A.rows) {
  A.validate();
  if (A.rows != A.cols)
    throw std::invalid_argument("DeviceRelabel: the matrix is " + std::to_string(A.rows) + " x " +
                                std::to_string(A.cols) + "; relabelling the unknowns needs a square one");
  row_ptr_ = DeviceBuffer<std::int32_t>(A.row_ptr);
  col_idx_ = DeviceBuffer<std::int32_t>(A.col_idx);
  values_ = DeviceBuffer<double>(A.values);
  new_label_ = DeviceBuffer<std::int32_t>(std::size_t(n_) + 1);
  old_label_ = DeviceBuffer<std::int32_t>(std::size_t(n_) + 1);
  lengths_ = DeviceBuffer<std::int32_t>(std::size_t(n_) + 1);
  LABKIT_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, scan_scratch_bytes_, lengths_.data(), lengths_.data(), n_ + 1));
  scan_scratch_ = DeviceBuffer<unsigned char>(scan_scratch_bytes_ ? scan_scratch_bytes_ : 1);
}

void DeviceRelabel::draw(std::uint64_t seed, std::int32_t* row_ptr, std::int32_t* col_idx, double* values) {
  if (n_ == 0) {
    LABKIT_CUDA(cudaMemset(row_ptr, 0, sizeof(std::int32_t)));
    LABKIT_CUDA(cudaDeviceSynchronize());
    return;
  }
  window_labels_kernel<<<blocks_for(n_), 256>>>(n_, seed, new_label_.data(), old_label_.data());
  LABKIT_CHECK_LAUNCH();
  relabelled_lengths_kernel<<<blocks_for(n_ + 1), 256>>>(n_, row_ptr_.data(), old_label_.data(), lengths_.data());
  LABKIT_CHECK_LAUNCH();
  std::size_t bytes = scan_scratch_bytes_;
  LABKIT_CUDA(cub::DeviceScan::ExclusiveSum(scan_scratch_.data(), bytes, lengths_.data(), row_ptr, n_ + 1));
  relabelled_rows_kernel<<<blocks_for(n_), 256>>>(n_, row_ptr_.data(), col_idx_.data(),
                                                  values ? values_.data() : nullptr, new_label_.data(),
                                                  old_label_.data(), row_ptr, col_idx, values);
  LABKIT_CHECK_LAUNCH();
  LABKIT_CUDA(cudaDeviceSynchronize());
}

}  // namespace labkit
