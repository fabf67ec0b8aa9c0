# Tool installation for a fresh machine; each installer is idempotent.
RINGMQ_TEST_STEPS=(tools fmt clippy unit)

ensure_rust_components() {
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
}

test_tools() {
  ensure_rust_components
  cargo --version
}
