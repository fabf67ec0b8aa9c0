# Unit, property and integration tests of every crate.
# ring-runtime and broker tests run once per backend (RINGMQ_BACKEND=uring, then epoll).
test_unit() {
  cargo test --workspace --locked --all-targets
}
