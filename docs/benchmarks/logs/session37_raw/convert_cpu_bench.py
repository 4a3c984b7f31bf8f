#!/usr/bin/env python3
"""Host-side INT4 conversion and repack, this commit against a baseline build, in one run.

usage: convert_cpu_bench.py NEW_BUILD_DIR BASE_BUILD_DIR BASE_COMMIT SHARDS_DIR ONE_FILE_DIR OUT_PREFIX
  *_BUILD_DIR: lowbit build trees (bin/lowbit and the static libraries). The baseline converter
  reads one file only, so it gets ONE_FILE_DIR/model.safetensors (+ config.json); this commit's
  gets the sharded SHARDS_DIR (the same tensors, both written by make_gptq_moe_shards.py).
Writes OUT_PREFIX.md / .json / .png: wall / user / sys time (/usr/bin/time), peak anonymous and
file-backed memory (a second run, sampled from /proc every 20 ms), and the repack timings.
"""
import datetime, json, os, platform, subprocess, sys, tempfile, time

new_b, base_b, base_commit, shards, one, out = sys.argv[1:7]
here = os.path.dirname(os.path.abspath(__file__))
git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True, cwd=here).stdout.strip()
commit = git("rev-parse", "--short=12", "HEAD")
dirty = git("status", "--porcelain", "--untracked-files=no")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
machine = f"{cpu}, {os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') >> 30} GiB"


