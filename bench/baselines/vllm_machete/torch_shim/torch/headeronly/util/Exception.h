// Stands in for PyTorch's <torch/headeronly/util/Exception.h> when vLLM's Machete sources are
// built without PyTorch for `lowbit bench gemm` (bench/baselines/vllm_machete.h): a failed check
// throws std::runtime_error with the message the check would have raised in PyTorch.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace lowbit_machete_shim {
template <class... A>
std::string cat(const A&... a) {
  std::ostringstream o;
  (o << ... << a);
  return o.str();
}
}  // namespace lowbit_machete_shim

#define STD_TORCH_CHECK(cond, ...)                                                               \
  do {                                                                                           \
    if (!(cond))                                                                                 \
      throw std::runtime_error(::lowbit_machete_shim::cat("vLLM Machete: check `" #cond "` failed" \
                                                          __VA_OPT__(, ": ", ) __VA_ARGS__));    \
  } while (0)
