#include "bench/common/gpu_timing.cuh"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lowbit/detail/cuda_check.h"

namespace lowbit::bench {

Status time_in_graph(cudaStream_t stream, const std::function<Status(cudaStream_t)>& enqueue, int calls_per_graph,
                     int warmup, int reps, Timing* out) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  LOWBIT_CUDA_RETURN(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  Status st;
  for (int i = 0; i < calls_per_graph && st.ok(); ++i) st = enqueue(stream);
  cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!st.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return st;
  }
  LOWBIT_CUDA_RETURN(end);
  LOWBIT_CUDA_RETURN(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t a, b;
  LOWBIT_CUDA_RETURN(cudaEventCreate(&a));
  LOWBIT_CUDA_RETURN(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) LOWBIT_CUDA_RETURN(cudaGraphLaunch(exec, stream));
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    LOWBIT_CUDA_RETURN(cudaEventRecord(a, stream));
    LOWBIT_CUDA_RETURN(cudaGraphLaunch(exec, stream));
    LOWBIT_CUDA_RETURN(cudaEventRecord(b, stream));
    LOWBIT_CUDA_RETURN(cudaEventSynchronize(b));
    float ms = 0;
    LOWBIT_CUDA_RETURN(cudaEventElapsedTime(&ms, a, b));
    us.push_back(1000.0 * ms / calls_per_graph);
  }
  std::sort(us.begin(), us.end());
  out->median_us = us[us.size() / 2];
  out->min_us = us.front();
  out->max_us = us.back();
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return Status::Ok();
}

namespace {
// 16-byte vector copy, a few loads in flight per thread: the device copy ceiling that
// memory-bound kernels can reach (cudaMemcpyAsync D2D alone measured ~2.7 TB/s on H200,
// well under what a plain vectorized kernel moves).
__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}
}  // namespace

Status measure_copy_bandwidth(int device, size_t bytes, double* gbps) {
  LOWBIT_CUDA_RETURN(cudaSetDevice(device));
  void *src = nullptr, *dst = nullptr;
  LOWBIT_CUDA_RETURN(cudaMalloc(&src, bytes));
  LOWBIT_CUDA_RETURN(cudaMalloc(&dst, bytes));
  LOWBIT_CUDA_RETURN(cudaMemset(src, 0x5A, bytes));
  cudaStream_t s;
  LOWBIT_CUDA_RETURN(cudaStreamCreate(&s));
  // Two ways to copy; the ceiling is the faster one.
  Timing t_memcpy, t_kernel;
  Status st = time_in_graph(
      s,
      [&](cudaStream_t st_) -> Status {
        LOWBIT_CUDA_RETURN(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st_));
        return Status::Ok();
      },
      5, 2, 10, &t_memcpy);
  int sms = 0;
  if (st.ok() && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    st = make_status(StatusCode::kCudaError, "measure_copy_bandwidth: cannot read the SM count of device %d", device);
  if (st.ok())
    st = time_in_graph(
        s,
        [&](cudaStream_t st_) -> Status {
          copy_kernel<<<sms * 4, 512, 0, st_>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), bytes / 16);
          LOWBIT_CUDA_RETURN_LAUNCH();
          return Status::Ok();
        },
        5, 2, 10, &t_kernel);
  cudaStreamDestroy(s);
  cudaFree(src);
  cudaFree(dst);
  LOWBIT_RETURN_IF_ERROR(st);
  const double best_us = std::min(t_memcpy.median_us, t_kernel.median_us);
  *gbps = 2.0 * static_cast<double>(bytes) / (best_us * 1e-6) / 1e9;
  return Status::Ok();
}

namespace {
constexpr int kReadRegions = 3;
struct ReadArgs {
  const uint4* p[kReadRegions];
  size_t n[kReadRegions];  // 16 B words
  uint32_t* out;
};
__global__ void stream_read_kernel(const ReadArgs a) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t t = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
#pragma unroll 1
  for (int r = 0; r < kReadRegions; ++r) {
    const uint4* src = a.p[r];
    const size_t n = a.n[r];
    size_t i = t;
    for (; i + 3 * stride < n; i += 4 * stride) {
      const uint4 v0 = __ldg(src + i), v1 = __ldg(src + i + stride), v2 = __ldg(src + i + 2 * stride),
                  v3 = __ldg(src + i + 3 * stride);
      acc ^= v0.x ^ v1.y ^ v2.z ^ v3.w;
    }
    for (; i < n; i += stride) acc ^= __ldg(src + i).x;
  }
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  acc = __reduce_xor_sync(0xFFFFFFFFu, acc);
  if ((threadIdx.x & 31) == 0) atomicXor(a.out + blockIdx.x, acc);
}
}  // namespace

