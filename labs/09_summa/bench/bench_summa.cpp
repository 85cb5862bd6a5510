// Lab 09 bench: C = A B over all the processes of the run (one P x Q grid, P <= Q, as square as the count
// allows), N x N fp32, for steps 2 and 3, next to what one SUMMA step costs in communication alone (the panels'
// staging and broadcasts, timed by the bench's own code) and in computation alone (one local update), and the bytes
// a process receives per step. Run it once per process count and compare the CSVs:
//   mpirun -np 1 lab09_bench_solution --csv np1.csv;  mpirun -np 2 lab09_bench_solution --csv np2.csv
// Options: --csv FILE (rank 0 appends), --quick (two sizes, one repeat), --max N (largest N). The options are
// parsed here rather than by labkit::parse_bench_args because this bench also runs without a GPU (the CPU path,
// small sizes), for a smoke test of the distribution.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "labkit/not_implemented.h"
#include "summa.h"
#include "tests/blocking_comm.h"

namespace {

int g_rank = 0;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

// Milliseconds of fn on the slowest process, barrier to barrier; -1 when the step is not written.
double time_ms(lab09::Engine& e, int repeats, const std::function<void()>& fn) {
  std::vector<double> ms;
  for (int r = 0; r <= repeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    try {
      fn();
    } catch (const labkit::NotImplemented&) {
      return -1;
    }
    if (e.gpu) LABKIT_CUDA(cudaDeviceSynchronize());
    double t = (MPI_Wtime() - t0) * 1e3;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (r > 0) ms.push_back(t);  // the first call warms up (staging buffers, cuBLAS's choice of kernel)
  }
  return median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string csv = "lab09_bench.csv";
  bool quick = false;
  long long max_n = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--csv" && i + 1 < argc) csv = argv[++i];
    else if (a == "--quick") quick = true;
    else if (a == "--max" && i + 1 < argc) max_n = std::atoll(argv[++i]);
    else {
      if (g_rank == 0) std::cerr << "usage: mpirun -np P " << argv[0] << " [--csv FILE] [--quick] [--max N]\n";
      MPI_Finalize();
      return 2;
    }
  }
  lab09::Engine e = lab09::make_engine();
  int P = 1;
  for (int p = 1; p * p <= size; ++p)
    if (size % p == 0) P = p;
  lab09::Grid g = lab09::make_grid(MPI_COMM_WORLD, P, size / P);
  const std::string device = e.gpu ? labkit::describe(labkit::device_info()) : "CPU (no CUDA device)";
  std::vector<int> sizes = e.gpu ? std::vector<int>{2048, 4096, 8192, 16384} : std::vector<int>{128, 256, 512};
  if (quick) sizes.resize(2);
  if (max_n > 0) sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](int n) { return n > max_n; }), sizes.end());
  const int repeats = quick ? 1 : 3;
  if (g_rank == 0) {
    std::printf("lab09 bench: %d process(es), %d x %d grid, %s\n", size, g.P, g.Q, device.c_str());
    std::printf("%6s %5s %10s %10s %9s %8s %12s %10s %9s %12s\n", "N", "b", "step2_ms", "step3_ms", "TFLOP/s",
                "steps", "comm_ms/step", "MB/step", "comm_GB/s", "gemm_ms/step");
  }
  std::ofstream out;
  if (g_rank == 0) {
    std::ifstream exists(csv);
    const bool header = !exists.good();
    out.open(csv, std::ios::app);
    if (header)
      out << "procs,P,Q,N,b,device,step2_ms,step3_ms,step3_tflops,steps,comm_ms_per_step,mb_per_step,comm_gbs,"
             "gemm_ms_per_step\n";
  }

  for (int N : sizes) {
    const int b = e.gpu ? 1024 : 64;
    const lab09::Dist d{N, N, b};
    const int mloc = lab09::local_rows(d, g), nloc = lab09::local_cols(d, g), ld = lab09::local_ld(d, g);
    const std::size_t n = lab09::local_size(d, g);
    std::vector<float> h(n);
    for (std::size_t k = 0; k < n; ++k) h[k] = float(int(k % 17)) / 17.0f - 0.5f;
    float *A = h.data(), *B = nullptr, *C = nullptr;
    std::vector<float> hb(h), hc(n, 0.0f);
    if (e.gpu) {
      LABKIT_CUDA(cudaMalloc(&A, n * 4));
      LABKIT_CUDA(cudaMalloc(&B, n * 4));
      LABKIT_CUDA(cudaMalloc(&C, n * 4));
      LABKIT_CUDA(cudaMemcpy(A, h.data(), n * 4, cudaMemcpyHostToDevice));
      LABKIT_CUDA(cudaMemcpy(B, h.data(), n * 4, cudaMemcpyHostToDevice));
    } else {
      B = hb.data(), C = hc.data();
    }
    const double t2 = time_ms(e, repeats, [&] { lab09::summa(g, e, N, N, N, b, A, B, C); });
    const double t3 = time_ms(e, repeats, [&] { lab09::summa_overlap(g, e, N, N, N, b, A, B, C); });

    // Communication alone, as step 2 does it: stage each panel to the host, broadcast, stage back.
    const int steps = (N + b - 1) / b;
    std::vector<float> pa(std::size_t(mloc) * b + 1), pb(std::size_t(b) * nloc + 1);
    float *da = nullptr, *db = nullptr;
    if (e.gpu) {
      LABKIT_CUDA(cudaMallocHost(&da, pa.size() * 4));  // pinned, as the reference's staging
      LABKIT_CUDA(cudaMallocHost(&db, pb.size() * 4));
    }
    float* sa = e.gpu ? da : pa.data();
    float* sb = e.gpu ? db : pb.data();
    double bytes = 0;
    const double comm = time_ms(e, repeats, [&] { bytes = lab09::blocking_comm(g, e, d, A, B, sa, sb, C); }) / steps;
    MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    bytes /= steps;
    // Computation alone: one local update of a full-width panel.
    const double gemm = time_ms(e, repeats, [&] { lab09::local_gemm(e, mloc, nloc, std::min({b, N, ld}), A, ld, B, ld, C, ld); });
    if (e.gpu) cudaFree(A), cudaFree(B), cudaFree(C), cudaFreeHost(da), cudaFreeHost(db);

    if (g_rank == 0) {
      const double tflops = t3 > 0 ? 2.0 * N * double(N) * N / t3 / 1e9 : -1;
      const double gbs = comm > 0 ? bytes / comm / 1e6 : 0;
      std::printf("%6d %5d %10.2f %10.2f %9.2f %8d %12.3f %10.2f %9.2f %12.3f\n", N, b, t2, t3, tflops, steps, comm,
                  bytes / 1e6, gbs, gemm);
      out << size << "," << g.P << "," << g.Q << "," << N << "," << b << ",\"" << device << "\"," << t2 << "," << t3
          << "," << tflops << "," << steps << "," << comm << "," << bytes / 1e6 << "," << gbs << "," << gemm << "\n";
    }
  }
  if (g_rank == 0) std::printf("(-1: step not implemented; times are the slowest process's)\nwrote %s\n", csv.c_str());
  lab09::free_grid(g);
  lab09::free_engine(e);
  MPI_Finalize();
  return 0;
}
