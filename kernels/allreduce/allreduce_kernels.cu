// Fused Flash All-Reduce kernels. One block per tile; every block runs all chunks of the
// call for its tile: step 1 (encode + push to owners), step 2 (reduce own slice, encode,
// push to all), step 3 (decode). Flags and epochs: lowbit/detail/allreduce_protocol.h.
//
// Memory ordering: payload stores (local or over NVLink) by all threads, __syncthreads(),
// then one thread per peer does __threadfence_system() + st.release.sys of the epoch.
// Waiters spin on ld.acquire.sys, then __syncthreads(); slot data written by peers is read
// with ld.global.cg (L2, never a stale L1 line from an earlier epoch).
// Every wait is bounded by %globaltimer; the first block to time out writes the host-mapped
// ErrorRecord and raises the local abort word so every other block exits too.
#include "kernels/allreduce/allreduce_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "lowbit/detail/codec_device.cuh"
#include "lowbit/detail/codec_warp_encode.cuh"
#include "lowbit/detail/cuda_check.h"

namespace lowbit::allreduce::kernels {
namespace {

using proto::Plan;
using proto::Span;

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Phase timer for KernelArgs::trace (diagnostics). State lives in shared memory; the buffer
// pointer is copied by value (see report_timeout on references to kernel parameters).
struct Tracer {
  uint64_t* trace;  // this block's kTracePhases sums, or nullptr
  uint64_t* s_t;    // shared [0]: kernel start, [1]: previous mark (thread 0 only)
  __device__ Tracer(uint64_t* all, uint64_t* smem)
      : trace(all != nullptr && threadIdx.x == 0 ? all + static_cast<size_t>(blockIdx.x) * kTracePhases : nullptr),
        s_t(smem) {
    if (trace != nullptr) s_t[0] = s_t[1] = globaltimer();
  }
  __device__ __forceinline__ void mark(int phase) {
    if (trace != nullptr) {
      const uint64_t now = globaltimer();
      trace[phase] += now - s_t[1];
      s_t[1] = now;
    }
  }
  __device__ __forceinline__ void finish() {
    if (trace != nullptr) trace[kTraceTotal] += globaltimer() - s_t[0];
  }
};

__device__ __forceinline__ uint64_t* ctl_of(const KernelArgs& a, int r) { return reinterpret_cast<uint64_t*>(a.base[r]); }

// Records a timeout (first block wins) and raises the local abort word. Takes values, not
// the KernelArgs: a reference to a kernel parameter in a non-inlined call makes every thread
// copy all the parameters to local memory.
__device__ __noinline__ void report_timeout(uint64_t* ctl, proto::ErrorRecord* err, int rank, int peer, int step,
                                            size_t chunk) {
  if (atomicCAS(reinterpret_cast<unsigned long long*>(ctl + proto::kClaimIndex), 0ull, 1ull) == 0ull) {
    volatile proto::ErrorRecord* r = err;
    r->rank = rank;
    r->peer = peer;
    r->step = step;
    r->chunk = static_cast<int64_t>(chunk);
    r->tile = static_cast<int>(blockIdx.x);
    __threadfence_system();
    r->set = 1;
    __threadfence_system();
  }
  reinterpret_cast<volatile uint64_t*>(ctl)[proto::kAbortIndex] = 1;
}

// Threads 0..N-1 wait for flag (index_of(peer)) >= e. Returns false (whole block) on
// timeout or abort. s_abort is sticky: an aborted block only exits.
template <typename IndexFn>
__device__ __forceinline__ bool wait_all(const KernelArgs& a, IndexFn index_of, uint64_t e, int step, size_t chunk, int* s_abort) {
  const int t = threadIdx.x;
  if (t < a.nranks) {
    uint64_t* ctl = ctl_of(a, a.rank);
    const uint64_t* f = ctl + index_of(t);
    if (ld_acquire_sys(f) < e) {
      volatile uint64_t* abort_word = ctl + proto::kAbortIndex;
      const uint64_t t0 = globaltimer();
      while (ld_acquire_sys(f) < e) {
        if (*abort_word != 0) {
          *s_abort = 1;
          break;
        }
        if (globaltimer() - t0 > a.timeout_ns) {
          report_timeout(ctl, a.err, a.rank, t, step, chunk);
          *s_abort = 1;
          break;
        }
      }
    }
  }
  __syncthreads();
  return *s_abort == 0;
}

// After __syncthreads(): thread j < N raises flag `idx` on rank j.
__device__ __forceinline__ void signal_all(const KernelArgs& a, size_t idx, uint64_t e) {
  __syncthreads();
  const int t = threadIdx.x;
  if (t < a.nranks) {
    __threadfence_system();
    st_release_sys(ctl_of(a, t) + idx, e);
  }
}

// Hardware conversions: correctly rounded like float_bits.h on every non-NaN value (see
// there); NaN is canonicalized exactly as proto::round_output does.
__device__ __forceinline__ float h2f(DType t, uint16_t h) {
  return t == DType::kF16 ? __half2float(__ushort_as_half(h)) : __uint_as_float(static_cast<uint32_t>(h) << 16);
}
__device__ __forceinline__ uint16_t f2h(DType t, float f) {
  if (f != f) return t == DType::kF16 ? kF16CanonicalNaN : kBF16CanonicalNaN;
  return t == DType::kF16 ? __half_as_ushort(__float2half_rn(f)) : __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

// ---- raw (unquantized) pieces: 8 elements (16 bytes) per vector, kRawUnroll vectors per
// thread per pass with every load issued before the first use (bytes in flight per SM are
// what bounds these copies: one 16-byte load per thread at a time reaches ~5 GB/s per SM).
constexpr int kRawUnroll = 4;

__device__ __forceinline__ void copy_raw(const uint16_t* src, uint16_t* const* dst, int ndst, size_t n) {
  const size_t nv = n / 8, stride = static_cast<size_t>(blockDim.x) * kRawUnroll;
  for (size_t v0 = threadIdx.x; v0 < nv; v0 += stride) {
    uint4 x[kRawUnroll];
#pragma unroll
    for (int u = 0; u < kRawUnroll; ++u) {
      const size_t v = v0 + static_cast<size_t>(blockDim.x) * u;
      if (v < nv) x[u] = *reinterpret_cast<const uint4*>(src + 8 * v);
    }
#pragma unroll
    for (int u = 0; u < kRawUnroll; ++u) {
      const size_t v = v0 + static_cast<size_t>(blockDim.x) * u;
      if (v < nv)
        for (int j = 0; j < ndst; ++j) *reinterpret_cast<uint4*>(dst[j] + 8 * v) = x[u];
    }
  }
  for (size_t i = nv * 8 + threadIdx.x; i < n; i += blockDim.x) {
    uint16_t x = src[i];
    for (int j = 0; j < ndst; ++j) dst[j][i] = x;
  }
}
// dst[k] = round(sum_r src[r]) for every destination k; src are slots written by peers.
__device__ __forceinline__ void sum_raw(DType t, const uint16_t* const* src, int nsrc, uint16_t* const* dst, int ndst,
                                        size_t n) {
  const size_t nv = n / 8, stride = static_cast<size_t>(blockDim.x) * kRawUnroll;
  for (size_t v0 = threadIdx.x; v0 < nv; v0 += stride) {
    float acc[kRawUnroll][8];
    for (int r = 0; r < nsrc; ++r) {
      uint4 x[kRawUnroll];
#pragma unroll
      for (int u = 0; u < kRawUnroll; ++u) {
        const size_t v = v0 + static_cast<size_t>(blockDim.x) * u;
        if (v < nv) x[u] = __ldcg(reinterpret_cast<const uint4*>(src[r] + 8 * v));
      }
#pragma unroll
      for (int u = 0; u < kRawUnroll; ++u) {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(&x[u]);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[u][i] = r == 0 ? h2f(t, h[i]) : acc[u][i] + h2f(t, h[i]);
      }
    }
#pragma unroll
    for (int u = 0; u < kRawUnroll; ++u) {
      const size_t v = v0 + static_cast<size_t>(blockDim.x) * u;
      if (v >= nv) continue;
      uint4 y;
      uint16_t* o = reinterpret_cast<uint16_t*>(&y);
#pragma unroll
      for (int i = 0; i < 8; ++i) o[i] = f2h(t, acc[u][i]);
      for (int j = 0; j < ndst; ++j) *reinterpret_cast<uint4*>(dst[j] + 8 * v) = y;
    }
  }
  for (size_t i = nv * 8 + threadIdx.x; i < n; i += blockDim.x) {
    float acc = 0;
    for (int r = 0; r < nsrc; ++r) {
      float x = h2f(t, __ldcg(src[r] + i));
      acc = r == 0 ? x : acc + x;
    }
    uint16_t y = f2h(t, acc);
    for (int j = 0; j < ndst; ++j) dst[j][i] = y;
  }
}
__device__ __forceinline__ void copy_raw_cg(const uint16_t* src, uint16_t* dst, size_t n) {
  const size_t nv = n / 8, stride = static_cast<size_t>(blockDim.x) * kRawUnroll;
  for (size_t v0 = threadIdx.x; v0 < nv; v0 += stride) {
    uint4 x[kRawUnroll];
#pragma unroll
    for (int u = 0; u < kRawUnroll; ++u) {
      const size_t v = v0 + static_cast<size_t>(blockDim.x) * u;
      if (v < nv) x[u] = __ldcg(reinterpret_cast<const uint4*>(src + 8 * v));
    }
#pragma unroll
    for (int u = 0; u < kRawUnroll; ++u) {
      const size_t v = v0 + static_cast<size_t>(blockDim.x) * u;
      if (v < nv) *reinterpret_cast<uint4*>(dst + 8 * v) = x[u];
    }
  }
  for (size_t i = nv * 8 + threadIdx.x; i < n; i += blockDim.x) dst[i] = __ldcg(src + i);
}

// ---- the kernels ------------------------------------------------------------------------
__device__ __forceinline__ void finish_kernel(const KernelArgs& a, uint64_t base) {
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t* ctl = ctl_of(a, a.rank);
    __threadfence();
    unsigned long long done = atomicAdd(reinterpret_cast<unsigned long long*>(ctl + proto::kDoneIndex), 1ull);
    if (done + 1 == static_cast<unsigned long long>(gridDim.x)) {
      // Every block has read `base` (each read it before incrementing `done`).
      reinterpret_cast<volatile uint64_t*>(ctl)[proto::kDoneIndex] = 0;
      reinterpret_cast<volatile uint64_t*>(ctl)[proto::kSeqBaseIndex] = base + a.plan.num_chunks;
      __threadfence();
    }
  }
}

__device__ __forceinline__ uint64_t read_base(const KernelArgs& a, uint64_t* s_base, int* s_abort) {
  if (threadIdx.x == 0) {
    *s_base = reinterpret_cast<volatile uint64_t*>(ctl_of(a, a.rank))[proto::kSeqBaseIndex];
    *s_abort = 0;
  }
  __syncthreads();
  return *s_base;
}

__global__ void __launch_bounds__(kThreads) oneshot_kernel(KernelArgs a) {
  __shared__ uint64_t s_base;
  __shared__ int s_abort;
  __shared__ uint64_t s_trace[2];
  Tracer tr(a.trace, s_trace);
  const uint64_t base = read_base(a, &s_base, &s_abort);
  const int tile = blockIdx.x;
  const Plan& p = a.plan;
  for (size_t c = 0; c < p.num_chunks; ++c) {
    const uint64_t e = proto::chunk_epoch(base, c);
    const Span sp = proto::oneshot_span(p, c, tile);
    uint16_t* dst[proto::kMaxRanks];
    for (int j = 0; j < a.nranks; ++j)
      dst[j] = reinterpret_cast<uint16_t*>(a.base[j] + proto::oneshot_offset(a.areas, p, e, a.rank, tile));
    copy_raw(a.in + sp.begin, dst, a.nranks, sp.n);
    tr.mark(kTraceWork1);
    signal_all(a, proto::flag1_index(tile, a.rank), e);
    tr.mark(kTraceSignal1);
    if (!wait_all(a, [&](int r) { return proto::flag1_index(tile, r); }, e, proto::kStepOneShot, c, &s_abort)) return;
    tr.mark(kTraceWait1);
    const uint16_t* src[proto::kMaxRanks];
    for (int r = 0; r < a.nranks; ++r)
      src[r] = reinterpret_cast<const uint16_t*>(a.base[a.rank] + proto::oneshot_offset(a.areas, p, e, r, tile));
    uint16_t* out = a.out + sp.begin;
    sum_raw(a.dtype, src, a.nranks, &out, 1, sp.n);
    __syncthreads();
    tr.mark(kTraceWork2);
  }
  finish_kernel(a, base);
  tr.finish();
}

// ---- LL one-shot (allreduce_protocol.h, "LL one-shot"): flags travel inside the data ----
__device__ __forceinline__ void st_volatile_v4(uint8_t* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint4 ld_volatile_v4(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p) : "memory");
  return v;
}
// Elements 4i..4i+3 of x as two 32-bit words (zero padding past n).
__device__ __forceinline__ uint2 load_line(const uint16_t* x, size_t n, size_t i) {
  const size_t e0 = i * proto::kLLLineElems;
  if (e0 + 4 <= n) return *reinterpret_cast<const uint2*>(x + e0);
  uint16_t h[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) h[k] = e0 + k < n ? x[e0 + k] : 0;
  return make_uint2(h[0] | (uint32_t(h[1]) << 16), h[2] | (uint32_t(h[3]) << 16));
}

__global__ void __launch_bounds__(kThreads) oneshot_ll_kernel(KernelArgs a) {
  __shared__ uint64_t s_base;
  __shared__ int s_abort;
  __shared__ uint64_t s_trace[2];
  Tracer tr(a.trace, s_trace);
  const uint64_t base = read_base(a, &s_base, &s_abort);
  const uint64_t e = proto::chunk_epoch(base, 0);
  const uint32_t f = proto::ll_flag(e);
  const int N = a.nranks;
  const size_t n = a.plan.count;
  const proto::LineRange lr = proto::ll_tile_lines(n, a.plan.tiles, static_cast<int>(blockIdx.x));
  // Push: every line of my tile to every peer (my own contribution stays in registers /
  // the input: it is read again below, before this thread writes the same output line).
  for (size_t i = lr.begin + threadIdx.x; i < lr.end; i += blockDim.x) {
    const uint2 d = load_line(a.in, n, i);
    const uint4 line = make_uint4(d.x, f, d.y, f);
    for (int j = 1; j < N; ++j) {
      const int peer = (a.rank + j) % N;
      st_volatile_v4(a.base[peer] + proto::ll_line_offset(a.areas, N, e, a.rank, i), line);
    }
  }
  tr.mark(kTraceWork1);
  // Pull: poll each sender's line in my buffer, sum in rank order.
  volatile uint64_t* abort_word = ctl_of(a, a.rank) + proto::kAbortIndex;
  for (size_t i = lr.begin + threadIdx.x; i < lr.end; i += blockDim.x) {
    float acc[4];
    for (int r = 0; r < N; ++r) {
      uint2 d;
      if (r == a.rank) {
        d = load_line(a.in, n, i);
      } else {
        const uint8_t* src = a.base[a.rank] + proto::ll_line_offset(a.areas, N, e, r, i);
        uint4 v = ld_volatile_v4(src);
        if (v.y != f || v.w != f) {
          const uint64_t t0 = globaltimer();
          uint32_t spins = 0;
          do {
            v = ld_volatile_v4(src);
            if ((++spins & 255u) == 0) {
              if (*abort_word != 0) return;  // another block timed out: exit, the host reports
              if (globaltimer() - t0 > a.timeout_ns) {
                report_timeout(ctl_of(a, a.rank), a.err, a.rank, r, proto::kStepOneShot, 0);
                return;
              }
            }
          } while (v.y != f || v.w != f);
        }
        d = make_uint2(v.x, v.z);
      }
      const uint32_t w[2] = {d.x, d.y};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float x = h2f(a.dtype, static_cast<uint16_t>(w[k / 2] >> (16 * (k % 2))));
        acc[k] = r == 0 ? x : acc[k] + x;
      }
    }
    const size_t e0 = i * proto::kLLLineElems;
    uint16_t o[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) o[k] = f2h(a.dtype, acc[k]);
    if (e0 + 4 <= n) {
      *reinterpret_cast<uint2*>(a.out + e0) = make_uint2(o[0] | (uint32_t(o[1]) << 16), o[2] | (uint32_t(o[3]) << 16));
    } else {
      for (int k = 0; k < 4 && e0 + k < n; ++k) a.out[e0 + k] = o[k];
    }
  }
  tr.mark(kTraceWork2);
  finish_kernel(a, base);
  tr.finish();
}

