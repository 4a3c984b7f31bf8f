#!/usr/bin/env python3
"""A synthetic GPTQ (v1, symmetric, G=128, fp16 scales) checkpoint with Qwen3-30B-A3B's MoE
shapes (E=128, H=2048, I=768), written as Hugging Face shards of at most --shard-mb MB with a
model.safetensors.index.json and a config.json, or as one file (--one-file). Used to measure
`lowbit convert` on a checkpoint of realistic size (session 37)."""
import argparse, json, os
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--layers", type=int, default=4)
p.add_argument("--experts", type=int, default=128)
p.add_argument("--hidden", type=int, default=2048)
p.add_argument("--inter", type=int, default=768)
p.add_argument("--group", type=int, default=128)
p.add_argument("--shard-mb", type=int, default=512)
p.add_argument("--one-file", action="store_true")
a = p.parse_args()
rng = np.random.default_rng(1)

def linear(k, n):
    qweight = rng.integers(-2**31, 2**31, size=(k // 8, n), dtype=np.int64).astype(np.int32)
    ng = k // a.group
    qzeros = np.full((ng, n // 8), 0x77777777, dtype=np.int32)  # v1 symmetric: z - 1 = 7
    # scales with 8 significant bits, so they are exact in bf16 as well
    scales = (np.ldexp(rng.integers(128, 256, size=(ng, n)).astype(np.float32), -14)).astype(np.float16)
    g_idx = (np.arange(k) // a.group).astype(np.int32)
    return {"qweight": qweight, "qzeros": qzeros, "scales": scales, "g_idx": g_idx}

def tensors():
    for l in range(a.layers):
        for e in range(a.experts):
            base = f"model.layers.{l}.mlp.experts.{e}"
            for proj, (k, n) in (("gate_proj", (a.hidden, a.inter)), ("up_proj", (a.hidden, a.inter)),
                                 ("down_proj", (a.inter, a.hidden))):
                for name, t in linear(k, n).items():
                    yield f"{base}.{proj}.{name}", t

DT = {np.dtype(np.int32): "I32", np.dtype(np.float16): "F16"}

def write(path, items):
    header, off = {}, 0
    for name, t in items:
        header[name] = {"dtype": DT[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + t.nbytes]}
        off += t.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for _, t in items:
            f.write(np.ascontiguousarray(t).tobytes())

os.makedirs(a.out, exist_ok=True)
cfg = {"architectures": ["Qwen3MoeForCausalLM"],
       "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": a.group, "sym": True,
                               "desc_act": False}}
if a.one_file:
    write(os.path.join(a.out, "model.safetensors"), list(tensors()))
else:
    shards, cur, size = [], [], 0
    for name, t in tensors():
        if cur and size + t.nbytes > a.shard_mb << 20:
            shards.append(cur)
            cur, size = [], 0
        cur.append((name, t))
        size += t.nbytes
    shards.append(cur)
    wm = {}
    for i, items in enumerate(shards):
        fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write(os.path.join(a.out, fn), items)
        for name, _ in items:
            wm[name] = fn
    json.dump({"metadata": {}, "weight_map": wm}, open(os.path.join(a.out, "model.safetensors.index.json"), "w"))
json.dump(cfg, open(os.path.join(a.out, "config.json"), "w"))
