// Stands in for PyTorch's BFloat16 type: used only as a tag (see Half.h).
#pragma once
namespace torch::headeronly {
struct BFloat16 {};
}  // namespace torch::headeronly
