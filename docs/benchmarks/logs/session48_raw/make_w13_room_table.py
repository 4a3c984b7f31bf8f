# Builds docs/benchmarks/moe_w13_room_h100.{md,json,png} from session 48's raw A/B
# (logs/session48_raw/results_h100_verify_9da3ae1.tgz): min over the alternated passes of each variant.
# Optional arguments 3-5 (session 49, the bounded rule's run): the binaries, the rule, the note; the title follows the rule.
import json, glob, collections, sys
import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt
src = sys.argv[1]; out = sys.argv[2]
arg = lambda i, d: sys.argv[i] if len(sys.argv) > i else d
bins = arg(3, 'binaries of 9da3ae1, staged in .dev/s47r')
rule = arg(4, 'session 47 moe_gate_up_shape without the grid bound')
note = arg(5, 'the bound of 37ab2e4 keeps the rule on qwen3.5-35b-a3b M = 2 only among these rows')
title = 'session 47 rule' if len(sys.argv) <= 4 else 'bounded rule'
t = collections.defaultdict(lambda: collections.defaultdict(list)); meta = None; fl = {}
for f in sorted(glob.glob(src + '/*_[1-5].json')):
    name = f.rsplit('/', 1)[1].split('_')[0][:-1]
    d = json.load(open(f)); meta = meta or d
    for r in d['rows']:
        t[(r['shape'], r['M'])][name].append(r); fl[(r['shape'], r['M'])] = r['floor_us']
rows = []; mins = []  # the table's one decimal comes from the unrounded mins (no double rounding)
for k in sorted(t):
    a, o = t[k]['rule'], t[k]['old']
    ra, ro = min(x['time_us'] for x in a), min(x['time_us'] for x in o)
    rows.append(dict(shape=k[0], M=k[1], passes=len(a), rule_us=round(ra, 2), previous_us=round(ro, 2), ratio=round(ra / ro, 3),
                     floor_us=round(fl[k], 2), pct_floor_rule=round(100 * fl[k] / ra, 1), pct_floor_previous=round(100 * fl[k] / ro, 1),
                     cublas_us=round(min(x['cublas_us'] for x in a + o), 1), wrong=sum(x['wrong'] for x in a + o),
                     rule_us_passes=[round(x['time_us'], 1) for x in a], previous_us_passes=[round(x['time_us'], 1) for x in o]))
    mins.append((ra, ro))
hdr = dict(date=meta['date'], commit=meta['commit'] + f' ({bins})', machine=meta['machine'],
           copy_gbps=meta['copy_gbps'], command='docs/benchmarks/logs/session48_raw/gpu_verify.sh (lowbit bench moe --reps 5, '
           f'rule = {rule}, previous = LOWBIT_INT4_MOE_W13_ROOM=0, alternated passes)',
           note='min over passes; ' + note)
json.dump(dict(**hdr, rows=rows), open(out + '.json', 'w'), indent=1)
with open(out + '.md', 'w') as f:
    f.write(f"# MoE GEMM1 room for a wide GEMM2: {title} vs previous plan ({next(w for w in meta['machine'].split() if w[:1] == 'H' and w[1:].isdigit())})\n\n")
    f.write(f"date {hdr['date']}, commit {hdr['commit']}, machine: {hdr['machine']}, copy bandwidth {hdr['copy_gbps']:.0f} GB/s (the floor's)\n\n")
    f.write(hdr['command'] + '; ' + hdr['note'] + '.\n\n')
    f.write('| shape | M | passes | rule_us | previous_us | rule/previous | %floor rule | %floor previous | cublas_us | #wrong |\n|---|---|---|---|---|---|---|---|---|---|\n')
    for r, (ra, ro) in zip(rows, mins):
        f.write(f"| {r['shape']} | {r['M']} | {r['passes']} | {ra:.1f} | {ro:.1f} | {r['ratio']:.3f} | {r['pct_floor_rule']:.1f} | {r['pct_floor_previous']:.1f} | {r['cublas_us']:.1f} | {r['wrong']} |\n")
lab = [f"{r['shape']}\nM={r['M']}" for r in rows]
fig, ax = plt.subplots(figsize=(9, 4))
ax.bar(range(len(rows)), [r['ratio'] for r in rows], color=['tab:green' if r['ratio'] < 0.98 else 'tab:red' if r['ratio'] > 1.02 else 'tab:gray' for r in rows])
ax.axhline(1.0, color='k', lw=0.8); ax.set_xticks(range(len(rows))); ax.set_xticklabels(lab, fontsize=7)
ax.set_ylabel('time: rule / previous plan'); ax.set_title(f"MoE GEMM1 {title} vs previous plan, {hdr['machine'].split(' x1')[0]}, {hdr['date'][:10]}")
fig.tight_layout(); fig.savefig(out + '.png', dpi=110)
