#!/usr/bin/env bash
# The layer stream against the kernel-per-op step on the GPU machine, from binaries packed with
# `tools/gpu/check.sh pack` (or a partial pack holding cuda_fused_test and helium_bench_decode): the fused
# tests (and the stream's case without PDL), then decode at 1K (128 tokens, one run) with the stream off, on,
# its stream alone (HELIUM_CUDA_STREAM_DIAG=1), each also with attention left out; then 1K/8K/32K (256 tokens)
# off and on. Lines in $OUT/stream.log.
B=/tmp/helium-stream-bin
mkdir -p $B && tar -C $B -xJf .gpu-bin/bin.tar.xz || exit 1
export LD_LIBRARY_PATH=$B/lib
S=${OUT:-/tmp}/stream.log
timeout 150 $B/cuda_fused_test --gtest_brief=1 > /tmp/f.txt 2>&1
echo "fused rc $?: $(grep -E 'FAILED|PASSED|rror' /tmp/f.txt | head -5 | tr '\n' ' ')" | tee -a $S
HELIUM_CUDA_PDL=0 timeout 150 $B/cuda_fused_test --gtest_brief=1 --gtest_filter='*LayerStream*' > /tmp/f.txt 2>&1
echo "stream test, PDL off, rc $?: $(grep -E 'FAILED|PASSED|rror' /tmp/f.txt | head -5 | tr '\n' ' ')" | tee -a $S
N="HELIUM_CUDA_OMIT=prologue,attention,merge"
O="HELIUM_CUDA_STREAM=on"
for v in "HELIUM_CUDA_STREAM=off" "$O" "$O HELIUM_CUDA_STREAM_DIAG=1" "$N HELIUM_CUDA_STREAM=off" "$N $O" "$N $O HELIUM_CUDA_STREAM_DIAG=1" ${STREAM_AB_EXTRA:-}; do
  env $v timeout 100 $B/helium_bench_decode --device cuda --config bench/configs/qwen3-8b --contexts 1024 --tokens 128 --runs 1 --prefill 0 > /tmp/o.txt 2>&1
  echo "rc $?" >> /tmp/o.txt
  echo "$v: $(grep -E 'decode  |rc |rror|abort' /tmp/o.txt | tr '\n' ' ')" | tee -a $S
done
[ "${STREAM_AB_QUICK:-0}" = 1 ] && exit 0
for v in "HELIUM_CUDA_STREAM=off" "$O"; do
  env $v timeout 150 $B/helium_bench_decode --device cuda --config bench/configs/qwen3-8b --contexts 1024,8192,32768 --tokens 256 --runs 1 --prefill 0 > /tmp/o.txt 2>&1
  echo "$v: $(grep -E 'bandwidth|decode  ' /tmp/o.txt | tr '\n' ' ')" | tee -a $S
done
