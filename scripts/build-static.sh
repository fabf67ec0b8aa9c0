#!/usr/bin/env bash
# Static musl builds for x86_64 and aarch64, linked with rust-lld (shipped with rustup), so
# pure-Rust code needs no C cross toolchain. The linker is set per target through
# CARGO_TARGET_<TRIPLE>_LINKER: normal host builds are untouched.
#
#   scripts/build-static.sh                      # ringmq + ringmq-bench, profile dist, both targets
#   scripts/build-static.sh --runtime-tests T    # build ring-runtime's test binaries for target T;
#                                                # prints the path of the `runtime` test binary
#
# The broker links mimalloc, whose C part needs a C compiler for the target: for aarch64 that
# is Debian's gcc-aarch64-linux-gnu plus musl headers (musl-dev / a musl cross sysroot), and
# CC_aarch64_unknown_linux_musl pointing at it. ring-runtime's tests need none of that.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)

use_rust_lld() {
  local triple=$1 var
  var="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$triple")_LINKER"
  export "$var=rust-lld"
}

ensure_target() {
  rustup target list --installed | grep -qx "$1" || rustup target add "$1" >&2
}

if [[ ${1:-} == --runtime-tests ]]; then
  triple=${2:?usage: build-static.sh --runtime-tests <target triple>}
  ensure_target "$triple"
  use_rust_lld "$triple"
  cargo test --locked -p ring-runtime --target "$triple" --no-run --message-format=json-render-diagnostics \
    | grep -o '"executable":"[^"]*/runtime-[^"]*"' | sed 's/"executable":"\(.*\)"/\1/' | tail -1
  exit 0
fi

for triple in "${@:-${TARGETS[@]}}"; do
  ensure_target "$triple"
  use_rust_lld "$triple"
  cargo build --locked --profile dist --target "$triple" -p ringmq -p bench
  echo "built target/$triple/dist/{ringmq,ringmq-bench}"
done
