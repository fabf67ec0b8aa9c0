#!/usr/bin/env bash
# Every scenario for every broker, REPS times (default 3; storm STORM_REPS, default 1) with the
# brokers alternating in each rep, bounded (each scenario by 25 minutes; the whole suite takes
# about 80 minutes on 2 shared cores with the four default brokers before FlashMQ joined them;
# more now), then the report into
# docs/benchmarks.md. One RUN_ID for the whole suite. Extra scenario settings pass through the
# environment. SCENARIOS limits the list.
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
export RUN_ID=${RUN_ID:-$(date +%Y%m%d-%H%M%S)}
export REPS=${REPS:-3}
SCENARIOS=${SCENARIOS:-loadgen fanout fanout-qos1 p2p conn latency storm shared offline}
start=$(date +%s)
for s in $SCENARIOS; do
  echo "== $s (run $RUN_ID, $(($(date +%s) - start)) s so far)" >&2
  reps=$REPS
  # storm reconnects 19k clients twice per broker (minutes for the peers that accept a few
  # hundred connections per second): one run per broker unless STORM_REPS says otherwise.
  [[ $s == storm ]] && reps=${STORM_REPS:-1}
  REPS=$reps timeout 1500 "$dir/$s.sh" || echo "== $s failed or timed out" >&2
  export SKIP_BUILD=1
done
echo "== suite done in $(($(date +%s) - start)) s" >&2
"$dir/report" --run "$RUN_ID"
