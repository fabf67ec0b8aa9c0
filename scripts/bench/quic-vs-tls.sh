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
# then prints, per load and transport, the messages delivered per broker CPU-second (broker
# CPU from /proc over the run, as every scenario: lib.sh's measured_bench) and the p99 latency.
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

qvt_all() {
  qvt_p2p || log "quic-vs-tls p2p failed"
  qvt_fanout || log "quic-vs-tls fanout failed"
}

prepare_brokers
make_certificates
QUIC_PORT=$(free_udp_port)
RINGMQ_CONFIG_EXTRA="${RINGMQ_CONFIG_EXTRA:-}\n[[listeners.quic]]\nbind = \"127.0.0.1:$QUIC_PORT\"\ncert = \"$BENCH_TLS_CERT\"\nkey = \"$BENCH_TLS_KEY\""
for_each_broker qvt_all
printf '%s\n' "${SUMMARY[@]}"
