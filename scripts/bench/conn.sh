#!/usr/bin/env bash
# Scenario conn: idle connections (keep-alive 300 s, clean start), connected as fast as the
# broker accepts them, from several 127.0.0.x source addresses. For each count: RSS per
# connection = (broker RSS with the connections - RSS before) / count, measured CONN_SETTLE s
# (default 2, issue 6's method) after the broker holds them all; anonymous memory per
# connection the same way from RssAnon (leaving out the code pages that handling the first
# connections reads in from the binary's file); connect rate = CONNACKs per second. A fresh
# broker per count.
# A broker that has not accepted them all after CONN_WAIT seconds is measured with what it holds
# then ("held").
#   CONN_COUNTS="10000 19000" (the fd limit per process is 20000)  CONN_WAIT=120  CONN_SETTLE=2
#   CONN_SMAPS_DIR=dir: also save the broker's /proc/PID/smaps there when RSS is read
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CONN_COUNTS=${CONN_COUNTS:-10000 19000}
CONN_WAIT=${CONN_WAIT:-120}
CONN_SETTLE=${CONN_SETTLE:-2}

conn_once() {
  local count=$1 json rss0 rss1 anon0 anon1 held bench_pid
  json=$(bench_json_path conn)
  sleep 1
  rss0=$(rss_kb "$BROKER_PID")
  anon0=$(rss_anon_kb "$BROKER_PID")
  sampler_start
  bench_bg "$json" conn --host "127.0.0.1:$BROKER_PORT" --label conn -c "$count" \
    --bind 127.0.1.1 --bind 127.0.1.2 --bind 127.0.1.3 --bind 127.0.1.4 \
    --keep-alive 300 --hold "$((CONN_SETTLE + 3))" -d "$((CONN_WAIT + CONN_SETTLE + 10))" --quiet
  bench_pid=$BENCH_PID
  local started=$SECONDS waited
  wait_conns "$count" "$CONN_WAIT" >/dev/null
  waited=$((SECONDS - started))
  sleep "$CONN_SETTLE"
  held=$(conn_count "$BROKER_PORT")
  rss1=$(rss_kb "$BROKER_PID")
  anon1=$(rss_anon_kb "$BROKER_PID")
  if [[ -n ${CONN_SMAPS_DIR:-} ]]; then
    mkdir -p "$CONN_SMAPS_DIR"
    cat "/proc/$BROKER_PID/smaps" >"$CONN_SMAPS_DIR/conn-$BROKER_NAME-$count.smaps" || true
  fi
  wait "$bench_pid" || true
  local sampled
  sampled=$(sampler_stop)
  [[ -s $json ]] || { log "conn $BROKER_NAME: no summary"; return 1; }
  record conn "$(jq -c -n --slurpfile b "$json" --argjson s "$sampled" \
    --argjson count "$count" --argjson held "$held" --argjson rss0 "$rss0" --argjson rss1 "$rss1" --argjson anon0 "$anon0" --argjson anon1 "$anon1" --argjson waited "$waited" --argjson settle "$CONN_SETTLE" '
    $b[0] as $b | {
      count: $count, held: $held, connected: $b.totals.connected,
      connect_failures: $b.totals.connect_failures,
      rss_before_kb: $rss0, rss_after_kb: $rss1, settle_s: $settle,
      rss_per_conn_bytes: (if $held > 0 then ($rss1 - $rss0) * 1024 / $held else null end),
      rss_anon_before_kb: $anon0, rss_anon_after_kb: $anon1,
      anon_per_conn_bytes: (if $held > 0 then ($anon1 - $anon0) * 1024 / $held else null end),
      connect_s: $b.ready_after_s,
      connect_rate: ($b.connect_rate // (if $waited > 0 then $held / $waited else null end)),
      rss_peak_kb: $s.rss_peak_kb, rss_steady_kb: $s.rss_steady_kb, bench: $b, samples: $s.samples }')"
  rm -f "$json"
}

conn_counts() {
  local count first=1
  for count in $CONN_COUNTS; do
    if ((first == 0)); then
      broker_stop
      broker_start "$BROKER_NAME" || return 1
    fi
    first=0
    conn_once "$count" || return 1
  done
}

prepare_brokers
for_each_broker conn_counts