// Unquantized two-shot: reduce-scatter by pushes (step 1), owner sums in rank order and
// pushes the rounded sum to every rank (step 2), copy out (step 3).
__global__ void __launch_bounds__(kThreads) twoshot_kernel(KernelArgs a) {
  __shared__ uint64_t s_base;
  __shared__ int s_abort;
  __shared__ uint64_t s_trace[2];
  Tracer tr(a.trace, s_trace);
  const uint64_t base = read_base(a, &s_base, &s_abort);
  const int tile = blockIdx.x;
  const Plan& p = a.plan;
  const int N = a.nranks;
  const DType t = a.dtype;
  for (size_t c = 0; c < p.num_chunks; ++c) {
    const uint64_t e = proto::chunk_epoch(base, c);
    // Step 1: my tile of every slice j into owner j's recv slot for me.
    for (int j = 0; j < N; ++j) {
      const Span sp = proto::tile_span(p, c, j, tile);
      uint16_t* d = reinterpret_cast<uint16_t*>(a.base[j] + proto::recv_offset(a.areas, p, a.rank, tile));
      copy_raw(a.in + sp.begin, &d, 1, sp.n);
    }
    tr.mark(kTraceWork1);
    signal_all(a, proto::flag1_index(tile, a.rank), e);
    tr.mark(kTraceSignal1);
    if (!wait_all(a, [&](int r) { return proto::flag1_index(tile, r); }, e, proto::kStepReduceScatter, c, &s_abort))
      return;
    tr.mark(kTraceWait1);
    // Step 2: reduce my slice's tile over all senders (rank order), push to all.
    {
      const Span mine = proto::tile_span(p, c, a.rank, tile);
      const uint16_t* src[proto::kMaxRanks];
      uint16_t* dst[proto::kMaxRanks];
      for (int r = 0; r < N; ++r) {
        src[r] = reinterpret_cast<const uint16_t*>(a.base[a.rank] + proto::recv_offset(a.areas, p, r, tile));
        dst[r] = reinterpret_cast<uint16_t*>(a.base[r] + proto::gather_offset(a.areas, p, a.rank, tile));
      }
      sum_raw(t, src, N, dst, N, mine.n);
    }
    tr.mark(kTraceWork2);
    signal_all(a, proto::flag2_index(tile, a.rank), e);
    tr.mark(kTraceSignal2);
    if (!wait_all(a, [&](int r) { return proto::flag2_index(tile, r); }, e, proto::kStepAllGather, c, &s_abort))
      return;
    tr.mark(kTraceWait2);
    // Step 3: copy every owner's reduced tile into the output.
    for (int j = 0; j < N; ++j) {
      const Span sp = proto::tile_span(p, c, j, tile);
      copy_raw_cg(reinterpret_cast<const uint16_t*>(a.base[a.rank] + proto::gather_offset(a.areas, p, j, tile)),
                  a.out + sp.begin, sp.n);
    }
    __syncthreads();
    tr.mark(kTraceWork3);
  }
  finish_kernel(a, base);
  tr.finish();
}