Status time_stream_read(cudaStream_t stream, const std::vector<std::vector<ReadRegion>>& copies, int reps,
                        Timing* out) {
  if (copies.empty()) return make_status(StatusCode::kInvalidArgument, "time_stream_read: no copies");
  std::vector<ReadArgs> args;
  for (const std::vector<ReadRegion>& c : copies) {
    if (c.size() > static_cast<size_t>(kReadRegions))
      return make_status(StatusCode::kInvalidArgument, "time_stream_read: %zu regions (at most %d)", c.size(),
                         kReadRegions);
    ReadArgs a{};
    for (size_t r = 0; r < c.size(); ++r) {
      if (c[r].bytes % 16 != 0 || reinterpret_cast<uintptr_t>(c[r].p) % 16 != 0)
        return make_status(StatusCode::kMisaligned, "time_stream_read: region %zu (%p, %zu B) not 16 B aligned", r,
                           c[r].p, c[r].bytes);
      a.p[r] = static_cast<const uint4*>(c[r].p);
      a.n[r] = c[r].bytes / 16;
    }
    args.push_back(a);
  }
  int dev = 0, sms = 0;
  LOWBIT_CUDA_RETURN(cudaGetDevice(&dev));
  LOWBIT_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const unsigned blocks = static_cast<unsigned>(sms * 4);
  uint32_t* scratch = nullptr;  // one word per block
  LOWBIT_CUDA_RETURN(cudaMalloc(&scratch, blocks * sizeof(uint32_t)));
  for (ReadArgs& a : args) a.out = scratch;
  int call = 0;
  auto enqueue = [&](cudaStream_t s) -> Status {
    cudaLaunchAttribute la[1];
    la[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    la[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(512);
    cfg.stream = s;
    cfg.attrs = la;
    cfg.numAttrs = 1;
    LOWBIT_CUDA_RETURN(cudaLaunchKernelEx(&cfg, stream_read_kernel, args[call++ % args.size()]));
    return Status::Ok();
  };
  const Status st = time_in_graph(stream, enqueue, static_cast<int>(args.size()), 2, reps, out);
  cudaFree(scratch);
  return st;
}

Status measure_read_bandwidth(int device, size_t bytes, double* gbps) {
  LOWBIT_CUDA_RETURN(cudaSetDevice(device));
  bytes = bytes / 16 * 16;
  void* src = nullptr;
  LOWBIT_CUDA_RETURN(cudaMalloc(&src, bytes));
  cudaStream_t s = nullptr;
  Status st = cudaMemset(src, 0x5A, bytes) == cudaSuccess && cudaStreamCreate(&s) == cudaSuccess
                  ? Status::Ok()
                  : make_status(StatusCode::kCudaError, "measure_read_bandwidth: cannot set up %zu B on device %d",
                                bytes, device);
  Timing t;
  if (st.ok()) st = time_stream_read(s, std::vector<std::vector<ReadRegion>>(4, {{src, bytes}}), 10, &t);
  if (s != nullptr) cudaStreamDestroy(s);
  cudaFree(src);
  LOWBIT_RETURN_IF_ERROR(st);
  *gbps = static_cast<double>(bytes) / (t.median_us * 1e-6) / 1e9;
  return Status::Ok();
}

std::string machine_description() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return "no CUDA device";
  cudaDeviceProp p{};
  (void)cudaGetDeviceProperties(&p, 0);
  int drv = 0, rt = 0;
  (void)cudaDriverGetVersion(&drv);
  (void)cudaRuntimeGetVersion(&rt);
  char buf[512];
  snprintf(buf, sizeof buf, "%s x%d (%d SMs, %.0f GiB), driver API %d.%d, runtime %d.%d", p.name, n,
           p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, drv / 1000, (drv % 1000) / 10, rt / 1000,
           (rt % 1000) / 10);
  return buf;
}

}  // namespace lowbit::bench
