#!/usr/bin/env bash
# A sustained p2p flood with one load generator process beside the broker (unlike p2p.sh, whose
# load outruns the broker's delivery): 1,000 pairs, 256 B, for 9 s. Per run: messages delivered
# per broker CPU-second, the broker's peak RSS (sampled every 0.5 s), its mean delivery latency
# and, from /metrics, PUBLISH packets held for order and input fences expired. Written for
# `runtime.subscribe_order = "received"` against "handled" (docs/bench/history/issue-49-order.md).
#   scripts/bench/order-flood.sh <rounds> <build>...   (build: ${BUILD_ROOT:-/tmp/tgt-}<build>/release/
#   holding ringmq and ringmq-bench; the builds alternate round by round)
#   QOS=0  PAIRS=1000  SECONDS_RUN=9  RINGMQ_CONFIG_EXTRA (TOML appended to the broker's config)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rounds=${1:?usage: order-flood.sh <rounds> <build>...}
shift
[[ $# -gt 0 ]] || { echo "no builds given" >&2; exit 2; }
qos=${QOS:-0}
pairs=${PAIRS:-1000}
seconds=${SECONDS_RUN:-9}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

one_run() { # build -> one line
  local build=$1 dir=${BUILD_ROOT:-/tmp/tgt-}$1/release
  local port http run conf
  port=$(free_port)
  http=$(free_port)
  run=$(mktemp -d)
  # The scenarios' RingMQ config (with RINGMQ_CONFIG_EXTRA), and /metrics for the counts.
  conf=$(write_config ringmq "$port")
  printf '[http]\nbind = "127.0.0.1:%s"\n' "$http" >>"$conf"
  (ulimit -n "$FD_LIMIT" && exec "$dir/ringmq" --config "$conf") >"$run/broker.log" 2>&1 &
  local broker=$!
  sleep 1
  local before peak=0 rss
  before=$(cpu_ticks "$broker")
  (ulimit -n "$FD_LIMIT" && exec "$dir/ringmq-bench" p2p -H "127.0.0.1:$port" --pairs "$pairs" -s 256 \
    -q "$qos" -L 1000000 -d "$seconds" --warmup 1 --quiet) >"$run/bench.json" 2>"$run/bench.err" &
  local bench=$!
  while kill -0 "$bench" 2>/dev/null; do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$broker/status")
    ((rss > peak)) && peak=$rss
    sleep 0.5
  done
  wait "$bench" || true
  local ticks received
  ticks=$(($(cpu_ticks "$broker") - before))
  curl -s "127.0.0.1:$http/metrics" >"$run/metrics.txt"
  # The bench prints a summary, then its JSON report from the first "{" line on.
  received=$(sed -n '/^{/,$p' "$run/bench.json" | jq -r '.totals.received')
  awk -v tck="$CLK_TCK" -v build="$build" -v qos="$qos" -v received="$received" -v ticks="$ticks" -v peak="$peak" '
    /^ringmq_delivery_latency_seconds_sum/ { sum += $2 }
    /^ringmq_delivery_latency_seconds_count/ { count += $2 }
    /^ringmq_publishes_held_for_order_total/ { held = $2 }
    /^ringmq_input_fences_expired_total/ { expired = $2 }
    END {
      printf "%s qos %d: %d msg/CPU-s, peak RSS %d MB, mean delivery latency %.1f ms, held %d, fences expired %d\n",
        build, qos, received * tck / ticks, peak / 1024, count ? sum / count * 1000 : 0, held, expired
    }' "$run/metrics.txt"
  kill "$broker"
  wait "$broker" 2>/dev/null || true
  rm -rf "$run" "$(dirname "$conf")/ringmq-data-$port"
}

builds=("$@")
for round in $(seq 1 "$rounds"); do
  shift_by=$(((round - 1) % ${#builds[@]}))
  for build in "${builds[@]:shift_by}" "${builds[@]:0:shift_by}"; do
    echo "r$round $(one_run "$build")"
  done
done
