#!/usr/bin/env bash
# Session 17 round GG: the SASS at the offsets racecheck named (round GF) in three decode kernels.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
CU=/usr/local/cuda/bin/cuobjdump; [ -x $CU ] || CU=$(command -v cuobjdump)
$CU --dump-sass $B/lowbit_tests_gpu_int4 > $R/sass.txt 2>&1; echo "cuobjdump rc=$? $(wc -l < $R/sass.txt)"
python3 - $R/sass.txt <<'PY' | tee $R/offsets.txt
import re,sys
want={'DecodeCfgILi1ELi8ELi3ELi4ELi4ELb0EEELi8ELb1ELi0E':(0xa70,0xa90),'DecodeCfgILi2ELi8ELi3ELi8ELi1ELb0EEELi8ELb1ELi0E':(0xae0,0xb00),'DecodeCfgILi1ELi8ELi3ELi8ELi2ELb0EEELi2ELb0ELi0E':(0xe20,0xe40)}
cur=None; lines=open(sys.argv[1]).read().splitlines()
for i,l in enumerate(lines):
    if 'Function :' in l:
        cur=None
        if 'gemm_decode_kernelI13__nv_bfloat16' in l and 'gemm_decode_cu' in l:
            for k in want:
                if k in l: cur=k; print('##',l.strip()[:160])
    if cur:
        m=re.search(r'/\*([0-9a-f]{4})\*/',l)
        if m:
            off=int(m.group(1),16); a,b=want[cur]
            if a-0x80<=off<=b+0x40: print(l.strip()[:140])
PY
tar -C $R -czf $OUT/results.tgz offsets.txt
