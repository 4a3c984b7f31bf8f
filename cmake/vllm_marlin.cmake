# vLLM's Marlin W4A16 GEMM as a baseline for `lowbit bench gemm` (opt-in:
# -DLOWBIT_BENCH_VLLM_MARLIN=ON; bench/baselines/vllm_marlin.h says what runs).
#
# The sources come from vLLM's source release on PyPI (cmake/vllm_sdist.cmake). Only
# csrc/quantization/marlin, csrc/moe/marlin_moe_wna16, csrc/core/scalar_type.hpp and the license are extracted;
# bench/baselines/vllm_marlin/prepare_sources.py cuts the PyTorch entries off and writes the
# kernel instantiations. Compiled with vLLM's own nvcc flags for these files (not lowbit's:
# no --fmad=false, no warnings-as-policy), into lowbit_bench_vllm_marlin, which only the CLI
# links. The library and the tests never depend on it.
set(LOWBIT_VLLM_MARLIN_GROUPS "128" CACHE STRING "Group sizes to instantiate Marlin for (32,64,128,-1)")
include(${CMAKE_CURRENT_LIST_DIR}/vllm_sdist.cmake)
set(_root ${LOWBIT_VLLM_ROOT})
lowbit_vllm_extract(csrc/quantization/marlin csrc/moe/marlin_moe_wna16 csrc/core/scalar_type.hpp LICENSE)

find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(_gen ${CMAKE_BINARY_DIR}/generated/vllm_marlin)
execute_process(
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/bench/baselines/vllm_marlin/prepare_sources.py ${_root} ${_gen}
          --act bf16,fp16 --groups ${LOWBIT_VLLM_MARLIN_GROUPS}
  RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "lowbit: prepare_sources.py failed for vLLM ${LOWBIT_VLLM_VERSION}")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/bench/baselines/vllm_marlin/prepare_sources.py)
file(STRINGS ${_gen}/sources.txt _names)
set(_srcs ${CMAKE_SOURCE_DIR}/bench/baselines/vllm_marlin/marlin_baseline.cu
          ${CMAKE_SOURCE_DIR}/bench/baselines/vllm_marlin/marlin_moe_baseline.cu)
foreach(f ${_names})
  list(APPEND _srcs ${_gen}/${f})
endforeach()

add_library(lowbit_bench_vllm_marlin STATIC ${_srcs})
# The shim directory first: it stands in for <torch/headeronly/util/Exception.h>.
target_include_directories(lowbit_bench_vllm_marlin PRIVATE ${_gen} ${_root}/csrc/quantization/marlin ${_root}/csrc
                           ${CMAKE_SOURCE_DIR})
target_link_libraries(lowbit_bench_vllm_marlin PUBLIC lowbit_int4 CUDA::cudart)
set_target_properties(lowbit_bench_vllm_marlin PROPERTIES CUDA_STANDARD 17 POSITION_INDEPENDENT_CODE ON)
# vLLM's flags for these files with CUDA >= 12 (torch's COMMON_NVCC_FLAGS without the
# __CUDA_NO_HALF* defines, -static-global-template-stub=false as vLLM sets on the Marlin files).
target_compile_options(lowbit_bench_vllm_marlin PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr --expt-extended-lambda -static-global-template-stub=false
                              -diag-suppress=2810>)  # 2810: lowbit::Status is [[nodiscard]] (as LOWBIT_CUDA_FLAGS)
target_compile_definitions(lowbit_bench_vllm_marlin PRIVATE ENABLE_FP8
  "LOWBIT_VLLM_MARLIN_SOURCE=\"vLLM ${LOWBIT_VLLM_VERSION} csrc/quantization/marlin (PyPI sdist, SHA-256 ${LOWBIT_VLLM_SDIST_SHA256})\""
  "LOWBIT_VLLM_MARLIN_GROUPS=\"${LOWBIT_VLLM_MARLIN_GROUPS}\"")
set(LOWBIT_HAVE_VLLM_MARLIN ON)
message(STATUS "lowbit: vLLM Marlin baseline ON (vLLM ${LOWBIT_VLLM_VERSION}, groups ${LOWBIT_VLLM_MARLIN_GROUPS})")
