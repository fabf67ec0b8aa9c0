RINGMQ_TEST_STEPS+=(unit)

# Unit, property and integration tests of every crate.
# ring-runtime and broker tests run once per backend (RINGMQ_BACKEND=uring, then epoll; the
# broker's cluster tests on the default backend only: 50-interop.sh).
#
# Every libtest binary here (and the epoll broker step's) runs RINGMQ_TEST_THREADS tests at once.
# The long suites, the broker's and session-store's, mostly wait on sockets, timers and fsync
# (the broker's: 109 CPU-s in 151 s of wall time on 2 cores at libtest's default of one thread
# a core). Each binary run by hand at 8 threads on the 2-core machine: broker 98 s,
# session-store 47 s, against 151 s and 72 s at the default.
RINGMQ_TEST_THREADS=${RINGMQ_TEST_THREADS:-8}

test_unit() {
  # libtest reads RUST_TEST_THREADS; the criterion benches, run once as tests, take no flag.
  RUST_TEST_THREADS=$RINGMQ_TEST_THREADS cargo test --workspace --locked --all-targets
}
