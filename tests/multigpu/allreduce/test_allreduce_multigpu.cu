// Multi-GPU tests of the Flash All-Reduce communicator, one process driving every visible
// GPU (rank i = device i). Outputs are poisoned first, compared bit for bit with the CPU
// reference and across ranks; integer payloads check exactness of unquantized modes.
#include <gtest/gtest.h>
#include <nccl.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <thread>
#include <vector>

#include "lowbit/allreduce.h"
#include "lowbit/allreduce_cuda.h"
#include "lowbit/detail/cuda_check.h"

namespace lowbit::allreduce {
namespace {

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x
// The same in helpers that cannot return early (void functions that other code continues
// after, destructors' waits): the failure is recorded and the test fails.
#define CUDA_EXPECT(x) EXPECT_EQ((x), cudaSuccess) << #x
// The two-process test's child (no gtest there): a failed CUDA call ends it with its own exit
// code and names the call.
#define CHILD_CUDA(x, code)                                                          \
  do {                                                                               \
    const cudaError_t _e = (x);                                                      \
    if (_e != cudaSuccess) {                                                         \
      std::fprintf(stderr, "rank %d: %s: %s\n", rank, #x, cudaGetErrorString(_e));   \
      return code;                                                                   \
    }                                                                                \
  } while (0)
#define ST_OK(x)                          \
  do {                                    \
    Status _s = (x);                      \
    ASSERT_TRUE(_s.ok()) << _s.to_string(); \
  } while (0)

// Deterministic input: value of element i of rank r for seed s. integer: small integers
// (r+1) * ((i % 17) - 8) whose sums are exact; otherwise hashed values in [-8, 8).
__host__ __device__ inline uint16_t gen_value(uint32_t seed, int r, size_t i, DType t, bool integer) {
  if (integer) return float_to_half_bits(t, static_cast<float>((r + 1) * (static_cast<int>(i % 17) - 8)));
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ (seed * 40503u + static_cast<uint32_t>(r) * 97u);
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  float v = static_cast<float>(h & 0xFFFFu) / 4096.0f - 8.0f;
  // Some groups of small amplitude, some large.
  if ((i / 128) % 5 == 3) v *= 1.0f / 1024;
  return float_to_half_bits(t, v);
}

__global__ void fill_kernel(uint16_t* x, size_t n, const uint32_t* seed, int r, DType t, bool integer) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = gen_value(*seed, r, i, t, integer);
}

int num_gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n > 8 ? 8 : n;
}

struct Ranks {
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<cudaStream_t> streams;
  int n = 0;
  ~Ranks() {
    for (size_t r = 0; r < streams.size(); ++r) {
      CUDA_EXPECT(cudaSetDevice(static_cast<int>(r)));
      CUDA_EXPECT(cudaStreamSynchronize(streams[r]));
      cudaStreamDestroy(streams[r]);
    }
  }
};

Status make_ranks(const Config& cfg, Ranks* rk) {
  rk->n = num_gpus();
  std::vector<int> devs;
  for (int i = 0; i < rk->n; ++i) devs.push_back(i);
  LOWBIT_RETURN_IF_ERROR(Communicator::create_single_process(devs, cfg, &rk->comms));
  for (int i = 0; i < rk->n; ++i) {
    LOWBIT_CUDA_RETURN(cudaSetDevice(i));
    cudaStream_t s;
    LOWBIT_CUDA_RETURN(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    rk->streams.push_back(s);
  }
  return Status::Ok();
}

// Device buffers of one case: input and output per rank (output may alias input).
struct Bufs {
  std::vector<uint16_t*> in, out;
  std::vector<uint32_t*> seed;
  size_t n = 0;
  bool in_place = false;
  void alloc(int N, size_t count, bool inplace) {
    n = count, in_place = inplace;
    for (int r = 0; r < N; ++r) {
      CUDA_EXPECT(cudaSetDevice(r));
      uint16_t *a = nullptr, *b = nullptr;
      uint32_t* s = nullptr;
      CUDA_EXPECT(cudaMalloc(&a, count * 2 + 16));
      if (!inplace) CUDA_EXPECT(cudaMalloc(&b, count * 2 + 16));
      CUDA_EXPECT(cudaMalloc(&s, 4));
      in.push_back(a);
      out.push_back(inplace ? a : b);
      seed.push_back(s);
    }
  }
  ~Bufs() {
    for (size_t r = 0; r < in.size(); ++r) {
      CUDA_EXPECT(cudaSetDevice(static_cast<int>(r)));
      cudaFree(in[r]);
      if (!in_place) cudaFree(out[r]);
      cudaFree(seed[r]);
    }
  }
};

// Enqueue: set seed, fill input (poison output first when out of place).
void enqueue_fill(Ranks& rk, Bufs& b, uint32_t seed, DType t, bool integer) {
  for (int r = 0; r < rk.n; ++r) {
    CUDA_EXPECT(cudaSetDevice(r));
    if (!b.in_place) CUDA_EXPECT(cudaMemsetAsync(b.out[r], 0xFF, b.n * 2, rk.streams[r]));  // NaN poison
    CUDA_EXPECT(cudaMemcpyAsync(b.seed[r], &seed, 4, cudaMemcpyHostToDevice, rk.streams[r]));
    fill_kernel<<<256, 256, 0, rk.streams[r]>>>(b.in[r], b.n, b.seed[r], r, t, integer);
    CUDA_EXPECT(cudaGetLastError());
  }
}

// Compares outputs with the CPU reference of `algo` (bit for bit) and across ranks.
void check_outputs(Ranks& rk, Bufs& b, uint32_t seed, DType t, bool integer, Mode algo, int G,
                   const std::string& what) {
  const int N = rk.n;
  std::vector<std::vector<uint16_t>> x(N, std::vector<uint16_t>(b.n)), got(N, std::vector<uint16_t>(b.n)),
      want(N, std::vector<uint16_t>(b.n));
  for (int r = 0; r < N; ++r) {
    for (size_t i = 0; i < b.n; ++i) x[r][i] = gen_value(seed, r, i, t, integer);
    CUDA_OK(cudaSetDevice(r));
    ASSERT_EQ(cudaStreamSynchronize(rk.streams[r]), cudaSuccess) << what;
    ASSERT_EQ(cudaMemcpy(got[r].data(), b.out[r], b.n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  for (int r = 0; r < N; ++r) ST_OK(rk.comms[r]->check_peer_error());
  std::vector<const uint16_t*> xi;
  std::vector<uint16_t*> wo;
  for (int r = 0; r < N; ++r) xi.push_back(x[r].data()), wo.push_back(want[r].data());
  ST_OK(reference_allreduce(algo == Mode::kNccl ? Mode::kTwoShot : algo, G, t, xi, wo, b.n));
  size_t bad = 0;
  for (int r = 0; r < N; ++r) {
    for (size_t i = 0; i < b.n; ++i) {
      if (got[r][i] != got[0][i] || got[r][i] != want[0][i]) {
        if (bad++ < 5)
          ADD_FAILURE() << what << ": rank " << r << " elem " << i << " got 0x" << std::hex << got[r][i]
                        << " rank0 0x" << got[0][i] << " want 0x" << want[0][i] << std::dec;
      }
    }
  }
  if (integer && !mode_is_quantized(algo)) {
    const float k = N * (N + 1) / 2.0f;
    for (size_t i = 0; i < b.n && bad < 5; ++i) {
      float v = half_bits_to_float(t, got[0][i]);
      if (v != k * (static_cast<float>(i % 17) - 8.0f)) {
        ++bad;
        ADD_FAILURE() << what << ": integer sum wrong at " << i << ": " << v;
      }
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

void run_case(Ranks& rk, Mode mode, DType t, int G, size_t n, bool in_place, bool integer, uint32_t seed) {
  Bufs b;
  b.alloc(rk.n, n, in_place);
  enqueue_fill(rk, b, seed, t, integer);
  Options o;
  o.mode = mode;
  o.group_size = G;
  o.precision = Precision::kInt4Int8;
  // One thread drives every GPU: NCCL needs the per-rank calls inside a group (harmless for
  // the custom kernels).
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  std::vector<Status> sts;
  for (int r = 0; r < rk.n; ++r) sts.push_back(rk.comms[r]->allreduce(b.in[r], b.out[r], n, t, o, rk.streams[r]));
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (auto& s : sts) ST_OK(s);
  Mode algo = rk.comms[0]->resolve_mode(n, t, o);
  std::string what = std::string(mode_name(mode)) + "->" + mode_name(algo) + " " + dtype_name(t) +
                     " G=" + std::to_string(G) + " n=" + std::to_string(n) + (in_place ? " in-place" : "") +
                     (integer ? " integer" : "");
  if (algo == Mode::kNccl && !integer) {
    // NCCL's summation order is its own: only integer payloads are checked exactly.
    for (int r = 0; r < rk.n; ++r) {
      CUDA_OK(cudaSetDevice(r));
      CUDA_OK(cudaStreamSynchronize(rk.streams[r]));
    }
    return;
  }
  check_outputs(rk, b, seed, t, integer, algo, G, what);
}

class AllreduceMultiGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rk_ = new Ranks();
    Status st = make_ranks(Config{}, rk_);
    if (!st.ok()) {
      delete rk_;
      rk_ = nullptr;
      FAIL() << st.to_string();
    }
  }
  static void TearDownTestSuite() {
    delete rk_;
    rk_ = nullptr;
  }
  static Ranks* rk_;
};
Ranks* AllreduceMultiGpu::rk_ = nullptr;

TEST_F(AllreduceMultiGpu, AllModesMatchReference) {
  ASSERT_NE(rk_, nullptr);
  uint32_t seed = 1;
  for (Mode m : {Mode::kOneShot, Mode::kTwoShot, Mode::kQ8Q8, Mode::kQ4Q8, Mode::kQ4Q4, Mode::kNccl, Mode::kAuto}) {
    for (DType t : {DType::kF16, DType::kBF16}) {
      for (int G : {32, 64, 128}) {
        if (!mode_is_quantized(m) && G != 128) continue;
        for (size_t n : {size_t{1}, size_t{7}, size_t{1000}, size_t{1} << 20, (size_t{3} << 20) + 5}) {
          for (bool in_place : {false, true}) {
            run_case(*rk_, m, t, G, n, in_place, false, seed++);
            if (!mode_is_quantized(m) && G == 128) run_case(*rk_, m, t, G, n, in_place, true, seed++);
            if (HasFailure()) return;
          }
        }
      }
    }
  }
}

// A small staging buffer forces many chunks (and buffer reuse across chunks and calls).
TEST(AllreduceMultiGpuChunked, ManyChunks) {
  Ranks rk;
  Config cfg;
  cfg.buffer_bytes = 256 << 10;
  ST_OK(make_ranks(cfg, &rk));
  uint32_t seed = 100;
  for (Mode m : {Mode::kOneShot, Mode::kTwoShot, Mode::kQ8Q8, Mode::kQ4Q8, Mode::kQ4Q4}) {
    for (size_t n : {(size_t{3} << 20) + 5, size_t{1000}, size_t{777777}}) {
      run_case(rk, m, DType::kBF16, 64, n, n == 1000, false, seed++);
      if (!mode_is_quantized(m)) run_case(rk, m, DType::kF16, 64, n, false, true, seed++);
    }
  }
}

// The split two-step (three kernels per chunk) forced for every size, one chunk and many
// chunks, fp16/bf16, every group size: bit-identical to the CPU reference like the fused path.
TEST(AllreduceMultiGpuSplit, SplitPathMatchesReference) {
  for (size_t buffer : {size_t{256} << 20, size_t{256} << 10}) {
    Ranks rk;
    Config cfg;
    cfg.buffer_bytes = buffer;
    cfg.quant_split_min_bytes = 0;
    ST_OK(make_ranks(cfg, &rk));
    uint32_t seed = 500;
    for (Mode m : {Mode::kQ8Q8, Mode::kQ4Q8, Mode::kQ4Q4}) {
      for (int G : {32, 128}) {
        for (size_t n : {size_t{1}, size_t{1000}, size_t{777777}, (size_t{3} << 20) + 5}) {
          run_case(rk, m, n % 2 ? DType::kBF16 : DType::kF16, G, n, n == 1000, false, seed++);
          if (::testing::Test::HasFailure()) return;
        }
      }
      // Interleave with fused calls on the same communicator (flags and epochs shared).
      run_case(rk, Mode::kTwoShot, DType::kBF16, 128, 4096, false, false, seed++);
    }
  }
}

// Capture one call per device, replay many times with new input contents each time (the
// fill kernel reads its seed from device memory, updated before each replay).
TEST_F(AllreduceMultiGpu, CudaGraphReplays) {
  ASSERT_NE(rk_, nullptr);
  Ranks& rk = *rk_;
  for (Mode m : {Mode::kQ4Q8, Mode::kOneShot, Mode::kTwoShot, Mode::kQ8Q8}) {
    const size_t n = 4096 + 3;
    const DType t = DType::kBF16;
    Bufs b;
    b.alloc(rk.n, n, false);
    Options o;
    o.mode = m;
    std::vector<cudaGraphExec_t> exec(rk.n);
    for (int r = 0; r < rk.n; ++r) {
      CUDA_OK(cudaSetDevice(r));
      cudaGraph_t g;
      CUDA_OK(cudaStreamBeginCapture(rk.streams[r], cudaStreamCaptureModeThreadLocal));
      fill_kernel<<<64, 256, 0, rk.streams[r]>>>(b.in[r], n, b.seed[r], r, t, false);
      Status st = rk.comms[r]->allreduce(b.in[r], b.out[r], n, t, o, rk.streams[r]);
      CUDA_OK(cudaStreamEndCapture(rk.streams[r], &g));
      ST_OK(st);
      CUDA_OK(cudaGraphInstantiate(&exec[r], g, 0));
      cudaGraphDestroy(g);
    }
    const int reps = m == Mode::kQ4Q8 ? 1000 : 200;
    for (int k = 0; k < reps; ++k) {
      uint32_t seed = 5000 + static_cast<uint32_t>(k);
      for (int r = 0; r < rk.n; ++r) {
        CUDA_OK(cudaSetDevice(r));
        CUDA_OK(cudaMemsetAsync(b.out[r], 0xFF, n * 2, rk.streams[r]));
        CUDA_OK(cudaMemcpyAsync(b.seed[r], &seed, 4, cudaMemcpyHostToDevice, rk.streams[r]));
        CUDA_OK(cudaGraphLaunch(exec[r], rk.streams[r]));
      }
      check_outputs(rk, b, seed, t, false, m, 128, std::string("graph ") + mode_name(m) + " replay " + std::to_string(k));
      if (HasFailure()) break;
    }
    for (int r = 0; r < rk.n; ++r) cudaGraphExecDestroy(exec[r]);
    if (HasFailure()) return;
  }
}

TEST_F(AllreduceMultiGpu, MisalignedPointers) {
  ASSERT_NE(rk_, nullptr);
  Bufs b;
  b.alloc(rk_->n, 1024, false);
  Options o;
  o.mode = Mode::kTwoShot;
  Status st = rk_->comms[0]->allreduce(b.in[0] + 1, b.out[0], 1000, DType::kBF16, o, rk_->streams[0]);
  EXPECT_EQ(st.code(), StatusCode::kMisaligned);
  EXPECT_NE(st.message().find("input"), std::string::npos) << st.message();
  st = rk_->comms[0]->allreduce(b.in[0], b.out[0] + 4, 1000, DType::kBF16, o, rk_->streams[0]);
  EXPECT_EQ(st.code(), StatusCode::kMisaligned);
  EXPECT_NE(st.message().find("output"), std::string::npos) << st.message();
  o.mode = Mode::kQ4Q4;
  o.group_size = 48;
  st = rk_->comms[0]->allreduce(b.in[0], b.out[0], 1000, DType::kBF16, o, rk_->streams[0]);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_TRUE(rk_->comms[0]->allreduce(b.in[0], b.out[0], 0, DType::kBF16, o, rk_->streams[0]).ok());
}

// Only rank 0 calls: its kernel must give up after timeout_ms and name the missing peer.
TEST(AllreduceMultiGpuTimeout, MissingPeerReportsTimeout) {
  for (int variant = 0; variant < 4; ++variant) {
    const Mode m = variant == 0 ? Mode::kTwoShot : variant == 1 ? Mode::kOneShot : Mode::kQ4Q8;
    Ranks rk;
    Config cfg;
    cfg.timeout_ms = 200;
    if (variant == 3) cfg.quant_split_min_bytes = 0;  // the split two-step's waits
    ST_OK(make_ranks(cfg, &rk));
    Bufs b;
    b.alloc(rk.n, 1 << 16, false);
    enqueue_fill(rk, b, 9, DType::kBF16, false);
    for (int r = 0; r < rk.n; ++r) {
      CUDA_OK(cudaSetDevice(r));
      CUDA_OK(cudaStreamSynchronize(rk.streams[r]));
    }
    Options o;
    o.mode = m;
    auto t0 = std::chrono::steady_clock::now();
    ST_OK(rk.comms[0]->allreduce(b.in[0], b.out[0], b.n, DType::kBF16, o, rk.streams[0]));
    Status st = rk.comms[0]->check_peer_error();
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(st.code(), StatusCode::kTimeout) << mode_name(m) << ": " << st.to_string();
    const std::string step = m == Mode::kOneShot ? "step 0" : "step 1";
    EXPECT_NE(st.message().find("rank 0: peer rank "), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(step), std::string::npos) << st.message();
    if (rk.n == 2) EXPECT_NE(st.message().find("peer rank 1"), std::string::npos) << st.message();
    EXPECT_LT(sec, 1.5) << st.message();
    // The communicator stays failed.
    EXPECT_EQ(rk.comms[0]->allreduce(b.in[0], b.out[0], b.n, DType::kBF16, o, rk.streams[0]).code(),
              StatusCode::kTimeout);
    std::printf("%s: %s (%.3f s)\n", mode_name(m), st.to_string().c_str(), sec);
  }
}

// create_from_nccl with one thread per GPU in this process. CUDA IPC may refuse handles
// of the same process; the communicator then falls back to NCCL (reported by resolve_mode)
// and must still be correct.
TEST(AllreduceMultiGpuNccl, CreateFromNcclThreads) {
  const int N = num_gpus();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclComm_t> nc(N);
  Ranks rk;
  rk.n = N;
  rk.comms.resize(N);
  rk.streams.resize(N);
  std::vector<Status> st(N);
  std::vector<std::thread> th;
  for (int r = 0; r < N; ++r) {
    th.emplace_back([&, r] {
      if (cudaSetDevice(r) != cudaSuccess ||
          cudaStreamCreateWithFlags(&rk.streams[r], cudaStreamNonBlocking) != cudaSuccess) {
        st[r] = make_status(StatusCode::kCudaError, "cudaSetDevice / cudaStreamCreateWithFlags failed on rank %d", r);
        return;
      }
      if (ncclCommInitRank(&nc[r], N, id, r) != ncclSuccess) {
        st[r] = make_status(StatusCode::kNcclError, "ncclCommInitRank failed on rank %d", r);
        return;
      }
      st[r] = Communicator::create_from_nccl(nc[r], Config{}, &rk.comms[r]);
    });
  }
  for (auto& t : th) t.join();
  for (int r = 0; r < N; ++r) ST_OK(st[r]);
  Options o;
  o.mode = Mode::kQ4Q8;
  std::printf("create_from_nccl in one process: q4q8 resolves to %s\n",
              mode_name(rk.comms[0]->resolve_mode(1 << 20, DType::kBF16, o)));
  uint32_t seed = 77;
  for (Mode m : {Mode::kQ4Q8, Mode::kTwoShot, Mode::kOneShot}) run_case(rk, m, DType::kBF16, 128, 100000, false, false, seed++);
  for (Mode m : {Mode::kTwoShot, Mode::kNccl}) run_case(rk, m, DType::kF16, 128, 100000, false, true, seed++);
  for (int r = 0; r < N; ++r) rk.comms[r].reset();
  for (int r = 0; r < N; ++r) ncclCommDestroy(nc[r]);
}


// ---- create_from_nccl across two processes (the MPI path: CUDA IPC) --------------------
// The parent forks + execs this binary with LOWBIT_AR_ROLE=1 running only ChildRole; the
// ncclUniqueId goes through a temp file. Each process runs rank (role) on GPU (role).
int run_process_rank(int rank, const std::string& id_file) {
  const int N = 2;
  ncclUniqueId id;
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) return 10;
    std::ofstream(id_file + ".tmp", std::ios::binary).write(reinterpret_cast<const char*>(&id), sizeof id);
    std::rename((id_file + ".tmp").c_str(), id_file.c_str());
  } else {
    bool got = false;
    for (int i = 0; i < 3000 && !got; ++i) {  // bounded: 30 s
      std::ifstream f(id_file, std::ios::binary);
      if (f && f.read(reinterpret_cast<char*>(&id), sizeof id)) got = true;
      else usleep(10000);
    }
    if (!got) return 11;
  }
  if (cudaSetDevice(rank) != cudaSuccess) return 12;
  ncclComm_t nc;
  if (ncclCommInitRank(&nc, N, id, rank) != ncclSuccess) return 13;
  std::unique_ptr<Communicator> comm;
  Status st = Communicator::create_from_nccl(nc, Config{}, &comm);
  if (!st.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, st.to_string().c_str());
    return 14;
  }
  cudaStream_t s;
  CHILD_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), 15);
  int rc = 0;
  const size_t n = (size_t{1} << 20) + 77;
  uint16_t *in = nullptr, *out = nullptr;
  uint32_t* seed_d = nullptr;
  CHILD_CUDA(cudaMalloc(&in, n * 2), 16);
  CHILD_CUDA(cudaMalloc(&out, n * 2), 16);
  CHILD_CUDA(cudaMalloc(&seed_d, 4), 16);
  uint32_t seed = 4242;
  CHILD_CUDA(cudaMemcpy(seed_d, &seed, 4, cudaMemcpyHostToDevice), 17);
  for (Mode m : {Mode::kQ4Q8, Mode::kTwoShot, Mode::kOneShot, Mode::kQ8Q8, Mode::kQ4Q4, Mode::kNccl}) {
    const DType t = DType::kBF16;
    Options o;
    o.mode = m;
    Mode ran = comm->resolve_mode(n, t, o);
    if (rank == 0) std::printf("2-process create_from_nccl: %s runs as %s\n", mode_name(m), mode_name(ran));
    if (m != Mode::kNccl && ran == Mode::kNccl) rc = 20;  // IPC must work between processes of one host
    CHILD_CUDA(cudaMemsetAsync(out, 0xFF, n * 2, s), 18);
    fill_kernel<<<256, 256, 0, s>>>(in, n, seed_d, rank, t, m == Mode::kNccl);
    st = comm->allreduce(in, out, n, t, o, s);
    if (!st.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, st.to_string().c_str());
      return 21;
    }
    const cudaError_t sync = cudaStreamSynchronize(s);
    st = comm->check_peer_error();
    if (!st.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, st.to_string().c_str());
      return 22;
    }
    std::vector<std::vector<uint16_t>> x(N, std::vector<uint16_t>(n)), want(N, std::vector<uint16_t>(n));
    std::vector<uint16_t> got(n);
    CHILD_CUDA(sync, 19);
    CHILD_CUDA(cudaMemcpy(got.data(), out, n * 2, cudaMemcpyDeviceToHost), 19);
    std::vector<const uint16_t*> xi;
    std::vector<uint16_t*> wo;
    for (int r = 0; r < N; ++r) {
      for (size_t i = 0; i < n; ++i) x[r][i] = gen_value(seed, r, i, t, m == Mode::kNccl);
      xi.push_back(x[r].data());
      wo.push_back(want[r].data());
    }
    if (!reference_allreduce(ran == Mode::kNccl ? Mode::kTwoShot : ran, 128, t, xi, wo, n).ok()) return 23;
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += got[i] != want[0][i];
    if (bad) {
      std::fprintf(stderr, "rank %d: %s: %zu of %zu elements differ from the reference\n", rank, mode_name(m), bad, n);
      rc = 24;
    }
  }
  cudaFree(in);
  cudaFree(out);
  cudaFree(seed_d);
  comm.reset();
  ncclCommDestroy(nc);
  return rc;
}

