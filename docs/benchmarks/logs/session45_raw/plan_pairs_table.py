#!/usr/bin/env python3
"""Session 45: docs/benchmarks/gemm_plan_pairs.{md,json,png} from the session's device results.

The dense decode plan's 8-warp pairs (split-K clusters of 2 of 8-warp blocks, 8-row tiles,
M <= 8) against 4-warp pairs (LOWBIT_INT4_DECODE_WARPS=4 _SPLITS=2), min of three alternated
passes of `lowbit bench gemm --path skinny --reps 5` per side:
  results_h200_round.tgz  (s/, 1x H200, binaries 9fbd75f) Llama-3-8B o / down, 70B o; bf16, fp16
  results_h200_bound.tgz  (b/, 1x H200, binaries 9fbd75f) Llama-3-70B TP shares; bf16, fp16
  results_h100_cand.tgz   (c/, 1x H100, binaries e28139d, whose plan took 4-warp pairs for bf16
                           M <= 4 where 8-warp pairs give each warp <= 2 batches; both sides forced)
                           8b.o at G = 128 / 64 / per-channel and N x K weights around it; bf16
Usage: plan_pairs_table.py <dir with the three tgz> out_prefix
"""
import collections, json, os, re, sys, tarfile

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

src, out = sys.argv[1], sys.argv[2]
SIDES = {"s": ("def", "o_w4s2"), "b": ("def", "o_w4s2"), "c": ("w8s2", "w4s2")}
runs = collections.defaultdict(lambda: collections.defaultdict(list))
meta = {}
for tgz in ("results_h200_round.tgz", "results_h200_bound.tgz", "results_h100_cand.tgz"):
    with tarfile.open(os.path.join(src, tgz)) as t:
        for m in t.getmembers():
            part, name = m.name.split("/", 1)[0], m.name.rsplit("/", 1)[-1]
            if part not in SIDES or not name.endswith(".json") or name in ("gemm.json", "moe.json"):
                continue
            cfg = name[:-5].rsplit("_", 1)[0]
            g = ""
            if part == "c":
                mg = re.match(r"g(-?\d+)(.*)", cfg)
                if mg:
                    g, cfg = mg.group(1), mg.group(2)
            cfg = cfg.replace("_bf16", "").replace("_fp16", "")
            if cfg not in SIDES[part]:
                continue
            d = json.load(t.extractfile(m))
            dev = "H200" if "H200" in d["machine"] else "H100"
            meta[dev] = {k: d[k] for k in ("date", "machine", "copy_gbps")}
            for r in d["rows"]:
                grp = {"-1": "per-channel", "64": "64", "": str(r["group"])}[g]
                key = (dev, r["shape"], r["N"], r["K"], grp, r["dtype"], r["M"])
                runs[key]["pairs8" if cfg == SIDES[part][0] else "pairs4"].append(r["time_us"])
rows = []
for (dev, shape, n, k, grp, dt, m), v in sorted(runs.items()):
    if not v["pairs8"] or not v["pairs4"]:
        continue
    a, b = min(v["pairs8"]), min(v["pairs4"])
    rows.append(dict(device=dev, shape=shape, N=n, K=k, group=grp, dtype=dt, M=m, groups=n // 64,
                     batches_per_warp_pairs8=k / 16 / 16 / 8, pairs8_us=a, pairs4_us=b, ratio=b / a,
                     passes=len(v["pairs8"])))
with open(out + ".json", "w") as f:
    json.dump(dict(meta=meta, source="docs/benchmarks/logs/session45_raw/plan_pairs_table.py", rows=rows), f, indent=1)
with open(out + ".md", "w") as f:
    f.write("# Dense decode, 8-row tiles: 8-warp pairs (the plan) against 4-warp pairs\n\n")
    for dev, mt in sorted(meta.items()):
        f.write(f"- {dev}: {mt['machine']}, {mt['date']}, copy bandwidth {mt['copy_gbps']:.0f} GB/s\n")
    f.write("\nSession 45, `lowbit bench gemm --path skinny --reps 5`, min of 3 alternated passes per side; "
            "ratio = 4-warp pairs' time over 8-warp pairs' (< 1: 4-warp pairs faster). Binaries 9fbd75f (H200), "
            "e28139d (H100; both sides forced). Decision: no rule (docs/int4-kernels-sessions.md, \"Session 45\").\n\n")
    f.write("| device | shape | N x K | G | groups | batches / warp | dtype | M | 8-warp pairs us | 4-warp pairs us | ratio |\n")
    f.write("|---|---|---|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        f.write(f"| {r['device']} | {r['shape']} | {r['N']}x{r['K']} | {r['group']} | {r['groups']} | "
                f"{r['batches_per_warp_pairs8']:g} | {r['dtype']} | {r['M']} | {r['pairs8_us']:.2f} | "
                f"{r['pairs4_us']:.2f} | {r['ratio']:.3f} |\n")
fig, ax = plt.subplots(figsize=(11, 5))
labels = sorted({(r["device"], r["shape"], r["group"], r["dtype"]) for r in rows})
for i, lab in enumerate(labels):
    pts = [r for r in rows if (r["device"], r["shape"], r["group"], r["dtype"]) == lab]
    ax.scatter([i] * len(pts), [r["ratio"] for r in pts], s=[12 + 6 * r["M"] for r in pts],
               color="tab:green" if min(r["ratio"] for r in pts) < 1 else "tab:red", alpha=0.7)
ax.axhline(1.0, color="k", lw=0.8)
ax.set_xticks(range(len(labels)))
ax.set_xticklabels([f"{d} {s} G{g} {t}" for d, s, g, t in labels], rotation=75, fontsize=7)
ax.set_ylabel("time 4-warp / 8-warp pairs\n(marker size: M = 1, 2, 4, 8)")
ax.set_title("Dense decode 8-row tiles: 4-warp pairs vs the plan's 8-warp pairs (session 45)")
fig.tight_layout()
fig.savefig(out + ".png", dpi=110)
print(len(rows), "rows")
