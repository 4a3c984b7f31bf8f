# vLLM's source release on PyPI, shared by the vLLM baselines of `lowbit bench` (Marlin:
# cmake/vllm_marlin.cmake, Machete: cmake/vllm_machete.cmake). Pinned by version and SHA-256;
# -DLOWBIT_VLLM_SDIST=/path/vllm-0.34.0.tar.gz uses a local copy of that tarball instead of the
# download. lowbit_vllm_extract(<patterns...>) extracts the named paths (relative to the
# release's top directory) once and sets LOWBIT_VLLM_ROOT.
include_guard(GLOBAL)
set(LOWBIT_VLLM_VERSION 0.34.0)
set(LOWBIT_VLLM_SDIST_URL
    "https://files.pythonhosted.org/packages/92/21/6e0b077dc4a0b28f5a8ce8bb352a38d7196650d681fd4faa87f8dc622eff/vllm-0.34.0.tar.gz")
set(LOWBIT_VLLM_SDIST_SHA256 fcad848b246a9d8652b47e6425af92334dc02492f9802720f54e27b823cf0113)
set(LOWBIT_VLLM_SDIST "" CACHE FILEPATH "A local copy of vLLM's source tarball (else downloaded from PyPI)")

if(NOT LOWBIT_HAS_CUDA)
  message(FATAL_ERROR "lowbit: the vLLM baselines need CUDA")
endif()
# A pinned download for the baselines: `local` (a path the user gave through the cache variable
# `option`, may be empty) or `url` fetched into `dest`, checked against `sha256` either way; sets
# <out_var> to the file.
function(lowbit_fetch_pinned out_var option local url sha256 dest what)
  set(_file ${local})
  if(NOT _file)
    set(_file ${dest})
    if(NOT EXISTS ${_file})
      message(STATUS "lowbit: downloading ${what}")
      file(DOWNLOAD ${url} ${_file}.part EXPECTED_HASH SHA256=${sha256} STATUS _st TLS_VERIFY ON)
      list(GET _st 0 _code)
      if(NOT _code EQUAL 0)
        message(FATAL_ERROR "lowbit: download of ${what} failed: ${_st}; pass a local copy: -D${option}=<file>")
      endif()
      file(RENAME ${_file}.part ${_file})
    endif()
  endif()
  file(SHA256 ${_file} _sha)
  if(NOT _sha STREQUAL sha256)
    message(FATAL_ERROR "lowbit: ${_file} is not ${what} (SHA-256 ${_sha})")
  endif()
  set(${out_var} ${_file} PARENT_SCOPE)
endfunction()

set(_vllm_dir ${CMAKE_BINARY_DIR}/_deps/vllm)
lowbit_fetch_pinned(_vllm_tarball LOWBIT_VLLM_SDIST "${LOWBIT_VLLM_SDIST}" ${LOWBIT_VLLM_SDIST_URL} ${LOWBIT_VLLM_SDIST_SHA256}
                    ${_vllm_dir}/vllm-${LOWBIT_VLLM_VERSION}.tar.gz "vLLM ${LOWBIT_VLLM_VERSION}'s source release (51 MB)")
set(LOWBIT_VLLM_ROOT ${_vllm_dir}/vllm-${LOWBIT_VLLM_VERSION})

# Extracts each path of ARGN (relative to the release's top directory) that is not there yet.
function(lowbit_vllm_extract)
  set(_missing)
  foreach(p ${ARGN})
    if(NOT EXISTS ${LOWBIT_VLLM_ROOT}/${p})
      list(APPEND _missing vllm-${LOWBIT_VLLM_VERSION}/${p})
    endif()
  endforeach()
  if(_missing)
    file(ARCHIVE_EXTRACT INPUT ${_vllm_tarball} DESTINATION ${_vllm_dir} PATTERNS ${_missing})
  endif()
endfunction()
