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

__device__ __forceinline__ uint64_t* ctl_of(const KernelArgs& a, int r) { return reinterpret_cast<uint64_t*>(a.base[r]); }

// Threads 0..N-1 wait for flag (index_of(peer)) >= e. Returns false (whole block) on
// timeout or abort. s_abort is sticky: an aborted block only exits.
template <typename IndexFn>
__device__ bool wait_all(const KernelArgs& a, IndexFn index_of, uint64_t e, int step, size_t chunk, int* s_abort) {
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
          if (atomicCAS(reinterpret_cast<unsigned long long*>(ctl + proto::kClaimIndex), 0ull, 1ull) == 0ull) {
            volatile proto::ErrorRecord* r = a.err;
            r->rank = a.rank;
            r->peer = t;
            r->step = step;
            r->chunk = static_cast<int64_t>(chunk);
            r->tile = static_cast<int>(blockIdx.x);
            __threadfence_system();
            r->set = 1;
            __threadfence_system();
          }
          *abort_word = 1;
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
    signal_all(a, proto::flag1_index(tile, a.rank), e);
    if (!wait_all(a, [&](int r) { return proto::flag1_index(tile, r); }, e, proto::kStepOneShot, c, &s_abort)) return;
    const uint16_t* src[proto::kMaxRanks];
    for (int r = 0; r < a.nranks; ++r)
      src[r] = reinterpret_cast<const uint16_t*>(a.base[a.rank] + proto::oneshot_offset(a.areas, p, e, r, tile));
    uint16_t* out = a.out + sp.begin;
    sum_raw(a.dtype, src, a.nranks, &out, 1, sp.n);
    __syncthreads();
  }
  finish_kernel(a, base);
}

// Unquantized two-shot: reduce-scatter by pushes (step 1), owner sums in rank order and
// pushes the rounded sum to every rank (step 2), copy out (step 3).
__global__ void __launch_bounds__(kThreads) twoshot_kernel(KernelArgs a) {
  __shared__ uint64_t s_base;
  __shared__ int s_abort;
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
    signal_all(a, proto::flag1_index(tile, a.rank), e);
    if (!wait_all(a, [&](int r) { return proto::flag1_index(tile, r); }, e, proto::kStepReduceScatter, c, &s_abort))
      return;
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
    signal_all(a, proto::flag2_index(tile, a.rank), e);
    if (!wait_all(a, [&](int r) { return proto::flag2_index(tile, r); }, e, proto::kStepAllGather, c, &s_abort))
      return;
    // Step 3: copy every owner's reduced tile into the output.
    for (int j = 0; j < N; ++j) {
      const Span sp = proto::tile_span(p, c, j, tile);
      copy_raw_cg(reinterpret_cast<const uint16_t*>(a.base[a.rank] + proto::gather_offset(a.areas, p, j, tile)),
                  a.out + sp.begin, sp.n);
    }
    __syncthreads();
  }
  finish_kernel(a, base);
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

// Encodes one lane's vector into ndst segments. The whole warp must call it (group
// reductions shuffle); lanes past the span's groups pass active = false (valid = 0).
template <DType T, int BITS, int G>
__device__ __forceinline__ void enc_vec(const uint4& x, int valid, bool active, size_t v, uint8_t* const* dst, int ndst,
                                        size_t meta_off) {
  namespace dv = codec::dev;
  constexpr int GL = G / 8;
  const codec::CodecSpec spec{BITS, G};
  uint32_t mm = dv::minmax8(x, valid);
  mm = dv::group_reduce_minmax<GL>(mm);
  const codec::GroupMeta gm = dv::group_meta<T>(spec, mm);
  const dv::QuantCtx qc = dv::make_quant_ctx(spec, gm);
  float r[8];
  dv::quantize8<T>(qc, spec, x, r, valid);
  if (!active) return;
  if constexpr (BITS == 4) {
    const uint32_t w = dv::int4_pack8(r);
    for (int j = 0; j < ndst; ++j) *reinterpret_cast<uint32_t*>(dst[j] + 4 * v) = w;
  } else {
    const uint2 b = dv::int8_pack8(r);
    for (int j = 0; j < ndst; ++j) *reinterpret_cast<uint2*>(dst[j] + 8 * v) = b;
  }
  if (v % GL == 0) {
    const uint32_t mw = dv::meta_word(gm);
    for (int j = 0; j < ndst; ++j) *reinterpret_cast<uint32_t*>(dst[j] + meta_off + 4 * (v / GL)) = mw;
  }
}

// Decodes one lane's vector of a segment written by a peer (ld.global.cg).
template <DType T, int BITS, int G>
__device__ __forceinline__ void dec_vec(const uint8_t* src, size_t v, size_t meta_off, float (&out)[8]) {
  namespace dv = codec::dev;
  constexpr int GL = G / 8;
  const uint32_t mw = __ldcg(reinterpret_cast<const unsigned int*>(src + meta_off + 4 * (v / GL)));
  const codec::GroupMeta gm = dv::load_meta<T>(mw);
  float qf[8];
  if constexpr (BITS == 4) {
    dv::int4_unpack8(__ldcg(reinterpret_cast<const unsigned int*>(src + 4 * v)), qf);
  } else {
    dv::int8_unpack8(__ldcg(reinterpret_cast<const uint2*>(src + 8 * v)), qf);
  }
  dv::dequantize8<T>(gm, qf, out);
}

