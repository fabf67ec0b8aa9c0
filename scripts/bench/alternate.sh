#!/usr/bin/env bash
# Compares release builds on one scenario in alternating rounds (the machine drifts between
# runs, so builds are compared round by round, never one set after the other):
#   scripts/bench/alternate.sh <scenario> <set> <rounds> <build>...
# Each build is a binary directory made with `cargo build --release -p ringmq -p bench` and
# copied to ${BUILD_ROOT:-/tmp/tgt-}<build>/release/. Round n runs <scenario>.sh once per build
# (the order rotated by one build each round),
# as RUN_ID=<set>-<build>-r<n> (rows in bench-results/scenarios/<scenario>.jsonl, logs in
# bench-results/alternate/). PEERS="rumqttd ..." run beside the first build named, every round.
# Other settings pass through the environment (FANOUT_STEPS, P2P_QOS, RINGMQ_CONFIG_EXTRA, ...).
set -euo pipefail
scenario=${1:?usage: scripts/bench/alternate.sh <scenario> <set> <rounds> <build>...}
set_name=${2:?set name}
rounds=${3:?rounds}
shift 3
[[ $# -gt 0 ]] || { echo "no builds given" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
script=$root/scripts/bench/$scenario.sh
[[ -x $script ]] || { echo "no scenario script $script" >&2; exit 2; }
for build in "$@"; do
  dir=${BUILD_ROOT:-/tmp/tgt-}$build
  [[ -x $dir/release/ringmq ]] || { echo "no build at $dir/release/ringmq" >&2; exit 2; }
done
logs=$root/bench-results/alternate
mkdir -p "$logs"
builds=("$@")
for round in $(seq 1 "$rounds"); do
  # The build run first in a round won 12 of 14 rounds whichever it was (docs/bench/history/
  # issue-17-part1-throughput.md, session 21): each round starts one build further on, so every
  # build leads as often.
  shift_by=$(((round - 1) % ${#builds[@]}))
  for build in "${builds[@]:shift_by}" "${builds[@]:0:shift_by}"; do
    brokers=ringmq
    [[ $build == "$1" && -n ${PEERS:-} ]] && brokers="ringmq $PEERS"
    run_id=$set_name-$build-r$round
    CARGO_TARGET_DIR=${BUILD_ROOT:-/tmp/tgt-}$build SKIP_BUILD=1 RUN_ID=$run_id REPS=1 \
      BROKERS=$brokers "$script" >"$logs/$run_id.log" 2>&1 || echo "$run_id: scenario failed" >&2
    # One line per broker and step (the scenario logs "[time] <scenario> <broker>: {json}").
    sed -nE 's/^\[[0-9:]+\] [a-z0-9-]+ ([a-z]+): (\{.*\})$/\1 \2/p' "$logs/$run_id.log" |
      while read -r broker json; do
        figures=$(jq -r '[(.step_rate // .qos // "-" | tostring),
          ("msg/CPU-s " + (.msgs_per_broker_cpu_s // 0 | floor | tostring)),
          ("delivered " + (.delivered_ratio // "-" | tostring)),
          ("p50 " + (.latency_us.p50 // "-" | tostring))] | join("  ")' <<<"$json")
        echo "$run_id $broker $figures"
      done
  done
done
