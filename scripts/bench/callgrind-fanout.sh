#!/usr/bin/env bash
# Instruction counts of a fixed fan-out under callgrind (repeatable where wall-clock figures are
# not): the broker runs under `valgrind --tool=callgrind` with one shard on epoll, then
# `ringmq-bench fanout --threads 1 --pubs 2 --subs 200 -s 16 -r 100 -L 300` (120,000 deliveries).
#   scripts/bench/callgrind-fanout.sh [BROKER_BINARY] [TAG]
#   QOS=1: publishes and subscriptions at QoS 1 (default 0)
#   CACHE_SIM=1: callgrind's cache simulation too (D1/LL read and write misses in the summary)
#   CONFIG_EXTRA: TOML appended to the broker's configuration (printf escapes, e.g.
#     '[limits]\nmax_inflight_outbound = 65535\n')
#   BENCH_ARGS: another fixed load instead of the fan-out (ringmq-bench's arguments after the
#     host), e.g. 'p2p --threads 1 --pairs 100 -s 256 -r 100 -L 300' (30,000 messages)
# Prints the broker's total instructions and its top functions; the profile stays in
# bench-results/callgrind/<TAG>.out for callgrind_annotate.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BIN=${1:-target/release/ringmq}
TAG=${2:-fanout-$(date +%Y%m%d-%H%M%S)}
BENCH=${BENCH_BIN:-target/release/ringmq-bench}
OUT=bench-results/callgrind
mkdir -p "$OUT"
CONFIG=$(mktemp)
printf '[runtime]\nshards = 1\nbackend = "epoll"\n[sys]\ninterval = 0\n[persistence]\nengine = "none"\n' >"$CONFIG"
printf "${CONFIG_EXTRA:-}" >>"$CONFIG"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
timeout 600 valgrind --tool=callgrind ${CACHE_SIM:+--cache-sim=yes} --callgrind-out-file="$OUT/$TAG.out" \
  "$BIN" --config "$CONFIG" --listen "127.0.0.1:$PORT" >"$OUT/$TAG.log" 2>&1 &
VPID=$!
trap 'kill -TERM $VPID 2>/dev/null || true; rm -f "$CONFIG"' EXIT
for _ in $(seq 1 120); do
  (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.5
done
DEFAULT_ARGS="fanout --threads 1 --pubs 2 --subs 200 -s 16 -r 100 -L 300 -q ${QOS:-0}"
# shellcheck disable=SC2086 # the arguments are words
timeout 300 "$BENCH" ${BENCH_ARGS:-$DEFAULT_ARGS} -H "127.0.0.1:$PORT" --quiet >"$OUT/$TAG.bench.json"
kill -TERM $VPID
wait $VPID || true
echo "$TAG total instructions: $(awk '/^summary:/ { print $2 }' "$OUT/$TAG.out")"
[[ -n ${CACHE_SIM:-} ]] && grep -E '^(events|summary):' "$OUT/$TAG.out"
callgrind_annotate "$OUT/$TAG.out" 2>/dev/null | sed -n '/file:function/,$p' | sed -n '2,16p'
