#!/usr/bin/env python3
"""Prepares vLLM's Marlin W4A16 GEMM (csrc/quantization/marlin of a vLLM source release) for a
build without PyTorch, as the side-by-side baseline of `lowbit bench gemm`.

vLLM's files are used unchanged except where they touch PyTorch: the host dispatch
(marlin.cu) and the repack kernel (gptq_marlin_repack.cu) are copied up to their PyTorch
wrappers, which are cut off; the one PyTorch header the kernel templates include (for the
STD_TORCH_CHECK macro of core/scalar_type.hpp) is replaced by a shim that throws
std::runtime_error. The kernel instantiations and the selector that marlin.cu includes are
written here (vLLM writes them with its generate_kernels.py and jinja2), for the activation
types and group sizes asked for, with vLLM's own rule for which thread configurations exist.

The MoE GEMM (csrc/moe/marlin_moe_wna16, vLLM's fused_marlin_moe) the same way: its host
dispatch (ops.cu) up to the PyTorch entry, with its own kernel.h and selector named by path
(both directories hold a kernel.h and include a "kernel_selector.h"), and the instantiations
vLLM writes for it with the same script and rule.

usage: prepare_sources.py VLLM_ROOT OUT_DIR --act bf16,fp16 --groups 128[,64,32,-1]
Writes OUT_DIR/{marlin_host.cu, marlin_repack.cu, kernel_selector.h, marlin_k_*.cu,
moe_host.cu, moe_kernel_selector.h, moe_k_*.cu, torch/headeronly/util/Exception.h, sources.txt}.
"""
import argparse
import os
import sys

THREAD_CONFIGS = [(128, 128, 256), (64, 256, 256), (64, 128, 128), (128, 64, 128)]
M_BLOCKS = [0.5, 1, 2, 3, 4]  # 0.5: 8-row blocks (m_block_size_8)
ACT = {"bf16": "kBFloat16", "fp16": "kFloat16"}

SHIM = """// Replaces <torch/headeronly/util/Exception.h> for vLLM's Marlin sources built without
// PyTorch (bench/baselines/vllm_marlin/prepare_sources.py): a failed check throws.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
namespace lowbit_marlin_shim {
template <class... A>
std::string cat(const A&... a) {
  std::ostringstream o;
  (o << ... << a);
  return o.str();
}
}  // namespace lowbit_marlin_shim
#define STD_TORCH_CHECK(cond, ...)                                                          \\
  do {                                                                                      \\
    if (!(cond))                                                                            \\
      throw std::runtime_error(::lowbit_marlin_shim::cat("vLLM Marlin: check `" #cond "` failed" \\
                                                         __VA_OPT__(, ": ", ) __VA_ARGS__)); \\
  } while (0)
"""

REPACK_LAUNCHER = """
// Written by lowbit's prepare_sources.py: a plain launcher for the kernel above (vLLM's
// PyTorch wrapper, cut off, did the same with a tensor).
namespace marlin {
cudaError_t lowbit_launch_repack4(const uint32_t* in, uint32_t* out, int size_k, int size_n, int blocks,
                                  int max_shared_mem, cudaStream_t stream) {
  cudaError_t e = cudaFuncSetAttribute(gptq_marlin_repack_kernel<repack_threads, 4>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, max_shared_mem);
  if (e != cudaSuccess) return e;
  gptq_marlin_repack_kernel<repack_threads, 4><<<blocks, repack_threads, max_shared_mem, stream>>>(
      in, out, size_k, size_n);
  return cudaGetLastError();
}
}  // namespace marlin
"""


def read(path):
    with open(path) as f:
        return f.read()


def write_if_changed(path, text):
    if os.path.exists(path) and read(path) == text:
        return
    with open(path, "w") as f:
        f.write(text)


def strip_torch(text, cut_at, nth):
    """Drops the PyTorch includes and everything from the nth occurrence of cut_at on."""
    pos = -1
    for _ in range(nth):
        pos = text.find(cut_at, pos + 1)
        if pos < 0:
            sys.exit(f"prepare_sources.py: '{cut_at}' not found {nth} times; not the vLLM release this was written for")
    lines = [
        l for l in text[:pos].splitlines()
        if not (l.startswith("#include <torch/") or l.startswith('#include "torch_utils.h"'))
    ]
    return "\n".join(lines) + "\n"


