// Token embedding lookup (one block per token; bf16 rows copied as-is).
#include "lowbit/detail/cuda_check.h"
#include "lowbit/model/gpu_ops.h"

namespace lowbit::model::gpu {
namespace {
__global__ void embedding_kernel(const int32_t* ids, const bf16* table, int vocab, int hidden, bf16* out) {
  const int t = blockIdx.x;
  const int id = ids[t];
  bf16* o = out + static_cast<int64_t>(t) * hidden;
  if (id < 0 || id >= vocab) {  // never read out of bounds; make the bad token visible
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) o[i] = __float2bfloat16_rn(__int_as_float(0x7fc00000));
    return;
  }
  const bf16* r = table + static_cast<int64_t>(id) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) o[i] = r[i];
}
}  // namespace

Status embedding(const int32_t* ids, int n_tokens, const bf16* table, int vocab, int hidden, bf16* out,
                 cudaStream_t stream) {
  LOWBIT_CHECK_ARG(ids && table && out, "embedding: null pointer");
  LOWBIT_CHECK_ARG(n_tokens > 0 && vocab > 0 && hidden > 0, "embedding: n_tokens=%d vocab=%d hidden=%d must be > 0",
                   n_tokens, vocab, hidden);
  embedding_kernel<<<n_tokens, 256, 0, stream>>>(ids, table, vocab, hidden, out);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}
}  // namespace lowbit::model::gpu
