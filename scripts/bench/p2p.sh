#!/usr/bin/env bash
# Scenario p2p: 1,000 publisher/subscriber pairs, each pair on its own topic, 256 B, QoS 0, 1
# and 2; publishers flood (QoS 0 bounded by the socket queue, QoS 1/2 by a 64-message window)
# until each sent P2P_LIMIT messages or the window ends. One JSON line per QoS in
# bench-results/scenarios/p2p.jsonl.
#   P2P_PAIRS=1000  P2P_QOS="0 1 2"  P2P_LIMIT=1000 (per publisher)  WINDOW=6 (s, upper bound)
#   P2P_RATE=0: messages per second per publisher (0 = flood). A paced run (issue 17's "100
#   msg/s per pair") sends P2P_RATE x WINDOW messages per publisher unless P2P_LIMIT is set.
#   P2P_PERSISTENT=1: persistent sessions (Clean Start 0, no expiry), so a broker with
#   persistence on stores every QoS 1/2 message (see RINGMQ_ENGINE, MOSQUITTO_PERSISTENCE)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
P2P_PAIRS=${P2P_PAIRS:-1000}
P2P_QOS=${P2P_QOS:-0 1 2}
WINDOW=${WINDOW:-6}
P2P_RATE=${P2P_RATE:-0}
if [[ -z ${P2P_LIMIT:-} ]]; then
  P2P_LIMIT=$(awk -v r="$P2P_RATE" -v w="$WINDOW" 'BEGIN { print (r > 0) ? int(r * w) : 1000 }')
fi
SIZE=${SIZE:-256}

p2p_all_qos() {
  local qos
  for qos in $P2P_QOS; do
    local extra=",\"persistent\":${P2P_PERSISTENT:-0},\"engine\":\"${RINGMQ_ENGINE:-none}\",\"mosquitto_persistence\":${MOSQUITTO_PERSISTENCE:-0}"
    measured_bench p2p "{\"qos\":$qos,\"pairs\":$P2P_PAIRS,\"size\":$SIZE,\"rate\":$P2P_RATE$extra}" \
      p2p --pairs "$P2P_PAIRS" -s "$SIZE" -q "$qos" -r "$P2P_RATE" -L "$P2P_LIMIT" \
      -d $((WINDOW + 5)) --warmup 1 --quiet ${P2P_PERSISTENT:+--persistent} || return 1
  done
}

prepare_brokers
for_each_broker p2p_all_qos
