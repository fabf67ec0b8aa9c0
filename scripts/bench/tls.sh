#!/usr/bin/env bash
# Scenario tls (issue 13): TLS, WebSocket and secure WebSocket against plain TCP, for RingMQ and
# mosquitto, with one throwaway CA and server certificate (openssl, P-256, in the run
# directory; never committed). Each broker gets a plain, a TLS, a WebSocket (/mqtt) and a
# secure WebSocket listener (BENCH_TLS=1 in lib.sh). Per broker and rep, in bench-results/
# scenarios/:
#   tls-p2p.jsonl     p2p (TLS_P2P_PAIRS pairs, 256 B, flood, TLS_P2P_LIMIT per publisher) at
#                     QoS 0 and 1 over each of TLS_P2P_TRANSPORTS: messages per broker CPU-s
#   tls-fanout.jsonl  10 publishers -> 1 topic -> 500 subscribers, 16 B, QoS 0, TLS_FANOUT_RATE
#                     msg/s per publisher for WINDOW s, over tcp and tls
#   tls-handshake.jsonl  TLS_HS_CLIENTS clients connecting at once (connect + CONNACK), tcp and
#                     tls: connects per second and broker CPU per connect
#   tls-idle.jsonl    TLS_IDLE_CLIENTS idle clients over tcp, tls, ws and wss, a fresh broker
#                     each: broker RSS per connection ((RSS with them - RSS before) / held)
#   TLS_SCENARIOS="p2p fanout handshake idle"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BROKERS=${TLS_BROKERS:-ringmq mosquitto}
TLS_SCENARIOS=${TLS_SCENARIOS:-p2p fanout handshake idle}
TLS_P2P_PAIRS=${TLS_P2P_PAIRS:-1000}
TLS_P2P_LIMIT=${TLS_P2P_LIMIT:-1000}
TLS_P2P_QOS=${TLS_P2P_QOS:-0 1}
TLS_P2P_TRANSPORTS=${TLS_P2P_TRANSPORTS:-tcp tls}
TLS_FANOUT_RATE=${TLS_FANOUT_RATE:-50}
TLS_HS_CLIENTS=${TLS_HS_CLIENTS:-5000}
TLS_IDLE_CLIENTS=${TLS_IDLE_CLIENTS:-10000}
TLS_IDLE_TRANSPORTS=${TLS_IDLE_TRANSPORTS:-tcp tls ws wss}
WINDOW=${WINDOW:-6}
export BENCH_TLS=1

# transport NAME: sets TARGET_PORT and TARGS (the load generator's flags) for tcp, tls, ws, wss.
transport() {
  case $1 in
    tcp) TARGET_PORT=$BROKER_PORT TARGS=() ;;
    tls) TARGET_PORT=$TLS_PORT TARGS=(--tls-ca "$BENCH_TLS_CA") ;;
    ws) TARGET_PORT=$WS_PORT TARGS=(--ws /mqtt) ;;
    wss) TARGET_PORT=$WSS_PORT TARGS=(--tls-ca "$BENCH_TLS_CA" --ws /mqtt) ;;
    *) log "unknown transport $1"; return 1 ;;
  esac
}

tls_p2p() {
  local t qos
  for qos in $TLS_P2P_QOS; do
    for t in $TLS_P2P_TRANSPORTS; do
      transport "$t"
      measured_bench tls-p2p \
        "{\"transport\":\"$t\",\"qos\":$qos,\"pairs\":$TLS_P2P_PAIRS,\"size\":256}" \
        p2p --pairs "$TLS_P2P_PAIRS" -s 256 -q "$qos" -r 0 -L "$TLS_P2P_LIMIT" \
        -d $((WINDOW + 5)) --warmup 1 --quiet "${TARGS[@]}" || return 1
    done
  done
}

