# The workspace's shape: no import cycle between the files of any crate, and no crate edge
# outside scripts/crate-graph.toml (one crate per capability; nothing depends on the binary).
RINGMQ_TEST_STEPS+=(deps)

test_deps() {
  python3 scripts/check_deps_test.py
  python3 scripts/check-deps.py
}