// ---- quantized two-step kernel: 8 elements (one 16-byte vector) per thread ------------
// A group of G elements is held by GL = G/8 consecutive lanes (aligned), so a warp holds
// 32/GL groups and 256 elements per pass; groups never straddle warps. The codec math is
// codec_device.cuh (bit-exact with codec_math.h: order-key min/max, reciprocal quantize with
// exact fallback, magic-number unpack). Lane l of a span handles vector v (elements
// 8v..8v+7 of the span); its codes live at byte v*BITS of the tile segment (INT4: one
// 32-bit word, INT8: 8 bytes), the group's metadata at meta_off + 4*(v/GL).
constexpr int kQThreads = 512;  // 16 warps per SM: latency hiding for the load->encode chain
constexpr int kQUnroll = 4;     // vectors per lane per pass (loads issued before the math)

__device__ __forceinline__ int vec_valid(size_t n, size_t v) {
  const size_t e0 = v * 8;
  return e0 >= n ? 0 : (n - e0 >= 8 ? 8 : static_cast<int>(n - e0));
}

// Plain (non-peer) input loads: 16 bytes when the vector is full, zero padding otherwise.
__device__ __forceinline__ uint4 load_vec(const uint16_t* src, size_t v, int valid) {
  if (valid == 8) return *reinterpret_cast<const uint4*>(src + 8 * v);
  uint16_t h[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) h[i] = i < valid ? src[8 * v + i] : 0;
  return make_uint4(h[0] | (uint32_t(h[1]) << 16), h[2] | (uint32_t(h[3]) << 16), h[4] | (uint32_t(h[5]) << 16),
                    h[6] | (uint32_t(h[7]) << 16));
}

