#!/usr/bin/env bash
# Scenario quic-vs-tls (issue 51): MQTT over QUIC against MQTT over TLS on one RingMQ broker
# with both listeners (BENCH_TLS=1 in lib.sh adds the TLS one, a [[listeners.quic]] on a free
# UDP port is appended to its config; one throwaway certificate, lib.sh's make_certificates).
# ringmq-bench runs each load over each of QVT_TRANSPORTS (`--quic`, or TLS over TCP), against
# the same broker, and records in bench-results/scenarios/:
#   quic-vs-tls-p2p.jsonl     p2p: QVT_P2P_PAIRS pairs, 256 B, QoS QVT_P2P_QOS, flood,
#                             QVT_P2P_LIMIT messages per publisher
#   quic-vs-tls-fanout.jsonl  QVT_FANOUT_PUBS publishers -> one topic -> QVT_FANOUT_SUBS
#                             subscribers, 16 B, QoS 0, QVT_FANOUT_RATE msg/s per publisher for
#                             WINDOW s
#   quic-vs-tls-handshake.jsonl  QVT_HS_CLIENTS clients connecting at once (handshake,
#                             CONNECT, CONNACK): connects per second, broker CPU per connect
#   quic-vs-tls-loss.jsonl    a paced p2p (QVT_LOSS_PAIRS pairs, QVT_LOSS_RATE msg/s each, QoS
#                             1, 256 B, QVT_LOSS_SECONDS s) with each of QVT_LOSSES percent of
#                             the packets to and from the broker's TLS and QUIC ports dropped on
#                             loopback (iptables' statistic match, both ways; root and iptables
#                             needed, the rules removed on exit): latency p50, p99, max
# then prints, per load and transport, the messages delivered per broker CPU-second (broker
# CPU from /proc over the run, as every scenario: lib.sh's measured_bench) and the p99 latency.
# QVT_LOADS="p2p fanout handshake loss" picks the loads.
#
# A smoke run (seconds; its figures mean nothing):
#   QVT_P2P_PAIRS=4 QVT_P2P_LIMIT=50 QVT_FANOUT_PUBS=2 QVT_FANOUT_SUBS=5 QVT_FANOUT_RATE=20 \
#     WINDOW=1 scripts/bench/quic-vs-tls.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BROKERS=ringmq
QVT_TRANSPORTS=${QVT_TRANSPORTS:-quic tls}
QVT_P2P_PAIRS=${QVT_P2P_PAIRS:-500}
QVT_P2P_LIMIT=${QVT_P2P_LIMIT:-1000}
QVT_P2P_QOS=${QVT_P2P_QOS:-1}
QVT_FANOUT_PUBS=${QVT_FANOUT_PUBS:-10}
QVT_FANOUT_SUBS=${QVT_FANOUT_SUBS:-500}
QVT_FANOUT_RATE=${QVT_FANOUT_RATE:-50}
QVT_HS_CLIENTS=${QVT_HS_CLIENTS:-2000}
QVT_LOSSES=${QVT_LOSSES:-0 1 5}
QVT_LOSS_PAIRS=${QVT_LOSS_PAIRS:-10}
QVT_LOSS_RATE=${QVT_LOSS_RATE:-50}
QVT_LOSS_SECONDS=${QVT_LOSS_SECONDS:-20}
QVT_LOADS=${QVT_LOADS:-p2p fanout handshake loss}
WINDOW=${WINDOW:-6}
# `ss` counts TCP connections only: a QUIC run would sample nothing but its cost.
export SAMPLE_CONNS=${SAMPLE_CONNS:-0}
export BENCH_TLS=1
# One line per load and transport, printed at the end.
SUMMARY=()

# A UDP port free on loopback now.
free_udp_port() {
  python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# transport NAME: sets TARGET_PORT and TARGS (the load generator's flags) for quic or tls.
transport() {
  case $1 in
    quic) TARGET_PORT=$QUIC_PORT TARGS=(--quic --tls-ca "$BENCH_TLS_CA") ;;
    tls) TARGET_PORT=$TLS_PORT TARGS=(--tls-ca "$BENCH_TLS_CA") ;;
    *) log "unknown transport $1"; return 1 ;;
  esac
}

