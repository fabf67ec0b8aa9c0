#!/usr/bin/env bash
# Latency seen by an independent client: scripts/bench/paho_probe.py (paho-mqtt, QoS 0 to a
# topic it subscribes to, LAT_SAMPLES samples LAT_INTERVAL_MS apart) against every broker in
# BROKERS (lib.sh), under two loads, one row each in bench-results/scenarios/latency-paho.jsonl
# (p50/p90/p99/p99.9/max in µs, lost samples, the broker's CPU s and RSS over the probe):
#   unloaded: the probe alone
#   loaded:   LAT_IDLE idle connections (ringmq-bench conn from the source addresses
#             LAT_IDLE_BINDS, keep-alive 300 s) plus background p2p of LAT_PAIRS pairs, 256 B,
#             QoS 0, LAT_BG_RATE msg/s in total (ringmq-bench p2p, spread phase), as latency.sh
#   LAT_IDLE=10000  LAT_IDLE_BINDS="127.0.2.1 127.0.2.2"  LAT_PAIRS=100  LAT_BG_RATE=1000
#   LAT_SAMPLES=2000  LAT_INTERVAL_MS=10  LAT_LOADS="unloaded loaded"
#   LAT_PROBE_ARGS: more arguments for the probe (latency-sched.sh passes --slow-log)
# Bounded: the probe runs at most LAT_SAMPLES x LAT_INTERVAL_MS + 30 s, the background load
# 15 s longer, the idle clients 300 s.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LAT_IDLE=${LAT_IDLE:-10000}
LAT_IDLE_BINDS=${LAT_IDLE_BINDS:-127.0.2.1 127.0.2.2}
LAT_PAIRS=${LAT_PAIRS:-100}
LAT_BG_RATE=${LAT_BG_RATE:-1000}
LAT_SAMPLES=${LAT_SAMPLES:-2000}
LAT_INTERVAL_MS=${LAT_INTERVAL_MS:-10}
LAT_LOADS=${LAT_LOADS:-unloaded loaded}
# No `ss` once a second beside the probe (lib.sh, sampler_start).
export SAMPLE_CONNS=${SAMPLE_CONNS:-0}

# probe LOAD EXTRA_JSON: one paho probe, measured; records a row.
probe() {
  local load=$1 extra=$2 out cpu0 cpu1 sampled bound=$((LAT_SAMPLES * LAT_INTERVAL_MS / 1000 + 30))
  out=$(mktemp "$RUN_DIR/paho.XXXXXX")
  sampler_start
  cpu0=$(cpu_s "$BROKER_PID")
  # shellcheck disable=SC2086 # LAT_PROBE_ARGS is a list of arguments
  "${LOADGEN_TASKSET[@]}" timeout "$bound" python3 "$BENCH_DIR/paho_probe.py" --port "$BROKER_PORT" \
    --samples "$LAT_SAMPLES" --interval-ms "$LAT_INTERVAL_MS" --client-id "paho-$load-$REP" \
    ${LAT_PROBE_ARGS:-} >"$out" 2>>"$RUN_DIR/bench.log" || true
  cpu1=$cpu0
  if broker_alive; then cpu1=$(cpu_s "$BROKER_PID"); fi
  sampled=$(sampler_stop)
  if [[ ! -s $out ]]; then
    log "latency-paho $BROKER_NAME: the probe printed nothing (see $RUN_DIR/bench.log)"
    rm -f "$out"
    return 1
  fi
  record latency-paho "$(jq -c --argjson extra "$extra" --argjson s "$sampled" \
    --argjson cpu "$(fsub "$cpu1" "$cpu0")" --arg load "$load" '
    $extra + {load: $load, latency_us: ., broker_cpu_s: $cpu, rss_peak_kb: $s.rss_peak_kb,
              rss_steady_kb: $s.rss_steady_kb}' "$out")"
  rm -f "$out"
}

latency_peers_once() {
  local load per_pub
  for load in $LAT_LOADS; do
    case $load in
      unloaded) probe unloaded '{"idle":0,"pairs":0,"bg_rate_per_s":0}' ;;
      loaded)
        # shellcheck disable=SC2086 # one address per word
        idle_background "$LAT_IDLE" "idle$REP" $LAT_IDLE_BINDS
        per_pub=$(awk -v r="$LAT_BG_RATE" -v p="$LAT_PAIRS" 'BEGIN { printf "%.3f", r / p }')
        bench_bg "$(bench_json_path bg-p2p)" p2p --host "127.0.0.1:$BROKER_PORT" \
          --pairs "$LAT_PAIRS" -s 256 -q 0 -r "$per_pub" \
          -d $((LAT_SAMPLES * LAT_INTERVAL_MS / 1000 + 45)) --warmup 1 --client-prefix "bg$REP" --quiet
        sleep 4
        probe loaded "{\"idle\":$LAT_IDLE,\"pairs\":$LAT_PAIRS,\"bg_rate_per_s\":$LAT_BG_RATE}"
        background_stop
        ;;
      *) log "unknown load $load" ;;
    esac
  done
}

python3 -c 'import paho.mqtt.client' 2>/dev/null ||
  pip install --break-system-packages paho-mqtt >&2 ||
  { log "paho-mqtt cannot be installed; nothing measured"; exit 1; }
prepare_brokers
for_each_broker latency_peers_once
