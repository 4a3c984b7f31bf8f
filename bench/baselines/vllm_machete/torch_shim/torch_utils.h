// Shadows vLLM's csrc/torch_utils.h (PyTorch's stable ABI) for the Machete sources built
// without PyTorch: the stream is the one the caller registered in its Arena.
#pragma once
#include <cuda_runtime.h>

#include "torch/csrc/stable/tensor.h"

#define STD_TORCH_CHECK_NOT_IMPLEMENTED(cond, ...) STD_TORCH_CHECK(cond, "NotImplementedError: ", __VA_ARGS__)

inline cudaStream_t get_current_cuda_stream(int /*device_index*/) { return lowbit_machete_shim::arena().stream; }
