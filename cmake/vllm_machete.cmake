# vLLM's Machete W4A16 GEMM as a baseline for `lowbit bench gemm` (opt-in:
# -DLOWBIT_BENCH_VLLM_MACHETE=ON; bench/baselines/vllm_machete.h says what runs).
#
# Machete is CUTLASS-based: its sources come from vLLM's source release (cmake/vllm_sdist.cmake:
# csrc/quantization/machete, csrc/cutlass_extensions, csrc/core/scalar_type.hpp), CUTLASS's
# headers and its cutlass_library generator package from NVIDIA's nvidia-cutlass wheel on PyPI
# (pinned by version and SHA-256; -DLOWBIT_CUTLASS_WHEEL=/path/to/the.whl uses a local copy).
# vLLM pins CUTLASS v4.7.1 from GitHub; PyPI's newest nvidia-cutlass is 4.2.0.0, which is what
# this build uses. bench/baselines/vllm_machete/prepare_sources.py runs vLLM's generate.py
# (needs jinja2) for the uint4b8 bf16 / fp16 kernels; they compile with vLLM's flags for them
# (C++17, sm_90a, -O3 -DNDEBUG, --expt-relaxed-constexpr, --expt-extended-lambda) against
# bench/baselines/vllm_machete/torch_shim instead of PyTorch, into lowbit_bench_vllm_machete,
# which only the CLI links. One flag differs: vLLM defines CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL
# (CUTLASS calls cuTensorMapEncodeTiled from libcuda, which PyTorch has loaded anyway); here
# CUTLASS fetches the same driver function through cudaGetDriverEntryPoint, so that the CLI
# still starts on a machine without a GPU driver. Host code only: graph replays do not run it.
# 18 CUTLASS kernels: ~45 s of nvcc each on one core.
set(LOWBIT_CUTLASS_WHEEL_VERSION 4.2.0.0)
set(LOWBIT_CUTLASS_WHEEL_URL
    "https://files.pythonhosted.org/packages/21/6b/e86fc2fd536dd4b8bd2209aa31d7002610c501b0802337787eac9c9b328c/nvidia_cutlass-4.2.0.0-py3-none-any.whl")
set(LOWBIT_CUTLASS_WHEEL_SHA256 f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6)
set(LOWBIT_CUTLASS_WHEEL "" CACHE FILEPATH "A local copy of the nvidia-cutlass 4.2.0.0 wheel (else downloaded from PyPI)")

include(${CMAKE_CURRENT_LIST_DIR}/vllm_sdist.cmake)
if(NOT "90a" IN_LIST CMAKE_CUDA_ARCHITECTURES)
  message(FATAL_ERROR "lowbit: the Machete baseline needs sm_90a in CMAKE_CUDA_ARCHITECTURES")
endif()
set(_root ${LOWBIT_VLLM_ROOT})
lowbit_vllm_extract(csrc/quantization/machete csrc/cutlass_extensions csrc/core/scalar_type.hpp LICENSE)

set(_cutlass_dir ${CMAKE_BINARY_DIR}/_deps/cutlass)
lowbit_fetch_pinned(_wheel LOWBIT_CUTLASS_WHEEL "${LOWBIT_CUTLASS_WHEEL}" ${LOWBIT_CUTLASS_WHEEL_URL} ${LOWBIT_CUTLASS_WHEEL_SHA256}
                    ${_cutlass_dir}/nvidia_cutlass-${LOWBIT_CUTLASS_WHEEL_VERSION}-py3-none-any.whl
                    "nvidia-cutlass ${LOWBIT_CUTLASS_WHEEL_VERSION} (6 MB wheel)")
set(_cutlass_py ${_cutlass_dir}/wheel)
if(NOT EXISTS ${_cutlass_py}/cutlass_library/source/include/cutlass/cutlass.h)
  file(ARCHIVE_EXTRACT INPUT ${_wheel} DESTINATION ${_cutlass_py} PATTERNS cutlass_library)
endif()
set(_cutlass_include ${_cutlass_py}/cutlass_library/source/include)

find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(_gen ${CMAKE_BINARY_DIR}/generated/vllm_machete)
execute_process(
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/bench/baselines/vllm_machete/prepare_sources.py ${_root}
          ${_cutlass_py} ${_gen} --act bf16,fp16
  RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "lowbit: prepare_sources.py failed for vLLM ${LOWBIT_VLLM_VERSION}'s Machete "
                      "(it needs jinja2: pip install jinja2)")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${CMAKE_SOURCE_DIR}/bench/baselines/vllm_machete/prepare_sources.py)
file(STRINGS ${_gen}/sources.txt _machete_srcs)

add_library(lowbit_bench_vllm_machete STATIC ${CMAKE_SOURCE_DIR}/bench/baselines/vllm_machete/machete_baseline.cu
                                             ${_machete_srcs})
# torch_shim first: it stands in for PyTorch's headers and for vLLM's csrc/torch_utils.h.
target_include_directories(lowbit_bench_vllm_machete PRIVATE
  ${CMAKE_SOURCE_DIR}/bench/baselines/vllm_machete/torch_shim ${_root}/csrc ${_root}/csrc/quantization/machete
  ${_cutlass_include} ${CMAKE_SOURCE_DIR})
target_link_libraries(lowbit_bench_vllm_machete PUBLIC lowbit_int4 CUDA::cudart)
set_target_properties(lowbit_bench_vllm_machete PROPERTIES CUDA_STANDARD 17 CUDA_ARCHITECTURES 90a
                                                           POSITION_INDEPENDENT_CODE ON)
target_compile_options(lowbit_bench_vllm_machete PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-O3 --expt-relaxed-constexpr --expt-extended-lambda -diag-suppress=2810>)
target_compile_definitions(lowbit_bench_vllm_machete PRIVATE NDEBUG
  "LOWBIT_VLLM_MACHETE_SOURCE=\"vLLM ${LOWBIT_VLLM_VERSION} csrc/quantization/machete (PyPI sdist, SHA-256 ${LOWBIT_VLLM_SDIST_SHA256}), CUTLASS ${LOWBIT_CUTLASS_WHEEL_VERSION} (nvidia-cutlass wheel)\"")
set(LOWBIT_HAVE_VLLM_MACHETE ON)
message(STATUS "lowbit: vLLM Machete baseline ON (vLLM ${LOWBIT_VLLM_VERSION}, CUTLASS ${LOWBIT_CUTLASS_WHEEL_VERSION})")
