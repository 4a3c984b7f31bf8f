#!/usr/bin/env python3
"""Session 44: docs/benchmarks/gemm_plan_qkv.{md,json,png} from results_h200_final.tgz (call 12).

8b.qkv under the decode plan of 30eaecf (bf16: 8-warp blocks alone at M <= 8) against the same
binary forced back to 8-warp pairs (LOWBIT_INT4_DECODE_WARPS=8 _SPLITS=2), bf16 and fp16,
M = 1 / 8 / 16, three alternated passes of `lowbit bench gemm --path skinny --reps 5`; min of the
three per side. Usage: plan_qkv_table.py results_h200_final.tgz out_prefix
"""
import collections, io, json, sys, tarfile

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

tgz, out = sys.argv[1], sys.argv[2]
runs = collections.defaultdict(lambda: collections.defaultdict(list))
meta = {}
with tarfile.open(tgz) as t:
    for m in t.getmembers():
        name = m.name.rsplit("/", 1)[-1]
        if not name.endswith(".json") or not name.startswith(("plan_", "pairs_")):
            continue
        d = json.load(t.extractfile(m))
        kind, dt, _ = name[:-5].split("_")
        meta = {k: d[k] for k in ("date", "commit", "machine", "copy_gbps")}
        for r in d["rows"]:
            runs[(dt, r["M"])][kind].append((r["time_us"], r["pct_floor"]))
        commit = t.extractfile(t.getmember("f/commit.txt")).read().decode().strip()
rows = []
for (dt, m), v in sorted(runs.items()):
    p, q = min(v["plan"]), min(v["pairs"])
    rows.append({"shape": "llama3-8b.qkv", "dtype": dt, "M": m, "plan_us": p[0], "pairs_us": q[0],
                 "ratio": p[0] / q[0], "plan_pct_floor": p[1], "pairs_pct_floor": q[1],
                 "plan_runs_us": [x[0] for x in v["plan"]], "pairs_runs_us": [x[0] for x in v["pairs"]]})
doc = {"what": __doc__.strip().splitlines()[0], "binaries": commit, **meta, "rows": rows}
json.dump(doc, open(out + ".json", "w"), indent=1)
with open(out + ".md", "w") as f:
    f.write("# 8b.qkv: the decode plan (bf16: 8-warp blocks alone at M <= 8) against 8-warp pairs\n\n")
    f.write(f"date {meta['date']}, binaries {commit} (header of the device checkout: {meta['commit']}), "
            f"machine: {meta['machine']}, copy bandwidth {meta['copy_gbps']:.0f} GB/s; min of three alternated "
            "passes, `--path skinny --reps 5`; pairs = the same binary with LOWBIT_INT4_DECODE_WARPS=8 "
            "LOWBIT_INT4_DECODE_SPLITS=2\n\n")
    f.write("| dtype | M | plan_us | pairs_us | plan / pairs | plan %floor | pairs %floor | plan runs | pairs runs |\n")
    f.write("|---|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        f.write(f"| {r['dtype']} | {r['M']} | {r['plan_us']:.2f} | {r['pairs_us']:.2f} | {r['ratio']:.3f} | "
                f"{r['plan_pct_floor']:.1f} | {r['pairs_pct_floor']:.1f} | "
                f"{' / '.join(f'{x:.2f}' for x in r['plan_runs_us'])} | {' / '.join(f'{x:.2f}' for x in r['pairs_runs_us'])} |\n")
fig, ax = plt.subplots(figsize=(6, 3.5))
for dt, mk in (("bf16", "o"), ("fp16", "s")):
    rs = [r for r in rows if r["dtype"] == dt]
    ax.plot([r["M"] for r in rs], [r["ratio"] for r in rs], marker=mk, label=dt)
ax.axhline(1.0, color="gray", lw=0.8)
ax.set_xlabel("M"); ax.set_ylabel("plan time / pairs time"); ax.set_xticks([1, 8, 16])
ax.set_title(f"8b.qkv decode plan vs 8-warp pairs ({meta['machine'].split(' (')[0]})", fontsize=9)
ax.legend(); fig.tight_layout(); fig.savefig(out + ".png", dpi=110)
