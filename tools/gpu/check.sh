#!/usr/bin/env bash
# The GPU check, in one call on the GPU machine: the CUDA op tests, the golden models on CUDA (and CPU),
# the batch-invariance and tree tests, compute-sanitizer over one short generation, and the benchmarks.
# Writes logs and JSON under $OUT (at most 8 files come back).
#
# Binaries: built here with `tools/gpu/check.sh build` (needs the project's Debian dependencies), or
# built on a development machine and carried as .gpu-bin/bin.tar.xz (`tools/gpu/check.sh pack` there):
#   cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DHELIUM_CUDA_ARCHS=90a-real
#   cmake --build build/gpu --target models_test kv_test engine_test cuda_matmul_test cuda_attention_test cuda_fused_test \
#     helium_bench_decode helium_bench_cuda_matmul helium_bench_cuda_attention helium_bench_cuda_stream
set -u
source "$(dirname "$0")/common.sh"
OUT=${OUT:-/tmp/helium-gpu-out}
mkdir -p "$OUT"
BIN=/tmp/helium-gpu-bin
TARGETS="models_test kv_test engine_test cuda_matmul_test cuda_attention_test cuda_fused_test helium_bench_decode helium_bench_cuda_matmul helium_bench_cuda_attention helium_bench_cuda_stream"

