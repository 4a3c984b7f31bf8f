#!/usr/bin/env bash
# Session 20 round JC: scripts/device/int4.sh end to end with round JB's binaries (a02d40c; the
# kernels of HEAD, whose later commits change comments and docs only): the GPU int4 suite and its
# switch variants, then every INT4 bench file.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
export PATH=$PATH:/usr/local/cuda/bin
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
mkdir -p $OUT/int4
BIN=$B OUT=$OUT/int4 bash scripts/device/int4.sh 2>&1 | tee $OUT/int4/round.log | tail -40
