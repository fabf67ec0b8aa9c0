#!/usr/bin/env bash
# The long fault run of the cluster (issue 48; docs/cluster.md, "Fault suite"): three NATS
# servers and three RingMQ nodes (real processes, each reaching NATS through relays of its
# own), publishers and persistent subscribers recording every acknowledged message and every
# delivery, and FAULTS faults (default 300) drawn from SEED (default: the time), one at a time,
# of every kind: NATS servers killed and frozen, nodes cut off, stalled and slowed on their
# links, nodes killed (started again with their store) and frozen. Prints the fault timeline
# and one result line: faults by kind, messages acknowledged, lost, QoS 2 twice, retained
# divergence, time to heal. The test command runs the same suite with 8 faults (seed 48).
# NODES=5 runs five nodes (a larger cluster) on the same three NATS servers.
# RINGMQ_BROKER_LOGS=DIR writes each node's log to DIR/f<N>.log (appended; the run prints the
# Unix time of its 0.0 s, to find a loss's moment in them); RINGMQ_BROKER_LOG_FILTER sets the
# nodes' log filter (RUST_LOG syntax: info,cluster=debug,broker_core::shard::mirror=debug).
#   scripts/cluster-faults.sh [FAULTS]
set -euo pipefail
cd "$(dirname "$0")/.."
faults=${1:-300}
RINGMQ_FAULTS=$faults RINGMQ_FAULT_NODES=${NODES:-3} RINGMQ_FAULT_SEED=${SEED:-$(date +%s)} \
  cargo test --release --locked -p ringmq --test broker faults::a_long_random_schedule \
    -- --ignored --nocapture 2>&1 |
  grep -E '^fault|^healed|^node|^test |test result|panicked'