__device__ __forceinline__ void store_vec(uint16_t* dst, size_t v, int valid, const uint4& y) {
  if (valid == 8) {
    *reinterpret_cast<uint4*>(dst + 8 * v) = y;
    return;
  }
  const uint32_t w[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (i < valid) dst[8 * v + i] = static_cast<uint16_t>(w[i / 2] >> (16 * (i % 2)));
}

// Why encoded bytes are staged: stores over NVLink are paid per request, not per byte. A
// warp's 4-byte (INT4) or 8-byte (INT8) code stores and 4-byte meta stores reach the peer as
// small requests; measured on 2x H200 the quantized kernels then moved only ~80 GB/s (INT4)
// and ~140 GB/s (INT8) per direction, while 16-byte-per-lane stores reach ~330 GB/s. So each
// warp encodes one pass (kPassVecs vectors) into shared memory laid out exactly like the
// global segment bytes, then copies it out with 16-byte stores (flush_pass).
constexpr int kPassVecs = 32 * kQUnroll;  // vectors per warp pass
template <int BITS, int G>
struct PassStage {
  static constexpr int kGL = G / 8;                       // lanes (vectors) per group
  static constexpr int kCodeBytes = kPassVecs * BITS;     // 8 elements * BITS / 8 bytes each
  static constexpr int kMetaWords = kPassVecs / kGL;      // one 4-byte word per group
  static constexpr int kBytes = kCodeBytes + 4 * kMetaWords;
};
constexpr int kStageBytes = PassStage<8, 32>::kBytes;  // the largest (INT8 codes, G = 32)

// Encodes one lane's vector into the warp's pass stage; lv = vector index within the pass.
// The whole warp must call it (group reductions shuffle); lanes past the span's groups pass
// active = false (valid = 0).
template <DType T, int BITS, int G>
__device__ __forceinline__ void enc_vec(const uint4& x, int valid, bool active, int lv, uint8_t* stage) {
  namespace dv = codec::dev;
  using PS = PassStage<BITS, G>;
  static_assert(PS::kBytes <= kStageBytes && 4 * PS::kMetaWords >= 4, "pass stage too small");
  const codec::CodecSpec spec{BITS, G};
  uint32_t mm = dv::minmax8(x, valid);
  mm = dv::group_reduce_minmax<PS::kGL>(mm);
  const codec::GroupMeta gm = dv::group_meta<T>(spec, mm);
  const dv::QuantCtx qc = dv::make_quant_ctx(spec, gm);
  float r[8];
  dv::quantize8<T>(qc, spec, x, r, valid);
  if (!active) return;
  if constexpr (BITS == 4) {
    *reinterpret_cast<uint32_t*>(stage + 4 * lv) = dv::int4_pack8(r);
  } else {
    *reinterpret_cast<uint2*>(stage + 8 * lv) = dv::int8_pack8(r);
  }
  if (lv % PS::kGL == 0) *reinterpret_cast<uint32_t*>(stage + PS::kCodeBytes + 4 * (lv / PS::kGL)) = dv::meta_word(gm);
}

// Copies the first nvalid vectors of a staged pass (codes and their groups' meta words) to
// ndst segments: codes at byte code_off, meta at byte meta_off, 16-byte stores. nvalid is a
// multiple of G/8 (whole groups), so the code bytes are a multiple of 16; code_off and
// meta_off are 16-byte aligned (passes start at multiples of kPassVecs vectors, segments
// and their meta blocks at multiples of 16 bytes).
template <int BITS, int G>
__device__ __forceinline__ void flush_pass(const uint8_t* stage, int nvalid, uint8_t* const* dst, int ndst,
                                           size_t code_off, size_t meta_off) {
  using PS = PassStage<BITS, G>;
  const int lane = threadIdx.x % 32;
  __syncwarp();
  const int code16 = nvalid * BITS / 16;
  for (int i = lane; i < code16; i += 32) {
    const uint4 w = *reinterpret_cast<const uint4*>(stage + 16 * i);
    for (int j = 0; j < ndst; ++j) *reinterpret_cast<uint4*>(dst[j] + code_off + 16 * i) = w;
  }
  const int nm = nvalid / PS::kGL, m16 = nm / 4;
  const uint8_t* meta = stage + PS::kCodeBytes;
  if (lane < m16) {
    const uint4 w = *reinterpret_cast<const uint4*>(meta + 16 * lane);
    for (int j = 0; j < ndst; ++j) *reinterpret_cast<uint4*>(dst[j] + meta_off + 16 * lane) = w;
  } else if (lane < m16 + nm % 4) {
    const int i = 4 * m16 + (lane - m16);
    const uint32_t w = *reinterpret_cast<const uint32_t*>(meta + 4 * i);
    for (int j = 0; j < ndst; ++j) *reinterpret_cast<uint32_t*>(dst[j] + meta_off + 4 * i) = w;
  }
  __syncwarp();
}

// A lane's vector of a segment written by a peer, as loaded (ld.global.cg: L2, never a stale
// L1 line): code bits (INT4 in .x) and its group's meta word. Loads and math are split so
// that a lane issues all its loads of a pass before the first decode.
struct CodedVec {
  uint2 code;
  uint32_t meta;
};
template <int BITS, int G>
__device__ __forceinline__ CodedVec load_coded(const uint8_t* src, size_t v, size_t meta_off) {
  CodedVec c;
  c.meta = __ldcg(reinterpret_cast<const unsigned int*>(src + meta_off + 4 * (v / (G / 8))));
  if constexpr (BITS == 4) {
    c.code = make_uint2(__ldcg(reinterpret_cast<const unsigned int*>(src + 4 * v)), 0u);
  } else {
    c.code = __ldcg(reinterpret_cast<const uint2*>(src + 8 * v));
  }
  return c;
}
template <DType T, int BITS>
__device__ __forceinline__ void decode_coded(const CodedVec& c, float (&out)[8]) {
  namespace dv = codec::dev;
  const codec::GroupMeta gm = dv::load_meta<T>(c.meta);
  float qf[8];
  if constexpr (BITS == 4) {
    dv::int4_unpack8(c.code.x, qf);
  } else {
    dv::int8_unpack8(c.code, qf);
  }
  dv::dequantize8<T>(gm, qf, out);
}

// Step-1 input prefetch: one pass (kPassVecs 16-byte vectors) per warp, vector 32u + lane
// at byte 16 * (32u + lane) of the warp's buffer; elements past n are zero-filled (cp.async
// src-size), exactly what load_vec returns.
constexpr size_t kPassInBytes = static_cast<size_t>(kPassVecs) * 16;
constexpr size_t kQuantSmemBytes = static_cast<size_t>(kQThreads / 32) * (kStageBytes + kPassInBytes);
__device__ __forceinline__ void prefetch_pass(uint8_t* buf, const uint16_t* src, size_t n, size_t v0) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int u = 0; u < kQUnroll; ++u) {
    const size_t v = v0 + 32 * u + lane;
    const int valid = vec_valid(n, v);
    const uint16_t* g = valid > 0 ? src + 8 * v : src;
    const unsigned sdst = static_cast<unsigned>(__cvta_generic_to_shared(buf + 16 * (32 * u + lane)));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sdst), "l"(g), "r"(2 * valid) : "memory");
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <DType T, int B1, int B2, int G>
__global__ void __launch_bounds__(kQThreads, 1) quant_kernel(KernelArgs a) {
  __shared__ uint64_t s_base;
  __shared__ int s_abort;
  __shared__ uint64_t s_trace[2];
  Tracer tr(a.trace, s_trace);
  const uint64_t base = read_base(a, &s_base, &s_abort);
  const int tile = blockIdx.x;
  const Plan& p = a.plan;
  const int N = a.nranks;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  constexpr int GL = G / 8;
  constexpr size_t kPass = kPassVecs;
  const size_t meta1 = codec::codec_data_bytes(codec::CodecSpec{B1, G}, p.ts);
  const size_t meta2 = codec::codec_data_bytes(codec::CodecSpec{B2, G}, p.ts);
  const size_t wstart = static_cast<size_t>(warp) * kPass, wstride = static_cast<size_t>(nwarps) * kPass;
  extern __shared__ __align__(16) uint8_t s_dyn[];  // kQuantSmemBytes
  uint8_t* stage = s_dyn + static_cast<size_t>(warp) * kStageBytes;
  uint8_t* inbuf = s_dyn + static_cast<size_t>(kQThreads / 32) * kStageBytes + static_cast<size_t>(warp) * kPassInBytes;

  for (size_t c = 0; c < p.num_chunks; ++c) {
    const uint64_t e = proto::chunk_epoch(base, c);
    // Step 1: my tile of every slice j, encoded into owner j's recv slot for me. Peers'
    // slices first, my own last: the NVLink stores drain while the local slice is encoded.
    // Input passes are prefetched into shared memory with cp.async one pass ahead, so the
    // HBM latency of pass k+1 hides behind the encode of pass k.
    for (int jj = 1; jj <= N; ++jj) {
      const int j = (a.rank + jj) % N;
      const Span sp = proto::tile_span(p, c, j, tile);
      uint8_t* dst = a.base[j] + proto::recv_offset(a.areas, p, a.rank, tile);
      const uint16_t* src = a.in + sp.begin;
      const size_t nvp = proto::ceil_div(sp.n, G) * GL;
      if (wstart < nvp) prefetch_pass(inbuf, src, sp.n, wstart);
      for (size_t v0 = wstart; v0 < nvp; v0 += wstride) {
        uint4 x[kQUnroll];
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        __syncwarp();
#pragma unroll
        for (int u = 0; u < kQUnroll; ++u) x[u] = *reinterpret_cast<const uint4*>(inbuf + 16 * (32 * u + lane));
        __syncwarp();
        if (v0 + wstride < nvp) prefetch_pass(inbuf, src, sp.n, v0 + wstride);
        if ((v0 + kPass) * 8 <= sp.n) {  // a full pass: the codec's fast warp-tile encode
          codec::dev::encode_warp_tile<T, B1, G>(x, stage,
                                                 reinterpret_cast<uint32_t*>(stage + PassStage<B1, G>::kCodeBytes));
          flush_pass<B1, G>(stage, kPass, &dst, 1, v0 * B1, meta1 + 4 * (v0 / GL));
          continue;
        }
#pragma unroll
        for (int u = 0; u < kQUnroll; ++u) {
          const size_t v = v0 + 32 * u + lane;
          enc_vec<T, B1, G>(x[u], vec_valid(sp.n, v), v < nvp, 32 * u + lane, stage);
        }
        const int nvalid = static_cast<int>(nvp - v0 < kPass ? nvp - v0 : kPass);
        flush_pass<B1, G>(stage, nvalid, &dst, 1, v0 * B1, meta1 + 4 * (v0 / GL));
      }
    }
    tr.mark(kTraceWork1);
    signal_all(a, proto::flag1_index(tile, a.rank), e);
    tr.mark(kTraceSignal1);
    if (!wait_all(a, [&](int r) { return proto::flag1_index(tile, r); }, e, proto::kStepReduceScatter, c, &s_abort))
      return;
    tr.mark(kTraceWait1);

    // Step 2: reduce my slice's tile over all senders (rank order), encode once, push to all.
    {
      const Span mine = proto::tile_span(p, c, a.rank, tile);
      const uint8_t* src[proto::kMaxRanks];
      uint8_t* dst[proto::kMaxRanks];
      for (int r = 0; r < N; ++r) {
        src[r] = a.base[a.rank] + proto::recv_offset(a.areas, p, r, tile);
        dst[r] = a.base[r] + proto::gather_offset(a.areas, p, a.rank, tile);
      }
      const size_t nvp = proto::ceil_div(mine.n, G) * GL;
      for (size_t v0 = wstart; v0 < nvp; v0 += wstride) {
        // Sum over senders in rank order (fp32), all loads of a sender before its math.
        float acc[kQUnroll][8];
        for (int r = 0; r < N; ++r) {
          CodedVec cv[kQUnroll];
#pragma unroll
          for (int u = 0; u < kQUnroll; ++u) {
            const size_t v = v0 + 32 * u + lane;
            if (v < nvp) cv[u] = load_coded<B1, G>(src[r], v, meta1);
          }
#pragma unroll
          for (int u = 0; u < kQUnroll; ++u) {
            const size_t v = v0 + 32 * u + lane;
            if (v >= nvp) continue;
            float w[8];
            decode_coded<T, B1>(cv[u], w);
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[u][i] = r == 0 ? w[i] : __fadd_rn(acc[u][i], w[i]);
          }
        }
        uint4 s16[kQUnroll];
#pragma unroll
        for (int u = 0; u < kQUnroll; ++u) {
          if (v0 + 32 * u + lane >= nvp) {
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[u][i] = 0.0f;
          }
          s16[u] = codec::dev::pack_out8<T>(acc[u]);
        }
        if ((v0 + kPass) * 8 <= mine.n) {  // a full pass: the codec's fast warp-tile encode
          codec::dev::encode_warp_tile<T, B2, G>(s16, stage,
                                                 reinterpret_cast<uint32_t*>(stage + PassStage<B2, G>::kCodeBytes));
          flush_pass<B2, G>(stage, kPass, dst, N, v0 * B2, meta2 + 4 * (v0 / GL));
          continue;
        }
#pragma unroll
        for (int u = 0; u < kQUnroll; ++u) {
          const size_t v = v0 + 32 * u + lane;
          enc_vec<T, B2, G>(s16[u], vec_valid(mine.n, v), v < nvp, 32 * u + lane, stage);
        }
        const int nvalid = static_cast<int>(nvp - v0 < kPass ? nvp - v0 : kPass);
        flush_pass<B2, G>(stage, nvalid, dst, N, v0 * B2, meta2 + 4 * (v0 / GL));
      }
    }
    tr.mark(kTraceWork2);
    signal_all(a, proto::flag2_index(tile, a.rank), e);
    tr.mark(kTraceSignal2);
    if (!wait_all(a, [&](int r) { return proto::flag2_index(tile, r); }, e, proto::kStepAllGather, c, &s_abort))
      return;
    tr.mark(kTraceWait2);

    // Step 3: decode every owner's reduced tile into the output.
    for (int j = 0; j < N; ++j) {
      const Span sp = proto::tile_span(p, c, j, tile);
      const uint8_t* src = a.base[a.rank] + proto::gather_offset(a.areas, p, j, tile);
      uint16_t* out = a.out + sp.begin;
      const size_t nv = proto::ceil_div(sp.n, 8);
      // Step 3 is local and memory bound: twice the vectors in flight per thread of steps 1-2
      // (its loads need 3 registers each; one 512-thread block per SM leaves few warps).
      constexpr int kU3 = 2 * kQUnroll;
      for (size_t v0 = static_cast<size_t>(threadIdx.x); v0 < nv; v0 += static_cast<size_t>(blockDim.x) * kU3) {
        CodedVec cv[kU3];
#pragma unroll
        for (int u = 0; u < kU3; ++u) {
          const size_t v = v0 + static_cast<size_t>(blockDim.x) * u;
          if (v < nv) cv[u] = load_coded<B2, G>(src, v, meta2);
        }
#pragma unroll
        for (int u = 0; u < kU3; ++u) {
          const size_t v = v0 + static_cast<size_t>(blockDim.x) * u;
          if (v >= nv) continue;
          float val[8];
          decode_coded<T, B2>(cv[u], val);
          store_vec(out, v, vec_valid(sp.n, v), codec::dev::pack_out8<T>(val));
        }
      }
    }
    __syncthreads();
    tr.mark(kTraceWork3);
  }
  finish_kernel(a, base);
  tr.finish();
}

