# Miri over ring-runtime's unsafe-free but pointer-heavy containers: the send queue and the
# generational slab (undefined behaviour, leaks, aliasing). Needs a nightly toolchain with the
# miri component: installs it when missing; if it cannot be installed, prints SKIP and passes.
# Its own target directory (about 25 s from scratch).
RINGMQ_TEST_STEPS+=(miri)

ensure_miri() {
  if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal >/dev/null 2>&1 || return 1
  fi
  if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup component add --toolchain nightly miri rust-src >/dev/null 2>&1 || return 1
  fi
}

test_miri() {
  if ! ensure_miri; then
    echo "SKIP miri: no nightly toolchain with miri could be installed"
    return 0
  fi
  CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}-miri" \
    cargo +nightly miri test -p ring-runtime --lib -- send_queue slab
}
