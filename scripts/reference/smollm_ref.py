#!/usr/bin/env python3
"""Independent numpy reference of lowbit's CPU Llama engine (plain fp32 forward) for checking
`lowbit ppl`: reads the same GGUF with the `gguf` package (its own Q4_1/Q8_0 dequantization),
tokenizes with Hugging Face `tokenizers` (scripts/reference/hf_tokenizer_from_gguf.py: BPE from the
GGUF vocabulary/merges + SmolLM2's pre-tokenizer), and scores the same windows:
[BOS, t0..t_{ctx-2}] -> targets t0..t_{ctx-1}, consecutive non-overlapping, ppl = exp(mean NLL).

  pip install gguf tokenizers numpy
  python3 scripts/reference/smollm_ref.py --ctx 1024 --windows 8 [--ids lowbit_ids.txt]

The model math follows the GGUF conventions: weights ne=[in, out] (row-major [out, in]),
RoPE on adjacent pairs (2i, 2i+1) (llama.cpp's "normal" mode; the converter permuted the
HF Q/K rows for it), GQA with query head h reading KV head h // (n_head / n_kv).
"""
import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402
import hf_tokenizer_from_gguf  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def field(r, key):
    return r.fields[key].contents()


def load(path):
    r = gguf.GGUFReader(path)
    cfg = dict(
        n_layers=int(field(r, "llama.block_count")), hidden=int(field(r, "llama.embedding_length")),
        n_heads=int(field(r, "llama.attention.head_count")), n_kv=int(field(r, "llama.attention.head_count_kv")),
        eps=float(field(r, "llama.attention.layer_norm_rms_epsilon")), theta=float(field(r, "llama.rope.freq_base")),
        bos=int(field(r, "tokenizer.ggml.bos_token_id")))
    w = {}
    for t in r.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w[t.name] = a.reshape([int(x) for x in reversed(t.shape)]) if a.ndim > 1 or len(t.shape) > 1 else a
    return r, cfg, w


def rmsnorm(x, g, eps):
    return (x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps)).astype(np.float32) * g


def rope(x, theta):  # x [T, n, hd], adjacent pairs
    T, n, hd = x.shape
    inv = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    c, s = np.cos(ang).astype(np.float32)[:, None, :], np.sin(ang).astype(np.float32)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


def forward(cfg, w, ids):
    T, H, nh, nkv = len(ids), cfg["hidden"], cfg["n_heads"], cfg["n_kv"]
    hd = H // nh
    x = w["token_embd.weight"][ids].copy()
    mask = np.triu(np.full((T, T), -np.inf, dtype=np.float32), 1)
    for l in range(cfg["n_layers"]):
        p = "blk.%d." % l
        xn = rmsnorm(x, w[p + "attn_norm.weight"], cfg["eps"])
        q = rope((xn @ w[p + "attn_q.weight"].T).reshape(T, nh, hd), cfg["theta"])
        k = rope((xn @ w[p + "attn_k.weight"].T).reshape(T, nkv, hd), cfg["theta"])
        v = (xn @ w[p + "attn_v.weight"].T).reshape(T, nkv, hd)
        att = np.empty((T, nh, hd), dtype=np.float32)
        for h in range(nh):
            g = h // (nh // nkv)
            s = (q[:, h] @ k[:, g].T) / np.float32(math.sqrt(hd)) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            att[:, h] = (s / s.sum(-1, keepdims=True)) @ v[:, g]
        x = x + att.reshape(T, H) @ w[p + "attn_output.weight"].T
        xn = rmsnorm(x, w[p + "ffn_norm.weight"], cfg["eps"])
        gt = xn @ w[p + "ffn_gate.weight"].T
        up = xn @ w[p + "ffn_up.weight"].T
        x = x + (gt / (1 + np.exp(-gt)) * up) @ w[p + "ffn_down.weight"].T
    xn = rmsnorm(x, w["output_norm.weight"], cfg["eps"])
    out = w.get("output.weight", w["token_embd.weight"])
    return xn @ out.T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--text", default=os.path.join(os.environ.get("LOWBIT_DATA_DIR", os.path.join(ROOT, "..", "shared", "data")),
                                                   "wikitext-2-raw", "wiki.test.raw"))
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--ids", help="token ids dumped by lowbit (one per line) to compare with")
    a = ap.parse_args()
    t0 = time.time()
    r, cfg, w = load(a.model)
    tok = hf_tokenizer_from_gguf.build(r)
    text = open(a.text, encoding="utf-8").read()
    ids = tok.encode(text).ids
    print("loaded + tokenized in %.1f s: %d tokens" % (time.time() - t0, len(ids)))
    if a.ids:
        other = [int(x) for x in open(a.ids)]
        print("token ids identical to %s: %s" % (a.ids, other == ids))
    nll, n = 0.0, 0
    t0 = time.time()
    for wi in range(min(a.windows, len(ids) // a.ctx)):
        tgt = np.array(ids[wi * a.ctx:(wi + 1) * a.ctx])
        inp = np.concatenate([[cfg["bos"]], tgt[:-1]])
        lg = forward(cfg, w, inp).astype(np.float64)
        mx = lg.max(-1)
        lse = np.log(np.exp(lg - mx[:, None]).sum(-1)) + mx
        nll += float((lse - lg[np.arange(len(tgt)), tgt]).sum())
        n += len(tgt)
        print("window %d: ppl so far %.4f (%.1f s)" % (wi + 1, math.exp(nll / n), time.time() - t0), flush=True)
    print("numpy reference: ctx %d, %d windows, %d tokens, ppl %.4f" % (a.ctx, n // a.ctx, n, math.exp(nll / n)))


if __name__ == "__main__":
    main()
