#!/usr/bin/env bash
# Scenario latency (after the AXMQ method): 10k idle background connections, plus background
# p2p (1,000 pairs, 256 B, QoS 0), while one probe client publishes QoS 0 to a topic it
# subscribes to: 2,000 samples 10 ms apart. Two loads, one row each in latency.jsonl:
#   own:    p2p at half of this broker's maximum p2p rate (measured first, idle connections held)
#   common: p2p at LAT_COMMON_RATE msg/s for every broker (identical load)
#   LAT_IDLE=10000  LAT_PAIRS=1000  LAT_SAMPLES=2000  LAT_INTERVAL_MS=10  LAT_LOADS="own common"
#   LAT_COMMON_RATE=20000
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LAT_IDLE=${LAT_IDLE:-10000}
LAT_PAIRS=${LAT_PAIRS:-1000}
LAT_SAMPLES=${LAT_SAMPLES:-2000}
LAT_INTERVAL_MS=${LAT_INTERVAL_MS:-10}
LAT_LOADS=${LAT_LOADS:-own common}
LAT_COMMON_RATE=${LAT_COMMON_RATE:-20000}

# probe_under LOAD RATE: background p2p at RATE msg/s in total, then the probe; records a row.
probe_under() {
  local load=$1 rate=$2 per_pub probe_s=$((LAT_SAMPLES * LAT_INTERVAL_MS / 1000 + 15)) bg_pid
  per_pub=$(awk -v r="$rate" -v p="$LAT_PAIRS" 'BEGIN { printf "%.3f", r / p }')
  log "latency $BROKER_NAME: $load load: background p2p at $rate msg/s"
  bench_bg "$(bench_json_path "bg-p2p")" p2p --host "127.0.0.1:$BROKER_PORT" \
    --pairs "$LAT_PAIRS" -s 256 -q 0 -r "$per_pub" -d $((probe_s + 10)) --warmup 1 \
    --client-prefix "bg$load" --quiet
  bg_pid=$BENCH_PID
  sleep 4
  measured_bench latency "{\"load\":\"$load\",\"idle\":$LAT_IDLE,\"pairs\":$LAT_PAIRS,\"p2p_max_per_s\":$LAT_MAX,\"p2p_rate_per_s\":$rate}" \
    latency --samples "$LAT_SAMPLES" --interval-ms "$LAT_INTERVAL_MS" -d "$probe_s" \
    --client-prefix "probe$load" --quiet || true
  kill "$bg_pid" 2>/dev/null || true
  wait "$bg_pid" 2>/dev/null || true
}

latency_once() {
  local max_json load
  idle_background "$LAT_IDLE" idle 127.0.2.1 127.0.2.2
  max_json=$(bench_json_path p2p-max)
  run_bench "$max_json" p2p --host "127.0.0.1:$BROKER_PORT" --pairs "$LAT_PAIRS" -s 256 -q 0 \
    -r 0 -L 500 -d 12 --warmup 1 --client-prefix max --quiet || true
  LAT_MAX=$(jq '.window_received_per_s // 0 | floor' "$max_json")
  rm -f "$max_json"
  log "latency $BROKER_NAME: p2p max $LAT_MAX msg/s"
  for load in $LAT_LOADS; do
    case $load in
      own) probe_under own $((LAT_MAX / 2)) ;;
      common) probe_under common "$LAT_COMMON_RATE" ;;
    esac
  done
  background_stop
}

prepare_brokers
for_each_broker latency_once
