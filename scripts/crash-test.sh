#!/usr/bin/env bash
# The crash test, many times: a real broker killed with SIGKILL under QoS 1/2 load, restarted
# on the same directory, checked for every acknowledged message (tests/broker/crash.rs).
#   ROUNDS=25 (kills per engine: sled, redb and log)
# Prints one line per kill and the total; exits non-zero on the first loss or duplicate.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS=${ROUNDS:-25}
RINGMQ_CRASH_ROUNDS=$ROUNDS cargo test --locked -p ringmq --test broker \
  crash::acknowledged_messages_survive_kill_9 -- --exact --nocapture 2>&1 |
  tee /dev/stderr | grep -c '^crash .* all delivered after the restart' |
  xargs -I{} echo "kills survived: {} of $((ROUNDS * 3))"
