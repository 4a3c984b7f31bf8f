#!/usr/bin/env bash
# Session 68, the last device call: on an H200 h200_round.sh (the int4 suite, the tables, the clusters-of-4
# A/B); on an H100 the Llama-3-70B tensor-parallel table again (gpu_tables.sh's gemm_tp_shards step) at the
# binaries of 945f721, whose clusters of 4 moved the TP4 / TP8 qkv shares (session 65's gemm_tp_shards_h100 is c358dcd's).
# run(command="tar xJf .dev/s68c/s68c.tar.xz -C .dev/s68c && rm .dev/s68c/s68c.tar.xz; BIN=.dev/s68c bash docs/benchmarks/logs/session68_raw/any_round.sh", carry=[".dev/s68c"], kind="nvidia-h200", timeout_s=560)
set -u
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash docs/benchmarks/logs/session68_raw/h200_round.sh
fi
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
R=$OUT/tp; mkdir -p $R; chmod +x $BIN/*; cat $BIN/COMMIT > $R/commit.txt
t0=$(date +%s)
timeout 200 $BIN/lowbit bench gemm --shapes llama3-70b.tp2.qkv,llama3-70b.tp2.o,llama3-70b.tp2.gate_up,llama3-70b.tp2.down,llama3-70b.tp4.qkv,llama3-70b.tp4.o,llama3-70b.tp4.gate_up,llama3-70b.tp4.down,llama3-70b.tp8.qkv,llama3-70b.tp8.o,llama3-70b.tp8.gate_up,llama3-70b.tp8.down \
  --m 1,8,9,12,16,17,24,32,128,512 --cooldown-ms 500 --out $R/gemm_tp_shards > $R/gemm_tp_shards.log 2>&1
echo "rc $? [$(( $(date +%s) - t0 )) s]"; grep -h "total #wrong" $R/gemm_tp_shards.log
(cd $OUT && tar czf tp.tgz tp && rm -rf tp)
