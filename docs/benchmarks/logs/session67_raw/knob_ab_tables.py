#!/usr/bin/env python3
"""Session 67: a docs/benchmarks table (md, json, png) from gpu_knobs.sh archives (session 65's script: one folder per
archive holding <label>_<dtype>_p<pass>.json and commit.txt): per shape, M and setting the min over the passes, its
ratio to the plan (no knob) and each pass's time; any row with #wrong != 0 stops it.
Usage: env -u LD_LIBRARY_PATH python3 knob_ab_tables.py OUT_STEM TITLE ARCHIVE:LABEL=ENV,LABEL=ENV... [ARCHIVE:...]
  e.g. knob_ab_tables.py docs/benchmarks/gemm_plan_changes_h200 "..." \\
       docs/benchmarks/logs/session67_raw/ab61.tgz:xe0=LOWBIT_INT4_DECODE_XEARLY=0,few0=LOWBIT_INT4_DECODE_FEW8=0"""
import collections, glob, json, os, subprocess, sys, tarfile, tempfile

root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
out, title, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
rows, md, header, machine, commits = [], [], None, None, set()
with tempfile.TemporaryDirectory() as tmp:
    for spec in specs:
        path, _, envs = spec.partition(':')
        knobs = {'plan': ''}
        knobs.update(dict(e.split('=', 1) for e in envs.split(',') if e))
        with tarfile.open(path) as t:
            t.extractall(tmp)
            top = t.getnames()[0].split('/')[0]
        d = os.path.join(tmp, top)
        commits.add(open(os.path.join(d, 'commit.txt')).read().strip())  # the binaries' commit
        times = collections.defaultdict(list)
        pct = {}
        for f in sorted(glob.glob(d + '/*_p*.json')):
            label, dt, _ = os.path.basename(f)[:-5].rsplit('_', 2)
            if label not in knobs:
                sys.exit('%s: label %s has no ENV given' % (path, label))
            doc = json.load(open(f))
            header = header or '%s, machine: %s, copy bandwidth %.0f GB/s' % (doc['date'], doc['machine'], doc['copy_gbps'])
            for r in doc['rows']:
                if r['wrong'] != 0:
                    sys.exit('#wrong %d in %s %s M=%d' % (r['wrong'], f, r['shape'], r['M']))
                times[(r['shape'], r['M'], dt, label)].append(r['time_us'])
                if label == 'plan':
                    k = (r['shape'], r['M'], dt)
                    pct[k] = max(pct.get(k, 0.0), r['pct_floor'])
        order = [l for l in knobs if any(k[3] == l for k in times)]
        md.append('\n## `%s`\n' % os.path.basename(path))
        md.append('| shape | M | dtype | plan (us, % of floor) | ' +
                  ' | '.join('%s (`%s`)' % (l, knobs[l]) for l in order if l != 'plan') + ' |')
        md.append('|' + '---|' * (3 + len(order)))
        for key in sorted({k[:3] for k in times}, key=lambda k: (k[0], k[1], k[2])):
            plan = min(times[key + ('plan',)])
            cells = []
            for l in order:
                v = times[key + (l,)]
                rows.append({'archive': os.path.basename(path), 'shape': key[0], 'M': key[1], 'dtype': key[2],
                             'setting': l, 'env': knobs[l], 'time_us': min(v), 'passes_us': v,
                             'x_plan': min(v) / plan, 'wrong': 0})
                if l != 'plan':
                    cells.append('%.2f (%.3fx)' % (min(v), min(v) / plan))
            md.append('| %s | %d | %s | %.2f (%.1f%%) | ' % (key[0], key[1], key[2], plan, pct[key]) + ' | '.join(cells) + ' |')
if len(commits) != 1:
    sys.exit('the archives name different binaries: %s' % sorted(commits))
commit = commits.pop()
passes = max(len(r['passes_us']) for r in rows)
intro = ['# ' + title, '',
         'Session 67, session 65\'s `logs/session65_raw/gpu_knobs.sh` (`lowbit bench gemm --reps 10 --cooldown-ms 100`, '
         'G = 128, symmetric, CUDA-graph medians), binaries of %s (the current GPU code) built without vLLM\'s Marlin; '
         'the min of %d alternated passes per setting and its ratio to the plan (no knob; < 1: the setting is faster); '
         '`#wrong` 0 on every row. Table by `logs/session67_raw/knob_ab_tables.py`.' % (commit, passes), '',
         'Bench header (first pass): ' + header]
open(out + '.md', 'w').write('\n'.join(intro + md) + '\n')
json.dump({'source': 'session 67, session65_raw/gpu_knobs.sh', 'commit': commit, 'header': header, 'rows': rows,
           'plot': {'x': 'M', 'y': 'x_plan', 'series': 'setting', 'facet': 'shape', 'logx': False, 'logy': False,
                    'title': title}},
          open(out + '.json', 'w'), indent=1)
subprocess.run([sys.executable, os.path.join(root, 'scripts', 'plot_bench.py'), out + '.json', out + '.png'], check=True)
print('wrote', out + '.{md,json,png}', len(rows), 'rows')
