#!/usr/bin/env bash
# Scenario latency (after the AXMQ method): 10k idle background connections, plus background
# p2p (1,000 pairs, 256 B, QoS 0), while one probe client publishes QoS 0 to a topic it
# subscribes to: 2,000 samples 10 ms apart. Loads, one row each in latency.jsonl:
#   own:    p2p at half of this broker's maximum p2p rate (measured first, idle connections held)
#   common: p2p at LAT_COMMON_RATE msg/s for every broker (identical load)
#   curve:  one row per percentage in LAT_CURVE of the maximum p2p rate (load "curveN"): the
#           latency/throughput curve
#   LAT_IDLE=10000  LAT_PAIRS=1000  LAT_SAMPLES=2000  LAT_INTERVAL_MS=10  LAT_LOADS="own common"
#   LAT_COMMON_RATE=20000  LAT_CURVE="10 25 50 75 100"
#   LAT_PROBE_SLICE_US=0: the scheduler slice the probe's thread asks for (`ringmq-bench
#           --sched-slice-us`; 0 = the kernel's default), the same for every broker
#   LAT_MAX=N: take N msg/s as the maximum p2p rate instead of measuring it (the same absolute
#           loads for several builds or configurations)
#   LAT_IDLE_BINDS="127.0.2.1 127.0.2.2": source addresses of the idle clients (runs back to back
#           on other addresses do not meet the previous run's TIME_WAIT ports)
#   SAMPLE_CONNS=0: the broker sampler records -1 connections instead of running `ss` each second
# The background publishers use ringmq-bench's default `--phase spread`: the same offered load,
# spread over each period, for every broker.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LAT_IDLE=${LAT_IDLE:-10000}
LAT_PAIRS=${LAT_PAIRS:-1000}
LAT_SAMPLES=${LAT_SAMPLES:-2000}
LAT_INTERVAL_MS=${LAT_INTERVAL_MS:-10}
LAT_PROBE_SLICE_US=${LAT_PROBE_SLICE_US:-0}
LAT_LOADS=${LAT_LOADS:-own common}
LAT_COMMON_RATE=${LAT_COMMON_RATE:-20000}
LAT_CURVE=${LAT_CURVE:-10 25 50 75 100}
LAT_MAX_GIVEN=${LAT_MAX:-}
LAT_IDLE_BINDS=${LAT_IDLE_BINDS:-127.0.2.1 127.0.2.2}
# The broker sampler does not count connections with `ss` once a second during the probe (lib.sh).
export SAMPLE_CONNS=${SAMPLE_CONNS:-0}

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
    --sched-slice-us "$LAT_PROBE_SLICE_US" --client-prefix "probe$load" --quiet || true
  kill "$bg_pid" 2>/dev/null || true
  wait "$bg_pid" 2>/dev/null || true
}

# measure_max: sets LAT_MAX, this broker's maximum p2p rate (or the one given).
measure_max() {
  local max_json
  if [[ -n $LAT_MAX_GIVEN ]]; then
    LAT_MAX=$LAT_MAX_GIVEN
    log "latency $BROKER_NAME: p2p max taken as $LAT_MAX msg/s"
    return
  fi
  max_json=$(bench_json_path p2p-max)
  run_bench "$max_json" p2p --host "127.0.0.1:$BROKER_PORT" --pairs "$LAT_PAIRS" -s 256 -q 0 \
    -r 0 -L 500 -d 12 --warmup 1 --client-prefix max --quiet || true
  LAT_MAX=$(jq '.window_received_per_s // 0 | floor' "$max_json")
  rm -f "$max_json"
  log "latency $BROKER_NAME: p2p max $LAT_MAX msg/s"
}

latency_once() {
  local load pct
  # shellcheck disable=SC2086 # one address per word
  idle_background "$LAT_IDLE" idle $LAT_IDLE_BINDS
  measure_max
  for load in $LAT_LOADS; do
    case $load in
      own) probe_under own $((LAT_MAX / 2)) ;;
      common) probe_under common "$LAT_COMMON_RATE" ;;
      curve)
        for pct in $LAT_CURVE; do
          probe_under "curve$pct" $((LAT_MAX * pct / 100))
        done
        ;;
    esac
  done
  background_stop
}

prepare_brokers
for_each_broker latency_once
