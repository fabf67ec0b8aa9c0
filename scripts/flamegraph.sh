#!/usr/bin/env bash
# Flame graph of a broker during one scenario: scripts/flamegraph.sh <scenario> [broker]
# (scenario: fanout, fanout-qos1, p2p, conn, latency, storm, shared, offline; broker: default
# ringmq). perf record -e cpu-clock -g on the broker for the whole scenario, folded and drawn by
# inferno (installed with `cargo install inferno --locked` into the bench cache when missing).
# Output: docs/bench/flame-<broker>-<scenario>.svg (FLAME_OUT overrides) and perf data under
# bench-results/. Scenario settings pass through the environment (e.g. FANOUT_STEPS="100").
set -euo pipefail
scenario=${1:?usage: scripts/flamegraph.sh <scenario> [broker]}
broker=${2:-ringmq}
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${BENCH_CACHE:-$HOME/.cache/ringmq-bench}
script=$root/scripts/bench/$scenario.sh
[[ -x $script ]] || { echo "no scenario script $script" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf is not installed (Debian: linux-perf)" >&2; exit 2; }
if [[ ! -x $cache/inferno/bin/inferno-flamegraph ]]; then
  cargo install inferno --locked -j 2 --root "$cache/inferno" >&2
fi
run_id=flame-$(date +%Y%m%d-%H%M%S)
data=$root/bench-results/$run_id.perf.data
mkdir -p "$root/bench-results" "$root/docs/bench"
out=${FLAME_OUT:-$root/docs/bench/flame-$broker-$scenario.svg}
# Results of profiled runs stay apart from the measured suite's.
RUN_ID=$run_id BROKERS=$broker REPS=1 PERF_DATA=$data \
  BENCH_RESULTS=$root/bench-results/flame "$script"
perf script -i "$data" 2>/dev/null |
  "$cache/inferno/bin/inferno-collapse-perf" |
  "$cache/inferno/bin/inferno-flamegraph" --title "$broker: $scenario (perf cpu-clock)" >"$out"
echo "flame graph: $out" >&2
