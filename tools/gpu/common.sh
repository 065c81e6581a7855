# tools/gpu/common.sh — what check.sh, quick.sh and xshared_ab.sh share; sourced, not run.

# variant_env "VAR=v+VAR=v": the settings of one sweep variant, as env's arguments, into the array env_args.
variant_env() {
  env_args=()
  local pairs kv
  IFS='+' read -r -a pairs <<<"$1"
  for kv in "${pairs[@]}"; do [ -n "$kv" ] && env_args+=("$kv"); done
}

# The decode matmul configurations the start-up tuner chose in this call (what the benchmarks ran).
print_tuned() {
  python3 - "${HELIUM_CACHE_DIR:-$HOME/.cache/helium}/tune" <<'PY'
import glob, json, sys
for path in sorted(glob.glob(sys.argv[1] + "/*.json")):
    j = json.load(open(path))
    if "tiers" in j:
        t = j["tiers"]
        print(f"attention tiers ({path.rsplit('/', 1)[-1]}): 64-key partitions to {t['small_end']} keys, 128 to "
              f"{t['medium_end']}, 256 to {t['large_end']}, then 512")
        for r in j.get("timed", []):
            print(f"  {r['keys']} keys, {r['partition_keys']}-key partitions: {r['us']:.2f} us")
    for e in j.get("shapes", []):
        c = e["config"]
        if c.get("mma_stages", 0) > 0:
            print(f"tuned {e['n']} x {e['k']} ({e['dtype']}): tensor cores, {c['mma_stages']} stages, {e['us']:.1f} us")
            if "x_shared_from_groups" in e:
                g = e["x_shared_from_groups"]
                timed = ", ".join(f"{t['rows']} rows {t['default_us']:.1f} / {t['x_shared_us']:.1f} us" for t in e.get("x_shared_timed", []))
                print(f"  x-shared from {'no' if g >= 5 else 9 if g == 1 else 16 * g - 15} rows (default / x-shared: {timed})")
        else:
            print(f"tuned {e['n']} x {e['k']} ({e['dtype']}): lane {c['features_per_lane']} x {c['rounds_in_flight']} rounds, "
                  f"warps {c['feature_warps']} x {c['k_warps']} k, {e['us']:.1f} us")
PY
}

# run NAME TIMEOUT COMMAND...: logs the command, its output and its exit code into $LOG.
run() {
  local name=$1 limit=$2
  shift 2
  echo "=== $name: $*" | tee -a "$LOG"
  local t0=$SECONDS
  timeout "$limit" "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "=== $name: exit $rc in $((SECONDS - t0)) s" | tee -a "$LOG"
}

# batch_summary JSON ROWS NAME: one line of a batched decode run (helium_bench_decode --batch ROWS --json JSON)
# for the A/B tables: rows, variant, tok/s of all rows, the batch's ceiling and the ratio.
batch_summary() {
  python3 -c "import json, sys; d = json.load(open(sys.argv[1]))['decode'][0]; print(json.dumps({'rows': int(sys.argv[2]), 'variant': sys.argv[3], 'tok_s': round(d['tok_s'], 2), 'ceiling': round(d['ceiling_tok_s'], 2), 'ratio': round(d['ratio'], 3)}))" "$1" "$2" "$3"
}
