#!/usr/bin/env bash
# GPU round for the codec: bit-exactness tests, the throughput benchmark and one
# quantization-error run. Env: BIN (built binaries), OUT (results). Budget: < 2 minutes
# (step limits 45+45+25 s; measured on H200: tests ~2 s, bench ~3 s, quant-error a few s).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
: "${BIN:?set BIN}" "${OUT:?set OUT}"
mkdir -p "$OUT"
rc=0

echo "== lowbit_tests_gpu_codec"
timeout 45 "$BIN/lowbit_tests_gpu_codec" --gtest_output=json:"$OUT/codec_gpu_tests.json" >"$OUT/codec_gpu_tests.log" 2>&1
t_rc=$?
tail -n 25 "$OUT/codec_gpu_tests.log"
[ $t_rc -ne 0 ] && rc=1

echo "== lowbit bench codec"
timeout 45 "$BIN/lowbit" bench codec --out "$OUT/codec" >"$OUT/codec_bench.log" 2>&1
b_rc=$?
cat "$OUT/codec_bench.log"
[ $b_rc -ne 0 ] && rc=1

echo "== lowbit quant-error"
if "$BIN/lowbit" quant-error --help >/dev/null 2>&1; then
  timeout 25 "$BIN/lowbit" quant-error --dist all --n 4194304 --dtype bf16 --json "$OUT/codec_quant_error.json" \
    >"$OUT/codec_quant_error.log" 2>&1 || rc=1
  cat "$OUT/codec_quant_error.log"
else
  echo "quant-error subcommand not built" | tee "$OUT/codec_quant_error.log"
fi

echo "== summary: gpu tests rc=$t_rc, bench rc=$b_rc (nonzero bench rc = wrong values or error)"
grep -E "^\[  (PASSED|FAILED)" "$OUT/codec_gpu_tests.log" || true
grep -E "copy bandwidth|# (OK|FAIL)" "$OUT/codec_bench.log" || true
exit $rc
