#!/usr/bin/env bash
# The whole RingMQ test suite: the README's test command and what .ci/run calls.
# Installs the test tools it needs on a fresh machine, then runs every check in order.
# Each step is a function in scripts/test.d/*.sh (sourced in name order) so steps stay small.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
export RUST_BACKTRACE=${RUST_BACKTRACE:-1}
# A CI clone builds once: incremental state (1.6 GB of a full run's 5.3 GB target) buys nothing.
if [[ -n ${CI:-} ]]; then
  export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
fi

step() { printf '\n=== %s ===\n' "$*"; }

for part in scripts/test.d/*.sh; do
  # shellcheck source=/dev/null
  source "$part"
done

# Steps run in this order; RINGMQ_TEST_ONLY="fmt clippy unit" runs a subset.
steps=(${RINGMQ_TEST_ONLY:-${RINGMQ_TEST_STEPS[@]}})
start=$(date +%s)
timings=()
for s in "${steps[@]}"; do
  step "$s"
  step_start=$(date +%s)
  "test_$s"
  timings+=("$(printf '%-16s %5d s' "$s" $(( $(date +%s) - step_start )))")
done
step "all steps passed in $(( $(date +%s) - start )) s"
# Where the time went, one line a step: the suite must stay well inside CI's limit.
printf '%s\n' "${timings[@]}"
