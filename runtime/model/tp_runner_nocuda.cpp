// Builds without CUDA: the GPU runner entry points exist and say so.
#include "lowbit/model/tp_runner.h"

#if !LOWBIT_HAS_CUDA
namespace lowbit::model {
namespace {
Status no_cuda() { return make_status(StatusCode::kNotSupported, "TP runner: lowbit was built without CUDA"); }
}  // namespace
struct TpRunner::Impl {};
TpRunner::TpRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TpRunner::~TpRunner() = default;
Status TpRunner::create(const LlamaConfig&, const std::vector<int>&, const allreduce::Config&,
                        std::unique_ptr<TpRunner>*) {
  return no_cuda();
}
Status gpu_perplexity(const LlamaConfig&, const LlamaWeights&, const std::vector<int>&, const GpuPplOptions&,
                      PplResult*) {
  return no_cuda();
}
Status gpu_perplexity(const LlamaConfig&, const LlamaWeights&, const std::vector<int>&, int, int, allreduce::Mode, int,
                      PplResult*) {
  return no_cuda();
}
}  // namespace lowbit::model
#endif
