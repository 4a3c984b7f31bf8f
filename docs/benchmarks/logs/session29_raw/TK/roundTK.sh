#!/usr/bin/env bash
# Session 29 round TK: the prefill GPU tests, including the new MidPrefillPlanMatchesOneChunk.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
timeout 60 $B/lowbit_tests_gpu_int4 --gtest_filter='Int4Prefill*:Int4Slab*' > $R/tests_prefill.log 2>&1; echo "== prefill rc=$? $(tail -n 1 $R/tests_prefill.log)"; grep -E "OK \] Int4PrefillGemm.Mid|FAILED|Failure" $R/tests_prefill.log | head
tar -C $R -czf $OUT/results.tgz .
