#!/usr/bin/env bash
# Where the echo servers' CPU goes (companion of runtime-echo.sh; needs perf and
# kernel.perf_event_paranoid <= 1 or root). For each server and connection count: one echo_bench
# run measuring 4 s, with `perf stat` of the server process (task clock, context switches,
# syscalls) for 2 s inside that window, then, while the load goes on (`--linger`), `perf record
# -e cpu-clock -g` for 2 s, grouped into cost categories by perf-categories.py, in % of the
# samples and in microseconds per message (from the measured messages per server CPU-second,
# which the profiler's own overhead does not inflate).
# Usage: scripts/bench/runtime-echo-perf.sh [SERVERS [CONNS [extra echo_bench options]]]
#   defaults: SERVERS="uring tokio", CONNS="1 5000"
# Results go to stdout and bench-results/runtime-echo-perf.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
servers=${1:-uring tokio}
conns_list=${2:-1 5000}
shift $(($# > 2 ? 2 : $#))
command -v perf >/dev/null || { echo "perf not found" >&2; exit 1; }
mkdir -p bench-results
out=bench-results/runtime-echo-perf.md
cargo build --locked --release -p ring-runtime --example echo_bench
bin=${CARGO_TARGET_DIR:-target}/release/examples/echo_bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
events=task-clock,context-switches
for syscall in io_uring_enter epoll_wait sendto recvfrom; do
  events+=,syscalls:sys_enter_$syscall
done
{
  echo "## echo server profiles ($(uname -r), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg))"
  for conns in $conns_list; do
    for kind in $servers; do
      echo
      echo "### $kind, $conns connections"
      timeout 120 "$bin" --conns "$conns" --seconds 4 --linger 4 --repeat 1 \
        --servers "$kind" "$@" >"$work/run.txt" &
      run=$!
      sleep 1
      bench=$(pgrep -P "$run" | head -1)
      server=$(pgrep -P "$bench" -f "serve $kind" | head -1)
      sleep 2
      perf stat -e "$events" -p "$server" -- sleep 2 2>&1 |
        grep -E "task-clock|context-switches|sys_enter" | sed 's/^ */    /' || true
      sleep 1.5 # past the measured window
      # perf record exits by re-raising the SIGTERM that ends a recording (the data is
      # complete); an inner shell keeps bash's "Terminated" notice out of the report.
      bash -c 'perf record -q -e cpu-clock -g -o "$1" -p "$2" -- sleep 2; true' _ \
        "$work/perf.data" "$server" >/dev/null 2>&1
      wait "$run"
      row=$(grep "^| $kind " "$work/run.txt")
      echo "    echo_bench: $row"
      per_cpu_second=$(echo "$row" | awk -F'|' '{gsub(/ /, "", $6); print $6}')
      us_per_message=$(awk -v r="$per_cpu_second" 'BEGIN { printf "%.3f", 1e6 / r }')
      echo "    server CPU per message: $us_per_message us"
      [ -s "$work/perf.data" ] || { echo "    (perf record wrote nothing)"; continue; }
      perf script -i "$work/perf.data" 2>/dev/null |
        scripts/bench/perf-categories.py "$us_per_message" | sed 's/^/    /'
    done
  done
} | tee "$out"
