#!/usr/bin/env bash
# The long power-cut run (issue 52): the log and redb engines each take a seeded random
# workload of store writes on the simulated disk, and the power is cut after every write and
# sync, three ways (unsynced changes lost, a prefix kept, the next write torn at a sector),
# until CUTS cut points per engine are checked (default 100,000). Each recovered store must
# hold every commit that returned and nothing else (crates/session-store/src/storage/
# power_cut_tests.rs). A failure names its seed; SEED=N starts from it. The test command runs
# the same tests with 2,000 cut points per engine and sync mode.
#   scripts/power-cuts.sh [CUTS]
set -euo pipefail
cd "$(dirname "$0")/.."
cuts=${1:-100000}
RINGMQ_POWER_CUTS=$cuts RINGMQ_POWER_CUT_SEED=${SEED:-1} \
  cargo test --release --locked -p session-store --lib power_cut -- --nocapture --test-threads 2 2>&1 |
  grep -E '^power cuts|^test |test result|panicked|cut after'