TEST(AllreduceMultiGpuNccl, ChildRole) {
  const char* role = std::getenv("LOWBIT_AR_ROLE");
  if (!role) GTEST_SKIP() << "only runs as the child of CreateFromNcclTwoProcesses";
  const char* f = std::getenv("LOWBIT_AR_ID_FILE");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(run_process_rank(std::atoi(role), f), 0);
}

TEST(AllreduceMultiGpuNccl, CreateFromNcclTwoProcesses) {
  if (std::getenv("LOWBIT_AR_ROLE")) GTEST_SKIP() << "child";
  char exe[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", exe, sizeof exe - 1), 0);
  std::string id_file = "/tmp/lowbit_ar_id_" + std::to_string(getpid());
  std::remove(id_file.c_str());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("LOWBIT_AR_ROLE", "1", 1);
    setenv("LOWBIT_AR_ID_FILE", id_file.c_str(), 1);
    execl(exe, exe, "--gtest_filter=AllreduceMultiGpuNccl.ChildRole", static_cast<char*>(nullptr));
    _exit(127);
  }
  int rc = run_process_rank(0, id_file);
  int status = 0;
  // Bounded wait for the child (its own waits are bounded too).
  bool done = false;
  for (int i = 0; i < 6000 && !done; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) done = true;
    else usleep(10000);
  }
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  std::remove(id_file.c_str());
  EXPECT_TRUE(done) << "child did not finish within 60 s";
  EXPECT_EQ(rc, 0) << "rank 0 (this process) failed";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

}  // namespace
}  // namespace lowbit::allreduce
