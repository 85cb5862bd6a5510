// Step 2: SUMMA. For each block column k of A (block row k of B): the owners broadcast the panels along the grid
// rows (A) and columns (B), and every process adds A_panel * B_panel to the blocks of C it already holds. MPI
// moves host memory here, so with a GPU the panels go device -> pinned host -> broadcast -> device.
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

void summa(const Grid& g, Engine& e, int M, int N, int K, int b, const float* A, const float* B, float* C) {
  check_args(g, M, N, K, b, "summa");
  const Dist dA{M, K, b}, dB{K, N, b}, dC{M, N, b};
  const int mloc = local_rows(dA, g), nloc = local_cols(dB, g);
  const int lda = local_ld(dA, g), ldb = local_ld(dB, g), ldc = local_ld(dC, g);
  const int panel_ld = std::max(1, mloc);
  static Scratch hostA(Scratch::host), hostB(Scratch::host), pinA(Scratch::pinned), pinB(Scratch::pinned),
      devA(Scratch::device), devB(Scratch::device);
  float* sendA = (e.gpu ? pinA : hostA).get(std::size_t(mloc) * b + 1);
  float* sendB = (e.gpu ? pinB : hostB).get(std::size_t(b) * nloc + 1);
  float* panelA = e.gpu ? devA.get(std::size_t(mloc) * b + 1) : sendA;
  float* panelB = e.gpu ? devB.get(std::size_t(b) * nloc + 1) : sendB;
  const auto D2H = cudaMemcpyDeviceToHost, H2D = cudaMemcpyHostToDevice;

  for (int k0 = 0, kb = 0; k0 < K; k0 += b, ++kb) {
    const int w = std::min(b, K - k0);
    // A's panel kb: block column kb lives on process column kb % Q, as local block column kb / Q; its w columns
    // of mloc rows are contiguous in the local array (lda == mloc whenever mloc > 0).
    const int rootc = kb % g.Q;
    const float* ownA = A + std::size_t(kb / g.Q) * b * lda;
    if (g.col == rootc && mloc > 0) {
      if (e.gpu) LABKIT_CUDA(cudaMemcpyAsync(sendA, ownA, sizeof(float) * mloc * w, D2H, e.stream));
      else std::memcpy(sendA, ownA, sizeof(float) * mloc * w);
    }
    // B's panel kb: block row kb lives on process row kb % P, as local block row kb / P: w rows of each of the
    // nloc columns, strided by ldb; packed into a w x nloc array for the broadcast.
    const int rootr = kb % g.P;
    const float* ownB = B + std::size_t(kb / g.P) * b;
    if (g.row == rootr && nloc > 0) {
      if (e.gpu) {
        LABKIT_CUDA(cudaMemcpy2DAsync(sendB, sizeof(float) * w, ownB, sizeof(float) * ldb, sizeof(float) * w, nloc,
                                      D2H, e.stream));
      } else {
        for (int j = 0; j < nloc; ++j) std::memcpy(sendB + std::size_t(j) * w, ownB + std::size_t(j) * ldb, sizeof(float) * w);
      }
    }
    if (e.gpu) LABKIT_CUDA(cudaStreamSynchronize(e.stream));
    MPI_Bcast(sendA, mloc * w, MPI_FLOAT, rootc, g.row_comm);
    MPI_Bcast(sendB, w * nloc, MPI_FLOAT, rootr, g.col_comm);

    // The owners multiply straight from their local arrays; the others from the received panel.
    const float* a = ownA;
    int a_ld = lda;
    if (g.col != rootc) {
      a = panelA, a_ld = panel_ld;
      if (e.gpu && mloc > 0) LABKIT_CUDA(cudaMemcpyAsync(panelA, sendA, sizeof(float) * mloc * w, H2D, e.stream));
    }
    const float* bp = ownB;
    int b_ld = ldb;
    if (g.row != rootr) {
      bp = panelB, b_ld = w;
      if (e.gpu && nloc > 0) LABKIT_CUDA(cudaMemcpyAsync(panelB, sendB, sizeof(float) * w * nloc, H2D, e.stream));
    }
    local_gemm(e, mloc, nloc, w, a, a_ld, bp, b_ld, C, ldc);
    // The staging buffers are refilled in the next step: wait here (step 3 removes this wait).
    if (e.gpu) LABKIT_CUDA(cudaStreamSynchronize(e.stream));
  }
}

}  // namespace lab09