def configs(groups):
    """vLLM's generate_kernels.py rule: 256-thread blocks only as (128, 128) for <= 16 rows and
    (64, 256) for more; 128-thread blocks in both shapes."""
    for gb in groups:
        for mb in M_BLOCKS:
            for tk, tn, th in THREAD_CONFIGS:
                if th == 256 and mb <= 1 and (tk, tn) != (128, 128):
                    continue
                if th == 256 and mb > 1 and (tk, tn) != (64, 256):
                    continue
                yield dict(threads=th, m=max(mb, 1), n=tn // 16, k=tk // 16,
                           m8="true" if mb == 0.5 else "false", group_blocks=gb)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vllm_root")
    ap.add_argument("out_dir")
    ap.add_argument("--act", default="bf16,fp16")
    ap.add_argument("--groups", default="128")
    a = ap.parse_args()
    src = os.path.join(a.vllm_root, "csrc", "quantization", "marlin")
    out = a.out_dir
    os.makedirs(os.path.join(out, "torch", "headeronly", "util"), exist_ok=True)
    write_if_changed(os.path.join(out, "torch", "headeronly", "util", "Exception.h"), SHIM)

    # marlin.cu: the first marlin_gemm is the stub of the (never compiled here) sm < 75 branch,
    # the second the PyTorch entry after marlin_mm; both sit inside one #if/#else.
    host = strip_torch(read(os.path.join(src, "marlin.cu")), "torch::stable::Tensor marlin_gemm(", 2)
    write_if_changed(os.path.join(out, "marlin_host.cu"), host + "#endif\n")
    repack = strip_torch(read(os.path.join(src, "gptq_marlin_repack.cu")), "#define CALL_IF", 1)
    write_if_changed(os.path.join(out, "marlin_repack.cu"), repack + REPACK_LAUNCHER)

    moe = os.path.join(a.vllm_root, "csrc", "moe", "marlin_moe_wna16")
    moe_host = strip_torch(read(os.path.join(moe, "ops.cu")), "torch::stable::Tensor moe_wna16_marlin_gemm(", 1)
    for old, new in (('#include "kernel.h"', '#include "moe/marlin_moe_wna16/kernel.h"'),
                     ('#include "kernel_selector.h"', '#include "moe_kernel_selector.h"')):
        if moe_host.count(old) != 1:
            sys.exit(f"prepare_sources.py: '{old}' not found once in ops.cu; not the vLLM release this was written for")
        moe_host = moe_host.replace(old, new)
    write_if_changed(os.path.join(out, "moe_host.cu"), moe_host)

    acts = [ACT[x] for x in a.act.split(",")]
    groups = []
    for g in a.groups.split(","):
        g = int(g)
        groups.append(-1 if g == -1 else g // 16)
    files = instantiate(out, acts, groups, "marlin_k", '#include "kernel.h"\n#include "marlin_template.h"',
                        "kernel_selector.h")
    files += instantiate(out, acts, groups, "moe_k",
                         '#include "moe/marlin_moe_wna16/kernel.h"\n#include "moe/marlin_moe_wna16/marlin_template.h"',
                         "moe_kernel_selector.h")
    write_if_changed(os.path.join(out, "sources.txt"),
                     "\n".join(["marlin_host.cu", "marlin_repack.cu", "moe_host.cu"] + files) + "\n")


def instantiate(out, acts, groups, prefix, includes, selector_name):
    """Explicit instantiations of Marlin<...> (one file per activation type, group and row
    block) and the selector chain the host file includes, as generate_kernels.py writes them."""
    selector, files = [], []
    for act in acts:
        for gb in groups:
            by_m = {}
            for c in configs([gb]):
                by_m.setdefault((c["m"], c["m8"]), []).append(c)
            for (m, m8), cs in by_m.items():
                body = []
                for c in cs:
                    args = (f"vllm::{act}.id(), vllm::kU4B8.id(), vllm::{act}.id(), vllm::{act}.id(), "
                            f"{c['threads']}, {c['m']}, {c['n']}, {c['k']}, {c['m8']}, 4, {c['group_blocks']}, false")
                    body.append(f"template __global__ void Marlin<{args}>(MARLIN_KERNEL_PARAMS);")
                    cond = (f"a_type == vllm::{act} && b_type == vllm::kU4B8 && c_type == vllm::{act} && "
                            f"s_type == vllm::{act} && threads == {c['threads']} && thread_m_blocks == {c['m']} && "
                            f"thread_n_blocks == {c['n']} && thread_k_blocks == {c['k']} && "
                            f"m_block_size_8 == {c['m8']} && stages == 4 && group_blocks == {c['group_blocks']} && "
                            f"is_zp_float == false")
                    selector.append(f"{'if' if not selector else 'else if'} ({cond})\n  kernel = "
                                    f"Marlin<{args}>;")
                name = f"{prefix}_{act[1:].lower()}_g{gb if gb > 0 else 'ch'}_m{'8' if m8 == 'true' else m * 16}.cu"
                text = ("// Written by lowbit's prepare_sources.py (what vLLM's generate_kernels.py writes).\n"
                        + includes + "\n\nnamespace MARLIN_NAMESPACE_NAME {\n" + "\n".join(body) + "\n}\n")
                write_if_changed(os.path.join(out, name), text)
                files.append(name)
    write_if_changed(os.path.join(out, selector_name),
                     "// Written by lowbit's prepare_sources.py.\n" + "\n".join(selector) + "\n")
    return files


if __name__ == "__main__":
    main()
