# Unit, property and integration tests of every crate.
# ring-runtime and broker tests run once per backend (RINGMQ_BACKEND=uring, then epoll).
#
# The broker and session-store suites mostly wait on sockets, timers and fsync (the broker's:
# 109 CPU-s in 151 s of wall time on 2 cores with libtest's default of one thread a core), so they
# run RINGMQ_TEST_THREADS tests at once: at 8 on the 2-core machine, 98 s for the broker
# suite and 47 s for session-store's, against 151 s and 72 s.
RINGMQ_TEST_THREADS=${RINGMQ_TEST_THREADS:-8}

test_unit() {
  # libtest reads RUST_TEST_THREADS; the criterion benches, run once as tests, take no flag.
  RUST_TEST_THREADS=$RINGMQ_TEST_THREADS cargo test --workspace --locked --all-targets
}
