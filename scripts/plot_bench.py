#!/usr/bin/env python3
"""Draw a benchmark JSON (written by `lowbit bench ...`) as a PNG.

The JSON carries {"rows": [...], "plot": {"x", "y", "series", "logx", "logy", "title",
"facet" (optional field: one panel per value)}}; every row is a dict of fields.
"""
import json
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    doc = json.load(open(src))
    spec = doc.get("plot", {})
    rows = doc["rows"]
    x, y, series = spec["x"], spec["y"], spec.get("series")
    facet = spec.get("facet")
    facets = sorted({r.get(facet) for r in rows}, key=str) if facet else [None]
    fig, axes = plt.subplots(1, len(facets), figsize=(6.5 * len(facets), 4.8), squeeze=False)
    for ax, fv in zip(axes[0], facets):
        sub = [r for r in rows if facet is None or r.get(facet) == fv]
        names = []
        for r in sub:
            s = r.get(series, "") if series else ""
            if s not in names:
                names.append(s)
        for s in names:
            pts = sorted((r[x], r[y]) for r in sub if (r.get(series, "") if series else "") == s
                         and r.get(y) is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=str(s))
        if spec.get("logx"):
            ax.set_xscale("log", base=2)
        if spec.get("logy"):
            ax.set_yscale("log")
        ax.set_xlabel(spec.get("xlabel", x))
        ax.set_ylabel(spec.get("ylabel", y))
        ax.set_title((spec.get("title", "") + (f" — {facet}={fv}" if facet else "")).strip())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    # Wrapped to the figure's width (a long command or commit note was cut at both edges).
    width = int(16 * 6.5 * len(facets))
    lines = [doc.get("command", ""), f"{doc.get('date', '')}  commit {doc.get('commit', '')}  {doc.get('machine', '')}"]
    sub = "\n".join(textwrap.fill(line, width) for line in lines)
    fig.suptitle(sub, fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    # Saved again in a 128-colour palette: the line plots look the same and the file is ~3x
    # smaller (the benchmark records are kept in the repository). Pillow is matplotlib's own
    # dependency; without it the full-colour file stays.
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(dst) as im:
        small = im.convert("RGB").quantize(colors=128)
    small.save(dst, optimize=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
