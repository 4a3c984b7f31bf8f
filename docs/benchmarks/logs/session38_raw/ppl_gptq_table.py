#!/usr/bin/env python3
"""Assembles ppl_gptq.sh's JSON files into docs/benchmarks/ppl_int4_weights.{json,md,png}.

usage: ppl_gptq_table.py RUN_DIR OUT_PREFIX --date D --commit C --machine M [--notes NOTES.md]
"""
import argparse
import json
import os

ROWS = [  # file, quantizer, group, zero points, act-order, sink weight
    ("as_loaded", None, None, None, None, None),
    ("rtn_g64_sym", "RTN", 64, "sym", False, None),
    ("gptq_g64_sym", "GPTQ", 64, "sym", False, 1),
    ("gptq_g64_sym_sink", "GPTQ", 64, "sym", False, 1024),
    ("gptq_g64_sym_sink_ao", "GPTQ", 64, "sym", True, 1024),
    ("rtn_g32_asym", "RTN", 32, "asym", False, None),
    ("gptq_g32_asym", "GPTQ", 32, "asym", False, 1),
    ("gptq_g32_asym_ao", "GPTQ", 32, "asym", True, 1),
    ("gptq_g32_asym_sink", "GPTQ", 32, "asym", False, 1024),
    ("gptq_g32_asym_sink_ao", "GPTQ", 32, "asym", True, 1024),
    ("rtn_pc_asym", "RTN", -1, "asym", False, None),
    ("gptq_pc_asym_sink", "GPTQ", -1, "asym", False, 1024),
    ("gptq_pc_asym_sink_ao", "GPTQ", -1, "asym", True, 1024),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run_dir")
    p.add_argument("out")
    p.add_argument("--date", required=True)
    p.add_argument("--commit", required=True)
    p.add_argument("--machine", required=True)
    p.add_argument("--notes", help="markdown appended below the table")
    a = p.parse_args()
    rows, first = [], None
    for name, quant, group, zp, ao, sink in ROWS:
        path = os.path.join(a.run_dir, name + ".json")
        if not os.path.exists(path):
            continue
        d = json.load(open(path))
        first = first or d
        r = d["results"][0]
        label = "as loaded (Q4_1 file, dequantized to fp32)" if quant is None else \
            f"INT4 {quant}{' act-order' if ao else ''}{' sink x1024' if sink and sink != 1 else ''} " \
            f"G={'pc' if group == -1 else group} {zp}"
        rows.append({"weights": label, "quantizer": quant, "group": group, "zero_points": zp, "act_order": ao,
                     "sink_weight": sink,
                     "ppl": r["ppl"], "mean_nll": r["mean_nll"], "tokens": r["tokens"], "seconds": r["seconds"],
                     "weights_detail": d["weights"], "engine": d["engine"]})
    base = rows[0]["ppl"]
    for r in rows:
        r["change_vs_as_loaded_pct"] = 100.0 * (r["ppl"] / base - 1.0)
    rtn = {(r["group"], r["zero_points"]): r["ppl"] for r in rows if r["quantizer"] == "RTN"}
    for r in rows:
        if r["quantizer"] == "GPTQ" and (r["group"], r["zero_points"]) in rtn:
            r["gap_closed_vs_rtn_pct"] = 100.0 * (rtn[(r["group"], r["zero_points"])] - r["ppl"]) / \
                (rtn[(r["group"], r["zero_points"])] - base)
    rec = {"command": "docs/benchmarks/logs/session38_raw/ppl_gptq.sh (lowbit ppl --device cpu [--weights int4 --wgroup G "
                      "[--wasym] [--wquant gptq [--wact-order]]], 8 windows of 1024 tokens, the CLI's CPU default)",
           "date": a.date, "commit": a.commit, "machine": a.machine, "model": first["model"], "text": first["text"],
           "ctx": first["ctx"], "windows": first["windows"], "tokens_scored": first["tokens_scored"],
           "calibration": "GPTQ: the text's last 8 windows [BOS, 1023 tokens] (8184 text tokens), disjoint from the "
                          "8192 scored; Hessians of the unquantized model's block-linear inputs (one pass), damp 0.01; "
                          "sink weight: each window's first row weighted that many times in the Hessians (1: standard)",
           "rows": rows}
    json.dump(rec, open(a.out + ".json", "w"), indent=1)
    lines = [f"# lowbit ppl --weights int4: what lowbit's INT4 weights cost SmolLM2-135M, GPTQ against round-to-nearest",
             "",
             f"date {a.date}, commit {a.commit}, machine: {a.machine}; {first['engine']}",
             "",
             "| weights | quantizer | G | zero points | act-order | sink weight | ppl | vs as loaded | RTN gap closed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g = "-" if r["group"] is None else ("pc" if r["group"] == -1 else str(r["group"]))
        closed = f"{r['gap_closed_vs_rtn_pct']:.0f}%" if "gap_closed_vs_rtn_pct" in r else "-"
        lines.append(f"| {r['weights']} | {r['quantizer'] or '-'} | {g} | {r['zero_points'] or '-'} | "
                     f"{'-' if r['act_order'] is None else ('yes' if r['act_order'] else 'no')} | "
                     f"{r['sink_weight'] or '-'} | {r['ppl']:.4f} | "
                     f"{r['change_vs_as_loaded_pct']:+.1f}% | {closed} |")
    if a.notes:
        lines += ["", open(a.notes).read().rstrip()]
    open(a.out + ".md", "w").write("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        labels = [r["weights"].replace("INT4 ", "").replace("as loaded (Q4_1 file, dequantized to fp32)", "as loaded")
                  for r in rows]
        colors = ["gray" if r["quantizer"] is None else ("tab:red" if r["quantizer"] == "RTN" else
                  ("tab:orange" if r["sink_weight"] == 1 and not r["act_order"] else
                   ("tab:olive" if r["sink_weight"] == 1 else ("tab:blue" if not r["act_order"] else "tab:green"))))
                  for r in rows]
        fig, ax = plt.subplots(figsize=(9, 4.5))
        ax.barh(range(len(rows)), [r["ppl"] for r in rows], color=colors)
        ax.set_yticks(range(len(rows)), labels)
        ax.invert_yaxis()
        ax.axvline(base, color="gray", lw=0.8, ls="--")
        ax.set_xlabel("WikiText-2 perplexity (8 x 1024 tokens; lower is better)")
        ax.set_title(f"SmolLM2-135M INT4 weights: RTN (red), GPTQ (orange), GPTQ act-order (olive),\n"
                     f"GPTQ sink-weighted (blue), both (green); {a.date}, {a.commit}",
                     fontsize=9)
        fig.tight_layout()
        fig.savefig(a.out + ".png", dpi=110)
    except ImportError:
        print("ppl_gptq_table.py: matplotlib missing, no PNG")


if __name__ == "__main__":
    main()
