// `lowbit bench allreduce`: every all-reduce mode against NCCL in the same run, one process
// driving all visible GPUs. Timing: K all-reduces per device captured into one CUDA graph
// per device; the graphs are launched on all devices back to back, with events per device;
// time per all-reduce = max over ranks of the median over repetitions.
//
// Table (nccl-tests style): size, count, mode, time_us, algbw = bytes / time (GB/s),
// busbw = algbw * 2(N-1)/N (the ring-equivalent bus bandwidth, as nccl-tests defines it),
// speedup over NCCL at the same size, #wrong (sampled outputs vs the CPU reference, plus
// sampled outputs bit-identical across ranks), floor_us = bytes each rank must send per
// direction / measured peer bandwidth (cudaMemcpyPeerAsync GPU0->GPU1 in this run; for
// quantized modes the encoded bytes of step 1 + step 2), and time/floor.
#include <cuda_runtime.h>
#include <nccl.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/common/bench_common.h"
#include "bench/common/gpu_timing.cuh"
#include "lowbit/allreduce.h"
#include "lowbit/allreduce_cuda.h"
#include "lowbit/detail/cuda_check.h"
#include "tools/cli/args.h"
#include "tools/cli/command.h"

namespace lowbit::allreduce {
namespace {

// Input element i of rank r (the host regenerates any rank's input for the reference).
__host__ __device__ inline uint16_t bench_value(size_t i, int rank, DType t) {
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ (static_cast<uint32_t>(rank) * 0x9E3779B9u);
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return float_to_half_bits(t, static_cast<float>(h & 0xFFFF) / 8192.0f - 4.0f);
}

__global__ void fill_input(uint16_t* x, size_t n, int rank, DType t) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = bench_value(i, rank, t);
}

struct Dev {
  uint16_t *in = nullptr, *out = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
};

Status measure_peer_bandwidth(int n_gpus, double* gbps) {
  *gbps = 0;
  if (n_gpus < 2) return Status::Ok();
  const size_t bytes = 256ull << 20;
  void *src = nullptr, *dst = nullptr;
  LOWBIT_CUDA_RETURN(cudaSetDevice(1));
  LOWBIT_CUDA_RETURN(cudaMalloc(&dst, bytes));
  LOWBIT_CUDA_RETURN(cudaSetDevice(0));
  LOWBIT_CUDA_RETURN(cudaMalloc(&src, bytes));
  cudaStream_t s;
  cudaEvent_t a, b;
  LOWBIT_CUDA_RETURN(cudaStreamCreate(&s));
  LOWBIT_CUDA_RETURN(cudaEventCreate(&a));
  LOWBIT_CUDA_RETURN(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < 6; ++i) {
    LOWBIT_CUDA_RETURN(cudaEventRecord(a, s));
    LOWBIT_CUDA_RETURN(cudaMemcpyPeerAsync(dst, 1, src, 0, bytes, s));
    LOWBIT_CUDA_RETURN(cudaEventRecord(b, s));
    LOWBIT_CUDA_RETURN(cudaEventSynchronize(b));
    float t = 0;
    LOWBIT_CUDA_RETURN(cudaEventElapsedTime(&t, a, b));
    if (i > 0) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  *gbps = static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
  cudaFree(src);
  LOWBIT_CUDA_RETURN(cudaSetDevice(1));
  cudaFree(dst);
  LOWBIT_CUDA_RETURN(cudaSetDevice(0));
  return Status::Ok();
}

// Bytes one rank sends per direction (the NVLink floor).
double bytes_sent(Mode m, size_t count, int N, int G) {
  const double n = static_cast<double>(count), f = static_cast<double>(N - 1) / N;
  switch (m) {
    case Mode::kOneShot: return (N - 1) * n * 2;
    case Mode::kQ8Q8:
    case Mode::kQ4Q8:
    case Mode::kQ4Q4:
      return f * (static_cast<double>(codec::codec_encoded_bytes(step1_codec(m, G), count)) +
                  static_cast<double>(codec::codec_encoded_bytes(step2_codec(m, G), count)));
    default: return 2 * f * n * 2;
  }
}

// The ranks this process drives: all of them (single process) or one (--launcher env).
struct Ctx {
  int N = 0;                      // world size
  std::vector<int> rank_of;       // local index -> global rank
  std::vector<int> device_of;     // local index -> CUDA device
  std::vector<std::unique_ptr<Communicator>> comms;  // local
  std::vector<Dev> dev;                              // local
  ncclComm_t world = nullptr;  // --launcher env: to combine results across processes
  double* scratch = nullptr;   // device double on local rank 0's device
  int iters = 20, reps = 10;
  int L() const { return static_cast<int>(comms.size()); }
  bool root() const { return rank_of[0] == 0; }
};

// Across processes (env launcher): max or sum of a per-process value.
Status combine(Ctx& c, double* v, ncclRedOp_t op) {
  if (!c.world) return Status::Ok();
  LOWBIT_CUDA_RETURN(cudaSetDevice(c.device_of[0]));
  LOWBIT_CUDA_RETURN(cudaMemcpy(c.scratch, v, sizeof(double), cudaMemcpyHostToDevice));
  LOWBIT_NCCL_RETURN(ncclAllReduce(c.scratch, c.scratch, 1, ncclFloat64, op, c.world, c.dev[0].stream));
  LOWBIT_CUDA_RETURN(cudaMemcpyAsync(v, c.scratch, sizeof(double), cudaMemcpyDeviceToHost, c.dev[0].stream));
  LOWBIT_CUDA_RETURN(cudaStreamSynchronize(c.dev[0].stream));
  return Status::Ok();
}

// Enqueue one all-reduce on every rank (inside an NCCL group: one thread drives all GPUs).
// trace: per local rank, Options::debug_phase_ns (or empty).
Status enqueue_all(Ctx& c, size_t count, DType t, const Options& o, const std::vector<uint64_t*>& trace = {}) {
  if (ncclGroupStart() != ncclSuccess) return make_status(StatusCode::kNcclError, "ncclGroupStart failed");
  Status st;
  for (int r = 0; r < c.L() && st.ok(); ++r) {
    LOWBIT_CUDA_RETURN(cudaSetDevice(c.device_of[r]));
    Options orank = o;
    if (!trace.empty()) orank.debug_phase_ns = trace[r];
    st = c.comms[r]->allreduce(c.dev[r].in, c.dev[r].out, count, t, orank, c.dev[r].stream);
  }
  if (ncclGroupEnd() != ncclSuccess && st.ok()) st = make_status(StatusCode::kNcclError, "ncclGroupEnd failed");
  return st;
}

Status time_mode(Ctx& c, size_t count, DType t, const Options& o, double* us) {
  std::vector<cudaGraph_t> g(c.L());
  std::vector<cudaGraphExec_t> ex(c.L());
  for (int r = 0; r < c.L(); ++r) {
    LOWBIT_CUDA_RETURN(cudaSetDevice(c.device_of[r]));
    LOWBIT_CUDA_RETURN(cudaStreamBeginCapture(c.dev[r].stream, cudaStreamCaptureModeThreadLocal));
  }
  Status st;
  for (int k = 0; k < c.iters && st.ok(); ++k) st = enqueue_all(c, count, t, o);
  for (int r = 0; r < c.L(); ++r) {
    LOWBIT_CUDA_RETURN(cudaSetDevice(c.device_of[r]));
    cudaError_t e = cudaStreamEndCapture(c.dev[r].stream, &g[r]);
    if (st.ok() && e != cudaSuccess) st = make_status(StatusCode::kCudaError, "capture failed: %s", cudaGetErrorString(e));
  }
  LOWBIT_RETURN_IF_ERROR(st);
  for (int r = 0; r < c.L(); ++r) {
    LOWBIT_CUDA_RETURN(cudaSetDevice(c.device_of[r]));
    LOWBIT_CUDA_RETURN(cudaGraphInstantiate(&ex[r], g[r], 0));
  }
  std::vector<std::vector<double>> per(c.L());
  for (int rep = 0; rep < c.reps + 2; ++rep) {
    for (int r = 0; r < c.L(); ++r) {
      LOWBIT_CUDA_RETURN(cudaSetDevice(c.device_of[r]));
      LOWBIT_CUDA_RETURN(cudaEventRecord(c.dev[r].a, c.dev[r].stream));
      LOWBIT_CUDA_RETURN(cudaGraphLaunch(ex[r], c.dev[r].stream));
      LOWBIT_CUDA_RETURN(cudaEventRecord(c.dev[r].b, c.dev[r].stream));
    }
    for (int r = 0; r < c.L(); ++r) {
      LOWBIT_CUDA_RETURN(cudaSetDevice(c.device_of[r]));
      LOWBIT_CUDA_RETURN(cudaEventSynchronize(c.dev[r].b));
      float ms = 0;
      LOWBIT_CUDA_RETURN(cudaEventElapsedTime(&ms, c.dev[r].a, c.dev[r].b));
      if (rep >= 2) per[r].push_back(1000.0 * ms / c.iters);
    }
  }
  for (int r = 0; r < c.L(); ++r) {
    LOWBIT_RETURN_IF_ERROR(c.comms[r]->check_peer_error());
    cudaGraphExecDestroy(ex[r]);
    cudaGraphDestroy(g[r]);
  }
  *us = 0;
  for (auto& v : per) {
    std::sort(v.begin(), v.end());
    *us = std::max(*us, v[v.size() / 2]);
  }
  return combine(c, us, ncclMax);
}

// --trace: one call with per-block phase timers (kernels/allreduce/allreduce_kernels.h
// TracePhase); prints, per rank, the mean over blocks of each phase and the slowest block.
Status trace_mode(Ctx& c, size_t count, DType t, const Options& o, const char* label) {
  constexpr int kPhases = 8, kTiles = 132;
  std::vector<uint64_t*> buf(c.L(), nullptr);
  Status st;
  for (int r = 0; r < c.L() && st.ok(); ++r) {
    LOWBIT_CUDA_RETURN(cudaSetDevice(c.device_of[r]));
    if (cudaMalloc(&buf[r], kPhases * kTiles * sizeof(uint64_t)) != cudaSuccess ||
        cudaMemset(buf[r], 0, kPhases * kTiles * sizeof(uint64_t)) != cudaSuccess)
      st = make_status(StatusCode::kCudaError, "trace buffer allocation failed");
  }
  if (st.ok()) {
    for (int r = 0; r < c.L(); ++r) {
      LOWBIT_CUDA_RETURN(cudaSetDevice(c.device_of[r]));
      LOWBIT_CUDA_RETURN(cudaDeviceSynchronize());
    }
    st = enqueue_all(c, count, t, o, buf);
  }
  for (int r = 0; r < c.L() && st.ok(); ++r) {
    LOWBIT_CUDA_RETURN(cudaSetDevice(c.device_of[r]));
    std::vector<uint64_t> h(kPhases * kTiles);
    if (cudaStreamSynchronize(c.dev[r].stream) != cudaSuccess ||
        cudaMemcpy(h.data(), buf[r], h.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost) != cudaSuccess) {
      st = make_status(StatusCode::kCudaError, "trace copy failed");
      break;
    }
    int blocks = 0;
    double mean[kPhases] = {}, max_total = 0;
    for (int b = 0; b < kTiles; ++b) {
      if (h[b * kPhases + 7] == 0) continue;
      ++blocks;
      for (int k = 0; k < kPhases; ++k) mean[k] += static_cast<double>(h[b * kPhases + k]) / 1000.0;
      max_total = std::max(max_total, static_cast<double>(h[b * kPhases + 7]) / 1000.0);
    }
    if (blocks == 0) continue;
    for (double& v : mean) v /= blocks;
    std::printf("trace %-8s %10zu bytes rank %d (%3d blocks, us mean): work1 %.1f sig1 %.1f wait1 %.1f work2 %.1f "
                "sig2 %.1f wait2 %.1f work3 %.1f total %.1f (max %.1f)\n",
                label, count * 2, c.rank_of[r], blocks, mean[0], mean[1], mean[2], mean[3], mean[4], mean[5], mean[6],
                mean[7], max_total);
  }
  for (int r = 0; r < c.L(); ++r)
    if (buf[r]) cudaSetDevice(c.device_of[r]), cudaFree(buf[r]);
  return st;
}

// #wrong on sampled windows (group aligned): vs reference and across ranks.
Status count_wrong(Ctx& c, size_t count, DType t, Mode algo, int G, size_t* wrong) {
  *wrong = 0;
  const size_t W = 8192;
  std::vector<size_t> starts = {0};
  if (count > 3 * W) starts.push_back((count / 2) / 1024 * 1024);
  if (count > W) starts.push_back((count - W) / 1024 * 1024);
  for (size_t s0 : starts) {
    size_t m = std::min(W, count - s0);
    std::vector<std::vector<uint16_t>> x(c.N, std::vector<uint16_t>(m)), y(c.L(), std::vector<uint16_t>(m)),
        want(c.N, std::vector<uint16_t>(m));
    std::vector<const uint16_t*> xi;
    std::vector<uint16_t*> wo;
    for (int r = 0; r < c.N; ++r) {
      for (size_t i = 0; i < m; ++i) x[r][i] = bench_value(s0 + i, r, t);
      xi.push_back(x[r].data());
      wo.push_back(want[r].data());
    }
    for (int r = 0; r < c.L(); ++r) {
      LOWBIT_CUDA_RETURN(cudaSetDevice(c.device_of[r]));
      LOWBIT_CUDA_RETURN(cudaStreamSynchronize(c.dev[r].stream));
      LOWBIT_CUDA_RETURN(cudaMemcpy(y[r].data(), c.dev[r].out + s0, m * 2, cudaMemcpyDeviceToHost));
    }
    LOWBIT_RETURN_IF_ERROR(reference_allreduce(algo == Mode::kNccl ? Mode::kTwoShot : algo, G, t, xi, wo, m));
    for (int r = 0; r < c.L(); ++r) {
      for (size_t i = 0; i < m; ++i) {
        bool ok = y[r][i] == y[0][i];
        if (algo == Mode::kNccl) {
          // NCCL sums in its own order: within one ulp of the rank-order fp32 sum.
          float a = half_bits_to_float(t, y[r][i]), b = half_bits_to_float(t, want[0][i]);
          ok = ok && std::fabs(a - b) <= std::fabs(b) * (t == DType::kF16 ? 1.0f / 1024 : 1.0f / 128) + 1e-6f;
        } else {
          ok = ok && y[r][i] == want[0][i];
        }
        if (!ok) ++*wrong;
      }
    }
  }
  double w = static_cast<double>(*wrong);
  LOWBIT_RETURN_IF_ERROR(combine(c, &w, ncclSum));
  *wrong = static_cast<size_t>(w);
  return Status::Ok();
}

std::vector<size_t> size_list(uint64_t lo, uint64_t hi) {
  std::vector<size_t> v;
  for (uint64_t s = lo; s <= hi; s *= 2) v.push_back(static_cast<size_t>(s));
  return v;
}

int run(const std::vector<std::string>& argv) {
  cli::Args args(argv,
                 {"sizes", "modes", "dtype", "group", "gpus", "iters", "reps", "out", "tune", "launcher", "rendezvous",
                  "buffer", "trace", "ll-max", "split-min", "help"},
                 {"tune", "trace", "help"});
  if (!args.ok() || args.has("help")) {
    std::fprintf(stderr,
                 "%s\nusage: lowbit bench allreduce [--sizes 16K:1G] [--modes all|nccl,oneshot,...] [--dtype bf16]\n"
                 "       [--group 128] [--gpus N] [--iters 20] [--reps 10] [--buffer 256M] [--ll-max 512K] [--tune]\n"
                 "       [--split-min BYTES] [--trace]\n"
                 "       [--out docs/benchmarks/allreduce] [--launcher env --rendezvous FILE]\n",
                 args.error().c_str());
    return args.ok() ? 0 : 2;
  }
  const bool env_launch = args.has("launcher");
  if (env_launch && (args.get("launcher") != "env" || !args.has("rendezvous"))) {
    std::fprintf(stderr, "bench allreduce: --launcher env --rendezvous FILE (the only launcher mode)\n");
    return 2;
  }
  uint64_t lo = 16 << 10, hi = 1ull << 30;
  {
    std::string s = args.get("sizes", "16K:1G");
    size_t colon = s.find(':');
    bool ok = colon == std::string::npos ? cli::parse_size(s, &lo) && (hi = lo, true)
                                         : cli::parse_size(s.substr(0, colon), &lo) &&
                                               cli::parse_size(s.substr(colon + 1), &hi);
    if (!ok || lo < 2 || hi < lo) {
      std::fprintf(stderr, "bench allreduce: bad --sizes '%s' (e.g. 16K:1G)\n", s.c_str());
      return 2;
    }
  }
  std::vector<Mode> modes;
  for (const std::string& name : args.get_list("modes", {"all"})) {
    if (name == "all") {
      modes = {Mode::kNccl, Mode::kOneShot, Mode::kTwoShot, Mode::kQ8Q8, Mode::kQ4Q8, Mode::kQ4Q4, Mode::kAuto};
      continue;
    }
    Mode m;
    Status st = parse_mode(name, &m);
    if (!st.ok()) {
      std::fprintf(stderr, "bench allreduce: %s\n", st.message().c_str());
      return 2;
    }
    modes.push_back(m);
  }
  if (std::find(modes.begin(), modes.end(), Mode::kNccl) == modes.end()) modes.insert(modes.begin(), Mode::kNccl);
  const std::string dts = args.get("dtype", "bf16");
  if (dts != "bf16" && dts != "fp16") {
    std::fprintf(stderr, "bench allreduce: --dtype must be bf16 or fp16\n");
    return 2;
  }
  const DType t = dts == "bf16" ? DType::kBF16 : DType::kF16;
  const int G = static_cast<int>(args.get_int("group", 128));
  int ngpu = 0;
  LOWBIT_BENCH_CUDA(cudaGetDeviceCount(&ngpu));
  int N = static_cast<int>(args.get_int("gpus", ngpu));
  Ctx c;
  c.iters = static_cast<int>(args.get_int("iters", 20));
  c.reps = static_cast<int>(args.get_int("reps", 10));
  uint64_t buffer = Config{}.buffer_bytes;
  if (args.has("buffer") && !cli::parse_size(args.get("buffer"), &buffer)) {
    std::fprintf(stderr, "bench allreduce: bad --buffer\n");
    return 2;
  }
  uint64_t ll_max = Config{}.oneshot_ll_max_bytes;
  if (args.has("ll-max") && !cli::parse_size(args.get("ll-max"), &ll_max)) {
    std::fprintf(stderr, "bench allreduce: bad --ll-max (bytes, e.g. 512K; 0 turns the LL one-shot off)\n");
    return 2;
  }
  uint64_t split_min = Config{}.quant_split_min_bytes;
  if (args.has("split-min") && !cli::parse_size(args.get("split-min"), &split_min)) {
    std::fprintf(stderr, "bench allreduce: bad --split-min (bytes, e.g. 8M)\n");
    return 2;
  }
  const bool tune = args.has("tune");
  const bool trace = args.has("trace");  // per-block phase times of one extra call per row
  const std::string prefix = args.get("out", "docs/benchmarks/allreduce");
  if (!args.ok()) {
    std::fprintf(stderr, "bench allreduce: %s\n", args.error().c_str());
    return 2;
  }
  Config cfg;
  cfg.buffer_bytes = buffer;
  cfg.oneshot_ll_max_bytes = ll_max;
  cfg.quant_split_min_bytes = split_min;
  Status st;
  if (env_launch) {
    // One process per GPU: rank/size from the launcher's environment; rank 0 publishes the
    // ncclUniqueId in the rendezvous file (tmp + rename), the others poll it (bounded).
    auto env_int = [](std::initializer_list<const char*> names, int def) {
      for (const char* n : names)
        if (const char* v = std::getenv(n)) return std::atoi(v);
      return def;
    };
    const int rank = env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"}, -1);
    N = env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"}, -1);
    const int local = env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"}, rank);
    if (rank < 0 || N < 1 || rank >= N || local < 0 || local >= ngpu) {
      std::fprintf(stderr, "bench allreduce: --launcher env: rank %d, size %d, local rank %d, %d GPUs visible\n", rank,
                   N, local, ngpu);
      return 2;
    }
    const std::string file = args.get("rendezvous");
    ncclUniqueId id;
    if (rank == 0) {
      ncclGetUniqueId(&id);
      FILE* f = std::fopen((file + ".tmp").c_str(), "wb");
      if (!f || std::fwrite(&id, sizeof id, 1, f) != 1) {
        std::fprintf(stderr, "bench allreduce: cannot write %s.tmp\n", file.c_str());
        return 1;
      }
      std::fclose(f);
      std::rename((file + ".tmp").c_str(), file.c_str());
    } else {
      bool got = false;
      for (int i = 0; i < 6000 && !got; ++i) {  // 60 s
        if (FILE* f = std::fopen(file.c_str(), "rb")) {
          got = std::fread(&id, sizeof id, 1, f) == 1;
          std::fclose(f);
        }
        if (!got) usleep(10000);
      }
      if (!got) {
        std::fprintf(stderr, "bench allreduce: rank %d: no ncclUniqueId in %s after 60 s\n", rank, file.c_str());
        return 1;
      }
    }
    LOWBIT_BENCH_CUDA(cudaSetDevice(local));
    if (ncclCommInitRank(&c.world, N, id, rank) != ncclSuccess) {
      std::fprintf(stderr, "bench allreduce: rank %d: ncclCommInitRank failed\n", rank);
      return 1;
    }
    c.comms.resize(1);
    st = Communicator::create_from_nccl(c.world, cfg, &c.comms[0]);
    c.rank_of = {rank};
    c.device_of = {local};
    LOWBIT_BENCH_CUDA(cudaMalloc(&c.scratch, sizeof(double)));
  } else {
    if (N < 1 || N > ngpu || N > 8) {
      std::fprintf(stderr, "bench allreduce: --gpus %d but %d GPUs visible (1..8)\n", N, ngpu);
      return 2;
    }
    std::vector<int> devs;
    for (int i = 0; i < N; ++i) devs.push_back(i), c.rank_of.push_back(i), c.device_of.push_back(i);
    st = Communicator::create_single_process(devs, cfg, &c.comms);
  }
  c.N = N;
  if (!st.ok()) {
    std::fprintf(stderr, "bench allreduce: %s\n", st.to_string().c_str());
    return 1;
  }
  c.dev.resize(c.L());
  const size_t max_count = hi / 2;
  for (int r = 0; r < c.L(); ++r) {
    LOWBIT_BENCH_CUDA(cudaSetDevice(c.device_of[r]));
    Dev& d = c.dev[r];
    if (cudaMalloc(&d.in, max_count * 2) != cudaSuccess || cudaMalloc(&d.out, max_count * 2) != cudaSuccess) {
      std::fprintf(stderr, "bench allreduce: out of memory for %zu-byte buffers\n", max_count * 2);
      return 1;
    }
    LOWBIT_BENCH_CUDA(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
    LOWBIT_BENCH_CUDA(cudaEventCreate(&d.a));
    LOWBIT_BENCH_CUDA(cudaEventCreate(&d.b));
    fill_input<<<1024, 256, 0, d.stream>>>(d.in, max_count, c.rank_of[r], t);
  }
  // The root prints and writes; every process measures.
  if (!c.root()) std::freopen("/dev/null", "w", stdout);
  double peer_gbps = 0;
  // Needs two GPUs in this process (not measured with --launcher env: floor columns are 0).
  st = measure_peer_bandwidth(c.L(), &peer_gbps);
  if (!st.ok()) {
    std::fprintf(stderr, "bench allreduce: %s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("# lowbit bench allreduce: %s, %d ranks, %s, G=%d, %d all-reduces per graph, median of %d\n",
              bench::machine_description().c_str(), N, dtype_name(t), G, c.iters, c.reps);
  std::printf("# peer copy bandwidth GPU0->GPU1: %.1f GB/s; busbw = algbw * 2(N-1)/N\n", peer_gbps);
  bench::Table table({{"size", 10}, {"count", 11}, {"mode", 8}, {"ran", 8}, {"time_us", 10}, {"algbw", 8},
                      {"busbw", 8}, {"vs_nccl", 8}, {"#wrong", 7}, {"floor_us", 9}, {"t/floor", 8}});
  table.print_header();
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> auto_rows, tune_rows;
  int failures = 0;
  for (size_t bytes : size_list(lo, hi)) {
    const size_t count = bytes / 2;
    double nccl_us = 0;
    std::vector<std::pair<Mode, double>> measured;
    for (Mode m : modes) {
      Options o;
      o.mode = m;
      o.group_size = G;
      o.precision = Precision::kExact;
      double us = 0;
      Mode ran = c.comms[0]->resolve_mode(count, t, o);
      st = time_mode(c, count, t, o, &us);
      if (!st.ok()) {
        std::fprintf(stderr, "bench allreduce: %s at %zu bytes: %s\n", mode_name(m), bytes, st.to_string().c_str());
        ++failures;
        if (st.code() == StatusCode::kTimeout) return 1;
        continue;
      }
      size_t wrong = 0;
      st = count_wrong(c, count, t, ran, G, &wrong);
      if (!st.ok()) {
        std::fprintf(stderr, "bench allreduce: check: %s\n", st.to_string().c_str());
        ++failures;
      }
      if (wrong) ++failures;
      if (m == Mode::kNccl) nccl_us = us;
      if (m != Mode::kAuto) measured.push_back({m, us});
      const double algbw = static_cast<double>(bytes) / (us * 1e-6) / 1e9;
      const double busbw = algbw * 2.0 * (N - 1) / N;
      const double floor_us = peer_gbps > 0 ? bytes_sent(ran, count, N, G) / (peer_gbps * 1e9) * 1e6 : 0;
      table.print_row({cli::format_size(bytes), std::to_string(count), mode_name(m), mode_name(ran), bench::fmt(us, 1),
                       bench::fmt(algbw, 1), bench::fmt(busbw, 1), bench::fmt(nccl_us > 0 ? nccl_us / us : 0, 2),
                       std::to_string(wrong), bench::fmt(floor_us, 1), bench::fmt(floor_us > 0 ? us / floor_us : 0, 2)});
      rows.push_back({{"bytes", bytes}, {"count", count}, {"mode", mode_name(m)}, {"ran", mode_name(ran)},
                      {"time_us", us}, {"algbw_gbps", algbw}, {"busbw_gbps", busbw},
                      {"speedup_vs_nccl", nccl_us > 0 ? nccl_us / us : 0}, {"wrong", wrong}, {"floor_us", floor_us},
                      {"time_over_floor", floor_us > 0 ? us / floor_us : 0}});
      std::fflush(stdout);
      if (trace && ran != Mode::kNccl) {
        st = trace_mode(c, count, t, o, mode_name(m));
        if (!st.ok()) std::fprintf(stderr, "bench allreduce: trace: %s\n", st.to_string().c_str());
      }
      if (tune && m != Mode::kNccl && m != Mode::kAuto) {
        int best_sms = 0;
        double best = 1e30;
        for (int sms : {2, 4, 8, 16, 32, 64, 96, 132}) {
          o.num_sms = sms;
          double u = 0;
          if (time_mode(c, count, t, o, &u).ok() && u < best) best = u, best_sms = sms;
        }
        char line[200];
        std::snprintf(line, sizeof line, "tune %-8s %10zu bytes: best num_sms %3d: %.1f us (default %.1f us)",
                      mode_name(m), bytes, best_sms, best, us);
        tune_rows.push_back(line);
      }
    }
    // kAuto row for this size: fastest measured mode within each precision.
    auto best_of = [&](std::initializer_list<Mode> allowed) {
      Mode bm = Mode::kNccl;
      double bu = 1e30;
      for (auto& [m, u] : measured)
        if (std::find(allowed.begin(), allowed.end(), m) != allowed.end() && u < bu) bu = u, bm = m;
      return bm;
    };
    auto q = [](Mode m) { return std::string("Mode::k") + (m == Mode::kNccl ? "Nccl" : m == Mode::kOneShot ? "OneShot"
                                                            : m == Mode::kTwoShot ? "TwoShot" : m == Mode::kQ8Q8 ? "Q8Q8"
                                                            : m == Mode::kQ4Q8 ? "Q4Q8" : "Q4Q4"); };
    Mode e = best_of({Mode::kNccl, Mode::kOneShot, Mode::kTwoShot});
    Mode i8 = best_of({Mode::kNccl, Mode::kOneShot, Mode::kTwoShot, Mode::kQ8Q8});
    Mode i48 = best_of({Mode::kNccl, Mode::kOneShot, Mode::kTwoShot, Mode::kQ8Q8, Mode::kQ4Q8});
    Mode i4 = best_of({Mode::kNccl, Mode::kOneShot, Mode::kTwoShot, Mode::kQ8Q8, Mode::kQ4Q8, Mode::kQ4Q4});
    char line[256];
    std::snprintf(line, sizeof line, "    {%d, %zu, %s, %s, %s, %s},", N, bytes, q(e).c_str(), q(i8).c_str(),
                  q(i48).c_str(), q(i4).c_str());
    auto_rows.push_back(line);
  }
  for (auto& l : tune_rows) std::printf("%s\n", l.c_str());
  std::printf("# kAuto rows for runtime/allreduce/auto_table.h (world, max_bytes, exact, int8, int4-int8, int4):\n");
  for (auto& l : auto_rows) std::printf("%s\n", l.c_str());
  nlohmann::json rec = bench::run_record(argv, "bench allreduce");
  rec["peer_copy_gbps"] = peer_gbps;
  rec["ranks"] = N;
  rec["dtype"] = dtype_name(t);
  rec["group_size"] = G;
  rec["auto_rows"] = auto_rows;
  if (c.root()) bench::write_results(prefix, rec, rows, table.markdown(),
                       {{"x", "bytes"}, {"y", "time_us"}, {"series", "mode"}, {"logx", true}, {"logy", true},
                        {"title", "all-reduce time per call, " + std::to_string(N) + " GPUs, " + dtype_name(t)}});
  for (int r = 0; r < c.L(); ++r) {
    LOWBIT_BENCH_CUDA(cudaSetDevice(c.device_of[r]));
    cudaFree(c.dev[r].in);
    cudaFree(c.dev[r].out);
    cudaStreamDestroy(c.dev[r].stream);
    cudaEventDestroy(c.dev[r].a);
    cudaEventDestroy(c.dev[r].b);
  }
  c.comms.clear();
  if (c.world) ncclCommDestroy(c.world);
  if (failures) std::printf("bench allreduce: %d FAILED measurements or wrong outputs\n", failures);
  return failures ? 1 : 0;
}

LOWBIT_REGISTER_COMMAND("bench allreduce", "Flash All-Reduce vs NCCL: time, bandwidth, correctness, auto table",
                        run);

}  // namespace
}  // namespace lowbit::allreduce
