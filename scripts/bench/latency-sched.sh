#!/usr/bin/env bash
# Where the latency probe's slow samples went: runs latency-peers.sh for ONE broker and ONE load
# while `perf record` traces the scheduler of every CPU (switches and wake-ups, CLOCK_MONOTONIC),
# has the probe log its samples slower than SLOW_US, and reads both with latency_sched.py: for
# each slow sample, how long the broker's threads and the probe waited for a CPU, the broker's
# longest uninterrupted run, and who held the CPUs. Needs perf and root.
#   BROKERS=ringmq LAT_LOADS=loaded scripts/bench/latency-sched.sh
#   BROKERS=mosquitto LAT_LOADS=unloaded scripts/bench/latency-sched.sh
# SLOW_US (1000). Other latency-peers.sh variables pass through. Bounded: perf stops with the
# probe (LAT_SAMPLES x LAT_INTERVAL_MS + 30 s at most).
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
export RUN_ID=${RUN_ID:-sched-$(date +%Y%m%d-%H%M%S)}
export BROKERS=${BROKERS:-ringmq}
export LAT_LOADS=${LAT_LOADS:-loaded}
[[ $BROKERS != *" "* && $LAT_LOADS != *" "* ]] || {
  echo "latency-sched.sh: one broker and one load at a time (BROKERS, LAT_LOADS)" >&2
  exit 2
}
command -v perf >/dev/null || { echo "latency-sched.sh: needs perf" >&2; exit 2; }
results=${BENCH_RESULTS:-$(cd "$here/../.." && pwd)/bench-results/scenarios}
dir=$results/runs/$RUN_ID
mkdir -p "$dir"
slow_log=$dir/slow-samples.txt
export LAT_PROBE_ARGS="--slow-log $slow_log --slow-us ${SLOW_US:-1000}"
bound=$((${LAT_SAMPLES:-2000} * ${LAT_INTERVAL_MS:-10} / 1000 + 30))

"$here/latency-peers.sh" &
runner=$!
probe_pid=
for _ in $(seq 1 3000); do # bounded: the idle clients connect first (< 10 min)
  probe_pid=$(pgrep -f "paho_probe.py .*--slow-log" | head -1 || true)
  [[ -n $probe_pid ]] && break
  kill -0 "$runner" 2>/dev/null || break
  sleep 0.2
done
[[ -n $probe_pid ]] || { echo "latency-sched.sh: the probe never started" >&2; wait "$runner"; exit 1; }
# The broker: the process started with its configuration from this run's directory (lib.sh).
broker_pid=$(pgrep -f "$dir/[a-z-]*\.(conf|toml)" | head -1 || true)
[[ -n $broker_pid ]] || { echo "latency-sched.sh: no broker process found" >&2; exit 1; }
broker_tids=$(ls "/proc/$broker_pid/task" | tr '\n' ' ')
perf record -q -e sched:sched_switch -e sched:sched_wakeup -a -k CLOCK_MONOTONIC \
  -o "$dir/sched.data" -- timeout "$bound" tail --pid="$probe_pid" -f /dev/null 2>/dev/null || true
wait "$runner"
perf script -i "$dir/sched.data" -F comm,pid,tid,cpu,time,event,trace 2>/dev/null >"$dir/sched.txt"
# shellcheck disable=SC2086 # one thread id per word
python3 "$here/latency_sched.py" --slow-log "$slow_log" --probe-pid "$probe_pid" \
  --broker-pid "$broker_pid" --broker-tids $broker_tids --trace "$dir/sched.txt" |
  tee "$dir/sched-report.txt"
