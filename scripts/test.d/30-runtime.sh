# ring-runtime's suite once per backend (the unit step runs it with RINGMQ_BACKEND unset: auto).
# On a kernel without io_uring the uring run's tests skip: each writes one "SKIP: <reason>" line
# to stderr (libtest has no runtime skip), and the step reports how many did.
RINGMQ_TEST_STEPS+=(runtime_epoll runtime_uring)

# Runs a command with its output shown, then reports the count of SKIP lines it printed.
run_counting_skips() {
  local log status skips
  log=$(mktemp)
  if "$@" 2>&1 | tee "$log"; then status=0; else status=$?; fi
  skips=$(grep -c '^SKIP: ' "$log" || true)
  rm -f "$log"
  echo "skipped: $skips test(s)"
  return "$status"
}

test_runtime_epoll() {
  RINGMQ_BACKEND=epoll run_counting_skips cargo test --locked -p ring-runtime
}

test_runtime_uring() {
  RINGMQ_BACKEND=uring run_counting_skips cargo test --locked -p ring-runtime
}
