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
  cargo build --locked -p ringmq
  local binary="${CARGO_TARGET_DIR:-target}/debug/ringmq"
  local work port broker_pid
  work=$(mktemp -d)
  port=$(interop_free_port)
  # The default engine (redb) stores in the step's own directory: interop runs with
  # persistence on, as a user's broker does.
  printf '[runtime]\nshards = 2\n[persistence]\ndir = "%s"\n' "$work/data" >"$work/ringmq.toml"
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

# The black-box broker tests on the epoll backend (test_unit runs them on the default backend).
test_broker_epoll() {
  RINGMQ_BACKEND=epoll cargo test --locked -p ringmq --test broker
}
