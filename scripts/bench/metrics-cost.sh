#!/usr/bin/env bash
# Scenario metrics-cost (issue 15): what the operations listener and Prometheus scrapes cost
# fan-out. RingMQ only, interleaved per rep: `off` (no [http]), then `on` ([http] bound and
# /metrics scraped every METRICS_SCRAPE_S seconds during the run, as a Prometheus would, at
# least ten times as often as usual). 10 publishers -> 1 topic -> 500 subscribers, 16 B, QoS 0,
# METRICS_RATE msg/s per publisher for WINDOW s. Per rep and mode, one line in
# bench-results/scenarios/metrics-cost.jsonl (messages per broker CPU-second, delivered share).
# The per-message counters themselves cannot be switched off: their cost is an instruction count
# (scripts/bench/callgrind-fanout.sh before and after the commit that added them).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
METRICS_RATE=${METRICS_RATE:-200}
METRICS_SCRAPE_S=${METRICS_SCRAPE_S:-1}
WINDOW=${WINDOW:-8}

# scrape_loop PORT: GET /metrics every METRICS_SCRAPE_S seconds until killed.
scrape_loop() {
  local port=$1
  while sleep "$METRICS_SCRAPE_S"; do
    curl -sf "http://127.0.0.1:$port/metrics" >/dev/null || log "metrics-cost: a scrape failed"
  done
}

metrics_fanout() {
  local mode=$1 limit=$((METRICS_RATE * WINDOW)) scraper=""
  if [[ $mode == on ]]; then
    scrape_loop "$HTTP_PORT" &
    scraper=$!
  fi
  measured_bench metrics-cost \
    "{\"metrics\":\"$mode\",\"pubs\":10,\"subs\":500,\"size\":16,\"step_rate\":$METRICS_RATE,\"planned\":$((limit * 10))}" \
    fanout --pubs 10 --subs 500 -s 16 -q 0 -r "$METRICS_RATE" -L "$limit" \
    -d $((WINDOW + 20)) --warmup 1 --quiet || true
  [[ -n $scraper ]] && { kill "$scraper" 2>/dev/null || true; wait "$scraper" 2>/dev/null || true; }
  jq -c '{metrics: .metrics, msgs_per_broker_cpu_s: .msgs_per_broker_cpu_s,
    delivered_ratio: .delivered_ratio}' <<<"$LAST_RESULT" >&2
}

BROKERS=ringmq
prepare_brokers
for REP in $(seq 1 "$REPS"); do
  for mode in off on; do
    if [[ $mode == on ]]; then
      HTTP_PORT=$(free_port)
      export RINGMQ_CONFIG_EXTRA="[http]\nbind = \"127.0.0.1:$HTTP_PORT\""
    else
      export RINGMQ_CONFIG_EXTRA=""
    fi
    broker_start ringmq || continue
    metrics_fanout "$mode"
    broker_stop
  done
done
