#!/usr/bin/env python3
"""Session 66: docs/benchmarks/gemm_block_shapes_h100.{json,md,png} from sweep1.sh's three archives (m16, m1, m70
.tgz in this folder): per shape, M and setting the min over the passes, its ratio to the plan (no knob) and each
pass's time; any row with #wrong != 0 stops the script.
Usage: env -u LD_LIBRARY_PATH python3 docs/benchmarks/logs/session66_raw/sweep_tables.py"""
import collections, glob, json, os, subprocess, sys, tarfile, tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.abspath(os.path.join(here, '..', '..', '..', '..'))
out = os.path.join(root, 'docs', 'benchmarks', 'gemm_block_shapes_h100')
groups = [('m16', 'M = 9..16, the 8-row tiles (ROWS16=0) in several block shapes against the 16-row plan'),
          ('m1', 'M = 1 / 8, block shapes against the plan'),
          ('m70', '70B rows slower than session 56\'s card: x_early off, each trigger, pairs forced')]
knobs = {'r8': 'ROWS16=0', 'r8w8s2t1': 'ROWS16=0 WARPS=8 SPLITS=2 TRIGGER=1', 'r8w4s2t1': 'ROWS16=0 WARPS=4 SPLITS=2 TRIGGER=1',
         'r8w4s3t1': 'ROWS16=0 WARPS=4 SPLITS=3 TRIGGER=1', 'w4s3t1': 'WARPS=4 SPLITS=3 TRIGGER=1',
         'w4s2t1': 'WARPS=4 SPLITS=2 TRIGGER=1', 'w8s2t0': 'WARPS=8 SPLITS=2 TRIGGER=0', 'w4s4t1': 'WARPS=4 SPLITS=4 TRIGGER=1',
         'xe0': 'XEARLY=0', 't0': 'TRIGGER=0', 't1': 'TRIGGER=1', 't2': 'TRIGGER=2', 's2': 'SPLITS=2', 'plan': '(none)'}
rows, md, header, commits = [], [], None, set()
with tempfile.TemporaryDirectory() as tmp:
    for g, title in groups:
        with tarfile.open(os.path.join(here, g + '.tgz')) as t:
            t.extractall(tmp)
        d = os.path.join(tmp, g)
        commits.add(open(os.path.join(d, 'commit.txt')).read().strip())  # the binaries' commit (gpu_knobs.sh)
        times = collections.defaultdict(list)
        order = []
        for f in sorted(glob.glob(d + '/*_p*.json')):
            label, dt, _ = os.path.basename(f)[:-5].rsplit('_', 2)
            doc = json.load(open(f))
            header = header or next((l.strip('# \n') for l in open(f[:-5] + '.md') if 'date ' in l), '')
            for r in doc['rows']:
                if r['wrong'] != 0:
                    sys.exit('#wrong %d in %s %s M=%d' % (r['wrong'], f, r['shape'], r['M']))
                times[(r['shape'], r['M'], dt, label)].append(r['time_us'])
            if label not in order:
                order.append(label)
        order.sort(key=lambda l: (l != 'plan', list(knobs).index(l)))
        md.append('\n## %s (`%s.tgz`)\n' % (title, g))
        md.append('| shape | M | ' + ' | '.join(l if l == 'plan' else '%s (%s)' % (l, knobs[l]) for l in order) + ' |')
        md.append('|' + '---|' * (2 + len(order)))
        for key in sorted({k[:3] for k in times}):
            plan = min(times[key + ('plan',)])
            cells = []
            for l in order:
                v = times[key + (l,)]
                cells.append('%.2f (%.3fx)' % (min(v), min(v) / plan))
                rows.append({'group': g, 'shape': key[0], 'M': key[1], 'dtype': key[2], 'setting': l,
                             'env': 'LOWBIT_INT4_DECODE_' + knobs[l].replace(' ', ' LOWBIT_INT4_DECODE_') if l != 'plan' else '',
                             'time_us': min(v), 'passes_us': v, 'x_plan': min(v) / plan, 'wrong': 0})
            md.append('| %s | %d | ' % key[:2] + ' | '.join(cells) + ' |')
if len(commits) != 1:
    sys.exit('the archives name different binaries: %s' % sorted(commits))
commit = commits.pop()
intro = ['# Decode block shapes on the rows below 50% of the floor, and the 70B plan check (1x H100)', '',
         'Session 66, `docs/benchmarks/logs/session66_raw/sweep1.sh` (session 65\'s `gpu_knobs.sh`), binaries of %s (the '
         'current GPU code) built without vLLM\'s Marlin; `lowbit bench gemm --reps 10 --cooldown-ms 100`, bf16, G = 128, '
         'symmetric, CUDA-graph medians; the min of 2 alternated passes per setting and its ratio to the plan (no knob; '
         '< 1: the setting is faster); `#wrong` 0 on every row. Knobs are `LOWBIT_INT4_DECODE_*`.' % commit, '',
         'Bench header (first pass): ' + header + ' (the checkout the archive was built in; the binaries are ' + commit + "'s GPU code)"]
open(out + '.md', 'w').write('\n'.join(intro + md) + '\n')
json.dump({'source': 'session 66 sweep1.sh', 'commit': commit, 'header': header, 'rows': rows,
           'plot': {'x': 'M', 'y': 'x_plan', 'series': 'setting', 'facet': 'shape', 'logx': False, 'logy': False,
                    'title': 'time / plan, H100'}},
          open(out + '.json', 'w'), indent=1)
subprocess.run([sys.executable, os.path.join(root, 'scripts', 'plot_bench.py'), out + '.json', out + '.png'], check=True)
print('wrote', out + '.{md,json,png}', len(rows), 'rows')
