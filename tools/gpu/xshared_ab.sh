#!/usr/bin/env bash
# The x-shared kernel with rings sized to its residency — bits, the rows table,
# batched decode off / auto / set tile counts, then the suites under auto.
# Run on the GPU machine over binaries carried as .gpu-bin/bin.tar.xz (tools/gpu/check.sh pack): bash tools/gpu/xshared_ab.sh
# XS_ROWS_VARIANTS: the x-shared settings of the rows table (default "off auto 2 4").
set -u
source "$(dirname "$0")/common.sh"
BIN=/tmp/helium-gpu-bin
mkdir -p "$BIN" && tar -C "$BIN" -xJf .gpu-bin/bin.tar.xz || exit 1
export LD_LIBRARY_PATH="$BIN/lib"
LOG="$OUT/xshared_ab.log"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee -a "$LOG"
run xs_test 120 "$BIN/cuda_matmul_test" --gtest_filter='*XShared*:*DecodeRowsAreBitwise*'
D="$BIN/helium_bench_decode --device cuda --config bench/configs/qwen3-8b --contexts 1024 --runs 1 --prefill 0"
run warm_tune 120 $D --tokens 16
for rows in 16 32 64 8; do
  for x in off auto 2 4; do
    [ "$rows" = 8 ] && [ "$x" = auto ] && continue
    HELIUM_CUDA_MMA_XSHARED=$x run "batch${rows}_$x" 60 $D --tokens 64 --batch $rows --json "/tmp/b_${rows}_$x.json"
    python3 -c "import json; d=json.load(open('/tmp/b_${rows}_$x.json'))['decode'][0]; print(json.dumps({'rows': $rows, 'xs': '$x', 'tok_s': round(d['tok_s'],2), 'ceiling': round(d['ceiling_tok_s'],2), 'ratio': round(d['ratio'],3)}))" >>"$OUT/batch.json" 2>>"$LOG"
  done
done
cat "$OUT/batch.json"
for x in ${XS_ROWS_VARIANTS:-off auto 2 4}; do
  HELIUM_CUDA_MMA_XSHARED=$x run "matmul_rows_$x" 100 "$BIN/helium_bench_cuda_matmul" --quick --json "/tmp/matmul_$x.json"
done
# The protocol (DESIGN.md) on an H200 only (the acceptance card): 1K / 8K / 32K, 512 tokens, median of 3, prefill 4K
# (XS_PROTOCOL=0 leaves it to check.sh).
[ "${XS_PROTOCOL:-1}" = 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 &&
  run protocol 240 "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b --json "$OUT/decode.json"
HELIUM_CUDA_MMA_XSHARED=auto run matmul_test_x_shared 150 "$BIN/cuda_matmul_test" --gtest_brief=1
HELIUM_CUDA_MMA_XSHARED=auto run models_x_shared 100 "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
HELIUM_CUDA_MMA_XSHARED=auto run fused_x_shared 120 "$BIN/cuda_fused_test" --gtest_brief=1
grep -E "^=== .*exit" "$LOG"
