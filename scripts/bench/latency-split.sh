#!/usr/bin/env bash
# Where the latency probe's time goes: runs latency.sh for ONE broker and ONE load while tcpdump
# captures the probe's connection, then splits each round trip into the probe's send path and
# the broker's part (latency_split.py). Needs tcpdump (installed if missing) and root.
#   scripts/bench/latency-split.sh                      # RingMQ, "own" load (half its maximum)
#   LAT_MAX=713000 scripts/bench/latency-split.sh       # the same absolute load as another run
#   BROKERS=mosquitto LAT_LOADS=common scripts/bench/latency-split.sh
# Other latency.sh variables (LAT_SAMPLES, RINGMQ_CONFIG_EXTRA, ...) pass through. The capture is
# kept as $BENCH_RESULTS/runs/$RUN_ID/probe.pcap.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
export RUN_ID=${RUN_ID:-split-$(date +%Y%m%d-%H%M%S)}
export BROKERS=${BROKERS:-ringmq}
export LAT_LOADS=${LAT_LOADS:-own}
export LAT_SAMPLES=${LAT_SAMPLES:-1000}
[[ $BROKERS != *" "* && $LAT_LOADS != *" "* ]] || {
  echo "latency-split.sh: one broker and one load at a time (BROKERS, LAT_LOADS)" >&2
  exit 2
}
command -v tcpdump >/dev/null || apt-get install -y tcpdump >&2 ||
  { apt-get update >&2 && apt-get install -y tcpdump >&2; }
results=${BENCH_RESULTS:-$(cd "$here/../.." && pwd)/bench-results/scenarios}
capture=$results/runs/$RUN_ID/probe.pcap
probe_secs=$((LAT_SAMPLES * ${LAT_INTERVAL_MS:-10} / 1000 + 5))

"$here/latency.sh" &
runner=$!
probe_pid=
for _ in $(seq 1 3000); do # bounded: the idle clients and the maximum come first (< 10 min)
  probe_pid=$(pgrep -f " latency --samples" | head -1 || true)
  [[ -n $probe_pid ]] && break
  kill -0 "$runner" 2>/dev/null || break
  sleep 0.2
done
[[ -n $probe_pid ]] || { echo "latency-split.sh: the probe never started" >&2; wait "$runner"; exit 1; }
sleep 0.5 # connected and subscribed
probe_port=$(ss -tnpH state established | grep "pid=$probe_pid," | awk '{print $3}' |
  awk -F: '{print $NF}' | head -1)
mkdir -p "$(dirname "$capture")"
timeout "$probe_secs" tcpdump -i lo -s 400 --time-stamp-precision=nano -w "$capture" \
  "tcp port $probe_port" 2>/dev/null || true
wait "$runner"
echo "probe on port $probe_port; capture $capture"
python3 "$here/latency_split.py" "$capture" "$probe_port"
