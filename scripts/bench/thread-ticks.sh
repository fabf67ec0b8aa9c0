#!/usr/bin/env bash
# CPU per broker thread for one persistent p2p load: PAIRS pairs, each publisher sending LIMIT
# messages of SIZE bytes at QoS QOS as fast as its 64-message window allows; prints the broker
# threads' CPU ticks (10 ms, utime + stime, summed per thread name) over the whole load, the
# group commits and the bytes the broker wrote. A fresh broker and data directory per run.
#   scripts/bench/thread-ticks.sh ENGINE QOS [BROKER_BINARY] ['extra [persistence] line' ...]
#   PAIRS=1000  SIZE=256 LIMIT=1000 (per publisher)  OUT=/tmp/ringmq-thread-ticks (work directory)
# Example: SIZE=2048 LIMIT=400 scripts/bench/thread-ticks.sh log 2 target/release/ringmq 'log_max_mb = 64'
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
engine=$1 qos=$2 bin=${3:-target/release/ringmq}
shift $(($# < 3 ? $# : 3))
bench=$(dirname "$bin")/ringmq-bench
out=${OUT:-/tmp/ringmq-thread-ticks}/$engine-q$qos
rm -rf "$out" && mkdir -p "$out"
# Below the ephemeral range (32768 and up here), where the load generator's own ports come from.
port=$((20000 + RANDOM % 12000)) && http=$((port + 1))
{
  printf '[listeners]\ntcp = ["127.0.0.1:%s"]\n[log]\nlevel = "warn"\n' "$port"
  printf '[connection]\nmax_connections = 200000\n[queues]\nmax_queued_messages = 100000\n'
  printf '[sessions]\nmax_sessions = 400000\n[http]\nbind = "127.0.0.1:%s"\n' "$http"
  printf '[persistence]\nengine = "%s"\ndir = "%s/data"\n' "$engine" "$out"
  for line in "$@"; do printf '%s\n' "$line"; done
} > "$out/ringmq.toml"

ticks() {
  for t in /proc/"$1"/task/*; do
    echo "$(cat "$t/comm") $(awk '{print $14 + $15}' "$t/stat")"
  done
}

(ulimit -n 20000 && exec "$bin" --config "$out/ringmq.toml") > "$out/broker.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "127.0.0.1:$http/metrics" > /dev/null && break; sleep 0.2; done
ticks $pid > "$out/ticks0"
(ulimit -n 20000 && "$bench" p2p --host "127.0.0.1:$port" --pairs "${PAIRS:-1000}" -s "${SIZE:-256}" \
  -q "$qos" -r 0 -L "${LIMIT:-1000}" -d 60 --warmup 1 --quiet --persistent \
  > "$out/bench.out" 2> "$out/bench.err")
ticks $pid > "$out/ticks1"
commits=$(curl -s "127.0.0.1:$http/metrics" | awk '/^ringmq_store_commits_total/ {print $2}')
written=$(awk '/^write_bytes/ {print $2}' /proc/$pid/io)
kill $pid && wait $pid 2> /dev/null || true
echo "engine $engine, QoS $qos, ${SIZE:-256} B x ${LIMIT:-1000} per publisher: $(sed -n 2p "$out/bench.out")"
printf 'commits %s, bytes written %s, ticks:' "${commits:-0}" "$written"
paste "$out/ticks0" "$out/ticks1" | awk '{t[$1] += $4 - $2} END {for (k in t) if (t[k] > 0) printf " %s=%d", k, t[k]}'
echo
ls -l "$out/data" 2> /dev/null | awk '/log-/ {printf "%s %s bytes\n", $NF, $5}'
