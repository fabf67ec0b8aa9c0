#!/usr/bin/env bash
# Broker RSS per idle connection, measured the way docs/bench/history/conn-memory.md
# ("Broker memory per idle connection") describes: start ringmq, warm it up with WARM idle clients
# (so fixed costs such as
# the receive buffer ring are already touched), read VmRSS, connect COUNT more idle clients, read
# VmRSS again; (after - before) / COUNT. Loopback only, bounded in time.
#
#   scripts/bench/conn-memory.sh [COUNT] [WARM]        # default 16000 and 3000 (19,000 in all)
#   RINGMQ_BIN=path/to/ringmq scripts/bench/conn-memory.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
count=${1:-16000}
warm=${2:-3000}
port=${PORT:-18990}
ulimit -n 20000
if [[ -z ${RINGMQ_BIN:-} ]]; then
  cargo build -q --release -p ringmq -p bench
fi
bin=${RINGMQ_BIN:-target/release/ringmq}
bench=target/release/ringmq-bench
"$bin" -l "127.0.0.1:$port" --log-level warn >/dev/null 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null; wait 2>/dev/null' EXIT
sleep 0.5
rss() { awk '/VmRSS/{print $2}' "/proc/$broker/status"; }
timeout 90 "$bench" conn -H "127.0.0.1:$port" -c "$warm" --duration 60 --threads 1 --quiet \
  --client-prefix warm --json /dev/null >/dev/null 2>&1 &
sleep 6
before=$(rss)
timeout 90 "$bench" conn -H "127.0.0.1:$port" -c "$count" --duration 20 --threads 1 --quiet \
  --json /dev/null >/dev/null 2>&1 &
sleep 14
after=$(rss)
echo "connections: $warm warm-up + $count measured; RSS ${before} KiB -> ${after} KiB;" \
  "$(( (after - before) * 1024 / count )) bytes per idle connection"
