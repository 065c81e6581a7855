#!/usr/bin/env bash
# The x-shared kernel's A/B in one call: its bits, batched decode at 16 / 32 / 64 (and 8) rows and the rows
# table under each variant, the protocol (on an H200), then the suites under the last variant.
# Run on the GPU machine over binaries carried as .gpu-bin/bin.tar.xz (tools/gpu/check.sh pack): bash tools/gpu/xshared_ab.sh
# XS_VARIANTS: "name:VAR=value+VAR=value ..." (default: off, tuned (the default: per shape, from the row
# groups the start-up tuner chose), wide (past 32 rows), auto (every row group of 16), auto with one row group
# a block); XS_ROWS: the batch sizes; XS_PROTOCOL=0 leaves the protocol to check.sh.
set -u
source "$(dirname "$0")/common.sh"
BIN=/tmp/helium-gpu-bin
mkdir -p "$BIN" && tar -C "$BIN" -xJf .gpu-bin/bin.tar.xz || exit 1
export LD_LIBRARY_PATH="$BIN/lib"
LOG="$OUT/xshared_ab.log"
VARIANTS=${XS_VARIANTS:-"off:HELIUM_CUDA_MMA_XSHARED=off tuned: wide:HELIUM_CUDA_MMA_XSHARED=wide auto:HELIUM_CUDA_MMA_XSHARED=auto auto-g1:HELIUM_CUDA_MMA_XSHARED=auto+HELIUM_CUDA_MMA_XSHARED_GROUPS=1"}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee -a "$LOG"
run xs_test 180 "$BIN/cuda_matmul_test" --gtest_filter='*XShared*:*DecodeRowsAreBitwise*:CudaMatmulHost*'
D="$BIN/helium_bench_decode --device cuda --config bench/configs/qwen3-8b --contexts 1024 --runs 1 --prefill 0"
run warm_tune 120 $D --tokens 16
for rows in ${XS_ROWS:-16 32 64 8}; do
  for variant in $VARIANTS; do
    name=${variant%%:*}
    variant_env "${variant#*:}"
    run "batch${rows}_$name" 60 env "${env_args[@]}" $D --tokens 64 --batch "$rows" --json "/tmp/b_${rows}_$name.json"
    batch_summary "/tmp/b_${rows}_$name.json" "$rows" "$name" >>"$OUT/batch.json" 2>>"$LOG"
  done
done
cat "$OUT/batch.json"
for variant in $VARIANTS; do
  name=${variant%%:*}
  variant_env "${variant#*:}"
  run "matmul_rows_$name" 100 env "${env_args[@]}" "$BIN/helium_bench_cuda_matmul" --quick --json "/tmp/matmul_$name.json"
done
# The protocol (DESIGN.md) on an H200 only (the acceptance card): 1K / 8K / 32K, 512 tokens, median of 3, prefill 4K.
[ "${XS_PROTOCOL:-1}" = 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 &&
  run protocol 240 "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b --json "$OUT/decode.json"
variant_env "${variant#*:}"  # the last variant
run matmul_test_x_shared 150 env "${env_args[@]}" "$BIN/cuda_matmul_test" --gtest_brief=1
run models_x_shared 100 env "${env_args[@]}" "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
run fused_x_shared 120 env "${env_args[@]}" "$BIN/cuda_fused_test" --gtest_brief=1
grep -E "^=== .*exit" "$LOG"
