#!/usr/bin/env python3
"""Interoperability of `lowbit convert` with Hugging Face's own safetensors package.

A small GPTQ (v1, symmetric, G = 32) MoE checkpoint is written the way Hugging Face writes
models -- shards by safetensors.numpy.save_file, a model.safetensors.index.json, a config.json
with a quantization_config -- and converted by `lowbit convert --fuse-gate-up --act fp16`.
The output is read back with safetensors.safe_open and checked against an independent numpy
statement of the layouts: GPTQ qweight [K/8, N] words are, little-endian, the canonical
K-packed bytes of each column's row (low nibble = even k); experts are stacked and gate / up
joined along N; fp16 scales [K/G, N] become [E, N, K/G].

usage: hf_safetensors_convert.py LOWBIT_BINARY WORK_DIR
Prints SKIPPED (exit 0) when numpy or safetensors is not installed.
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError as e:  # the README's setup installs both (scripts/requirements.txt)
    print(f"SKIPPED: {e}")
    sys.exit(0)

lowbit, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
ckpt = os.path.join(work, "ckpt")
os.makedirs(ckpt)
rng = np.random.default_rng(3)
E, H, I, G = 3, 128, 64, 32


def gptq_layer(k, n):
    return {
        "qweight": rng.integers(-2**31, 2**31, size=(k // 8, n), dtype=np.int64).astype(np.int32),
        "qzeros": np.full((k // G, n // 8), 0x77777777, dtype=np.int32),  # v1 symmetric: z - 1 = 7
        "scales": (rng.integers(1, 64, size=(k // G, n)) / 256.0).astype(np.float16),
        "g_idx": (np.arange(k) // G).astype(np.int32),
    }


layers = {}
for e in range(E):
    for proj, (k, n) in (("gate_proj", (H, I)), ("up_proj", (H, I)), ("down_proj", (I, H))):
        layers[f"model.layers.0.mlp.experts.{e}.{proj}"] = gptq_layer(k, n)
tensors = {f"{p}.{t}": v for p, d in layers.items() for t, v in d.items()}
names = sorted(tensors)
shards = [names[: len(names) // 2], names[len(names) // 2:]]  # expert 1's tensors straddle the two
weight_map = {}
for i, part in enumerate(shards):
    fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
    save_file({n: tensors[n] for n in part}, os.path.join(ckpt, fn), metadata={"format": "pt"})
    weight_map.update({n: fn for n in part})
with open(os.path.join(ckpt, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
with open(os.path.join(ckpt, "config.json"), "w") as f:
    json.dump({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": G, "sym": True,
                                       "desc_act": False}}, f)

out = os.path.join(work, "packed.safetensors")
r = subprocess.run([lowbit, "convert", "--in", ckpt, "--out", out, "--fuse-gate-up", "--act", "fp16"],
                   capture_output=True, text=True)
print(r.stdout, end="")
if r.returncode != 0:
    print(r.stderr, file=sys.stderr)
    sys.exit(f"FAIL: lowbit convert exited {r.returncode}")


def kpacked(qweight):  # [K/8, N] int32 -> [N, K/2] bytes
    return np.ascontiguousarray(qweight.T).view(np.uint8).reshape(qweight.shape[1], -1)


def expect(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


with safe_open(out, framework="numpy") as f:
    meta = f.metadata()
    expect(meta.get("lowbit.format") == "int4-packed-v1", "lowbit.format metadata")
    w13 = "model.layers.0.mlp.experts.gate_up_proj"
    w2 = "model.layers.0.mlp.experts.down_proj"
    lm = json.loads(meta[w13])
    expect(lm["experts"] == E and lm["n"] == 2 * I and lm["k"] == H and lm["group_size"] == G, f"{w13} metadata {lm}")
    got = f.get_tensor(w13 + ".qweight_kpacked")
    want = np.stack([np.concatenate([kpacked(layers[f"model.layers.0.mlp.experts.{e}.{p}"]["qweight"])
                                     for p in ("gate_proj", "up_proj")]) for e in range(E)])
    expect(got.dtype == np.uint8 and got.shape == (E, 2 * I, H // 2), f"w13 K-packed shape {got.shape}")
    expect(np.array_equal(got, want), "w13 K-packed bytes")
    got2 = f.get_tensor(w2 + ".qweight_kpacked")
    want2 = np.stack([kpacked(layers[f"model.layers.0.mlp.experts.{e}.down_proj"]["qweight"]) for e in range(E)])
    expect(np.array_equal(got2, want2), "w2 K-packed bytes")
    sc = f.get_tensor(w13 + ".scales_kpacked")
    want_sc = np.stack([np.concatenate([layers[f"model.layers.0.mlp.experts.{e}.{p}"]["scales"].T
                                        for p in ("gate_proj", "up_proj")]) for e in range(E)])
    expect(sc.dtype == np.float16 and np.array_equal(sc, want_sc), "w13 scales")
    expect(w13 + ".zeros_kpacked" not in f.keys(), "a symmetric layer has no zeros")
print(f"OK: {len(names)} tensors in {len(shards)} Hugging Face shards -> {w13} [{E}, {2 * I}, {H}] and {w2}, "
      "read back by safetensors", sys.modules["safetensors"].__version__)

# Act-order (desc_act) experts, `--fold-act-order --fuse-gate-up --tp-size 2 --tp-rank all`: each
# expert's MLP, y = down(silu(gate x) * up x), computed in fp64 from the GPTQ tensors as the
# checkpoint states them (w[n, k] = (q[k, n] - 8) * scales[g_idx[k], n]) equals the sum over the two
# ranks' files of the same MLP computed from lowbit's layout (w13's k_perm gathers x; down has no
# k_perm: its permutation went into w13's columns; its rows are the rank's K range, its groups the
# file's group_size).
ckpt2 = os.path.join(work, "ckpt_act_order")
os.makedirs(ckpt2)
layers2 = {}
for e in range(E):
    gi_h = rng.permutation(np.arange(H) // G).astype(np.int32)  # gate and up read one x: one order
    for proj, (k, n) in (("gate_proj", (H, I)), ("up_proj", (H, I)), ("down_proj", (I, H))):
        layer = gptq_layer(k, n)
        layer["g_idx"] = gi_h if proj != "down_proj" else rng.permutation(np.arange(I) // G).astype(np.int32)
        layers2[f"model.layers.0.mlp.experts.{e}.{proj}"] = layer
save_file({f"{p}.{t}": v for p, d in layers2.items() for t, v in d.items()}, os.path.join(ckpt2, "model.safetensors"),
          metadata={"format": "pt"})
with open(os.path.join(ckpt2, "config.json"), "w") as f:
    json.dump({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": G, "sym": True,
                                       "desc_act": True}}, f)
pattern = os.path.join(work, "fold_rank{rank}.safetensors")
r = subprocess.run([lowbit, "convert", "--in", ckpt2, "--out", pattern, "--fold-act-order", "--fuse-gate-up", "--act",
                    "fp16", "--tp-size", "2", "--tp-rank", "all"], capture_output=True, text=True)
print(r.stdout, end="")
if r.returncode != 0:
    print(r.stderr, file=sys.stderr)
    sys.exit(f"FAIL: lowbit convert --fold-act-order exited {r.returncode}")


def gptq_dense(layer):  # [N, K] fp64 from qweight [K/8, N], scales [K/G, N], g_idx [K]
    qw = layer["qweight"].view(np.uint32)
    k = qw.shape[0] * 8
    q = np.stack([(qw[kk // 8] >> (4 * (kk % 8))) & 15 for kk in range(k)]).astype(np.float64)  # [K, N]
    return ((q - 8) * layer["scales"].astype(np.float64)[layer["g_idx"]]).T


def lowbit_dense(f, prefix, e):  # [N, K] fp64 in stored K order from the K-packed layout
    b = f.get_tensor(prefix + ".qweight_kpacked")[e]  # [N, K/2]
    q = np.stack([b & 15, b >> 4], axis=-1).reshape(b.shape[0], -1).astype(np.float64)
    g = json.loads(f.metadata()[prefix])["group_size"]
    return (q - 8) * np.repeat(f.get_tensor(prefix + ".scales_kpacked")[e].astype(np.float64), g, axis=1)


def silu(v):
    return v / (1.0 + np.exp(-v))


x = rng.uniform(-1, 1, size=(5, H))
files = [safe_open(pattern.replace("{rank}", str(rank)), framework="numpy") for rank in range(2)]
for e in range(E):
    c = {p: gptq_dense(layers2[f"model.layers.0.mlp.experts.{e}.{p}"]) for p in ("gate_proj", "up_proj", "down_proj")}
    want = (silu(x @ c["gate_proj"].T) * (x @ c["up_proj"].T)) @ c["down_proj"].T
    got = np.zeros_like(want)
    for f in files:
        perm = f.get_tensor(w13 + ".k_perm")[e]
        h = x[:, perm] @ lowbit_dense(f, w13, e).T
        expect(w2 + ".k_perm" not in f.keys(), "the folded down layer has no k_perm")
        got += (silu(h[:, : I // 2]) * h[:, I // 2:]) @ lowbit_dense(f, w2, e).T
    err = np.abs(got - want).max() / np.abs(want).max()
    expect(err < 1e-12, f"expert {e}: folded TP ranks differ from the checkpoint's MLP by {err:.3g} (relative)")
meta2 = json.loads(files[0].metadata()[w2])
expect(meta2["act_order"] is False and meta2["act_order_folded_into"] == [w13] and meta2["tp_split"] == "rows",
       f"folded down metadata {meta2}")
print(f"OK: act-order experts folded and split over 2 TP ranks: the ranks' MLP outputs add up to the checkpoint's "
      f"(fp64, {E} experts)")
shutil.rmtree(work, ignore_errors=True)
