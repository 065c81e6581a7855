#!/usr/bin/env bash
# Runs train_code_models.py on the GPU machine across device calls: the first call starts it in its own
# session and waits up to WAIT seconds; a later call (within the machine's warm time) waits again. When
# training has finished, the two checkpoints and report.json come back in $OUT/models.tar.gz.
set -u
WAIT=${WAIT:-560}
if [ ! -f /tmp/helium-train/started ]; then
  mkdir -p /tmp/helium-train && touch /tmp/helium-train/started
  PYTHONUNBUFFERED=1 setsid python3 tools/train/train_code_models.py /tmp/helium-train/out "$@" \
    > /tmp/helium-train/log.txt 2>&1 &
  echo $! > /tmp/helium-train/pid
fi
pid=$(cat /tmp/helium-train/pid)
for ((i = 0; i < WAIT; i += 5)); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 5
done
cp /tmp/helium-train/log.txt "$OUT/log.txt"
if [ -f /tmp/helium-train/out/report.json ]; then
  rm -rf /tmp/helium-train/out/_tokenizer
  tar -C /tmp/helium-train/out -czf "$OUT/models.tar.gz" .
  echo "training finished"
else
  kill -0 "$pid" 2>/dev/null && echo "still training" || echo "training process ended without a report"
fi
tail -30 /tmp/helium-train/log.txt
