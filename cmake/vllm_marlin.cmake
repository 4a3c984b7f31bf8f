# vLLM's Marlin W4A16 GEMM as a baseline for `lowbit bench gemm` (opt-in:
# -DLOWBIT_BENCH_VLLM_MARLIN=ON; bench/baselines/vllm_marlin.h says what runs).
#
# The sources come from vLLM's source release on PyPI (pinned by version and SHA-256; or a
# local copy of that tarball: -DLOWBIT_VLLM_SDIST=/path/vllm-0.34.0.tar.gz). Only
# csrc/quantization/marlin, csrc/moe/marlin_moe_wna16, csrc/core/scalar_type.hpp and the license are extracted;
# bench/baselines/vllm_marlin/prepare_sources.py cuts the PyTorch entries off and writes the
# kernel instantiations. Compiled with vLLM's own nvcc flags for these files (not lowbit's:
# no --fmad=false, no warnings-as-policy), into lowbit_bench_vllm_marlin, which only the CLI
# links. The library and the tests never depend on it.
set(LOWBIT_VLLM_VERSION 0.34.0)
set(LOWBIT_VLLM_SDIST_URL
    "https://files.pythonhosted.org/packages/92/21/6e0b077dc4a0b28f5a8ce8bb352a38d7196650d681fd4faa87f8dc622eff/vllm-0.34.0.tar.gz")
set(LOWBIT_VLLM_SDIST_SHA256 fcad848b246a9d8652b47e6425af92334dc02492f9802720f54e27b823cf0113)
set(LOWBIT_VLLM_SDIST "" CACHE FILEPATH "A local copy of vLLM's source tarball (else downloaded from PyPI)")
set(LOWBIT_VLLM_MARLIN_GROUPS "128" CACHE STRING "Group sizes to instantiate Marlin for (32,64,128,-1)")

if(NOT LOWBIT_HAS_CUDA)
  message(FATAL_ERROR "LOWBIT_BENCH_VLLM_MARLIN needs CUDA")
endif()
set(_vllm_dir ${CMAKE_BINARY_DIR}/_deps/vllm)
set(_tarball ${LOWBIT_VLLM_SDIST})
if(NOT _tarball)
  set(_tarball ${_vllm_dir}/vllm-${LOWBIT_VLLM_VERSION}.tar.gz)
  if(NOT EXISTS ${_tarball})
    message(STATUS "lowbit: downloading vLLM ${LOWBIT_VLLM_VERSION} sources (51 MB) for the Marlin baseline")
    file(DOWNLOAD ${LOWBIT_VLLM_SDIST_URL} ${_tarball}.part EXPECTED_HASH SHA256=${LOWBIT_VLLM_SDIST_SHA256}
         STATUS _st TLS_VERIFY ON)
    list(GET _st 0 _code)
    if(NOT _code EQUAL 0)
      message(FATAL_ERROR "lowbit: vLLM source download failed: ${_st}; pass -DLOWBIT_VLLM_SDIST=<tarball>")
    endif()
    file(RENAME ${_tarball}.part ${_tarball})
  endif()
endif()
file(SHA256 ${_tarball} _sha)
if(NOT _sha STREQUAL LOWBIT_VLLM_SDIST_SHA256)
  message(FATAL_ERROR "lowbit: ${_tarball} is not vLLM ${LOWBIT_VLLM_VERSION}'s source release (SHA-256 ${_sha})")
endif()
set(_root ${_vllm_dir}/vllm-${LOWBIT_VLLM_VERSION})
if(NOT EXISTS ${_root}/csrc/quantization/marlin/marlin_template.h OR NOT EXISTS ${_root}/csrc/moe/marlin_moe_wna16/ops.cu)
  file(ARCHIVE_EXTRACT INPUT ${_tarball} DESTINATION ${_vllm_dir}
       PATTERNS vllm-${LOWBIT_VLLM_VERSION}/csrc/quantization/marlin vllm-${LOWBIT_VLLM_VERSION}/csrc/moe/marlin_moe_wna16
                vllm-${LOWBIT_VLLM_VERSION}/csrc/core/scalar_type.hpp vllm-${LOWBIT_VLLM_VERSION}/LICENSE)
endif()

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
