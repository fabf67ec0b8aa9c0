# Interop with real clients (paho-mqtt 3.1.1/5.0, mosquitto_pub/sub) against a running ringmq,
# and the black-box broker suite on the epoll backend.
RINGMQ_TEST_STEPS+=(interop broker_epoll)

# Seconds any one interop client script may run.
RINGMQ_INTEROP_STEP_TIMEOUT=${RINGMQ_INTEROP_STEP_TIMEOUT:-120}

# Prints the Python interpreter that has paho-mqtt 2.x: the system one when it already does,
# else a virtual environment under target/ (created once), else a --user install.
interop_python() {
  local has_paho='import sys, paho.mqtt as m; sys.exit(int(m.__version__.split(".")[0]) < 2)'
  if python3 -c "$has_paho" 2>/dev/null; then
    echo python3
    return
  fi
  local venv="${CARGO_TARGET_DIR:-target}/interop-venv"
  if [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2; then
    "$venv/bin/python" -c "$has_paho" 2>/dev/null \
      || "$venv/bin/python" -m pip install --quiet 'paho-mqtt>=2,<3' >&2
    echo "$venv/bin/python"
    return
  fi
  python3 -m pip install --quiet --user 'paho-mqtt>=2,<3' >&2
  echo python3
}

# Installs Debian's mosquitto-clients unless mosquitto_pub and mosquitto_sub are present.
ensure_mosquitto_clients() {
  if command -v mosquitto_pub >/dev/null && command -v mosquitto_sub >/dev/null; then
    return
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq mosquitto-clients
}

# A throwaway CA and a server certificate for 127.0.0.1 in directory $1 (ca.pem, server.pem,
# server.key), made with openssl for this run only.
interop_certificates() {
  local dir=$1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=ringmq interop CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=127.0.0.1" -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$dir/server.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 2 -extfile "$dir/server.ext" -out "$dir/server.pem" 2>/dev/null
}

# A TCP port nothing listens on now.
interop_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits (at most 10 s) until the broker accepts connections on 127.0.0.1:$1.
interop_wait_for_port() {
  local _
  for _ in $(seq 100); do
    if python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), 0.2).close()" \
      2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# Runs in a subshell so the EXIT trap (which always stops the broker) stays local to the step.
test_interop() (
  set -euo pipefail
  local python
  python=$(interop_python)
  ensure_mosquitto_clients
  # The binary the broker tests use, built with the unit step's features (the whole
  # workspace's, dev-dependencies included): after that step, nothing is rebuilt.
  cargo test --workspace --locked --no-run --test broker
  local binary="${CARGO_TARGET_DIR:-target}/debug/ringmq"
  local work port broker_pid
  work=$(mktemp -d)
  port=$(interop_free_port)
  local tls_port ws_port wss_port
  tls_port=$(interop_free_port) ws_port=$(interop_free_port) wss_port=$(interop_free_port)
  interop_certificates "$work"
  # The default engine (log) stores in the step's own directory: interop runs with
  # persistence on, as a user's broker does. TLS, WebSocket and secure WebSocket listeners use
  # the certificates made above.
  {
    printf '[runtime]\nshards = 2\n[persistence]\ndir = "%s"\n' "$work/data"
    printf '[[listeners.tls]]\nbind = "127.0.0.1:%s"\ncert = "%s"\nkey = "%s"\n' \
      "$tls_port" "$work/server.pem" "$work/server.key"
    printf '[[listeners.ws]]\nbind = "127.0.0.1:%s"\npath = "/mqtt"\n' "$ws_port"
    printf '[[listeners.wss]]\nbind = "127.0.0.1:%s"\npath = "/mqtt"\ncert = "%s"\nkey = "%s"\n' \
      "$wss_port" "$work/server.pem" "$work/server.key"
  } >"$work/ringmq.toml"
  "$binary" --config "$work/ringmq.toml" --listen "127.0.0.1:$port" --log-level warn \
    >"$work/broker.log" 2>&1 &
  broker_pid=$!
  trap 'kill "$broker_pid" 2>/dev/null; wait "$broker_pid" 2>/dev/null; rm -rf "$work"' EXIT
  if ! interop_wait_for_port "$port"; then
    echo "ringmq did not start:"
    cat "$work/broker.log"
    return 1
  fi

  local failures=0 results="$work/results"
  local steps=(
    "$python tests/interop/paho_check.py --port $port --protocol 311"
    "$python tests/interop/paho_check.py --port $port --protocol 5"
    "bash tests/interop/mosquitto_check.sh $port"
    "$python tests/interop/paho_transport_check.py --tls-port $tls_port --ws-port $ws_port --wss-port $wss_port --cafile $work/ca.pem"
    "bash tests/interop/mosquitto_tls_check.sh $tls_port $work/ca.pem"
  )
  local step
  for step in "${steps[@]}"; do
    # shellcheck disable=SC2086 # each step is a command line
    if ! timeout "$RINGMQ_INTEROP_STEP_TIMEOUT" $step | tee -a "$results"; then
      failures=$((failures + 1))
      echo "FAIL step ($step) exited non-zero or timed out" | tee -a "$results"
    fi
  done
  kill -0 "$broker_pid" || { echo "FAIL the broker died"; failures=$((failures + 1)); }

  echo
  echo "interop summary: $(grep -c '^PASS' "$results") passed, $(grep -c '^FAIL' "$results") failed"
  grep '^FAIL' "$results" || true
  if [ "$failures" -ne 0 ]; then
    echo "broker log:"
    tail -n 50 "$work/broker.log"
    return 1
  fi
)

# The black-box broker tests on the epoll backend (test_unit runs them all on the default
# backend). The cluster tests (names with `cluster`, and the fault suite) are left out here:
# what they test is the NATS link, a side thread the shards' I/O backend does not touch, and
# they were 270 of this step's 307 s (session 40: 38 s for the other 320 tests).
test_broker_epoll() {
  # --workspace, not -p ringmq: the unit step's features, so its build is reused.
  RINGMQ_BACKEND=epoll RUST_TEST_THREADS=$RINGMQ_TEST_THREADS \
    cargo test --workspace --locked --test broker -- --skip cluster --skip faults
}