case "${1:-run}" in
  pack)  # on the development machine: strip and compress the binaries for `carry`
    rm -rf .gpu-bin && mkdir -p .gpu-bin /tmp/helium-pack && rm -rf /tmp/helium-pack/*
    for t in $TARGETS; do cp "$(find build/gpu -type f -name "$t" -perm -u+x | head -1)" /tmp/helium-pack/; done
    strip /tmp/helium-pack/*
    # The tokenizer's Debian libraries (engine_test loads a real tokenizer), which the GPU machine lacks.
    mkdir -p /tmp/helium-pack/lib
    for t in $TARGETS; do ldd "/tmp/helium-pack/$t"; done | grep -oE "/[^ ]*lib(utf8proc|pcre2-8)\.so[^ ]*" | sort -u |
      xargs -r -I{} cp -L {} /tmp/helium-pack/lib/
    # One xz stream with a 64 MiB window: the binaries share the CUDA library (one ~19 MB fatbin each), stored once.
    # In a fixed order, each binary next to the last: in the directory's order xz did not always find the previous
    # copy (one binary more grew the pack by 9.4 MB instead of 0.9; thirty-eighth session).
    tar -C /tmp/helium-pack -cf - lib $TARGETS | xz -T1 -9 > .gpu-bin/bin.tar.xz
    ls -la .gpu-bin
    exit 0 ;;
  build)
    cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DHELIUM_CUDA_ARCHS=90a-real -DHELIUM_CUDA=ON &&
      cmake --build build/gpu -j "$(nproc)" --target $TARGETS || exit 1
    mkdir -p "$BIN" && for t in $TARGETS; do cp "$(find build/gpu -type f -name "$t" -perm -u+x | head -1)" "$BIN/"; done ;;
  *)
    mkdir -p "$BIN" && tar -C "$BIN" -xJf .gpu-bin/bin.tar.xz || exit 1 ;;
esac

export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # the libraries pack carried
LOG="$OUT/check.log"

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee -a "$LOG"

# CHECK_SWEEP="name:VAR=value+VAR=value name2:..." times the decode (1K and 32K, 256 tokens, one run) under
# each setting of the environment, before the tests: for choosing defaults among kernel and policy
# variants. Results in $OUT/sweep.json (one line per variant).
if [ -n "${CHECK_SWEEP:-}" ]; then
  for variant in $CHECK_SWEEP; do
    name=${variant%%:*}
    settings=${variant#*:}
    [ "$settings" = "$variant" ] && settings=""
    variant_env "$settings"
    run "sweep_$name" 120 env "${env_args[@]}" "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b \
      --contexts "${SWEEP_CONTEXTS:-1024,32768}" --tokens 256 --runs 1 --prefill 0 --json "/tmp/sweep_$name.json"
    python3 -c "import json,sys; d=json.load(open('/tmp/sweep_$name.json')); print(json.dumps({'variant': '$name', 'settings': '$settings', 'tok_s': {str(x['context']): round(x['tok_s'], 2) for x in d['decode']}}))" >>"$OUT/sweep.json" 2>>"$LOG"
  done
  cat "$OUT/sweep.json" | tee -a "$LOG"
  [ "${CHECK_SWEEP_ONLY:-0}" = 1 ] && exit 0  # CHECK_SWEEP_ONLY=1: the sweep alone (no tests)
fi
run cuda_matmul_test 150 "$BIN/cuda_matmul_test" --gtest_output=json:"$OUT/tests.json"
run cuda_attention_test 200 "$BIN/cuda_attention_test" --gtest_brief=1
run cuda_fused_test 150 "$BIN/cuda_fused_test" --gtest_brief=1
# CHECK_CORE=1 leaves out the runs under switches that are off by default (below, to models_test_no_spread_rows):
# for a call that must fit beside others, where the code behind those switches did not change.
[ "${CHECK_CORE:-0}" != 1 ] && HELIUM_CUDA_PDL=0 run cuda_fused_test_nopdl 150 "$BIN/cuda_fused_test" --gtest_brief=1
[ "${CHECK_CORE:-0}" != 1 ] && HELIUM_CUDA_MATMUL_TRIGGER=end run cuda_fused_test_late_trigger 150 "$BIN/cuda_fused_test" --gtest_brief=1
run models_test 120 "$BIN/models_test" --gtest_brief=1
if [ "${CHECK_CORE:-0}" != 1 ]; then
HELIUM_CUDA_PDL=0 run models_test_nopdl 120 "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
# The goldens through the fused decode attention (off by default; cuda_fused_test checks its bits).
HELIUM_CUDA_ATTN_FUSED=on run models_test_fused_attention 120 "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
# The goldens with the q/k/v projection doing the attention prologue (off by default; cuda_fused_test checks its bits).
HELIUM_CUDA_QKV_PROLOGUE=on run models_test_qkv_prologue 120 "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
# The goldens with one-row matmuls on the four-row instance (the one-row instance is the default;
# cuda_matmul_test checks that the two give the same bits).
HELIUM_CUDA_MMA_ONE_ROW=0 run models_test_four_row 120 "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
# The goldens with o_proj on the one-row instance's spread ring and on the deep one, each set by hand
# (Context::oproj_stages: 10 before tuning, the attention tuner picks 0 or 10 per GPU; cuda_matmul_test
# checks that the depths give the same bits).
HELIUM_CUDA_OPROJ_STAGES=0 run models_test_oproj_shallow 120 "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
HELIUM_CUDA_OPROJ_STAGES=10 run models_test_oproj_deep 120 "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
# The goldens with o_proj splitting its x itself (the attention merge writes the split by default;
# cuda_fused_test checks that the two give the same bits).
HELIUM_CUDA_ATTN_SPLIT=off run models_test_no_attention_split 120 "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
# The goldens with short contexts merged by the partition kernel's clusters (off by default;
# cuda_attention_test checks the bits).
HELIUM_CUDA_CLUSTER_MERGE=16 run models_test_cluster_merge 120 "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
# The goldens with row groups of 4-16 packed by the block scheduler (the multi-row spread is the default;
# cuda_matmul_test checks that the two give the same bits).
HELIUM_CUDA_MMA_SPREAD_ROWS=off run models_test_no_spread_rows 120 "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
# The goldens with every row count on the default kernel (by default the x-shared kernel takes each shape's
# launches from the row groups the start-up tuner found it faster from).
HELIUM_CUDA_MMA_XSHARED=off run models_test_no_x_shared 120 "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
fi
# CHECK_XSHARED=1: the fused-layer tests and the goldens with the x-shared multi-row kernel taking every row
# group of 16 (auto; by default, tuned, it takes each shape's launches from the row groups the start-up tuner
# chose; cuda_matmul_test's XSharedKernelHasTheDefaultKernelsBits runs in every check), then batched decode at
# 16, 32, 48 and 64 rows without it, by default, with wide (more than 32 rows) and with auto (tok/s into
# xshared.json).
if [ "${CHECK_XSHARED:-0}" = 1 ]; then
  HELIUM_CUDA_MMA_XSHARED=auto run cuda_fused_test_x_shared 150 "$BIN/cuda_fused_test" --gtest_brief=1
  HELIUM_CUDA_MMA_XSHARED=auto run models_test_x_shared 120 "$BIN/models_test" --gtest_brief=1 --gtest_filter='*cuda*'
  for rows in 16 32 48 64; do
    for variant in off:HELIUM_CUDA_MMA_XSHARED=off tuned: wide:HELIUM_CUDA_MMA_XSHARED=wide auto:HELIUM_CUDA_MMA_XSHARED=auto; do
      name=${variant%%:*}
      variant_env "${variant#*:}"
      rm -f /tmp/xs.json
      run "bench_decode_batch${rows}_x_shared_$name" 60 env "${env_args[@]}" "$BIN/helium_bench_decode" --device cuda \
        --config bench/configs/qwen3-8b --contexts 1024 --tokens 64 --runs 1 --prefill 0 --batch "$rows" --json /tmp/xs.json &&
        batch_summary /tmp/xs.json "$rows" "$name" >>"$OUT/xshared.json" 2>>"$LOG"
    done
  done
fi
run kv_test 30 "$BIN/kv_test" --gtest_brief=1
# The engine's sampled paths on the GPU: device candidates and totals against copied logits, and pipelined
# greedy decode against unpipelined, over the embedded model (read through HELIUM_SOURCE_DIR, as models_test
# reads its fixtures).
run engine_sampling 120 "$BIN/engine_test" --gtest_brief=1 --gtest_filter='SamplingPaths.*OnTheGpu:SpeedTest.*OnTheGpu:PipelinedDecode.*OnTheGpu:PipelinedDecode.OnByDefault*'
run sanitizer 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/models_test" \
  --gtest_filter='*GreedyContinuationMatchesTransformers/cuda_tiny_qwen3*'
# CHECK_BENCH=0: the tests alone (for a call that ran the protocol itself, first on a fresh machine).
[ "${CHECK_BENCH:-1}" = 0 ] && { grep -E "^=== .*exit" "$LOG"; exit 0; }
run bench_decode 240 "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b --json "$OUT/decode.json"
# Greedy steps queued one ahead (the engine's pipelined decode, EngineOptions::pipeline, on by default with
# CUDA) against the protocol's loop, back to back, twice.
for round in 1 2; do
  run "bench_decode_pipelined_$round" 100 "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b \
    --contexts 1024,8192,32768 --tokens 256 --runs 1 --prefill 0 --pipeline 1
  run "bench_decode_unpipelined_$round" 100 "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b \
    --contexts 1024,8192,32768 --tokens 256 --runs 1 --prefill 0 --pipeline 0
done
# The configurations the start-up tuner chose for it (a fresh machine tunes in its first decode run).
print_tuned >>"$LOG" 2>&1
# Sampled decode as the engine runs it, with a coding agent's settings: temperature 0.7 and top_p 0.95
# (the best 256 candidates and the row's softmax total from the device, drawn on the host; the dummy
# weights' rows are flat, so every draw reaches past the 256 and copies the logits too), the same at
# temperature 0.05 (peaked rows, as a trained model writes: drawn from the candidates), then with top_k 20.
run bench_decode_sampled 90 "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b --contexts 1024 --tokens 256 --runs 1 --prefill 0 --sample 0.7,0.95
run bench_decode_sampled_peaked 90 "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b --contexts 1024 --tokens 256 --runs 1 --prefill 0 --sample 0.05,0.95
# Batched greedy decode (--batch: 8 and 32 sequences decoded together, one row each per step; the row
# counts of batched decode and tree verification), tok/s over all rows beside the batch's ceiling.
run bench_decode_batch8 90 "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b --contexts 1024 --tokens 256 --runs 1 --prefill 0 --batch 8
run bench_decode_batch32 120 "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b --contexts 1024 --tokens 128 --runs 1 --prefill 0 --batch 32
run bench_decode_sampled_topk 90 "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b --contexts 1024 --tokens 256 --runs 1 --prefill 0 --sample 0.7,0.95,20
# CHECK_LEAN=1 leaves out the comparisons, the profile and the matmul benchmark; CHECK_QUICK=1 the op
# benchmarks (2 min).
if [ "${CHECK_LEAN:-0}" != 1 ]; then
  # Comparisons, one run each: programmatic dependent launch off; greedy tokens from copied logits (host).
  HELIUM_CUDA_PDL=0 run bench_decode_nopdl 150 "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b --contexts 1024,8192,32768 --runs 1 --json "$OUT/decode_nopdl.json"
  run bench_decode_host_argmax 60 "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b --contexts 1024 --runs 1 --prefill 0 --host-argmax 1
  # Where a decode step's time goes: every kernel of a short 1K-context decode timed by Nsight Compute
  # (clocks left alone), the last step's 258 kernels (Qwen3-8B: 1 + 36 x 7 + 5) summarised by name.
  run profile 240 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --log-file "$OUT/profile.csv" \
    "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b --contexts 1024 --tokens 3 --runs 0 --prefill 0
  run profile_summary 30 python3 tools/gpu/kernel_profile.py "$OUT/profile.csv" --kernels-per-step 258 --json "$OUT/profile.json"
  [ "${CHECK_QUICK:-0}" = 1 ] || run bench_matmul 120 "$BIN/helium_bench_cuda_matmul" --json "$OUT/matmul.json"
fi
[ "${CHECK_QUICK:-0}" = 1 ] || run bench_attention 90 "$BIN/helium_bench_cuda_attention" --json "$OUT/attention.json"
# The floor of a kernel-per-op decode step: kernels that only stream the step's bytes, per launch variant.
[ "${CHECK_QUICK:-0}" = 1 ] || run bench_stream 90 "$BIN/helium_bench_cuda_stream" --json "$OUT/stream.json"
grep -E "^=== .*exit" "$LOG"
