#!/usr/bin/env python3
"""lowbit's dense W4A16 GEMM next to PyTorch's own int4 weight-only GEMM, in one run.

The other implementation is `torch._weight_int4pack_mm` (the "tinygemm" kernel behind
torchao's int4 weight-only quantization and gpt-fast): a W4A16 GEMM that users already run,
shipped inside PyTorch, so it needs nothing beyond the torch on the device. Both sides see the
same shapes, M, group size (bf16 activations, G = 128) and timing method as `lowbit bench
gemm`: one CUDA graph per (shape, M) holding `copies` calls on rotated weight copies (>= 256
MiB of weights per graph, at most 16 copies) so that every call streams its weights from HBM;
median over `--reps` replays of the per-call time.

The lowbit figures come from `lowbit bench gemm` run by this script first (same shapes and M;
its own cuBLAS bf16 baseline and memory floor are kept in the rows). Before timing a shape the
torch kernel's output is checked against x @ W^T of its own dequantized weights
(W = (q - 8) * s + z per group, tinygemm's convention) in fp32: a baseline that does not
compute the product is reported as an error, not timed.

Usage (on a GPU machine with torch):
  python3 bench/int4/compare_torch_int4.py --lowbit build/bin/lowbit --out docs/benchmarks/gemm_vs_torch
Writes OUT.json (rows + plot spec for scripts/plot_bench.py) and OUT.md.
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys

SHAPES = {  # (N, K) as in bench/int4/bench_gemm.cu
    "llama3-8b.qkv": (6144, 4096),
    "llama3-8b.o": (4096, 4096),
    "llama3-8b.gate_up": (28672, 4096),
    "llama3-8b.down": (4096, 14336),
    "llama3-70b.qkv": (10240, 8192),
    "llama3-70b.o": (8192, 8192),
    "llama3-70b.gate_up": (57344, 8192),
    "llama3-70b.down": (8192, 28672),
}


def rotation_copies(bytes_per_call, max_copies):
    return max(1, min(max_copies, math.ceil((256 << 20) / max(1, bytes_per_call))))


def time_graph(torch, calls, reps):
    """Median per-call microseconds of a CUDA graph that runs every callable in `calls` once."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for c in calls:  # warm-up outside the graph (lazy init, workspace)
            c()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    for _ in range(2):
        g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    us = []
    for _ in range(reps):
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        us.append(1000.0 * a.elapsed_time(b) / len(calls))
    us.sort()
    del g
    return us[len(us) // 2]


def pack_for_tinygemm(torch, q, inner_k_tiles, even_high):
    """q: int32 [N, K] in 0..15 -> tinygemm's packed tensor. Newer torch takes two nibbles per
    byte ([N, K/2] uint8; which nibble holds the even k is tried both ways and settled by the
    check in main), older torch the int32 values."""
    try:
        lo, hi = (q[:, 1::2], q[:, ::2]) if even_high else (q[:, ::2], q[:, 1::2])
        return torch._convert_weight_to_int4pack(((hi << 4) | lo).to(torch.uint8), inner_k_tiles)
    except RuntimeError:
        return torch._convert_weight_to_int4pack(q, inner_k_tiles)


def run_lowbit(binary, shapes, ms, reps, out_prefix):
    cmd = [binary, "bench", "gemm", "--m", ",".join(map(str, ms)), "--shapes", ",".join(shapes),
           "--reps", str(reps), "--out", out_prefix]
    print("# " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    with open(out_prefix + ".json") as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lowbit", required=True, help="path to the lowbit CLI")
    ap.add_argument("--m", default="1,8,16,32,128,512")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--inner-k-tiles", type=int, default=8)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", required=True, help="output prefix (OUT.json, OUT.md)")
    a = ap.parse_args()
    ms = [int(v) for v in a.m.split(",")]
    shapes = a.shapes.split(",")
    for s in shapes:
        if s not in SHAPES:
            sys.exit(f"compare_torch_int4: unknown shape {s!r} (known: {', '.join(SHAPES)})")

    lb = run_lowbit(a.lowbit, shapes, ms, a.reps, a.out + "_lowbit")
    lrows = {(r["shape"], r["M"]): r for r in lb["rows"]}

    import torch  # after the lowbit run: the two never share the GPU's memory

    dev = torch.device("cuda")
    torch.manual_seed(1234)
    G = a.group
    rows = []
    errors = []
    for name in shapes:
        N, K = SHAPES[name]
        q = torch.randint(0, 16, (N, K), dtype=torch.int32, device=dev)
        scales = (torch.rand(K // G, N, device=dev) * 0.02 + 0.005).to(torch.bfloat16)
        zeros = ((torch.rand(K // G, N, device=dev) - 0.5) * 0.01).to(torch.bfloat16)
        sz = torch.stack([scales, zeros], dim=2).contiguous()  # [K/G, N, 2]
        # Check the baseline on M = 3 rows of non-zero data before timing it.
        x3 = torch.randn(3, K, device=dev).to(torch.bfloat16)
        s_full = scales.float().t().repeat_interleave(G, dim=1)  # [N, K]
        z_full = zeros.float().t().repeat_interleave(G, dim=1)
        ref = x3.float() @ ((q.float() - 8.0) * s_full + z_full).t()
        del s_full, z_full
        rel, wq = float("inf"), None
        for even_high in (True, False):
            cand = pack_for_tinygemm(torch, q, a.inner_k_tiles, even_high)
            got = torch._weight_int4pack_mm(x3, cand, G, sz).float()
            r_ = ((got - ref).norm() / ref.norm()).item()
            if r_ < rel:
                rel, wq = r_, cand
        if not rel < 2e-2:
            errors.append(f"{name}: torch int4 output differs from its own dequantized product (rel {rel:.3g})")
            continue
        wbytes = wq.numel() * wq.element_size() + sz.numel() * sz.element_size()
        copies = rotation_copies(wbytes, 16)
        wqs = [wq] + [wq.clone() for _ in range(copies - 1)]
        szs = [sz] + [sz.clone() for _ in range(copies - 1)]
        del q
        for m in ms:
            x = torch.randn(m, K, device=dev).to(torch.bfloat16)
            calls = [(lambda i=i: torch._weight_int4pack_mm(x, wqs[i], G, szs[i])) for i in range(copies)]
            t_tiny = time_graph(torch, calls, a.reps)
            r = lrows.get((name, m))
            row = {"shape": name, "M": m, "N": N, "K": K, "group": G, "dtype": "bf16",
                   "torch_int4_us": t_tiny,
                   "torch_int4_tbps": wbytes / (t_tiny * 1e-6) / 1e12,
                   "torch_int4_tflops": 2.0 * m * N * K / (t_tiny * 1e-6) / 1e12}
            if r is not None:
                row.update({"lowbit_us": r["time_us"], "lowbit_runs_as": r.get("runs_as", r.get("path")),
                            "lowbit_pct_floor": r["pct_floor"], "cublas_us": r["cublas_us"],
                            "lowbit_wrong": r["wrong"],
                            "speedup_vs_torch_int4": t_tiny / r["time_us"],
                            "torch_int4_vs_cublas": r["cublas_us"] / t_tiny})
            rows.append(row)
            print(f"{name:20s} M={m:5d} torch int4 {t_tiny:9.1f} us"
                  + (f"  lowbit {r['time_us']:9.1f} us ({t_tiny / r['time_us']:.2f}x)" if r else ""), flush=True)
        del wqs, szs
        torch.cuda.empty_cache()

    doc = {"command": " ".join(sys.argv), "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": lb.get("commit"), "machine": lb.get("machine"), "torch": torch.__version__,
           "torch_cuda": torch.version.cuda, "baseline": "torch._weight_int4pack_mm (tinygemm), inner_k_tiles="
           + str(a.inner_k_tiles), "copy_gbps": lb.get("copy_gbps"), "errors": errors, "rows": rows,
           "plot": {"x": "M", "y": "speedup_vs_torch_int4", "series": "shape", "logx": True, "logy": True,
                    "title": "lowbit int4 GEMM speedup over torch int4 (tinygemm), bf16 G=128"}}
    with open(a.out + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    with open(a.out + ".md", "w") as f:
        f.write(f"# {doc['command']}\n\ndate {doc['date']}, lowbit commit {doc['commit']}, machine: {doc['machine']}, "
                f"torch {doc['torch']} (CUDA {doc['torch_cuda']}); baseline {doc['baseline']}; CUDA-graph medians, "
                f"rotated weight copies\n\n")
        f.write("| shape | M | N | K | lowbit_us | runs | %floor | torch_int4_us | cublas_us | x torch int4 | "
                "torch int4 x cublas | #wrong |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            def g(k, fmt="{:.1f}"):
                return fmt.format(r[k]) if k in r else "-"
            f.write(f"| {r['shape']} | {r['M']} | {r['N']} | {r['K']} | {g('lowbit_us')} | {r.get('lowbit_runs_as', '-')} | "
                    f"{g('lowbit_pct_floor')} | {g('torch_int4_us')} | {g('cublas_us')} | "
                    f"{g('speedup_vs_torch_int4', '{:.2f}')} | {g('torch_int4_vs_cublas', '{:.2f}')} | "
                    f"{r.get('lowbit_wrong', '-')} |\n")
        for e in errors:
            f.write(f"\nerror: {e}\n")
    print(f"# wrote {a.out}.json, {a.out}.md; errors: {len(errors)}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