template <DType T, int B1, int B2, int G>
__global__ void __launch_bounds__(kQThreads, 1) quant_kernel(KernelArgs a) {
  __shared__ uint64_t s_base;
  __shared__ int s_abort;
  const uint64_t base = read_base(a, &s_base, &s_abort);
  const int tile = blockIdx.x;
  const Plan& p = a.plan;
  const int N = a.nranks;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  constexpr int GL = G / 8;
  constexpr size_t kPass = 32 * kQUnroll;  // vectors per warp pass
  const size_t meta1 = codec::codec_data_bytes(codec::CodecSpec{B1, G}, p.ts);
  const size_t meta2 = codec::codec_data_bytes(codec::CodecSpec{B2, G}, p.ts);
  const size_t wstart = static_cast<size_t>(warp) * kPass, wstride = static_cast<size_t>(nwarps) * kPass;

  for (size_t c = 0; c < p.num_chunks; ++c) {
    const uint64_t e = proto::chunk_epoch(base, c);
    // Step 1: my tile of every slice j, encoded into owner j's recv slot for me.
    for (int j = 0; j < N; ++j) {
      const Span sp = proto::tile_span(p, c, j, tile);
      uint8_t* dst = a.base[j] + proto::recv_offset(a.areas, p, a.rank, tile);
      const uint16_t* src = a.in + sp.begin;
      const size_t nvp = proto::ceil_div(sp.n, G) * GL;
      for (size_t v0 = wstart; v0 < nvp; v0 += wstride) {
        uint4 x[kQUnroll];
        int valid[kQUnroll];
#pragma unroll
        for (int u = 0; u < kQUnroll; ++u) {
          const size_t v = v0 + 32 * u + lane;
          valid[u] = vec_valid(sp.n, v);
          x[u] = load_vec(src, v, valid[u]);
        }
#pragma unroll
        for (int u = 0; u < kQUnroll; ++u) {
          const size_t v = v0 + 32 * u + lane;
          enc_vec<T, B1, G>(x[u], valid[u], v < nvp, v, &dst, 1, meta1);
        }
      }
    }
    signal_all(a, proto::flag1_index(tile, a.rank), e);
    if (!wait_all(a, [&](int r) { return proto::flag1_index(tile, r); }, e, proto::kStepReduceScatter, c, &s_abort))
      return;

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
        uint4 s16[kQUnroll];
        int valid[kQUnroll];
#pragma unroll
        for (int u = 0; u < kQUnroll; ++u) {
          const size_t v = v0 + 32 * u + lane;
          valid[u] = vec_valid(mine.n, v);
          float acc[8];
          if (v < nvp) {
            dec_vec<T, B1, G>(src[0], v, meta1, acc);
            for (int r = 1; r < N; ++r) {
              float w[8];
              dec_vec<T, B1, G>(src[r], v, meta1, w);
#pragma unroll
              for (int i = 0; i < 8; ++i) acc[i] = __fadd_rn(acc[i], w[i]);
            }
          } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[i] = 0.0f;
          }
          s16[u] = codec::dev::pack_out8<T>(acc);
        }
#pragma unroll
        for (int u = 0; u < kQUnroll; ++u) {
          const size_t v = v0 + 32 * u + lane;
          enc_vec<T, B2, G>(s16[u], valid[u], v < nvp, v, dst, N, meta2);
        }
      }
    }
    signal_all(a, proto::flag2_index(tile, a.rank), e);
    if (!wait_all(a, [&](int r) { return proto::flag2_index(tile, r); }, e, proto::kStepAllGather, c, &s_abort))
      return;

    // Step 3: decode every owner's reduced tile into the output.
    for (int j = 0; j < N; ++j) {
      const Span sp = proto::tile_span(p, c, j, tile);
      const uint8_t* src = a.base[a.rank] + proto::gather_offset(a.areas, p, j, tile);
      uint16_t* out = a.out + sp.begin;
      const size_t nv = proto::ceil_div(sp.n, 8);
      for (size_t v0 = static_cast<size_t>(threadIdx.x); v0 < nv; v0 += static_cast<size_t>(blockDim.x) * kQUnroll) {
        float val[kQUnroll][8];
#pragma unroll
        for (int u = 0; u < kQUnroll; ++u) {
          const size_t v = v0 + static_cast<size_t>(blockDim.x) * u;
          if (v < nv) dec_vec<T, B2, G>(src, v, meta2, val[u]);
        }
#pragma unroll
        for (int u = 0; u < kQUnroll; ++u) {
          const size_t v = v0 + static_cast<size_t>(blockDim.x) * u;
          if (v < nv) store_vec(out, v, vec_valid(sp.n, v), codec::dev::pack_out8<T>(val[u]));
        }
      }
    }
    __syncthreads();
  }
  finish_kernel(a, base);
}

template <DType T, int B1, int B2>
Status launch_q(int group_size, const KernelArgs& a, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(a.plan.tiles)), block(kQThreads);
  switch (group_size) {
    case 32: quant_kernel<T, B1, B2, 32><<<grid, block, 0, s>>>(a); break;
    case 64: quant_kernel<T, B1, B2, 64><<<grid, block, 0, s>>>(a); break;
    case 128: quant_kernel<T, B1, B2, 128><<<grid, block, 0, s>>>(a); break;
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