// ---- split two-step (allreduce_protocol.h, "Split two-step"): three kernels per chunk ------
constexpr int kSplitThreads = 256;
constexpr int kSplitWarps = kSplitThreads / 32;
constexpr int kSplitBlocksPerSM = 8;  // grid cap: enough warps to hide the chains' latency

// The last block of this kernel to arrive raises flag `flag_idx` (my index as sender/owner)
// on every rank. Every block fences at system scope first, so all its stores (NVLink ones
// included) precede its arrival, and the last block's fence orders the count before the flags.
__device__ __forceinline__ void split_arrive(const KernelArgs& a, size_t count_index, size_t flag_idx, uint64_t e) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    uint64_t* ctl = ctl_of(a, a.rank);
    const unsigned long long prev = atomicAdd(reinterpret_cast<unsigned long long*>(ctl + count_index), 1ull);
    if (prev + 1 == static_cast<unsigned long long>(gridDim.x)) {
      reinterpret_cast<volatile uint64_t*>(ctl)[count_index] = 0;
      __threadfence_system();
      for (int q = 0; q < a.nranks; ++q) st_release_sys(ctl_of(a, q) + flag_idx, e);
    }
  }
}

// Step 3's last block advances the epoch base by one (every block read it first).
__device__ __forceinline__ void split_finish(const KernelArgs& a, uint64_t base) {
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t* ctl = ctl_of(a, a.rank);
    __threadfence();
    const unsigned long long done = atomicAdd(reinterpret_cast<unsigned long long*>(ctl + proto::kDoneIndex), 1ull);
    if (done + 1 == static_cast<unsigned long long>(gridDim.x)) {
      reinterpret_cast<volatile uint64_t*>(ctl)[proto::kDoneIndex] = 0;
      reinterpret_cast<volatile uint64_t*>(ctl)[proto::kSeqBaseIndex] = base + 1;
      __threadfence();
    }
  }
}

