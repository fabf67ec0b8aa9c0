# Cross check: ring-runtime's test binary for aarch64 (static musl, rust-lld) runs under
# qemu-user, which has no io_uring, so the runtime must pick epoll by itself. The whole
# runtime suite runs (about 65 s under emulation on 2 cores, 100 s with the build).
RINGMQ_TEST_STEPS+=(cross_aarch64)

ensure_qemu_aarch64() {
  command -v qemu-aarch64-static >/dev/null && return
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static >/dev/null
}

test_cross_aarch64() {
  ensure_qemu_aarch64
  local bin out
  bin=$(scripts/build-static.sh --runtime-tests aarch64-unknown-linux-musl)
  [[ -x $bin ]] || { echo "no aarch64 test binary built" >&2; return 1; }
  file "$bin" 2>/dev/null || true
  out=$(cd crates/ring-runtime && env -u RINGMQ_BACKEND RINGMQ_TEST_RUNNER=qemu-aarch64-static \
    qemu-aarch64-static "$bin" --nocapture 2>&1) || {
    echo "$out"
    return 1
  }
  echo "$out"
  grep -q "backend: Epoll" <<<"$out" || { echo "epoll was not picked under qemu" >&2; return 1; }
}

# The ARM gateway's binary: the static aarch64 broker (dev profile; zig cc for mimalloc's and
# ring's C) runs under qemu-user, where epoll carries it, and the broker's black-box smoke
# tests (tests/broker/smoke.rs: QoS 0/1/2, retained, Will, a persistent session across a
# restart) run against it from the host's test binary.
RINGMQ_TEST_STEPS+=(aarch64_smoke)

test_aarch64_smoke() {
  ensure_qemu_aarch64
  local bin
  bin=$(scripts/build-static.sh --smoke-broker aarch64-unknown-linux-musl)
  [[ -x $bin ]] || { echo "no aarch64 broker built" >&2; return 1; }
  file "$bin" 2>/dev/null || true
  # --workspace, not -p ringmq: the unit step's features, so its build is reused.
  RINGMQ_TEST_BROKER_CMD="qemu-aarch64-static $bin" RUST_TEST_THREADS=1 \
    cargo test --workspace --locked --test broker smoke::
}
