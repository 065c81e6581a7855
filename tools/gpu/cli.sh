#!/usr/bin/env bash
# The user-facing commands on the GPU, in one call: `helium bench` (the engine's own loop, pipelined greedy decode
# as it runs by default with CUDA) on the Qwen3-8B shape with dummy weights (and at 1K with --pipeline off and on),
# `helium run` on CUDA and on the CPU with the embedded model, and `helium serve --device cuda` answering real HTTP
# requests (OpenAI chat, streamed and not, Anthropic messages, a malformed body) and still healthy after them.
# Logs and JSON under $OUT.
#
# The helium binary with the libraries it links does not fit beside check.sh's binaries in one carried tree
# (64 MiB), so it travels alone:
#   here:  tools/gpu/cli.sh pack          (after building the helium target in build/gpu)
#   there: tools/gpu/cli.sh run           (carry .gpu-bin/cli.tar.xz; CLI_BENCH=0 skips the benches)
set -u
source "$(dirname "$0")/common.sh"
OUT=${OUT:-/tmp/helium-gpu-out}
BIN=/tmp/helium-gpu-cli

case "${1:-run}" in
  pack)
    rm -rf /tmp/helium-cli-pack && mkdir -p .gpu-bin /tmp/helium-cli-pack/lib
    cp "$(find build/gpu -type f -name helium -perm -u+x | head -1)" /tmp/helium-cli-pack/ || exit 1
    strip /tmp/helium-cli-pack/helium
    # Every library it links but the C and C++ runtimes and CUDA's (the GPU machine has those): the HTTP server's
    # and the tokenizer's are Debian's alone, and the rest (libcurl's) may be missing or of other versions there.
    ldd /tmp/helium-cli-pack/helium | awk '$3 ~ /^\// {print $3}' |
      grep -vE "/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|libcudart|libcublasLt|libcublas)\.so" |
      xargs -r -I{} cp -L {} /tmp/helium-cli-pack/lib/
    strip --strip-unneeded /tmp/helium-cli-pack/lib/*
    tar -C /tmp/helium-cli-pack -cf - . | xz -T1 -9e > .gpu-bin/cli.tar.xz
    ls -la .gpu-bin/cli.tar.xz
    exit 0 ;;
  run) ;;
  *) echo "usage: $0 pack|run" >&2; exit 2 ;;
esac

mkdir -p "$OUT" "$BIN" && tar -C "$BIN" -xJf .gpu-bin/cli.tar.xz || exit 1
export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LOG="$OUT/cli.log"
H="$BIN/helium"
MODEL=models/helium-code-12m  # the embedded model (real weights and tokenizer)
nvidia-smi --query-gpu=name,driver_version --format=csv | tee -a "$LOG"
ldd "$H" | grep "not found" | tee -a "$LOG"  # nothing, or what the pack still lacks

# CLI_BENCH=0: the run and serve checks alone (a short call), without the Qwen3-8B benches.
if [ "${CLI_BENCH:-1}" != 0 ]; then
  run helium_bench 300 "$H" bench --model bench/configs/qwen3-8b --load-format dummy --device cuda --offline \
    --json "$OUT/helium_bench.json"
  # The two greedy loops at 1K, back to back (the tuning cached by the run above): --pipeline off, then on.
  for p in off on; do
    run "helium_bench_pipeline_$p" 120 "$H" bench --model bench/configs/qwen3-8b --load-format dummy --device cuda \
      --offline --contexts 1024 --tokens 256 --runs 1 --prefill 0 --pipeline "$p"
  done
fi
PROMPT='def fibonacci(n):'
# One greedy run a device: the text into the log, the ids (--show-ids, on stderr) kept apart for the comparison.
for device in cuda cpu; do
  echo "=== helium_run_$device" | tee -a "$LOG"
  timeout 60 "$H" run --device "$device" --offline --model "$MODEL" -p "$PROMPT" -n 64 --temp 0 --show-ids \
    >>"$LOG" 2>"/tmp/ids_$device.txt"
  echo "=== helium_run_$device: exit $?" | tee -a "$LOG"
done
if ! grep -q "^generated ids" /tmp/ids_cuda.txt || ! grep -q "^generated ids" /tmp/ids_cpu.txt; then
  echo "helium run: FAILED to generate on CUDA or the CPU" | tee -a "$LOG"
  cat /tmp/ids_cuda.txt /tmp/ids_cpu.txt >>"$LOG"
elif diff <(grep "^generated ids" /tmp/ids_cuda.txt) <(grep "^generated ids" /tmp/ids_cpu.txt) >/dev/null; then
  echo "helium run: the CUDA and CPU greedy ids are the same" | tee -a "$LOG"
else
  echo "helium run: the CUDA and CPU greedy ids differ (near-ties may part them; the goldens test bounds the logits)" | tee -a "$LOG"
  cat /tmp/ids_cuda.txt /tmp/ids_cpu.txt >>"$LOG"
fi

PORT=18391
"$H" serve --device cuda --offline --model "$MODEL" --port "$PORT" >"$OUT/serve.log" 2>&1 &
SERVER=$!
run serve_requests 120 env -u LD_LIBRARY_PATH python3 - "$PORT" <<'PY'  # the machine's own libraries for Python
import json, sys, time, urllib.error, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
def call(path, body=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
for _ in range(240):  # up to 60 s for the model to load and tune
    try:
        if call("/health")[0] == 200: break
    except OSError: pass
    time.sleep(0.25)
else:
    sys.exit("the server never answered /health")
failures = 0
def check(name, ok, detail):
    global failures
    print(("ok   " if ok else "FAIL ") + name + ": " + detail[:300].replace("\n", " "))
    failures += not ok
s, t = call("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "Write a hello world in C."}],
                                     "max_tokens": 48, "temperature": 0})
check("openai chat", s == 200 and json.loads(t)["choices"][0]["message"]["content"] is not None, f"{s} {t}")
s, t = call("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "List three primes."}],
                                     "max_tokens": 32, "stream": True, "seed": 7, "temperature": 0.7})
check("openai stream", s == 200 and "data: [DONE]" in t, f"{s} {t[-200:]}")
s, t = call("/v1/messages", {"model": "m", "max_tokens": 32, "messages": [{"role": "user", "content": "Say hi."}]})
check("anthropic messages", s == 200 and json.loads(t)["type"] == "message", f"{s} {t}")
s, t = call("/v1/chat/completions", raw=b'{"model": "m", "messages": [')
check("malformed body refused", s == 400, f"{s} {t}")
s, t = call("/health")
check("healthy after", s == 200, f"{s} {t}")
sys.exit(1 if failures else 0)
PY
kill "$SERVER" 2>/dev/null
wait "$SERVER" 2>/dev/null
tail -5 "$OUT/serve.log" >>"$LOG"
grep -E "^=== .*exit" "$LOG"
