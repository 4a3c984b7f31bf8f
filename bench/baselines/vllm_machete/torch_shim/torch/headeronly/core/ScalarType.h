// Stands in for PyTorch's ScalarType for vLLM's Machete sources built without PyTorch: the
// scalar types the Machete dispatch compares, their names and the C++ types that map to them.
#pragma once
#include <cstdint>

#include "torch/headeronly/util/BFloat16.h"
#include "torch/headeronly/util/Half.h"

namespace torch::headeronly {

enum class ScalarType : int8_t { Byte, Char, Short, Int, Long, Half, Float, Double, BFloat16 };

enum class MemoryFormat : int8_t { Contiguous };

inline const char* toString(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: return "Byte";
    case ScalarType::Char: return "Char";
    case ScalarType::Short: return "Short";
    case ScalarType::Int: return "Int";
    case ScalarType::Long: return "Long";
    case ScalarType::Half: return "Half";
    case ScalarType::Float: return "Float";
    case ScalarType::Double: return "Double";
    case ScalarType::BFloat16: return "BFloat16";
  }
  return "Unknown";
}

inline int64_t elementSize(ScalarType t) {
  switch (t) {
    case ScalarType::Byte:
    case ScalarType::Char: return 1;
    case ScalarType::Short:
    case ScalarType::Half:
    case ScalarType::BFloat16: return 2;
    case ScalarType::Int:
    case ScalarType::Float: return 4;
    case ScalarType::Long:
    case ScalarType::Double: return 8;
  }
  return 0;
}

template <class T>
struct CppTypeToScalarType;
template <>
struct CppTypeToScalarType<uint8_t> { static constexpr ScalarType value = ScalarType::Byte; };
template <>
struct CppTypeToScalarType<int8_t> { static constexpr ScalarType value = ScalarType::Char; };
template <>
struct CppTypeToScalarType<int32_t> { static constexpr ScalarType value = ScalarType::Int; };
template <>
struct CppTypeToScalarType<float> { static constexpr ScalarType value = ScalarType::Float; };
template <>
struct CppTypeToScalarType<Half> { static constexpr ScalarType value = ScalarType::Half; };
template <>
struct CppTypeToScalarType<BFloat16> { static constexpr ScalarType value = ScalarType::BFloat16; };

}  // namespace torch::headeronly
