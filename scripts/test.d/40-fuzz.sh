# Fuzz smoke test: every cargo-fuzz target in fuzz/ runs briefly over its seed corpus.
# Needs a nightly toolchain and cargo-fuzz: installs whichever is missing; if nightly cannot be
# installed, prints SKIP and passes. Bounded: about FUZZ_SMOKE_SECONDS per target plus builds.
#
# Without AddressSanitizer (`-s none`): the fuzzed crates (codec, router, the broker) forbid
# `unsafe`, so ASan had nothing of theirs to check, and it cost the step most of its time. On
# two cores the build took 9 minutes with it and 6 without, and the targets ran 3 to 7 times
# more inputs a second without it (decode_v311 1.9M runs in 20 s against 0.67M, broker_session
# 62k against 8.5k). Panics, overflow checks and debug assertions still fail a run.
#
# Session 34, on two cores (AMD EPYC), from an empty fuzz/target with cargo-fuzz installed. The
# old profile's build took 355 s (session 33, `cargo fuzz build`) and 415 s (the same cargo
# command with --timings), and the broker crate, compiled last on one core, 132 s of the 415.
# With the broker and its dependencies at opt-level 1 (fuzz/Cargo.toml) and the targets run
# two at a time, the whole step took 402 s (414 s in a fresh-clone `.ci/run`), where the old
# one took its build plus six 17 s runs. Runs in 15 s, new profile (this step, then the CI
# run) against the old (session 33): broker_session 53.6k and 51.3k against 39k, decode_v311
# 1.60M and 1.79M against 1.82M, decode_v5 2.38M and 2.34M against 2.15M.
# `--codegen-units 16` was slower to build (391 against 355 s) and did not run faster.
RINGMQ_TEST_STEPS+=(fuzz_smoke)

FUZZ_SMOKE_SECONDS=${FUZZ_SMOKE_SECONDS:-15}
FUZZ_SANITIZER=${FUZZ_SANITIZER:-none}
FUZZ_SMOKE_JOBS=${FUZZ_SMOKE_JOBS:-$(nproc)}

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

# Runs the targets FUZZ_SMOKE_JOBS at a time (default: one per CPU). A libFuzzer process keeps
# one core busy, so on CI's two cores the six targets take three rounds of FUZZ_SMOKE_SECONDS
# instead of six, and each target still gets a core of its own.
run_fuzz_targets() {
  local work=$1 status=0 running=0 target
  for target in $(cargo +nightly fuzz list); do
    if (( running >= FUZZ_SMOKE_JOBS )); then
      wait -n || status=1
      running=$((running - 1))
    fi
    fuzz_smoke_target "$target" "$work" &
    running=$((running + 1))
  done
  while (( running > 0 )); do
    wait -n || status=1
    running=$((running - 1))
  done
  return "$status"
}

test_fuzz_smoke() {
  if ! ensure_fuzz_tools; then
    echo "SKIP fuzz_smoke: no nightly toolchain or cargo-fuzz could be installed"
    return 0
  fi
  local work status=0
  work=$(mktemp -d)
  cargo +nightly fuzz build -s "$FUZZ_SANITIZER" >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; return 1; }
  run_fuzz_targets "$work" || status=1
  rm -rf "$work"
  return "$status"
}
