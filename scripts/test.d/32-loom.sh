# Loom model of the mailbox wake-up protocol (crates/ring-runtime/src/mailbox_loom.rs): every
# interleaving of senders, a bare wake-up and the receiver, checking no batch is left without a
# pending wake-up. Its own target directory, so the `--cfg loom` build does not invalidate the
# main one (about 2 min from scratch on 2 cores, 20 s of which is the model).
RINGMQ_TEST_STEPS+=(loom)

test_loom() {
  CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}-loom" RUSTFLAGS="--cfg loom" \
    cargo test --locked -p ring-runtime --lib loom --release
}