def peak_memory(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    anon = filepk = 0
    while p.poll() is None:
        try:
            for l in open(f"/proc/{p.pid}/status"):
                if l.startswith("RssAnon:"): anon = max(anon, int(l.split()[1]))
                if l.startswith("RssFile:"): filepk = max(filepk, int(l.split()[1]))
        except OSError:
            pass
        time.sleep(0.02)
    if p.returncode != 0: sys.exit(f"{cmd} failed")
    return anon / 1024, filepk / 1024


def timed(cmd):
    r = subprocess.run(["/usr/bin/time", "-f", "%e %U %S"] + cmd, capture_output=True, text=True)
    if r.returncode != 0: sys.exit(f"{cmd} failed: {r.stderr[-400:]}")
    return tuple(map(float, r.stderr.strip().splitlines()[-1].split()))


tmp = tempfile.mkdtemp()
o_path = os.path.join(tmp, "o.safetensors")
rows = []
for name, exe, args in (("baseline " + base_commit, os.path.join(base_b, "bin/lowbit"),
                         ["--in", os.path.join(one, "model.safetensors"), "--config", os.path.join(one, "config.json")]),
                        ("this commit", os.path.join(new_b, "bin/lowbit"), ["--in", shards])):
    for rep in (1, 2):
        cmd = [exe, "convert"] + args + ["--out", o_path]
        wall, user, sysc = timed(cmd)
        anon, filepk = peak_memory(cmd)
        rows.append({"what": "convert", "build": name, "run": rep, "wall_s": wall, "user_s": user, "sys_s": sysc,
                     "peak_anon_mb": anon, "peak_file_mb": filepk})
        os.remove(o_path)

# TP 4 (--fuse-gate-up --no-npacked): every rank's file in one pass against one run per rank.
new_exe = os.path.join(new_b, "bin/lowbit")
tp_args = ["convert", "--in", shards, "--fuse-gate-up", "--no-npacked", "--tp-size", "4"]
for rep in (1, 2):
    one_pass = timed([new_exe] + tp_args + ["--tp-rank", "all", "--out", os.path.join(tmp, "r{rank}.safetensors")])[0]
    per_rank = sum(timed([new_exe] + tp_args + ["--tp-rank", str(r), "--out", os.path.join(tmp, f"s{r}.safetensors")])[0]
                   for r in range(4))
    rows.append({"what": "tp4", "build": "this commit", "run": rep, "all_ranks_one_pass_s": one_pass,
                 "four_runs_s": per_rank})
    for f in os.listdir(tmp):
        if f.endswith(".safetensors"): os.remove(os.path.join(tmp, f))

for name, b in (("baseline " + base_commit, base_b), ("this commit", new_b)):
    exe = os.path.join(tmp, "rp_" + name.split()[0])
    subprocess.run(["g++", "-O2", "-std=c++20", "-I", os.path.join(here, "../../../../include"),
                    os.path.join(here, "repack_timing.cpp"), os.path.join(b, "liblowbit_int4.a"),
                    os.path.join(b, "liblowbit_common.a"), "-lpthread", "-o", exe], check=True)
    for threads in ((None,) if name.startswith("baseline") else ("1", None)):
        env = dict(os.environ)
        if threads: env["LOWBIT_HOST_THREADS"] = threads
        for rep in (1, 2):
            o = subprocess.run([exe], capture_output=True, text=True, env=env, check=True).stdout
            # "ok: ...: repack_for_kernels X ms, repack_to_npacked Y ms, 128x gptq_to_kpacked Z ms"
            nums = [float(t.split()[-2]) for t in o.strip().rsplit(":", 1)[1].split(",")]
            rows.append({"what": "repack", "build": name,
                         "host_threads": threads or ("serial" if name.startswith("baseline") else f"default ({os.cpu_count()})"),
                         "run": rep, "repack_for_kernels_ms": nums[0], "repack_to_npacked_ms": nums[1],
                         "gptq_to_kpacked_x128_ms": nums[2]})

date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
head = (f"date {date}, commit {commit}{'-dirty' if dirty else ''}, baseline {base_commit}, machine: {machine} "
        f"(no GPU; {platform.system()} {platform.release()})")
inp = "synthetic GPTQ v1 sym G = 128 checkpoint, Qwen3-30B-A3B MoE shapes, 4 layers x 128 experts x gate/up/down, 1.27 GB"
json.dump({"date": date, "commit": commit, "baseline": base_commit, "machine": machine, "input": inp, "rows": rows},
          open(out + ".json", "w"), indent=1)
md = ["# lowbit convert and the load-time repacks on the host (session 37)", "", head, "",
      f"Input: {inp} (`logs/session37_raw/make_gptq_moe_shards.py`). The baseline converter reads it as one file, "
      "this commit's as 3 shards with an index; both write K-packed + N-packed (the default). Peak memory sampled "
      "from /proc every 20 ms; file-backed pages are the mapped shards (clean, reclaimable page cache). Driver: "
      "`logs/session37_raw/convert_cpu_bench.py`.", "",
      "| build | run | wall s | user s | sys s | peak anon MB | peak file-backed MB |", "|---|---|---|---|---|---|---|"]
md += [f"| {r['build']} | {r['run']} | {r['wall_s']:.2f} | {r['user_s']:.2f} | {r['sys_s']:.2f} | "
       f"{r['peak_anon_mb']:.0f} | {r['peak_file_mb']:.0f} |" for r in rows if r["what"] == "convert"]
md += ["", "TP 4 (`--fuse-gate-up --no-npacked --tp-size 4`), this commit: `--tp-rank all` against four runs:", "",
       "| run | all ranks, one pass s | four runs s |", "|---|---|---|"]
md += [f"| {r['run']} | {r['all_ranks_one_pass_s']:.2f} | {r['four_runs_s']:.2f} |" for r in rows if r["what"] == "tp4"]
md += ["", "One Qwen3-30B-A3B w13 (128 experts, 1536 x 2048, 201 MB int4; `logs/session37_raw/repack_timing.cpp`):", "",
       "| build | host threads | run | repack_for_kernels ms | repack_to_npacked ms | 128x gptq_to_kpacked ms |",
       "|---|---|---|---|---|---|"]
md += [f"| {r['build']} | {r['host_threads']} | {r['run']} | {r['repack_for_kernels_ms']:.0f} | "
       f"{r['repack_to_npacked_ms']:.0f} | {r['gptq_to_kpacked_x128_ms']:.0f} |" for r in rows if r["what"] == "repack"]
open(out + ".md", "w").write("\n".join(md) + "\n")

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
conv = [r for r in rows if r["what"] == "convert"]
ax[0].bar([f"{r['build'].split()[0]} #{r['run']}" for r in conv], [r["peak_anon_mb"] for r in conv], color="tab:blue")
ax[0].set_ylabel("peak anonymous memory (MB)")
ax[0].set_title("lowbit convert, 1.27 GB GPTQ MoE checkpoint", fontsize=9)
rep = [r for r in rows if r["what"] == "repack"]
ax[1].bar([f"{r['build'].split()[0]}\n{str(r['host_threads']).split()[0]} #{r['run']}" for r in rep],
          [r["repack_for_kernels_ms"] for r in rep], color="tab:orange")
ax[1].set_ylabel("repack_for_kernels (ms)")
ax[1].set_title("one Qwen3-30B-A3B w13 (201 MB int4)", fontsize=9)
for a in ax: a.tick_params(axis="x", labelsize=7)
fig.suptitle(head, fontsize=6)
fig.tight_layout()
fig.savefig(out + ".png", dpi=110)
print("\n".join(md))
