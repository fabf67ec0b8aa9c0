# ring-runtime's suite once per backend (the unit step runs it with RINGMQ_BACKEND unset: auto).
# On a kernel without io_uring the uring run prints SKIP lines instead of failing.
RINGMQ_TEST_STEPS+=(runtime_epoll runtime_uring)

test_runtime_epoll() {
  RINGMQ_BACKEND=epoll cargo test --locked -p ring-runtime
}

test_runtime_uring() {
  RINGMQ_BACKEND=uring cargo test --locked -p ring-runtime
}