tls_fanout() {
  local t limit=$((TLS_FANOUT_RATE * WINDOW))
  for t in tcp tls; do
    transport "$t"
    measured_bench tls-fanout \
      "{\"transport\":\"$t\",\"qos\":0,\"pubs\":10,\"subs\":500,\"size\":16,\"step_rate\":$TLS_FANOUT_RATE,\"planned\":$((limit * 10))}" \
      fanout --pubs 10 --subs 500 -s 16 -q 0 -r "$TLS_FANOUT_RATE" -L "$limit" \
      -d $((WINDOW + 20)) --warmup 1 --quiet "${TARGS[@]}" || return 1
  done
}

# Connect storm: every client at once from four source addresses, held 1 s after the last
# CONNACK. connect_rate = CONNACKs / time until every client was ready.
tls_handshake() {
  local t
  for t in tcp tls; do
    transport "$t"
    measured_bench tls-handshake "{\"transport\":\"$t\",\"clients\":$TLS_HS_CLIENTS}" \
      conn -c "$TLS_HS_CLIENTS" --connect-rate 0 --keep-alive 300 --hold 1 -d 60 --quiet \
      --bind 127.0.6.1 --bind 127.0.6.2 --bind 127.0.6.3 --bind 127.0.6.4 "${TARGS[@]}" ||
      return 1
    jq -c '{transport, connected: .bench.totals.connected, failures: .bench.totals.connect_failures,
      connect_s: .bench.ready_after_s, connect_rate: .bench.connect_rate,
      broker_cpu_ms_per_connect: (if .bench.totals.connected > 0
        then 1000 * .broker_cpu_s / .bench.totals.connected else null end)}' <<<"$LAST_RESULT" >&2
  done
}

# Idle RSS per connection, one fresh broker per transport (as scripts/bench/conn.sh).
tls_idle_once() {
  local t=$1 json rss0 rss1 held bench_pid
  transport "$t"
  json=$(bench_json_path tls-idle)
  sleep 1
  rss0=$(rss_kb "$BROKER_PID")
  bench_bg "$json" conn --host "127.0.0.1:$TARGET_PORT" --label tls-idle -c "$TLS_IDLE_CLIENTS" \
    --bind 127.0.7.1 --bind 127.0.7.2 --bind 127.0.7.3 --bind 127.0.7.4 \
    --keep-alive 300 --connect-rate 2500 --hold 8 -d 130 --quiet "${TARGS[@]}"
  bench_pid=$BENCH_PID
  wait_conns "$TLS_IDLE_CLIENTS" 120 >/dev/null
  sleep 2
  held=$(conn_count "$TARGET_PORT")
  rss1=$(rss_kb "$BROKER_PID")
  wait "$bench_pid" || true
  BG_PIDS=()
  [[ -s $json ]] || { log "tls-idle $BROKER_NAME $t: no summary"; return 1; }
  record tls-idle "$(jq -c -n --slurpfile b "$json" --arg t "$t" --argjson count "$TLS_IDLE_CLIENTS" \
    --argjson held "$held" --argjson rss0 "$rss0" --argjson rss1 "$rss1" '
    $b[0] as $b | {
      transport: $t, count: $count, held: $held, connected: $b.totals.connected,
      connect_failures: $b.totals.connect_failures, rss_before_kb: $rss0, rss_after_kb: $rss1,
      rss_per_conn_bytes: (if $held > 0 then ($rss1 - $rss0) * 1024 / $held else null end),
      connect_s: $b.ready_after_s }')"
  rm -f "$json"
}

tls_idle() {
  local t first=1
  for t in $TLS_IDLE_TRANSPORTS; do
    if ((first == 0)); then
      broker_stop
      broker_start "$BROKER_NAME" || return 1
    fi
    first=0
    tls_idle_once "$t" || return 1
  done
}

tls_all() {
  local s
  for s in $TLS_SCENARIOS; do
    "tls_$s" || log "tls $s failed for $BROKER_NAME"
    # The next part starts on a fresh broker.
    broker_stop
    broker_start "$BROKER_NAME" || return 1
  done
}

prepare_brokers
make_certificates
for_each_broker tls_all
