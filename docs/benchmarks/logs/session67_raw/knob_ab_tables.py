#!/usr/bin/env python3
"""Session 67: a docs/benchmarks table (md, json, png) from knob A/B archives: per shape, M, dtype and setting the min
over the passes, its ratio to the baseline setting ('plan' or 'default': no knob) and each pass's time; any row with
#wrong != 0 stops it. An archive holds one folder of bench JSON named <label>_<dtype>_p<pass>.json (session 65's
gpu_knobs.sh, bench gemm) or <label>_<pass>.json (session 58's gpu_moe_knobs.sh, bench moe), and commit.txt (the
binaries' commit; every archive must name the same).
Usage: env -u LD_LIBRARY_PATH python3 knob_ab_tables.py OUT_STEM TITLE SCRIPT ARCHIVE:LABEL=ENV,LABEL=ENV... [...]
  OUT_STEM: docs/benchmarks/<name> (writes .md, .json, .png); SCRIPT: the device script that made the archives.
This session's MoE table (moe_knobs_m1_h100):
  K=warps8=LOWBIT_INT4_DECODE_WARPS=8,w13s8x1=LOWBIT_INT4_MOE_W13_SHAPE=8:1,w13s4x2=LOWBIT_INT4_MOE_W13_SHAPE=4:2,\
w13s8x2=LOWBIT_INT4_MOE_W13_SHAPE=8:2,wide0=LOWBIT_INT4_MOE_WIDE=0,wide2=LOWBIT_INT4_MOE_WIDE=2,\
single0=LOWBIT_INT4_MOE_SINGLE=0,trigger0=LOWBIT_INT4_MOE_TRIGGER=0,trigger2=LOWBIT_INT4_MOE_TRIGGER=2,\
early0=LOWBIT_INT4_MOE_EARLY=0,ysum0=LOWBIT_INT4_MOE_YSUM=0
  env -u LD_LIBRARY_PATH python3 docs/benchmarks/logs/session67_raw/knob_ab_tables.py \
    docs/benchmarks/moe_knobs_m1_h100 \
    "The MoE decode plan's knobs at M = 1 / 2 on the small-expert layers (1x H100)" \
    logs/session58_raw/gpu_moe_knobs.sh docs/benchmarks/logs/session67_raw/moe_knobs_m1_h100.tar.xz:$K
Session 66's table (gemm_block_shapes_h100), D=LOWBIT_INT4_DECODE_ and L=docs/benchmarks/logs/session66_raw:
  ... knob_ab_tables.py docs/benchmarks/gemm_block_shapes_h100 "Decode block shapes on the rows below 50% of the
    floor, and the 70B plan check (1x H100)" logs/session66_raw/sweep1.sh \
    "$L/m16.tgz:r8=${D}ROWS16=0,r8w8s2t1=${D}ROWS16=0 ${D}WARPS=8 ${D}SPLITS=2 ${D}TRIGGER=1,\
r8w4s2t1=${D}ROWS16=0 ${D}WARPS=4 ${D}SPLITS=2 ${D}TRIGGER=1,\
r8w4s3t1=${D}ROWS16=0 ${D}WARPS=4 ${D}SPLITS=3 ${D}TRIGGER=1" \
    "$L/m1.tgz:w4s3t1=${D}WARPS=4 ${D}SPLITS=3 ${D}TRIGGER=1,w4s2t1=${D}WARPS=4 ${D}SPLITS=2 ${D}TRIGGER=1,\
w8s2t0=${D}WARPS=8 ${D}SPLITS=2 ${D}TRIGGER=0,w4s4t1=${D}WARPS=4 ${D}SPLITS=4 ${D}TRIGGER=1" \
    "$L/m70.tgz:xe0=${D}XEARLY=0,t0=${D}TRIGGER=0,t1=${D}TRIGGER=1,t2=${D}TRIGGER=2,s2=${D}SPLITS=2"
"""
import collections, glob, json, os, re, subprocess, sys, tarfile, tempfile

