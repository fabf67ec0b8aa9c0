# Tool installation for a fresh machine; each installer is idempotent.
RINGMQ_TEST_STEPS=(tools fmt clippy)

ensure_rust_components() {
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
}

# ensure_debian_package PROGRAM PACKAGE: installs Debian's PACKAGE unless PROGRAM is on the
# PATH or in /usr/sbin.
ensure_debian_package() {
  if command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ]; then
    return
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2"
}

# mqtt.js (npm `mqtt` 5), a third-party MQTT 5 client that speaks AUTH: the SCRAM interop test
# (tests/broker/scram_mqttjs.rs) runs a node script with it from RINGMQ_MQTTJS_DIR.
export RINGMQ_MQTTJS_DIR=${RINGMQ_MQTTJS_DIR:-$HOME/.cache/ringmq-test/mqttjs}
ensure_mqtt_js() {
  if [ -f "$RINGMQ_MQTTJS_DIR/node_modules/mqtt/package.json" ]; then
    return
  fi
  ensure_debian_package npm npm
  mkdir -p "$RINGMQ_MQTTJS_DIR"
  npm install --prefix "$RINGMQ_MQTTJS_DIR" --no-audit --no-fund --silent mqtt@5
}

# aioquic (PyPI), a third-party QUIC stack: the MQTT over QUIC interop test
# (tests/broker/quic.rs) runs tests/broker/quic_aioquic.py with it from RINGMQ_AIOQUIC_DIR.
export RINGMQ_AIOQUIC_DIR=${RINGMQ_AIOQUIC_DIR:-$HOME/.cache/ringmq-test/aioquic}
ensure_aioquic() {
  if [ -d "$RINGMQ_AIOQUIC_DIR/aioquic" ]; then
    return
  fi
  ensure_debian_package pip3 python3-pip
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$RINGMQ_AIOQUIC_DIR" aioquic==1.7.2
}

test_tools() {
  ensure_rust_components
  # access/ unit tests make password files with the real mosquitto_passwd.
  ensure_debian_package mosquitto_passwd mosquitto
  # The broker tests drive mosquitto_pub/mosquitto_sub over TLS (tests/broker/tls.rs).
  ensure_mosquitto_clients
  # The Redis backend's tests run a real redis-server (crates/access/src/backend/redis_tests.rs, tests/broker/backends.rs).
  ensure_debian_package redis-server redis-server
  # The cluster tests run a real 3-server NATS cluster (tests/broker/nats_cluster.rs).
  ensure_debian_package nats-server nats-server
  # The PROXY protocol tests put a real HAProxy in front of the broker (tests/broker/proxy.rs).
  ensure_debian_package haproxy haproxy
  ensure_mqtt_js
  ensure_aioquic
  # The dashboard's test drives a headless Chromium over the DevTools protocol
  # (tests/broker/dashboard.rs); it fails, never skips, without it.
  ensure_debian_package chromium chromium
  cargo --version
}
