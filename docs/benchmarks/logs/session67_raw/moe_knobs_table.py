#!/usr/bin/env python3
"""Session 67: docs/benchmarks/moe_knobs_m1_h100.{json,md,png} from moe_knobs_m1_h100.tar.xz (this folder: the k/
folder of session 58's gpu_moe_knobs.sh, its JSON and logs, three alternated passes on an H100): per layer, M and knob
the min over the passes, its ratio to the default plan and each pass's time; any row with #wrong != 0 stops it.
Usage: env -u LD_LIBRARY_PATH python3 docs/benchmarks/logs/session67_raw/moe_knobs_table.py"""
import collections, glob, json, os, subprocess, sys, tarfile, tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.abspath(os.path.join(here, '..', '..', '..', '..'))
out = os.path.join(root, 'docs', 'benchmarks', 'moe_knobs_m1_h100')
# The probe's labels (gpu_moe_knobs.sh's b calls) and the environment each ran under.
knobs = {'default': '', 'warps8': 'LOWBIT_INT4_DECODE_WARPS=8', 'w13s8x1': 'LOWBIT_INT4_MOE_W13_SHAPE=8:1',
         'w13s4x2': 'LOWBIT_INT4_MOE_W13_SHAPE=4:2', 'w13s8x2': 'LOWBIT_INT4_MOE_W13_SHAPE=8:2',
         'wide0': 'LOWBIT_INT4_MOE_WIDE=0', 'wide2': 'LOWBIT_INT4_MOE_WIDE=2', 'single0': 'LOWBIT_INT4_MOE_SINGLE=0',
         'trigger0': 'LOWBIT_INT4_MOE_TRIGGER=0', 'trigger2': 'LOWBIT_INT4_MOE_TRIGGER=2',
         'early0': 'LOWBIT_INT4_MOE_EARLY=0', 'ysum0': 'LOWBIT_INT4_MOE_YSUM=0'}
times, pct, header = collections.defaultdict(list), {}, None
with tempfile.TemporaryDirectory() as tmp:
    with tarfile.open(os.path.join(here, 'moe_knobs_m1_h100.tar.xz')) as t:
        t.extractall(tmp)
    d = os.path.join(tmp, 'k')
    commit = open(os.path.join(d, 'commit.txt')).read().strip()  # the binaries' (gpu_moe_knobs.sh)
    for f in sorted(glob.glob(d + '/*_[0-9].json')):
        label = os.path.basename(f)[:-5].rsplit('_', 1)[0]
        doc = json.load(open(f))
        header = header or '%s, machine: %s, copy bandwidth %.0f GB/s' % (doc['date'], doc['machine'], doc['copy_gbps'])
        for r in doc['rows']:
            if r['wrong'] != 0:
                sys.exit('#wrong %d in %s %s M=%d' % (r['wrong'], f, r['shape'], r['M']))
            times[(r['shape'], r['M'], label)].append(r['time_us'])
            if label == 'default':
                pct[(r['shape'], r['M'])] = max(pct.get((r['shape'], r['M']), 0), r['pct_floor'])
order = [k for k in knobs if any(key[2] == k for key in times)]
md = ['# The MoE decode plan\'s knobs at M = 1 / 2 on the small-expert layers (1x H100)', '',
      'Session 67, session 58\'s `logs/session58_raw/gpu_moe_knobs.sh` (`lowbit bench moe --path fused --reps 5`, '
      'bf16, G = 128, symmetric, CUDA-graph medians), binaries of %s (the current GPU code) built without vLLM\'s '
      'Marlin; %d alternated passes; per setting the min over the passes and its ratio to the default plan (< 1: the '
      'knob is faster); `#wrong` 0 on every row. Raw: `logs/session67_raw/moe_knobs_m1_h100.tar.xz`; table: '
      '`logs/session67_raw/moe_knobs_table.py`.' % (commit, max(len(v) for v in times.values())), '',
      'Bench header (first pass): ' + header, '',
      'Knobs: ' + '; '.join('%s = `%s`' % (k, v) for k, v in knobs.items() if k != 'default' and k in order), '',
      '| layer | M | default (us, % of floor) | ' + ' | '.join(l for l in order if l != 'default') + ' |',
      '|' + '---|' * (2 + len(order))]
rows = []
for key in sorted({k[:2] for k in times}):
    base = min(times[key + ('default',)])
    cells = []
    for l in order:
        v = times[key + (l,)]
        rows.append({'shape': key[0], 'M': key[1], 'setting': l, 'env': knobs[l], 'time_us': min(v), 'passes_us': v,
                     'x_default': min(v) / base, 'wrong': 0})
        if l != 'default':
            cells.append('%.3f' % (min(v) / base))
    md.append('| %s | %d | %.1f (%.1f%%) | ' % (key[0], key[1], base, pct[key]) + ' | '.join(cells) + ' |')
open(out + '.md', 'w').write('\n'.join(md) + '\n')
json.dump({'source': 'session 67, session58_raw/gpu_moe_knobs.sh', 'commit': commit, 'header': header, 'rows': rows,
           'plot': {'x': 'M', 'y': 'x_default', 'series': 'setting', 'facet': 'shape', 'logx': False, 'logy': False,
                    'title': 'MoE M = 1 / 2: time / default plan, H100'}},
          open(out + '.json', 'w'), indent=1)
subprocess.run([sys.executable, os.path.join(root, 'scripts', 'plot_bench.py'), out + '.json', out + '.png'], check=True)
print('wrote', out + '.{md,json,png}', len(rows), 'rows')
