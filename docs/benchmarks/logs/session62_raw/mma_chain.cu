// Session 62 probe: what one K step of the decode tile costs a warp once its weights are in shared
// memory. clock64() around N steps per warp (the closing read takes the sums as an input), every SM busy:
// one block of 1 / 4 / 8 warps per SM, or two 8-warp blocks per SM (16 warps, 4 per SM sub-partition).
//   v0 chained  the chain_limit probe's loop: 4 accumulators, each chained over every step (+ sum(x) MMA)
//   v1 window   accumulators restarted every W = 8 steps (zero-C MMA), folded into fp32 totals (the tile's shape).
//               NOT VALID as written: the words repeat every 8 steps and x is fixed, so every window computes the
//               same values and ptxas keeps one window's 40 HMMA for 64 steps (SASS); its rows are not used.
//   v2 latency  one MMA chain, one MMA per step (dependent MMA latency)
//   v3 alu      the step's shared-memory load and LOP3 unpacking, no MMA
//   v4 indep    4 accumulators x 4 sets rotating by step (chain depth N / 4)
// Build: nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -o mma_chain mma_chain.cu
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>

__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_zc(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
               : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
}

template <int V, int N>
__global__ void __launch_bounds__(256) kstep(const uint4* w, uint32_t xb, long long* cycles, float* out) {
  __shared__ uint4 sw[8][8][32];  // 32 KB: steps reuse 8 slots (i % 8)
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int i = 0; i < 8; ++i) sw[warp][i][lane] = w[(blockIdx.x * 8 + warp) * 32 * 8 + i * 32 + lane];
  __syncwarp();
  const uint32_t b0 = xb ^ lane, b1 = xb + lane;
  float c[4][4][4] = {}, cx[4] = {}, tot[4][4] = {};
  uint32_t ax = 0;
  const uint32_t ones[4] = {0x3F803F80u, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u};
  __syncwarp();
  const long long t0 = clock64();
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint4 wv = sw[warp][i % 8][lane];
    const uint32_t words[4] = {wv.x, wv.y, wv.z, wv.w};
    if constexpr (V == 2) {
      uint32_t a[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] = ((words[0] >> (4 * r)) & 0x000F000Fu) | 0x43004300u;
      mma(c[0][0], a, b0, b1);
      continue;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t a[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] = ((words[j] >> (4 * r)) & 0x000F000Fu) | 0x43004300u;
      if constexpr (V == 3) {
        ax ^= a[0] ^ a[1] ^ a[2] ^ a[3];
      } else if constexpr (V == 0) {
        mma(c[0][j], a, b0, b1);
      } else if constexpr (V == 1) {
        if (i % 8 == 0) mma_zc(c[0][j], a, b0, b1); else mma(c[0][j], a, b0, b1);
      } else if constexpr (V == 4) {
        mma(c[i % 4][j], a, b0, b1);
      }
    }
    if constexpr (V == 0 || V == 4) mma(cx, ones, b0, b1);
    if constexpr (V == 1) {
      if (i % 8 == 0) mma_zc(cx, ones, b0, b1); else mma(cx, ones, b0, b1);
      if (i % 8 == 7) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int q = 0; q < 4; ++q) tot[j][q] = fmaf(fmaf(-136.f, cx[q & 1], c[0][j][q]), 0.01f * (q + 1), tot[j][q]);
      }
    }
  }
  float s = __uint_as_float(ax & 0x3FFFFFFFu);
#pragma unroll
  for (int k = 0; k < 4; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) s += c[k][j][q] + tot[j][q] * (k == 0);
  s += cx[0];
  long long t1;  // read after the sums: the clock read takes s as an input, so every MMA has completed
  asm volatile("{\n\t.reg .f32 tmp;\n\tmov.f32 tmp, %1;\n\tmov.u64 %0, %%clock64;\n\t}\n" : "=l"(t1) : "f"(s) : "memory");
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (lane == 0) cycles[blockIdx.x * 8 + warp] = t1 - t0;
}

template <int V, int N>
void run(const char* name, int warps, int sms, int per_sm, const uint4* w, long long* cyc, float* out) {
  const int blocks = sms * per_sm;
  std::vector<long long> h(blocks * 8, 0);
  for (int rep = 0; rep < 3; ++rep) {
    cudaMemset(cyc, 0, blocks * 8 * sizeof(long long));
    kstep<V, N><<<blocks, warps * 32>>>(w, 0x3F813F82u, cyc, out);
    cudaDeviceSynchronize();
  }
  cudaMemcpy(h.data(), cyc, h.size() * sizeof(long long), cudaMemcpyDeviceToHost);
  std::vector<long long> v;
  for (int b = 0; b < blocks; ++b)
    for (int k = 0; k < warps; ++k) v.push_back(h[b * 8 + k]);
  std::sort(v.begin(), v.end());
  printf("| %s | %d | %d x %d | %lld | %.1f | %lld |\n", name, N, per_sm, warps, v[v.size() / 2], double(v[v.size() / 2]) / N, v.back());
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  int clk = 0;
  cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
  printf("# %s, %d SMs, max clock %.0f MHz\n| variant | steps | blocks/SM x warps | median cycles | cycles/step | max |\n|---|---|---|---|---|---|\n", prop.name, sms, clk / 1e3);
  const size_t nw = size_t(sms) * 2 * 8 * 32 * 8;
  uint4* w; long long* cyc; float* out;
  cudaMalloc(&w, nw * sizeof(uint4));
  cudaMalloc(&cyc, 2 * sms * 8 * sizeof(long long));
  cudaMalloc(&out, 2 * sms * 256 * sizeof(float));
  std::vector<uint32_t> hw(nw * 4);
  uint32_t st = 12345;
  for (auto& x : hw) { st = st * 1664525u + 1013904223u; x = st; }
  cudaMemcpy(w, hw.data(), nw * sizeof(uint4), cudaMemcpyHostToDevice);
  struct Shape { int per_sm, warps; };
  for (Shape sh : {Shape{1, 1}, Shape{1, 4}, Shape{1, 8}, Shape{2, 8}}) {
    const int p = sh.per_sm, wps = sh.warps;
    run<0, 16>("v0 chained", wps, sms, p, w, cyc, out);
    run<0, 64>("v0 chained", wps, sms, p, w, cyc, out);
    run<1, 16>("v1 window 8", wps, sms, p, w, cyc, out);
    run<1, 64>("v1 window 8", wps, sms, p, w, cyc, out);
    run<2, 16>("v2 latency", wps, sms, p, w, cyc, out);
    run<2, 64>("v2 latency", wps, sms, p, w, cyc, out);
    run<3, 16>("v3 alu", wps, sms, p, w, cyc, out);
    run<3, 64>("v3 alu", wps, sms, p, w, cyc, out);
    run<4, 16>("v4 4 sets", wps, sms, p, w, cyc, out);
    run<4, 64>("v4 4 sets", wps, sms, p, w, cyc, out);
  }
  const cudaError_t e = cudaGetLastError();
  printf("# %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