root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
out, title, script, specs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
name_re = re.compile(r'^(?P<label>.+?)(?:_(?:bf16|fp16)_p|_)\d+\.json$')  # label, then the pass
rows, md, commits, knob_lines = [], [], set(), []
first = ('~', '')  # (date, header) of the earliest pass
with tempfile.TemporaryDirectory() as tmp:
    for n, spec in enumerate(specs):
        path, _, envs = spec.partition(':')
        knobs = dict(e.split('=', 1) for e in envs.split(',') if e)
        dest = os.path.join(tmp, str(n))  # one folder per archive: two archives may share a top folder name
        with tarfile.open(path) as t:
            t.extractall(dest)
        (d,) = {os.path.dirname(f) for f in glob.glob(dest + '/**/commit.txt', recursive=True)}
        commits.add(open(os.path.join(d, 'commit.txt')).read().strip())
        runs = collections.defaultdict(list)  # (shape, M, dtype, setting) -> [(time_us, pct_floor)], one per pass
        for f in sorted(glob.glob(d + '/*.json')):
            m = name_re.match(os.path.basename(f))
            if not m:
                continue
            label = m['label']
            base = label in ('plan', 'default')
            if not base and label not in knobs:
                sys.exit('%s: label %s has no ENV given' % (path, label))
            doc = json.load(open(f))
            first = min(first, (doc['date'], '%s, machine: %s, copy bandwidth %d GB/s'  # (truncated, as the .md's)
                                % (doc['date'], doc['machine'], int(doc['copy_gbps']))))
            for r in doc['rows']:
                if r['wrong'] != 0:
                    sys.exit('#wrong %d in %s %s M=%d' % (r['wrong'], f, r['shape'], r['M']))
                runs[(r['shape'], r['M'], r['dtype'], 'base' if base else label)].append((r['time_us'], r['pct_floor']))
        order = [l for l in knobs if any(k[3] == l for k in runs)]
        knob_lines.append('`%s`: ' % os.path.basename(path) + '; '.join('%s = `%s`' % (l, knobs[l]) for l in order))
        md.append('\n## `%s`\n' % os.path.basename(path))
        md.append('| shape | M | dtype | no knob (us, % of floor) | ' + ' | '.join(order) + ' |')
        md.append('|' + '---|' * (4 + len(order)))
        for key in sorted({k[:3] for k in runs}):
            if key + ('base',) not in runs:
                sys.exit('%s: %s M=%d %s has no run without a knob' % ((path,) + key))
            b, pct = min(runs[key + ('base',)])  # the fastest pass, and its own % of floor (its copy bandwidth)
            cells = []
            for l in ['base'] + order:
                v = [t for t, _ in runs.get(key + (l,), [])]
                if not v:  # (a setting whose runs missed this shape and M)
                    cells.append('-')
                    continue
                rows.append({'archive': os.path.basename(path), 'shape': key[0], 'M': key[1], 'dtype': key[2],
                             'setting': 'none' if l == 'base' else l, 'env': knobs.get(l, ''), 'time_us': min(v),
                             'passes_us': v, 'x_base': min(v) / b, 'wrong': 0,
                             **({'pct_floor': pct} if l == 'base' else {})})
                cells.append('%.3f' % (min(v) / b))
            md.append('| %s | %d | %s | %.2f (%.1f%%) | ' % (key + (b, pct)) + ' | '.join(cells[1:]) + ' |')
if len(commits) != 1:
    sys.exit('the archives name different binaries: %s' % sorted(commits))
commit = commits.pop()
passes = max(len(r['passes_us']) for r in rows)
raw = sorted({os.path.relpath(os.path.dirname(os.path.abspath(spec.partition(':')[0])), root) for spec in specs})
intro = ['# ' + title, '',
         '`docs/benchmarks/%s` (G = 128, symmetric, CUDA-graph medians), binaries of %s built without vLLM\'s Marlin; '
         'up to %d alternated passes; per setting the min over the passes and its ratio to the time with no knob (< 1: '
         'the knob is faster); `#wrong` 0 on every row. Raw: the archives named below, in %s; table by '
         '`docs/benchmarks/logs/session67_raw/knob_ab_tables.py`.'
         % (script, commit, passes, ', '.join('`%s/`' % r for r in raw)), '',
         'Bench header (first pass): ' + first[1], '', 'Knobs: ' + ' '.join(knob_lines)]
open(out + '.md', 'w').write('\n'.join(intro + md) + '\n')
json.dump({'source': script, 'commit': commit, 'header': first[1], 'rows': rows,
           'plot': {'x': 'M', 'y': 'x_base', 'series': 'setting', 'facet': 'shape', 'logx': False, 'logy': False,
                    'title': 'time / no knob'}},
          open(out + '.json', 'w'), indent=1)
subprocess.run([sys.executable, os.path.join(root, 'scripts', 'plot_bench.py'), out + '.json', out + '.png'],
               check=True)
print('wrote', out + '.{md,json,png}', len(rows), 'rows')
