#!/usr/bin/env bash
# Scenario fanout (and fanout-qos1): 10 publishers -> one topic -> 500 subscribers, 16 B payload.
# The per-publisher rate is raised step by step; a step passes when >= 99 % of what it planned
# was sent and >= 99 % of what was sent was delivered; the first failing step ends the broker's
# steps. One JSON line per step in bench-results/scenarios/$SCENARIO.jsonl.
#   QOS=0|1 (default 0)  FANOUT_STEPS="20 50 ..." (msg/s per publisher)  WINDOW=5 (s per step)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SCENARIO=${SCENARIO:-fanout}
QOS=${QOS:-0}
FANOUT_STEPS=${FANOUT_STEPS:-20 50 100 200 400}
WINDOW=${WINDOW:-5}
PUBS=${PUBS:-10}
SUBS=${SUBS:-500}
SIZE=${SIZE:-16}

fanout_steps() {
  local rate limit planned
  for rate in $FANOUT_STEPS; do
    limit=$((rate * WINDOW))
    planned=$((limit * PUBS))
    measured_bench "$SCENARIO" \
      "{\"qos\":$QOS,\"pubs\":$PUBS,\"subs\":$SUBS,\"size\":$SIZE,\"step_rate\":$rate,\"planned\":$planned,\"offered_per_s\":$((rate * PUBS * SUBS))}" \
      fanout --pubs "$PUBS" --subs "$SUBS" -s "$SIZE" -q "$QOS" -r "$rate" -L "$limit" \
      -d $((WINDOW + 20)) --warmup 1 --quiet || return 1
    if ! jq -e --argjson planned "$planned" \
      '.sent >= 0.99 * $planned and (.delivered_ratio // 0) >= 0.99' <<<"$LAST_RESULT" >/dev/null; then
      log "$SCENARIO $BROKER_NAME: step $rate/s per publisher below 99 %; last step"
      break
    fi
  done
}

prepare_brokers
for_each_broker fanout_steps
