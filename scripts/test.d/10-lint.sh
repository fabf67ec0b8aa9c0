# Formatting and lints: warnings are errors.
test_fmt() {
  cargo fmt --all -- --check
}

test_clippy() {
  cargo clippy --workspace --all-targets --locked -- -D warnings
}