# note LOAD TRANSPORT: adds the last measurement's line to the summary.
note() {
  [[ $LAST_RESULT == null ]] && { SUMMARY+=("$1 $2: no result"); return; }
  SUMMARY+=("$(jq -r --arg load "$1" --arg t "$2" '
    "\($load) \($t): delivered \(.delivered)/\(.expected), " +
    "\(.msgs_per_broker_cpu_s // 0 | floor) msg per broker CPU-s " +
    "(broker CPU \(.broker_cpu_s) s), p99 \(.latency_us.p99) us"' <<<"$LAST_RESULT")")
}

qvt_p2p() {
  local t
  for t in $QVT_TRANSPORTS; do
    transport "$t"
    measured_bench quic-vs-tls-p2p \
      "{\"transport\":\"$t\",\"qos\":$QVT_P2P_QOS,\"pairs\":$QVT_P2P_PAIRS,\"size\":256}" \
      p2p --pairs "$QVT_P2P_PAIRS" -s 256 -q "$QVT_P2P_QOS" -r 0 -L "$QVT_P2P_LIMIT" \
      -d $((WINDOW + 5)) --warmup 1 --quiet "${TARGS[@]}" || return 1
    note p2p "$t"
  done
}

qvt_fanout() {
  local t limit=$((QVT_FANOUT_RATE * WINDOW))
  for t in $QVT_TRANSPORTS; do
    transport "$t"
    measured_bench quic-vs-tls-fanout \
      "{\"transport\":\"$t\",\"qos\":0,\"pubs\":$QVT_FANOUT_PUBS,\"subs\":$QVT_FANOUT_SUBS,\"size\":16,\"step_rate\":$QVT_FANOUT_RATE}" \
      fanout --pubs "$QVT_FANOUT_PUBS" --subs "$QVT_FANOUT_SUBS" -s 16 -q 0 \
      -r "$QVT_FANOUT_RATE" -L "$limit" -d $((WINDOW + 20)) --warmup 1 --quiet "${TARGS[@]}" ||
      return 1
    note fanout "$t"
  done
}

qvt_handshake() {
  local t
  for t in $QVT_TRANSPORTS; do
    transport "$t"
    measured_bench quic-vs-tls-handshake "{\"transport\":\"$t\",\"clients\":$QVT_HS_CLIENTS}" \
      conn -c "$QVT_HS_CLIENTS" --connect-rate 0 --keep-alive 300 --hold 1 -d 60 --quiet \
      "${TARGS[@]}" || return 1
    [[ $LAST_RESULT == null ]] && { SUMMARY+=("handshake $t: no result"); continue; }
    SUMMARY+=("$(jq -r --arg t "$t" '
      "handshake \($t): \(.bench.totals.connected) connected, \(.bench.connect_rate | floor) per s, " +
      "\(if .bench.totals.connected > 0 then (1e6 * .broker_cpu_s / .bench.totals.connected | floor)
          else "?" end) us broker CPU per connect"' <<<"$LAST_RESULT")")
  done
}

# drop_rules ACTION PERCENT: adds (-I) or removes (-D) the rules that drop PERCENT % of the
# packets to and from the broker's TLS (TCP) and QUIC (UDP) ports on loopback.
drop_rules() {
  local action=$1 p proto port dir
  p=$(awk -v pc="$2" 'BEGIN { printf "%.4f", pc / 100 }')
  for proto in tcp udp; do
    port=$TLS_PORT
    [[ $proto == udp ]] && port=$QUIC_PORT
    for dir in --dport --sport; do
      iptables "$action" INPUT -i lo -p "$proto" "$dir" "$port" \
        -m statistic --mode random --probability "$p" -j DROP
    done
  done
}

qvt_loss() {
  command -v iptables >/dev/null || { log "quic-vs-tls loss: iptables missing"; return 1; }
  local loss t limit=$((QVT_LOSS_RATE * QVT_LOSS_SECONDS))
  for loss in $QVT_LOSSES; do
    [[ $loss != 0 ]] && { drop_rules -I "$loss" || return 1; trap 'drop_rules -D '"$loss"' 2>/dev/null; on_exit' EXIT; }
    for t in $QVT_TRANSPORTS; do
      transport "$t"
      measured_bench quic-vs-tls-loss \
        "{\"transport\":\"$t\",\"loss_percent\":$loss,\"pairs\":$QVT_LOSS_PAIRS,\"rate\":$QVT_LOSS_RATE}" \
        p2p --pairs "$QVT_LOSS_PAIRS" -s 256 -q 1 -r "$QVT_LOSS_RATE" -L "$limit" \
        -d $((QVT_LOSS_SECONDS + 30)) --warmup 1 --quiet "${TARGS[@]}" || break
      [[ $LAST_RESULT == null ]] && { SUMMARY+=("loss $loss% $t: no result"); continue; }
      SUMMARY+=("$(jq -r --arg t "$t" --arg loss "$loss" '
        "loss \($loss)% \($t): delivered \(.delivered)/\(.expected), latency p50 \(.latency_us.p50) us, " +
        "p99 \(.latency_us.p99) us, max \(.latency_us.max) us"' <<<"$LAST_RESULT")")
    done
    [[ $loss != 0 ]] && { drop_rules -D "$loss"; trap on_exit EXIT; }
  done
}

qvt_all() {
  local load
  for load in $QVT_LOADS; do
    "qvt_$load" || log "quic-vs-tls $load failed"
  done
}

prepare_brokers
make_certificates
QUIC_PORT=$(free_udp_port)
RINGMQ_CONFIG_EXTRA="${RINGMQ_CONFIG_EXTRA:-}\n[[listeners.quic]]\nbind = \"127.0.0.1:$QUIC_PORT\"\ncert = \"$BENCH_TLS_CERT\"\nkey = \"$BENCH_TLS_KEY\""
for_each_broker qvt_all
printf '%s\n' "${SUMMARY[@]}"
