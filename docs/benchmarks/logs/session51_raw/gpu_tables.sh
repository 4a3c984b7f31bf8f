#!/usr/bin/env bash
# Session 51: the INT4 tables again, all from one H200 call at one commit (HEAD's kernels; the
# README's tables mixed session 31 / 35 / 44 / 47 rounds). The CLI is built with -DLOWBIT_BENCH_VLLM_MARLIN=ON,
# so vLLM's Marlin GEMM and fused_marlin_moe layer run in the same process as lowbit and cuBLAS. In order
# of need, each under what is left of the call: bench moe (every shape and M), bench gemm (every shape
# and M), the Llama-3-70B tensor-parallel shares, the other models' MoE shares. Exit 3 on any card but an
# H200 (the issue's targets are an H200's).
# Stage: cmake --build build-marlin --target lowbit_cli; D=.dev/s51t; mkdir -p $D && strip -o $D/lowbit
# build-marlin/bin/lowbit && xz -T2 -f $D/lowbit; git rev-parse HEAD > $D/COMMIT
# run(command="bash docs/benchmarks/logs/session51_raw/gpu_tables.sh", carry=[".dev/s51t"], kind="nvidia-h200")
set -u
nvidia-smi -L; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || [ -n "${ANY_GPU:-}" ] || exit 3
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s51t}; R=$OUT/r; mkdir -p $R; pack() { (cd $OUT && tar czf tables.tgz r); }
cat $B/COMMIT > $R/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.csv 2>&1
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s); left() { echo $(( ${TOTAL:-570} - ($(date +%s) - t0) )); }
step() {  # name, seconds it needs at least, then the bench arguments
  local name=$1 need=$2; shift 2
  [ "$(left)" -lt "$need" ] && { echo "== $name: skipped, $(left) s left"; return; }
  echo "== $name"; timeout "$(left)" $B/lowbit bench "$@" --out $R/$name > $R/$name.log 2>&1; echo "rc $? [$(( $(date +%s) - t0 )) s]"
  grep -h "total #wrong" $R/$name.log; pack
}
step moe 90 moe
step gemm 150 gemm --cooldown-ms 300
step gemm_tp_shards 150 gemm --shapes llama3-70b.tp2.qkv,llama3-70b.tp2.o,llama3-70b.tp2.gate_up,llama3-70b.tp2.down,llama3-70b.tp4.qkv,llama3-70b.tp4.o,llama3-70b.tp4.gate_up,llama3-70b.tp4.down,llama3-70b.tp8.qkv,llama3-70b.tp8.o,llama3-70b.tp8.gate_up,llama3-70b.tp8.down --m 1,8,9,12,16,17,24,32,128,512 --cooldown-ms 500
step moe_models 60 moe --shapes 128x4096x1536x8,128x4096x384x8,128x4096x1408x8,256x7168x256x8,8x6144x16384x2 --m 1,8,32,128,512,2048
pack