// Passes (kPassVecs vectors) per tile segment of the plan.
__device__ __forceinline__ size_t split_passes_per_tile(const Plan& p) {
  return proto::ceil_div(proto::ceil_div(p.ts, 8), static_cast<size_t>(kPassVecs));
}

template <DType T, int B1, int G>
__global__ void __launch_bounds__(kSplitThreads) split_step1_kernel(KernelArgs a, size_t c) {
  __shared__ uint64_t s_base;
  __shared__ int s_abort;
  __shared__ __align__(16) uint8_t s_stage[kSplitWarps][kStageBytes];
  const uint64_t base = read_base(a, &s_base, &s_abort);
  const uint64_t e = proto::chunk_epoch(base, 0);
  const Plan& p = a.plan;
  const int N = a.nranks, T_ = p.tiles;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  constexpr int GL = G / 8;
  uint8_t* stage = s_stage[warp];
  const size_t meta1 = codec::codec_data_bytes(codec::CodecSpec{B1, G}, p.ts);
  const size_t ppt = split_passes_per_tile(p);
  const size_t items = static_cast<size_t>(N) * T_ * ppt;
  // Work item w: slice (peers first, my own last), tile, pass.
  for (size_t w = static_cast<size_t>(blockIdx.x) * kSplitWarps + warp; w < items;
       w += static_cast<size_t>(gridDim.x) * kSplitWarps) {
    const int j = (a.rank + 1 + static_cast<int>(w / (static_cast<size_t>(T_) * ppt))) % N;
    const int t = static_cast<int>((w / ppt) % static_cast<size_t>(T_));
    const size_t v0 = (w % ppt) * kPassVecs;
    const Span sp = proto::tile_span(p, c, j, t);
    const size_t nvp = proto::ceil_div(sp.n, G) * GL;
    if (v0 >= nvp) continue;  // warp-uniform
    uint8_t* dst = a.base[j] + proto::recv_offset(a.areas, p, a.rank, t);
    const uint16_t* src = a.in + sp.begin;
    uint4 x[kQUnroll];
#pragma unroll
    for (int u = 0; u < kQUnroll; ++u) {
      const size_t v = v0 + 32 * u + lane;
      x[u] = load_vec(src, v, vec_valid(sp.n, v));
    }
    if ((v0 + kPassVecs) * 8 <= sp.n) {
      codec::dev::encode_warp_tile<T, B1, G>(x, stage, reinterpret_cast<uint32_t*>(stage + PassStage<B1, G>::kCodeBytes));
      flush_pass<B1, G>(stage, kPassVecs, &dst, 1, v0 * B1, meta1 + 4 * (v0 / GL));
      continue;
    }
#pragma unroll
    for (int u = 0; u < kQUnroll; ++u) {
      const size_t v = v0 + 32 * u + lane;
      enc_vec<T, B1, G>(x[u], vec_valid(sp.n, v), v < nvp, 32 * u + lane, stage);
    }
    const int nvalid = static_cast<int>(nvp - v0 < kPassVecs ? nvp - v0 : kPassVecs);
    flush_pass<B1, G>(stage, nvalid, &dst, 1, v0 * B1, meta1 + 4 * (v0 / GL));
  }
  split_arrive(a, proto::kSplitCount1Index, proto::flag1_index(0, a.rank), e);
}

