#!/usr/bin/env bash
# Scenario suback: how long until a SUBSCRIBE (and an UNSUBSCRIBE) is acknowledged, one request
# at a time, each a new filter (suback_probe.py). RingMQ acknowledges only once the change is in
# effect on every shard, so this bounds the window in which another client's PUBLISH, sent right
# after the SUBSCRIBE, misses it. Two loads, one row each in suback.jsonl:
#   idle: nothing else running
#   load: background p2p (SUBACK_PAIRS pairs, 256 B, QoS 0) at SUBACK_RATE msg/s in total
#   SUBACK_SAMPLES=2000  SUBACK_PAIRS=1000  SUBACK_RATE=20000
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SUBACK_SAMPLES=${SUBACK_SAMPLES:-2000}
SUBACK_PAIRS=${SUBACK_PAIRS:-1000}
SUBACK_RATE=${SUBACK_RATE:-20000}

suback_probe() { # load -> records a row
  local out
  out=$(timeout 300 python3 "$BENCH_DIR/suback_probe.py" 127.0.0.1 "$BROKER_PORT" "$SUBACK_SAMPLES") || {
    log "suback $BROKER_NAME: probe failed under $1"
    return 1
  }
  record suback "$(jq -c -n --arg load "$1" --argjson rate "$2" --argjson r "$out" \
    '{load: $load, p2p_rate_per_s: $rate} + $r')"
}

suback_once() {
  suback_probe idle 0
  local per_pub bg_pid
  per_pub=$(awk -v r="$SUBACK_RATE" -v p="$SUBACK_PAIRS" 'BEGIN { printf "%.3f", r / p }')
  bench_bg "$(bench_json_path bg-p2p)" p2p --host "127.0.0.1:$BROKER_PORT" \
    --pairs "$SUBACK_PAIRS" -s 256 -q 0 -r "$per_pub" -d 300 --warmup 1 \
    --client-prefix bgsub --quiet
  bg_pid=$BENCH_PID
  sleep 4 # the background pairs connect and reach their rate (load shaping)
  suback_probe load "$SUBACK_RATE"
  kill "$bg_pid" 2>/dev/null || true
  wait "$bg_pid" 2>/dev/null || true
  background_stop
}

prepare_brokers
for_each_broker suback_once
