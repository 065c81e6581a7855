#!/usr/bin/env bash
# A short GPU call for iterating on a kernel: the decode matmuls' layer chain, the CUDA op tests that check
# bits (matmul, fused, attention), and the decode benchmark at 1K and 32K (256 tokens, one run). Carried binaries
# (.gpu-bin, `tools/gpu/check.sh pack`); logs under $OUT.
set -u
source "$(dirname "$0")/common.sh"
OUT=${OUT:-/tmp/helium-gpu-out}
BIN=/tmp/helium-gpu-bin
mkdir -p "$OUT" "$BIN" && tar -C "$BIN" -xJf .gpu-bin/bin.tar.xz || exit 1
"$BIN/helium_bench_cuda_matmul" --chain --json "$OUT/chain.json" 2>&1 | tee "$OUT/quick.log" | grep -v "^wrote"
for t in cuda_matmul_test cuda_fused_test cuda_attention_test; do
  "$BIN/$t" --gtest_brief=1 >>"$OUT/quick.log" 2>&1
  echo "$t: exit $?"
done
# QUICK_VARIANTS="name:VAR=v+VAR=v ...": the decode benchmark once per variant (default: one, as is), twice round.
for round in 1 2; do
  for variant in ${QUICK_VARIANTS:-default:}; do
    name=${variant%%:*}
    variant_env "${variant#*:}"
    env "${env_args[@]}" "$BIN/helium_bench_decode" --device cuda --config bench/configs/qwen3-8b \
      --contexts "${QUICK_CONTEXTS:-1024,32768}" --tokens 256 --runs 1 --prefill 0 --json "$OUT/decode.json" >>"$OUT/quick.log" 2>&1
    python3 -c "import json; d=json.load(open('$OUT/decode.json')); print('$name round $round', ' '.join(f\"{x['context']}: {x['tok_s']:.1f} ({x['ratio']:.3f})\" for x in d['decode']))"
  done
done
print_tuned