template <DType T, int B1, int B2, int G>
__global__ void __launch_bounds__(kSplitThreads) split_step2_kernel(KernelArgs a, size_t c) {
  __shared__ uint64_t s_base;
  __shared__ int s_abort;
  __shared__ __align__(16) uint8_t s_stage[kSplitWarps][kStageBytes];
  const uint64_t base = read_base(a, &s_base, &s_abort);
  const uint64_t e = proto::chunk_epoch(base, 0);
  if (!wait_all(a, [&](int r) { return proto::flag1_index(0, r); }, e, proto::kStepReduceScatter, c, &s_abort)) return;
  const Plan& p = a.plan;
  const int N = a.nranks, T_ = p.tiles;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  constexpr int GL = G / 8;
  uint8_t* stage = s_stage[warp];
  const size_t meta1 = codec::codec_data_bytes(codec::CodecSpec{B1, G}, p.ts);
  const size_t meta2 = codec::codec_data_bytes(codec::CodecSpec{B2, G}, p.ts);
  const size_t ppt = split_passes_per_tile(p);
  const size_t items = static_cast<size_t>(T_) * ppt;
  for (size_t w = static_cast<size_t>(blockIdx.x) * kSplitWarps + warp; w < items;
       w += static_cast<size_t>(gridDim.x) * kSplitWarps) {
    const int t = static_cast<int>(w / ppt);
    const size_t v0 = (w % ppt) * kPassVecs;
    const size_t n = proto::tile_span(p, c, a.rank, t).n;
    const size_t nvp = proto::ceil_div(n, G) * GL;
    if (v0 >= nvp) continue;
    const uint8_t* src[proto::kMaxRanks];
    uint8_t* dst[proto::kMaxRanks];
    for (int r = 0; r < N; ++r) {
      src[r] = a.base[a.rank] + proto::recv_offset(a.areas, p, r, t);
      dst[r] = a.base[r] + proto::gather_offset(a.areas, p, a.rank, t);
    }
    float acc[kQUnroll][8];
    for (int r = 0; r < N; ++r) {
      CodedVec cv[kQUnroll];
#pragma unroll
      for (int u = 0; u < kQUnroll; ++u) {
        const size_t v = v0 + 32 * u + lane;
        if (v < nvp) cv[u] = load_coded<B1, G>(src[r], v, meta1);
      }
#pragma unroll
      for (int u = 0; u < kQUnroll; ++u) {
        const size_t v = v0 + 32 * u + lane;
        if (v >= nvp) continue;
        float wv[8];
        decode_coded<T, B1>(cv[u], wv);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[u][i] = r == 0 ? wv[i] : __fadd_rn(acc[u][i], wv[i]);
      }
    }
    uint4 s16[kQUnroll];
#pragma unroll
    for (int u = 0; u < kQUnroll; ++u) {
      if (v0 + 32 * u + lane >= nvp) {
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[u][i] = 0.0f;
      }
      s16[u] = codec::dev::pack_out8<T>(acc[u]);
    }
    if ((v0 + kPassVecs) * 8 <= n) {
      codec::dev::encode_warp_tile<T, B2, G>(s16, stage, reinterpret_cast<uint32_t*>(stage + PassStage<B2, G>::kCodeBytes));
      flush_pass<B2, G>(stage, kPassVecs, dst, N, v0 * B2, meta2 + 4 * (v0 / GL));
      continue;
    }
#pragma unroll
    for (int u = 0; u < kQUnroll; ++u) {
      const size_t v = v0 + 32 * u + lane;
      enc_vec<T, B2, G>(s16[u], vec_valid(n, v), v < nvp, 32 * u + lane, stage);
    }
    const int nvalid = static_cast<int>(nvp - v0 < kPassVecs ? nvp - v0 : kPassVecs);
    flush_pass<B2, G>(stage, nvalid, dst, N, v0 * B2, meta2 + 4 * (v0 / GL));
  }
  split_arrive(a, proto::kSplitCount2Index, proto::flag2_index(0, a.rank), e);
}

