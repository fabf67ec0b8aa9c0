#!/usr/bin/env bash
# Issue 53's comparison in one run: every scenario against RingMQ, FlashMQ, mosquitto and
# rumqttd, with both load generators (ringmq-bench and nanomq_cli bench) and the paho latency
# probe, ROUNDS rounds with the broker order rotated by one each round, then a markdown table
# (scripts/bench/issue53_table.py: per scenario each broker's median over the rounds and RingMQ
# against FlashMQ) on stdout and in bench-results/issue53/<SET>.md.
#   ROUNDS=3  SET=issue53-<timestamp> (round n is RUN_ID=<SET>-r<n>)
#   BROKERS="ringmq flashmq mosquitto rumqttd"  PARTS="fanout p2p nanomq-fanout nanomq-p2p latency"
#   FANOUT_STEPS="100 200 303 400 500" (per publisher, QoS 0 and 1; nanomq-fanout runs the same
#   steps as NANO_FANOUT_STEPS)  P2P_RATES="20 40 67 100" (QoS 0 per pair; then QoS 1 and 2
#   unpaced: P2P_FLOOD_QOS="1 2" ("" for none), P2P_LIMIT per publisher, p2p.sh's default 1000;
#   nanomq_cli's NANO_P2P_FLOOD_LIMIT, default 100)
#   WINDOW=5 (s per step)  PART_TIMEOUT=1500 (s, bound on each part of a round)
#   LAT_EXTRA_BROKERS="flashmq-nodelay": brokers the latency part also runs (FlashMQ ships with
#   tcp_nodelay off, and Nagle's algorithm then holds a probe's message for the next one: p50
#   about 10 ms at 10 ms intervals; shared/BENCHMARKS.md asks for FlashMQ both ways)
# Other settings pass through to the scripts (LAT_IDLE, LAT_SAMPLES, NANO_*, BROKER_CPUS, ...).
# The release binaries are built once (lib.sh's build_ringmq), the peers installed once.
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-3}
SET=${SET:-issue53-$(date +%Y%m%d-%H%M%S)}
BROKERS=${BROKERS:-ringmq flashmq mosquitto rumqttd}
PARTS=${PARTS:-fanout p2p nanomq-fanout nanomq-p2p latency}
export FANOUT_STEPS=${FANOUT_STEPS:-100 200 303 400 500}
export NANO_FANOUT_STEPS=${NANO_FANOUT_STEPS:-$FANOUT_STEPS}
P2P_RATES=${P2P_RATES:-20 40 67 100}
export NANO_P2P_RATES=${NANO_P2P_RATES:-$P2P_RATES}
P2P_FLOOD_QOS=${P2P_FLOOD_QOS-1 2}
export NANO_P2P_FLOOD_QOS=${NANO_P2P_FLOOD_QOS-$P2P_FLOOD_QOS}
export WINDOW=${WINDOW:-5}
PART_TIMEOUT=${PART_TIMEOUT:-1500}
LAT_EXTRA_BROKERS=${LAT_EXTRA_BROKERS-flashmq-nodelay}
results=${BENCH_RESULTS:-$dir/../../bench-results/scenarios}
out_dir=$(dirname "$results")/issue53
mkdir -p "$out_dir"
log() { printf '[%s] issue53: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# part NAME ENV... -- SCRIPT: one script of a round, bounded by PART_TIMEOUT; a failure is logged
# and the round goes on.
part() {
  local name=$1 envs=()
  shift
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  log "round $round, $name ($rotated)"
  env RUN_ID="$SET-r$round" REPS=1 BROKERS="$rotated" "${envs[@]}" \
    timeout "$PART_TIMEOUT" "$dir/$1" >>"$out_dir/$SET.log" 2>&1 || log "round $round: $name failed or timed out (see $out_dir/$SET.log)"
  export SKIP_BUILD=1
}

read -ra order <<<"$BROKERS"
start=$SECONDS
for round in $(seq 1 "$ROUNDS"); do
  shift_by=$(((round - 1) % ${#order[@]}))
  rotated="${order[*]:shift_by} ${order[*]:0:shift_by}"
  rotated=${rotated% }
  for p in $PARTS; do
    case $p in
      fanout)
        part "fan-out QoS 0 (ringmq-bench)" -- fanout.sh
        part "fan-out QoS 1 (ringmq-bench)" -- fanout-qos1.sh
        ;;
      p2p)
        for rate in $P2P_RATES; do
          part "p2p QoS 0 at $rate/s per pair (ringmq-bench)" P2P_QOS=0 P2P_RATE="$rate" -- p2p.sh
        done
        [[ -n $P2P_FLOOD_QOS ]] && part "p2p QoS $P2P_FLOOD_QOS unpaced (ringmq-bench)" \
          P2P_QOS="$P2P_FLOOD_QOS" P2P_RATE=0 -- p2p.sh
        ;;
      nanomq-fanout) part "fan-out (nanomq_cli)" SCENARIO=fanout -- nanomq-bench.sh ;;
      nanomq-p2p) part "p2p (nanomq_cli)" SCENARIO=p2p -- nanomq-bench.sh ;;
      latency) part "latency (paho probe)" BROKERS="$rotated $LAT_EXTRA_BROKERS" -- latency-peers.sh ;;
      *) log "unknown part $p" ;;
    esac
  done
done
log "done in $((SECONDS - start)) s; log: $out_dir/$SET.log"
python3 "$dir/issue53_table.py" --results "$results" --set "$SET" --brokers "$BROKERS $LAT_EXTRA_BROKERS" |
  tee "$out_dir/$SET.md"
