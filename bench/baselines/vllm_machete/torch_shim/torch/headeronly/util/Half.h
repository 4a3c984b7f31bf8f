// Stands in for PyTorch's Half type: Machete's sources use it only as a tag that names the
// scalar type of cutlass::half_t (equivalent_scalar_type in cutlass_extensions/torch_utils.hpp).
#pragma once
namespace torch::headeronly {
struct Half {};
}  // namespace torch::headeronly
