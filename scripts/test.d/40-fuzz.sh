# Fuzz smoke test: every cargo-fuzz target in fuzz/ runs briefly over its seed corpus.
# Needs a nightly toolchain and cargo-fuzz: installs whichever is missing; if nightly cannot be
# installed, prints SKIP and passes. Bounded: about FUZZ_SMOKE_SECONDS per target plus builds.
#
# Without AddressSanitizer (`-s none`): the fuzzed crates (codec, router, the broker) forbid
# `unsafe`, so ASan had nothing of theirs to check, and it cost the step most of its time. On
# two cores the build took 9 minutes with it and 6 without, and the targets ran 3 to 7 times
# more inputs a second without it (decode_v311 1.9M runs in 20 s against 0.67M, broker_session
# 62k against 8.5k). Panics, overflow checks and debug assertions still fail a run.
RINGMQ_TEST_STEPS+=(fuzz_smoke)

FUZZ_SMOKE_SECONDS=${FUZZ_SMOKE_SECONDS:-15}
FUZZ_SANITIZER=${FUZZ_SANITIZER:-none}

ensure_fuzz_tools() {
  if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "installing the nightly toolchain for cargo-fuzz"
    rustup toolchain install nightly --profile minimal >/dev/null 2>&1 || return 1
  fi
  if ! cargo fuzz --help >/dev/null 2>&1; then
    echo "installing cargo-fuzz"
    cargo install cargo-fuzz --locked >/dev/null 2>&1 || return 1
  fi
}

fuzz_smoke_target() {
  local target=$1 work=$2
  mkdir -p "$work/$target"
  # The first directory collects new inputs; the committed seeds stay untouched.
  if ! cargo +nightly fuzz run -s "$FUZZ_SANITIZER" "$target" "$work/$target" \
      "fuzz/corpus/$target" -- \
      -max_total_time="$FUZZ_SMOKE_SECONDS" -rss_limit_mb=512 -timeout=5 \
      >"$work/$target.log" 2>&1; then
    tail -n 60 "$work/$target.log"
    echo "fuzz target $target failed; the crashing input is in fuzz/artifacts/$target/"
    return 1
  fi
  printf '%-16s %s\n' "$target" "$(grep -E '^Done' "$work/$target.log")"
}

test_fuzz_smoke() {
  if ! ensure_fuzz_tools; then
    echo "SKIP fuzz_smoke: no nightly toolchain or cargo-fuzz could be installed"
    return 0
  fi
  local work status=0 target
  work=$(mktemp -d)
  cargo +nightly fuzz build -s "$FUZZ_SANITIZER" >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; return 1; }
  for target in $(cargo +nightly fuzz list); do
    fuzz_smoke_target "$target" "$work" || status=1
  done
  rm -rf "$work"
  return "$status"
}
