#!/usr/bin/env bash
# Scenario p2p: 1,000 publisher/subscriber pairs, each pair on its own topic, 256 B, QoS 0, 1
# and 2; publishers flood (QoS 0 bounded by the socket queue, QoS 1/2 by a 64-message window)
# until each sent P2P_LIMIT messages or the window ends. One JSON line per QoS in
# bench-results/scenarios/p2p.jsonl.
#   P2P_PAIRS=1000  P2P_QOS="0 1 2"  P2P_LIMIT=1000 (per publisher)  WINDOW=6 (s, upper bound)
#   P2P_PERSISTENT=1: persistent sessions (Clean Start 0, no expiry), so a broker with
#   persistence on stores every QoS 1/2 message (see RINGMQ_ENGINE, MOSQUITTO_PERSISTENCE)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
P2P_PAIRS=${P2P_PAIRS:-1000}
P2P_QOS=${P2P_QOS:-0 1 2}
P2P_LIMIT=${P2P_LIMIT:-1000}
WINDOW=${WINDOW:-6}
SIZE=${SIZE:-256}

p2p_all_qos() {
  local qos
  for qos in $P2P_QOS; do
    local extra=",\"persistent\":${P2P_PERSISTENT:-0},\"engine\":\"${RINGMQ_ENGINE:-none}\",\"mosquitto_persistence\":${MOSQUITTO_PERSISTENCE:-0}"
    measured_bench p2p "{\"qos\":$qos,\"pairs\":$P2P_PAIRS,\"size\":$SIZE$extra}" \
      p2p --pairs "$P2P_PAIRS" -s "$SIZE" -q "$qos" -r 0 -L "$P2P_LIMIT" \
      -d $((WINDOW + 5)) --warmup 1 --quiet ${P2P_PERSISTENT:+--persistent} || return 1
  done
}

prepare_brokers
for_each_broker p2p_all_qos