template <DType T, int B2, int G>
__global__ void __launch_bounds__(kSplitThreads) split_step3_kernel(KernelArgs a, size_t c) {
  __shared__ uint64_t s_base;
  __shared__ int s_abort;
  const uint64_t base = read_base(a, &s_base, &s_abort);
  const uint64_t e = proto::chunk_epoch(base, 0);
  if (!wait_all(a, [&](int r) { return proto::flag2_index(0, r); }, e, proto::kStepAllGather, c, &s_abort)) return;
  const Plan& p = a.plan;
  const int N = a.nranks, T_ = p.tiles;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const size_t meta2 = codec::codec_data_bytes(codec::CodecSpec{B2, G}, p.ts);
  const size_t ppt = split_passes_per_tile(p);
  const size_t items = static_cast<size_t>(N) * T_ * ppt;
  for (size_t w = static_cast<size_t>(blockIdx.x) * kSplitWarps + warp; w < items;
       w += static_cast<size_t>(gridDim.x) * kSplitWarps) {
    const int j = static_cast<int>(w / (static_cast<size_t>(T_) * ppt));
    const int t = static_cast<int>((w / ppt) % static_cast<size_t>(T_));
    const size_t v0 = (w % ppt) * kPassVecs;
    const Span sp = proto::tile_span(p, c, j, t);
    const size_t nv = proto::ceil_div(sp.n, 8);
    if (v0 >= nv) continue;
    const uint8_t* src = a.base[a.rank] + proto::gather_offset(a.areas, p, j, t);
    uint16_t* out = a.out + sp.begin;
    CodedVec cv[kQUnroll];
#pragma unroll
    for (int u = 0; u < kQUnroll; ++u) {
      const size_t v = v0 + 32 * u + lane;
      if (v < nv) cv[u] = load_coded<B2, G>(src, v, meta2);
    }
#pragma unroll
    for (int u = 0; u < kQUnroll; ++u) {
      const size_t v = v0 + 32 * u + lane;
      if (v >= nv) continue;
      float val[8];
      decode_coded<T, B2>(cv[u], val);
      store_vec(out, v, vec_valid(sp.n, v), codec::dev::pack_out8<T>(val));
    }
  }
  split_finish(a, base);
}

template <DType T, int B1, int B2, int G>
Status launch_split(const KernelArgs& a, cudaStream_t s) {
  int dev = 0, sms = 0;
  LOWBIT_CUDA_RETURN(cudaGetDevice(&dev));
  LOWBIT_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const Plan& p = a.plan;
  const size_t ppt = proto::ceil_div(proto::ceil_div(p.ts, 8), static_cast<size_t>(kPassVecs));
  auto grid_for = [&](size_t items) {
    size_t g = proto::ceil_div(items, static_cast<size_t>(kSplitWarps));
    const size_t cap = static_cast<size_t>(sms) * kSplitBlocksPerSM;
    return static_cast<unsigned>(g < 1 ? 1 : g > cap ? cap : g);
  };
  const unsigned g13 = grid_for(static_cast<size_t>(a.nranks) * p.tiles * ppt), g2 = grid_for(static_cast<size_t>(p.tiles) * ppt);
  for (size_t c = 0; c < p.num_chunks; ++c) {
    split_step1_kernel<T, B1, G><<<g13, kSplitThreads, 0, s>>>(a, c);
    LOWBIT_CUDA_RETURN_LAUNCH();
    split_step2_kernel<T, B1, B2, G><<<g2, kSplitThreads, 0, s>>>(a, c);
    LOWBIT_CUDA_RETURN_LAUNCH();
    split_step3_kernel<T, B2, G><<<g13, kSplitThreads, 0, s>>>(a, c);
    LOWBIT_CUDA_RETURN_LAUNCH();
  }
  return Status::Ok();
}

// Dynamic shared memory above 48 KiB needs the function attribute (per function and device;
// set on every launch: it is a cheap host call and also allowed during graph capture).
template <DType T, int B1, int B2, int G>
Status launch_qg(const KernelArgs& a, cudaStream_t s) {
  if (a.plan.kind == proto::Kind::kTwoStepSplit) return launch_split<T, B1, B2, G>(a, s);
  const dim3 grid(static_cast<unsigned>(a.plan.tiles)), block(kQThreads);
  LOWBIT_CUDA_RETURN(cudaFuncSetAttribute(quant_kernel<T, B1, B2, G>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kQuantSmemBytes)));
  quant_kernel<T, B1, B2, G><<<grid, block, kQuantSmemBytes, s>>>(a);
  return Status::Ok();
}

template <DType T, int B1, int B2>
Status launch_q(int group_size, const KernelArgs& a, cudaStream_t s) {
  switch (group_size) {
    case 32: LOWBIT_RETURN_IF_ERROR((launch_qg<T, B1, B2, 32>(a, s))); break;
    case 64: LOWBIT_RETURN_IF_ERROR((launch_qg<T, B1, B2, 64>(a, s))); break;
    case 128: LOWBIT_RETURN_IF_ERROR((launch_qg<T, B1, B2, 128>(a, s))); break;
    default:
      return make_status(StatusCode::kInvalidArgument, "allreduce: group size %d not in {32, 64, 128}", group_size);
  }
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}

template <int B1, int B2>
Status launch_g(int group_size, const KernelArgs& a, cudaStream_t s) {
  return a.dtype == DType::kF16 ? launch_q<DType::kF16, B1, B2>(group_size, a, s)
                                : launch_q<DType::kBF16, B1, B2>(group_size, a, s);
}

}  // namespace

Status launch_allreduce(Mode mode, int group_size, const KernelArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.plan.tiles)), block(kThreads);
  switch (mode) {
    case Mode::kOneShot:
      if (a.plan.kind == proto::Kind::kOneShotLL) {
        oneshot_ll_kernel<<<grid, block, 0, stream>>>(a);
        LOWBIT_CUDA_RETURN_LAUNCH();
        return Status::Ok();
      }
      oneshot_kernel<<<grid, block, 0, stream>>>(a);
      LOWBIT_CUDA_RETURN_LAUNCH();
      return Status::Ok();
    case Mode::kTwoShot:
      twoshot_kernel<<<grid, block, 0, stream>>>(a);
      LOWBIT_CUDA_RETURN_LAUNCH();
      return Status::Ok();
    case Mode::kQ8Q8: return launch_g<8, 8>(group_size, a, stream);
    case Mode::kQ4Q8: return launch_g<4, 8>(group_size, a, stream);
    case Mode::kQ4Q4: return launch_g<4, 4>(group_size, a, stream);
    default: return make_status(StatusCode::kInvalidArgument, "allreduce: mode %s has no kernel", mode_name(mode));
  }
}

}  // namespace lowbit::allreduce::kernels
