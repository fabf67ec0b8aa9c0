#!/usr/bin/env bash
# Static musl builds for x86_64 and aarch64, linked with rust-lld (shipped with rustup), so
# pure-Rust code needs no C cross toolchain. The linker is set per target through
# CARGO_TARGET_<TRIPLE>_LINKER: normal host builds are untouched.
#
#   scripts/build-static.sh                      # ringmq + ringmq-bench, profile dist, both targets
#   scripts/build-static.sh --runtime-tests T    # build ring-runtime's test binaries for target T;
#                                                # prints the path of the `runtime` test binary
#   scripts/build-static.sh --smoke-broker T     # build the broker for target T (dev profile,
#                                                # static); prints the binary's path
#
# The broker links mimalloc, whose C part needs a C compiler for the target. Unless
# CC_<triple> is set, this script uses `zig cc` from PyPI's `ziglang` package (installed into
# target/zig-venv on first use) as the cross C compiler for both musl targets. ring-runtime's
# tests need none of that.
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

# Points CC_<triple>/AR_<triple> at zig cc for `triple` unless the caller set a compiler.
use_zig_cc() {
  local triple=$1 zig_target venv=target/zig-venv wrapper
  local cc_var="CC_${triple//-/_}"
  [[ -n ${!cc_var:-} ]] && return
  if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q ziglang >&2
  fi
  zig_target=${triple%%-*}-linux-musl
  wrapper=$PWD/target/zig-cc-$triple
  cat >"$wrapper" <<WRAP
#!/usr/bin/env bash
# zig cc for $zig_target (cc-rs passes its own --target, which zig spells differently; zig
# turns UBSan on for unoptimised C, whose runtime a Rust link does not have)
args=()
for a in "\$@"; do case "\$a" in --target=*) ;; *) args+=("\$a");; esac; done
exec "$PWD/$venv/bin/python" -m ziglang cc -target $zig_target -fno-sanitize=undefined "\${args[@]}"
WRAP
  printf '#!/usr/bin/env bash\nexec "%s" -m ziglang ar "$@"\n' "$PWD/$venv/bin/python" >"$wrapper-ar"
  chmod +x "$wrapper" "$wrapper-ar"
  export "$cc_var=$wrapper"
  export "AR_${triple//-/_}=$wrapper-ar"
}

if [[ ${1:-} == --smoke-broker ]]; then
  triple=${2:?usage: build-static.sh --smoke-broker <target triple>}
  ensure_target "$triple"
  use_rust_lld "$triple"
  use_zig_cc "$triple"
  cargo build --locked -p ringmq --target "$triple" --message-format=json-render-diagnostics \
    | grep -o '"executable":"[^"]*/ringmq"' | sed 's/"executable":"\(.*\)"/\1/' | tail -1
  exit 0
fi

for triple in "${@:-${TARGETS[@]}}"; do
  ensure_target "$triple"
  use_rust_lld "$triple"
  use_zig_cc "$triple"
  cargo build --locked --profile dist --target "$triple" -p ringmq -p bench
  echo "built target/$triple/dist/{ringmq,ringmq-bench}"
done
