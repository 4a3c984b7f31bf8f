#!/usr/bin/env python3
"""Session 51: the README's INT4 tables from one run's JSON (bench gemm / moe with vLLM's Marlin in the
same process). Usage: make_readme_tables.py DIR (holding gemm.json, moe.json, gemm_tp_shards.json)."""
import json, os, sys

d = sys.argv[1]


def load(name):
    p = os.path.join(d, name + '.json')
    return json.load(open(p)) if os.path.exists(p) else None


def rows_by(js):
    return {(r['shape'], r['M']): r for r in js['rows']}


def listed(t, keep, key, fmt):
    """The rows (shape, M) that keep(M, row) selects, with their key's value: the issue's misses."""
    return ', '.join(f"{s} M={k} {r[key]:{fmt}}" for (s, k), r in sorted(t.items()) if keep(k, r))


def xm(r, key):
    v = r.get(key)
    return f'{v:.2f}' if isinstance(v, (int, float)) else '-'


g = load('gemm')
gt = rows_by(g) if g else None
if g:
    t = gt
    print(f"gemm: {g['date']} {g['commit']} {g['machine']} copy {g['copy_gbps']:.0f} GB/s\n")
    print('| projection (N x K) | M = 1: time, % floor (% rdbw), x cuBLAS bf16 | M = 8 | M = 16 | M = 512: time (path), x cuBLAS | '
          'M = 8192: x cuBLAS | x vLLM Marlin at M = 1 / 16 / 32 / 512 |')
    print('|---|---|---|---|---|---|---|')
    for shape in dict.fromkeys(r['shape'] for r in g['rows']):
        r1 = t[(shape, 1)]
        name = f"{shape.replace('llama3-', '')} ({r1['N']} x {r1['K']})"
        cells = []
        for m in (1, 8, 16):
            r = t[(shape, m)]
            cells.append(f"{r['time_us']:.1f} us, {r['pct_floor']:.0f}% ({r['pct_read_bw']:.0f}%), {r['speedup']:.2f}x")
        r = t[(shape, 512)]
        cells.append(f"{r['time_us']:.0f} us ({r.get('runs_as', r['path'])}), {r['speedup']:.2f}x")
        cells.append(f"{t[(shape, 8192)]['speedup']:.2f}x")
        cells.append(' / '.join(xm(t[(shape, m)], 'x_marlin') for m in (1, 16, 32, 512)))
        print(f"| {name} | " + ' | '.join(cells) + ' |')
    wrong = sum(r['wrong'] for r in g['rows']), sum(r.get('marlin_wrong', 0) for r in g['rows'])
    print(f'\n#wrong {wrong[0]}, #wrong Marlin {wrong[1]}\n')

m = load('moe')
if m:
    t = rows_by(m)
    print(f"moe: {m['date']} {m['commit']} {m['machine']} copy {m['copy_gbps']:.0f} GB/s\n")
    print('| fused MoE layer | M = 1: time, % floor | M = 8 | M = 16 | M = 512: x cuBLAS bf16 expert loop | M = 8192 | '
          'x vLLM fused_marlin_moe layer at M = 1 / 8 / 16 / 128 / 512 |')
    print('|---|---|---|---|---|---|---|')
    for shape in dict.fromkeys(r['shape'] for r in m['rows']):
        cells = [f"{t[(shape, k)]['time_us']:.1f} us, {t[(shape, k)]['pct_floor']:.0f}%" for k in (1, 8, 16)]
        cells.append(f"{t[(shape, 512)]['speedup']:.2f}x")
        r = t.get((shape, 8192))
        cells.append(f"{r['speedup']:.2f}x ({r.get('resolved_path', r['path'])})" if r else '-')
        cells.append(' / '.join(xm(t[(shape, k)], 'x_marlin_layer') if (shape, k) in t else '-' for k in (1, 8, 16, 128, 512)))
        print(f'| {shape} | ' + ' | '.join(cells) + ' |')
    print('\nmisses (M <= 16, < 50% of the floor):', listed(t, lambda k, r: k <= 16 and r['pct_floor'] < 50, 'pct_floor', '.1f'))
    print('#wrong', sum(r['wrong'] for r in m['rows']), '#wrong Marlin', sum(r.get('marlin_wrong', 0) for r in m['rows']), '\n')

if g:
    print('dense misses (M <= 16): floor <50%:', listed(gt, lambda k, r: k <= 16 and r['pct_floor'] < 50, 'pct_floor', '.1f'))
    print('speedup <2.5x:', listed(gt, lambda k, r: k <= 16 and r['speedup'] < 2.5, 'speedup', '.2f'))
    print('M>=4096 <0.8x:', listed(gt, lambda k, r: k >= 4096 and r['speedup'] < 0.8, 'speedup', '.2f') or 'none')

s = load('gemm_tp_shards')
if s:
    t = rows_by(s)
    print(f"\ntp shards: {s['date']} {s['commit']}\n")
    print('| one TP rank (N x K) | M = 1: time, % floor, x cuBLAS bf16 | M = 16 | M = 32 (path) | x vLLM Marlin at M = 1 / 16 / 32 / 128 / 512 |')
    print('|---|---|---|---|---|')
    for shape in dict.fromkeys(r['shape'] for r in s['rows']):
        r1, r16, r32 = t[(shape, 1)], t[(shape, 16)], t[(shape, 32)]
        print(f"| {shape.replace('llama3-', '')} ({r1['N']} x {r1['K']}) | {r1['time_us']:.1f} us, {r1['pct_floor']:.0f}%, {r1['speedup']:.2f}x | "
              f"{r16['time_us']:.1f} us, {r16['pct_floor']:.0f}%, {r16['speedup']:.2f}x | {r32['time_us']:.1f} us ({r32.get('runs_as', r32['path'])}) | "
              + ' / '.join(xm(t[(shape, k)], 'x_marlin') for k in (1, 16, 32, 128, 512)) + ' |')
