#!/usr/bin/env bash
# ring-runtime benchmarks, bounded in time (about 3 minutes on 2 cores):
#  1. echo: messages per server CPU-second, io_uring vs epoll vs tokio, 1/100/5000 connections,
#     3 interleaved runs per server (medians and ranges)
#  2. zero-copy threshold: SENDMSG vs SENDMSG_ZC throughput and CPU per GiB, 1 KiB..1 MiB
# Results go to stdout and bench-results/runtime-echo.md. Extra echo options pass through and
# win over the defaults, e.g. scripts/bench/runtime-echo.sh --window 8 --client-shards 2
# Where the CPU goes: scripts/bench/runtime-echo-perf.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p bench-results
out=bench-results/runtime-echo.md
cargo build --locked --release -p ring-runtime --example echo_bench --example zerocopy_bench
bin=${CARGO_TARGET_DIR:-target}/release/examples
load() { cut -d' ' -f1-3 /proc/loadavg; }
{
  echo "## echo ($(uname -r), $(nproc) CPUs, load average before: $(load))"
  timeout 400 "$bin/echo_bench" --conns 1,100,5000 --seconds 2 --repeat 3 "$@"
  echo "(load average after: $(load))"
  echo
  echo "## zero-copy threshold"
  timeout 300 "$bin/zerocopy_bench" 1024,4096,16384,65536,262144,1048576
} | tee "$out"
