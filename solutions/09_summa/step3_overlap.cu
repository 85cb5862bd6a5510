// Step 3: SUMMA with the next panels' broadcast in flight during the current local update. Two sets of panel
// buffers: while local_gemm works on set k % 2 (on the GPU, asynchronously on e.stream), the panels k + 1 are
// broadcast with MPI_Ibcast into set (k + 1) % 2 and copied to the device on a second stream. The CPU drives
// MPI's progress inside MPI_Waitall while the GPU multiplies.
#include <cstring>

#include "summa.h"

namespace lab09 {
namespace {

void check_args(const Grid& g, int M, int N, int K, int b, const char* what) {
  if (!g.member()) throw std::invalid_argument(std::string(what) + ": called on a process outside the grid");
  if (M < 0 || N < 0 || K < 0 || b < 1)
    throw std::invalid_argument(std::string(what) + ": impossible sizes M=" + std::to_string(M) + " N=" +
                                std::to_string(N) + " K=" + std::to_string(K) + " b=" + std::to_string(b));
}

// Staging memory kept between calls (allocating pinned memory costs more than a panel's broadcast). Pinned host
// memory with a GPU, so that the copies run at full PCIe speed; device memory for the received panels.
struct Scratch {
  enum Kind { host, pinned, device } kind;
  float* ptr = nullptr;
  std::size_t n = 0;
  explicit Scratch(Kind k) : kind(k) {}
  float* get(std::size_t want) {
    if (want <= n) return ptr;
    release();
    if (kind == device) LABKIT_CUDA(cudaMalloc(&ptr, want * sizeof(float)));
    else if (kind == pinned) LABKIT_CUDA(cudaMallocHost(&ptr, want * sizeof(float)));
    else ptr = static_cast<float*>(std::malloc(want * sizeof(float)));
    n = want;
    return ptr;
  }
  void release() {
    if (!ptr) return;
    if (kind == device) cudaFree(ptr);
    else if (kind == pinned) cudaFreeHost(ptr);
    else std::free(ptr);
    ptr = nullptr;
    n = 0;
  }
};

}  // namespace

void summa_overlap(const Grid& g, Engine& e, int M, int N, int K, int b, const float* A, const float* B, float* C) {
  check_args(g, M, N, K, b, "summa_overlap");
  const Dist dA{M, K, b}, dB{K, N, b}, dC{M, N, b};
  const int mloc = local_rows(dA, g), nloc = local_cols(dB, g);
  const int lda = local_ld(dA, g), ldb = local_ld(dB, g), ldc = local_ld(dC, g);
  const int panel_ld = std::max(1, mloc);
  const int nk = (K + b - 1) / b;
  if (nk == 0) return;
  const std::size_t a_size = std::size_t(mloc) * b + 1, b_size = std::size_t(b) * nloc + 1;
  static Scratch host[4] = {Scratch(Scratch::host), Scratch(Scratch::host), Scratch(Scratch::host),
                            Scratch(Scratch::host)};
  static Scratch pin[4] = {Scratch(Scratch::pinned), Scratch(Scratch::pinned), Scratch(Scratch::pinned),
                           Scratch(Scratch::pinned)};
  static Scratch dev[4] = {Scratch(Scratch::device), Scratch(Scratch::device), Scratch(Scratch::device),
                           Scratch(Scratch::device)};
  float *hA[2], *hB[2], *dAp[2] = {}, *dBp[2] = {};
  for (int s = 0; s < 2; ++s) {
    Scratch* h = e.gpu ? pin : host;
    hA[s] = h[2 * s].get(a_size);
    hB[s] = h[2 * s + 1].get(b_size);
    if (e.gpu) dAp[s] = dev[2 * s].get(a_size), dBp[s] = dev[2 * s + 1].get(b_size);
  }
  cudaStream_t copy = nullptr;
  cudaEvent_t copied[2] = {}, used[2] = {};  // panels of set s on the device; the update that read set s is done
  if (e.gpu) {
    LABKIT_CUDA(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    for (int s = 0; s < 2; ++s) {
      LABKIT_CUDA(cudaEventCreateWithFlags(&copied[s], cudaEventDisableTiming));
      LABKIT_CUDA(cudaEventCreateWithFlags(&used[s], cudaEventDisableTiming));
    }
  }
  MPI_Request req[2][2];
  auto width = [&](int kb) { return std::min(b, K - kb * b); };
  auto ownA = [&](int kb) { return A + std::size_t(kb / g.Q) * b * lda; };
  auto ownB = [&](int kb) { return B + std::size_t(kb / g.P) * b; };
  const auto D2H = cudaMemcpyDeviceToHost, H2D = cudaMemcpyHostToDevice;

  // Starts the broadcast of panels kb into set kb % 2.
  auto post = [&](int kb) {
    const int s = kb % 2, w = width(kb);
    // The host set is about to be overwritten: its copy to the device (panels kb - 2) must be finished.
    if (e.gpu) LABKIT_CUDA(cudaEventSynchronize(copied[s]));
    if (g.col == kb % g.Q && mloc > 0) {
      if (e.gpu) LABKIT_CUDA(cudaMemcpyAsync(hA[s], ownA(kb), sizeof(float) * mloc * w, D2H, copy));
      else std::memcpy(hA[s], ownA(kb), sizeof(float) * mloc * w);
    }
    if (g.row == kb % g.P && nloc > 0) {
      if (e.gpu) {
        LABKIT_CUDA(cudaMemcpy2DAsync(hB[s], sizeof(float) * w, ownB(kb), sizeof(float) * ldb, sizeof(float) * w,
                                      nloc, D2H, copy));
      } else {
        for (int j = 0; j < nloc; ++j)
          std::memcpy(hB[s] + std::size_t(j) * w, ownB(kb) + std::size_t(j) * ldb, sizeof(float) * w);
      }
    }
    if (e.gpu) LABKIT_CUDA(cudaStreamSynchronize(copy));  // the copy engine, not the update on e.stream
    MPI_Ibcast(hA[s], mloc * w, MPI_FLOAT, kb % g.Q, g.row_comm, &req[s][0]);
    MPI_Ibcast(hB[s], w * nloc, MPI_FLOAT, kb % g.P, g.col_comm, &req[s][1]);
  };
  // Completes the broadcast of panels kb and, with a GPU, queues their copy to the device.
  auto finish = [&](int kb) {
    const int s = kb % 2, w = width(kb);
    MPI_Waitall(2, req[s], MPI_STATUSES_IGNORE);
    if (!e.gpu) return;
    LABKIT_CUDA(cudaStreamWaitEvent(copy, used[s], 0));  // the update of panels kb - 2 still reads set s
    if (g.col != kb % g.Q && mloc > 0)
      LABKIT_CUDA(cudaMemcpyAsync(dAp[s], hA[s], sizeof(float) * mloc * w, H2D, copy));
    if (g.row != kb % g.P && nloc > 0)
      LABKIT_CUDA(cudaMemcpyAsync(dBp[s], hB[s], sizeof(float) * w * nloc, H2D, copy));
    LABKIT_CUDA(cudaEventRecord(copied[s], copy));
  };

  post(0);
  finish(0);
  for (int kb = 0; kb < nk; ++kb) {
    const int s = kb % 2;
    if (kb + 1 < nk) post(kb + 1);
    const bool a_mine = g.col == kb % g.Q, b_mine = g.row == kb % g.P;
    const float* a = a_mine ? ownA(kb) : (e.gpu ? dAp[s] : hA[s]);
    const float* bp = b_mine ? ownB(kb) : (e.gpu ? dBp[s] : hB[s]);
    if (e.gpu) LABKIT_CUDA(cudaStreamWaitEvent(e.stream, copied[s], 0));
    local_gemm(e, mloc, nloc, width(kb), a, a_mine ? lda : panel_ld, bp, b_mine ? ldb : width(kb), C, ldc);
    if (e.gpu) LABKIT_CUDA(cudaEventRecord(used[s], e.stream));
    if (kb + 1 < nk) finish(kb + 1);  // the CPU waits for the broadcast while the GPU multiplies
  }
  if (e.gpu) {
    LABKIT_CUDA(cudaStreamSynchronize(e.stream));
    LABKIT_CUDA(cudaStreamSynchronize(copy));
    for (int s = 0; s < 2; ++s) cudaEventDestroy(copied[s]), cudaEventDestroy(used[s]);
    cudaStreamDestroy(copy);
  }
}

}  // namespace lab09
