#!/usr/bin/env python3
"""Writes the kernel instantiations of vLLM's Machete GEMM for `lowbit bench gemm`.

Runs vLLM's own generator (csrc/quantization/machete/generate.py, with CUTLASS's
cutlass_library and vLLM's cutlass_extensions on the path) and keeps what vLLM runs for a
symmetric GPTQ / compressed-tensors int4 layer on Hopper: the uint4b8 weight type with group
scales in the activation type, for the activation types asked for, with every schedule of
vLLM's default heuristic (the heuristic itself is generated unchanged into
machete_mm_dispatch.cu). Each schedule gets its own translation unit so that they compile in
parallel. The files land in vLLM's machete/generated/ (their includes are relative to it),
rewritten only where they changed; OUT/sources.txt lists them.

usage: prepare_sources.py VLLM_ROOT CUTLASS_PYTHON_DIR OUT [--act bf16,fp16]
"""
import argparse
import contextlib
import io
import os
import sys
import tempfile


def write_if_changed(path, text):
    if os.path.exists(path) and open(path).read() == text:
        return
    with open(path, "w") as f:
        f.write(text)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("vllm_root")
    p.add_argument("cutlass_python", help="directory holding CUTLASS's cutlass_library package")
    p.add_argument("out")
    p.add_argument("--act", default="bf16,fp16")
    a = p.parse_args()

    machete = os.path.join(a.vllm_root, "csrc", "quantization", "machete")
    sys.path[:0] = [machete, os.path.join(a.vllm_root, "csrc", "cutlass_extensions"), a.cutlass_python]
    try:
        import generate  # vLLM's generator
        from cutlass_library import DataType
        from vllm_cutlass_library_extension import VLLMDataType
    except ImportError as e:
        sys.exit(f"prepare_sources.py: cannot import vLLM's Machete generator ({e}); "
                 "it needs jinja2 and CUTLASS's cutlass_library")

    acts = {"bf16": DataType.bf16, "fp16": DataType.f16}
    wanted = set()
    for name in a.act.split(","):
        if name not in acts:
            sys.exit(f"prepare_sources.py: unknown activation type '{name}' (bf16, fp16)")
        wanted.add(acts[name])

    original = generate.create_sources
    kept = []

    def create_sources(impl_configs, num_impl_files=8):
        chosen = [ic for ic in impl_configs
                  if ic.types.b == VLLMDataType.u4b8 and ic.types.a in wanted
                  and ic.types.b_group_scale == ic.types.a and ic.types.b_group_zeropoint == DataType.void]
        if len(chosen) != len(wanted):
            sys.exit(f"prepare_sources.py: expected {len(wanted)} uint4b8 type configs in generate.py, "
                     f"found {len(chosen)}; not the vLLM release this was written for")
        kept.extend(chosen)
        return original(chosen, num_impl_files=sum(len(ic.schedules) for ic in chosen))

    generate.create_sources = create_sources
    # generate() rewrites dirname(__file__)/generated from scratch; run it in a scratch directory
    # and copy only what changed, so that a reconfigure does not rebuild every CUTLASS kernel.
    with tempfile.TemporaryDirectory() as tmp:
        generate.__file__ = os.path.join(tmp, "generate.py")
        with contextlib.redirect_stdout(io.StringIO()):
            generate.generate()
        fresh = os.path.join(tmp, "generated")
        names = sorted(f for f in os.listdir(fresh) if f.endswith(".cu"))
        gen = os.path.join(machete, "generated")
        os.makedirs(gen, exist_ok=True)
        for f in os.listdir(gen):
            if f not in names:
                os.remove(os.path.join(gen, f))
        for f in names:
            write_if_changed(os.path.join(gen, f), open(os.path.join(fresh, f)).read())
    os.makedirs(a.out, exist_ok=True)
    write_if_changed(os.path.join(a.out, "sources.txt"), "".join(os.path.join(gen, f) + "\n" for f in names))
    print(f"prepare_sources.py: {len(names)} files, {sum(len(ic.schedules) for ic in kept)} kernels "
          f"for {len(kept)} type configs")


if __name__ == "__main__":
    main()
