# Tool installation for a fresh machine; each installer is idempotent.
RINGMQ_TEST_STEPS=(tools fmt clippy unit)

ensure_rust_components() {
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
}

# The unit tests of broker-bin's `access` module make password files with the real
# mosquitto_passwd (Debian's `mosquitto` package; crates/broker-bin/src/access).
ensure_mosquitto_passwd() {
  if [ -x /usr/bin/mosquitto_passwd ]; then
    return
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq mosquitto
}

# The Redis authentication backend's tests run a real redis-server (access/backend/redis.rs,
# tests/broker/backends.rs).
ensure_redis_server() {
  if command -v redis-server >/dev/null; then
    return
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
}

# The cluster tests run a real 3-server NATS cluster (tests/broker/nats_cluster.rs, Debian's
# nats-server, installed in /usr/sbin).
ensure_nats_server() {
  if [ -x /usr/sbin/nats-server ] || command -v nats-server >/dev/null; then
    return
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server
}

test_tools() {
  ensure_rust_components
  ensure_mosquitto_passwd
  # The broker tests drive mosquitto_pub/mosquitto_sub over TLS (tests/broker/tls.rs).
  ensure_mosquitto_clients
  ensure_redis_server
  ensure_nats_server
  cargo --version
}
