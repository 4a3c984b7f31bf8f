// Dense W4A16 GEMM through the pipelined tile (pipelined_tile.cuh) on MMA-tiled weights:
// gemm()'s GemmPath::kPipelined and kAuto's choice for batched decode and short prefill.
#include "kernels/int4/pipelined_tile.cuh"

namespace lowbit::int4::detail {

bool pipelined_uses_wgmma() { return kern::pipe_wgmma_ok(); }

int device_sm_count() { return kern::current_sm_count(); }

cudaError_t launch_gemm_pipelined(const void* x, void* y, int m, const KernelWeightsView& w, int expert,
                                  cudaStream_t stream) {
  const WeightShape& s = w.shape;
  kern::PipeParams p;
  p.qw = static_cast<const uint4*>(w.qweight) + static_cast<size_t>(expert) * tiled_expert_uint4s(s);
  const size_t so = static_cast<size_t>(expert) * expert_scale_entries(s);
  p.scales = w.scales + so;
  p.zeros = w.zeros ? w.zeros + so : nullptr;
  p.x = x;
  p.y = y;
  p.M = m;
  p.N = s.n;
  p.K = s.k;
  p.ksteps = s.k / kMmaTileK;
  p.gsteps = s.group_len() / kMmaTileK;
  const int sms = device_sm_count();
  const bool sym = p.zeros == nullptr;
  if (s.act == DType::kBF16)
    return sym ? kern::launch_rows<__nv_bfloat16, true>(p, sms, stream)
               : kern::launch_rows<__nv_bfloat16, false>(p, sms, stream);
  return sym ? kern::launch_rows<__half, true>(p, sms, stream) : kern::launch_rows<__half, false>(p, sms, stream);
}

}  // namespace lowbit::int4::detail
