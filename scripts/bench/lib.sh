# Shared helpers of the scenario scripts (scripts/bench/<scenario>.sh); sourced, not run.
#
# Environment (all optional):
#   RINGMQ_CONFIG_EXTRA  TOML appended to RingMQ's config (default: none)
#   RINGMQ_ENGINE  RingMQ's persistence.engine (default "none": memory only, as the peers run;
#                  "sled" or "redb" store in the run directory, synced per group commit)
#   MOSQUITTO_CONFIG_EXTRA  lines appended to mosquitto's config (default: none; later lines
#                  win, e.g. "allow_anonymous false\npassword_file FILE")
#   MOSQUITTO_PERSISTENCE=1  mosquitto with `persistence true` (it saves on its autosave
#                  interval and at exit, not per message)
#   BROKERS        brokers to run, in order (default: "ringmq flashmq mosquitto rumqttd mochi";
#                  "flashmq-nodelay" is FlashMQ with tcp_nodelay on its listener; "aedes" is also
#                  known: it is not in the default set because under the p2p flood it dies of a
#                  stack overflow in its topic matcher and its runs take the whole window; a
#                  peer that cannot be installed is skipped with a warning)
#   LAB            where FlashMQ and nanomq_cli are installed (default ~/lab: $LAB/bin/flashmq,
#                  $LAB/bin/nanomq_cli); missing ones are built from the bare git mirrors under
#                  MIRROR_ROOT (default: ../.mirror beside the repository, as `fetch` writes
#                  them) by ../shared/peers/flashmq.sh and nanomq.sh (PEER_SCRIPTS, default
#                  ../shared/peers beside the repository)
#   REPS           runs per broker (default 1; all.sh uses 3); brokers alternate within a rep
#   RUN_ID         groups the results of one suite run (default: a timestamp)
#   BENCH_RESULTS  results directory (default: bench-results/scenarios, gitignored)
#   BENCH_CACHE    where peers are installed (default: ~/.cache/ringmq-bench)
#   BENCH_THREADS  load generator threads (default 1: the broker keeps the other core)
#   SKIP_BUILD=1   use the release binaries already built
#   KEEP_DATA=1    keep each broker's data directory (runs/<id>/*-data-<port>) after it stops
#   BENCH_TLS=1    ringmq and mosquitto also get TLS, WebSocket (/mqtt) and secure WebSocket
#                  listeners on free ports (TLS_PORT, WS_PORT, WSS_PORT) with the PEM files
#                  BENCH_TLS_CERT and BENCH_TLS_KEY (scripts/bench/tls.sh makes them)
#   TARGET_PORT    the port measured_bench and wait_conns use (default: BROKER_PORT, plain TCP)
#   BROKER_CPUS, LOADGEN_CPUS  CPU lists (taskset -c) the broker and the load generators are
#                  confined to (default: none, all CPUs): BROKER_CPUS=0 LOADGEN_CPUS=1 gives the
#                  broker a vCPU the load generator never takes (RingMQ then starts one shard,
#                  pinned inside that list)
#   CARGO_TARGET_DIR as for cargo
# Every broker listens on a free loopback port; every load is bounded in time and count.
set -euo pipefail

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH_DIR=$BENCH_ROOT/scripts/bench
BENCH_CACHE=${BENCH_CACHE:-$HOME/.cache/ringmq-bench}
TARGET_DIR=${CARGO_TARGET_DIR:-$BENCH_ROOT/target}
RINGMQ_BIN=$TARGET_DIR/release/ringmq
BENCH_BIN=$TARGET_DIR/release/ringmq-bench
BENCH_RESULTS=${BENCH_RESULTS:-$BENCH_ROOT/bench-results/scenarios}
RUN_ID=${RUN_ID:-$(date +%Y%m%d-%H%M%S)}
REPS=${REPS:-1}
BENCH_THREADS=${BENCH_THREADS:-1}
BROKERS=${BROKERS:-ringmq flashmq mosquitto rumqttd mochi}
LAB=${LAB:-$HOME/lab}
FLASHMQ_BIN=$LAB/bin/flashmq
NANOMQ_CLI=$LAB/bin/nanomq_cli
# Open files per broker and per load generator process (connections + a few).
FD_LIMIT=${FD_LIMIT:-20000}
CLK_TCK=$(getconf CLK_TCK)
RUN_DIR=$BENCH_RESULTS/runs/$RUN_ID
mkdir -p "$RUN_DIR"

# on_cpus LIST: the command prefix that confines a process to LIST (nothing when LIST is empty).
on_cpus() { [[ -z $1 ]] || printf '%s\n' taskset -c "$1"; }
mapfile -t BROKER_TASKSET < <(on_cpus "${BROKER_CPUS:-}")
mapfile -t LOADGEN_TASKSET < <(on_cpus "${LOADGEN_CPUS:-}")

BROKER_NAME="" BROKER_PID="" BROKER_PORT="" SAMPLER_PID="" SAMPLES=""
TLS_PORT="" WS_PORT="" WSS_PORT=""

# a - b for decimal numbers.
fsub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", a - b }'; }

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# ---------------------------------------------------------------------------------------------
# Building and installing (idempotent; never part of CI's test command)

build_ringmq() {
  [[ ${SKIP_BUILD:-0} == 1 && -x $RINGMQ_BIN && -x $BENCH_BIN ]] && return 0
  log "building ringmq and ringmq-bench (release)"
  (cd "$BENCH_ROOT" && cargo build --locked --release -j 2 -p ringmq -p bench >&2)
}

install_mosquitto() {
  command -v mosquitto >/dev/null && return 0
  apt-get install -y mosquitto >&2 || { apt-get update >&2 && apt-get install -y mosquitto >&2; }
  # The Debian package starts a system service on port 1883; the scenarios start their own.
  if command -v systemctl >/dev/null && systemctl is-active --quiet mosquitto 2>/dev/null; then
    systemctl stop mosquitto
  elif [[ -x /etc/init.d/mosquitto ]]; then
    /etc/init.d/mosquitto stop >&2 || true
  fi
}

# Not --locked: rumqttd 0.20.0's lock file pins metrics 0.22.1, which current rustc rejects
# (E0521); the newest semver-compatible dependencies (metrics 0.22.4) build.
install_rumqttd() {
  [[ -x $BENCH_CACHE/rumqttd/bin/rumqttd ]] && return 0
  cargo install rumqttd --version 0.20.0 -j 2 --root "$BENCH_CACHE/rumqttd" >&2
}

install_mochi() {
  [[ -x $BENCH_CACHE/mochi/mochi-peer ]] && return 0
  mkdir -p "$BENCH_CACHE/mochi"
  (cd "$BENCH_DIR/peers/mochi" && go build -o "$BENCH_CACHE/mochi/mochi-peer" . >&2)
}

# FlashMQ v1.26.2 and nanomq_cli 0.25.3 (the versions issue 53 compares with) are C/C++ builds
# from fetched snapshots, done by the scripts in ../shared/peers (idempotent, nice'd).
build_lab_peer() { # script binary
  [[ -x $2 ]] && return 0
  local script=${PEER_SCRIPTS:-$BENCH_ROOT/../shared/peers}/$1
  [[ -f $script ]] || { log "no $script to build $2 with"; return 1; }
  log "building $2 with $script"
  LAB=$LAB MIRROR_ROOT=${MIRROR_ROOT:-$BENCH_ROOT/../.mirror} nice -n 10 bash "$script" >&2
}

install_flashmq() { build_lab_peer flashmq.sh "$FLASHMQ_BIN"; }

install_nanomq_cli() { build_lab_peer nanomq.sh "$NANOMQ_CLI"; }

install_aedes() {
  mkdir -p "$BENCH_CACHE/aedes"
  cp "$BENCH_DIR/peers/aedes/package.json" "$BENCH_DIR/peers/aedes/server.mjs" "$BENCH_CACHE/aedes/"
  [[ -d $BENCH_CACHE/aedes/node_modules/aedes ]] && return 0
  (cd "$BENCH_CACHE/aedes" && npm install --no-audit --no-fund >&2)
}

# Installs what BROKERS names; drops (with a warning) a peer that cannot be installed.
prepare_brokers() {
  build_ringmq
  local ok=() b
  for b in $BROKERS; do
    case $b in
      ringmq) ok+=("$b") ;;
      mosquitto | rumqttd | mochi | aedes | flashmq | flashmq-nodelay)
        if "install_${b%-nodelay}"; then ok+=("$b"); else log "WARNING: $b not installed; skipped"; fi ;;
      *) log "WARNING: unknown broker $b; skipped" ;;
    esac
  done
  BROKERS="${ok[*]}"
  log "brokers: $BROKERS"
}

# ---------------------------------------------------------------------------------------------
# Broker life

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

write_config() { # name port -> config path
  local name=$1 port=$2 conf=$RUN_DIR/$1.conf
  # rumqttd picks the config format by the file extension.
  [[ $name == ringmq || $name == rumqttd ]] && conf=$RUN_DIR/$1.toml
  case $name in
    ringmq)
      cat >"$conf" <<EOF
[listeners]
tcp = ["127.0.0.1:$port"]
[log]
level = "warn"
[connection]
max_connections = 200000
[queues]
max_queued_messages = 100000
[sessions]
max_sessions = 400000
[persistence]
engine = "${RINGMQ_ENGINE:-none}"
dir = "$RUN_DIR/ringmq-data-$port"
EOF
      [[ ${BENCH_TLS:-0} == 1 ]] && cat >>"$conf" <<EOF
[[listeners.tls]]
bind = "127.0.0.1:$TLS_PORT"
cert = "$BENCH_TLS_CERT"
key = "$BENCH_TLS_KEY"
[[listeners.ws]]
bind = "127.0.0.1:$WS_PORT"
path = "/mqtt"
[[listeners.wss]]
bind = "127.0.0.1:$WSS_PORT"
path = "/mqtt"
cert = "$BENCH_TLS_CERT"
key = "$BENCH_TLS_KEY"
EOF
      # Extra TOML for RingMQ (e.g. "[runtime]\nwrite_interval_us = 0" to measure without pacing).
      [[ -n ${RINGMQ_CONFIG_EXTRA:-} ]] && printf '%b\n' "$RINGMQ_CONFIG_EXTRA" >>"$conf"
      ;;
    mosquitto)
      local persist=false
      [[ ${MOSQUITTO_PERSISTENCE:-0} == 1 ]] && persist=true
      mkdir -p "$RUN_DIR/mosquitto-data-$port"
      cat >"$conf" <<EOF
listener $port 127.0.0.1
allow_anonymous true
max_connections -1
max_queued_messages 100000
max_queued_bytes 0
max_inflight_messages 0
max_inflight_bytes 0
max_keepalive 65535
set_tcp_nodelay true
persistence $persist
persistence_location $RUN_DIR/mosquitto-data-$port/
log_dest none
EOF
      [[ -n ${MOSQUITTO_CONFIG_EXTRA:-} ]] && printf '%b\n' "$MOSQUITTO_CONFIG_EXTRA" >>"$conf"
      # Its WebSocket listeners (libwebsockets) bind every interface: an address after the
      # port would be taken as an interface name.
      [[ ${BENCH_TLS:-0} == 1 ]] && cat >>"$conf" <<EOF
listener $TLS_PORT 127.0.0.1
certfile $BENCH_TLS_CERT
keyfile $BENCH_TLS_KEY
listener $WS_PORT
protocol websockets
listener $WSS_PORT
protocol websockets
certfile $BENCH_TLS_CERT
keyfile $BENCH_TLS_KEY
EOF
      ;;
    rumqttd)
      cat >"$conf" <<EOF
id = 0
[router]
id = 0
max_connections = 200000
max_outgoing_packet_count = 100000
max_segment_size = 104857600
max_segment_count = 10
[v4.1]
name = "v4-1"
listen = "127.0.0.1:$port"
next_connection_delay_ms = 0
[v4.1.connections]
connection_timeout_ms = 60000
max_payload_size = 1048576
max_inflight_count = 65535
dynamic_filters = true
EOF
      ;;
    flashmq | flashmq-nodelay)
      # thread_count: the CPUs the broker may run on (RingMQ starts one shard per CPU of its
      # affinity). QoS queues at their maxima (65535 messages, 1 GiB per client) and a 16 MiB
      # write buffer, so nothing is dropped for want of room; packet size is unlimited by default.
      cat >"$conf" <<EOF
thread_count $("${BROKER_TASKSET[@]}" nproc)
allow_anonymous true
log_level warning
rlimit_nofile $FD_LIMIT
max_qos_msg_pending_per_client 65535
max_qos_bytes_pending_per_client 1073741824
client_max_write_buffer_size 16777216
listen {
  protocol mqtt
  inet_protocol ip4
  inet4_bind_address 127.0.0.1
  port $port
  tcp_nodelay $([[ $name == flashmq-nodelay ]] && echo true || echo false)
}
EOF
      ;;
    *) : >"$conf" ;;
  esac
  echo "$conf"
}

# make_certificates: a throwaway CA and a server certificate for 127.0.0.1 and localhost
# (openssl, P-256, in the run directory; never committed), for BENCH_TLS=1 and QUIC listeners;
# sets BENCH_TLS_CA, BENCH_TLS_CERT and BENCH_TLS_KEY. Readable by all: mosquitto drops
# root for its own user before it reads them.
make_certificates() {
  local dir=$RUN_DIR/tls
  mkdir -p "$dir"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=ringmq bench CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=localhost" -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
  printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
    "keyUsage=digitalSignature" "extendedKeyUsage=serverAuth" >"$dir/server.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 2 -extfile "$dir/server.ext" -out "$dir/server.pem" 2>/dev/null
  chmod 755 "$dir"
  chmod 644 "$dir"/*
  BENCH_TLS_CA=$dir/ca.pem
  export BENCH_TLS_CERT=$dir/server.pem BENCH_TLS_KEY=$dir/server.key
}

# broker_start NAME: starts NAME on a free loopback port; sets BROKER_NAME/PID/PORT.
broker_start() {
  local name=$1 port conf
  port=$(free_port)
  if [[ ${BENCH_TLS:-0} == 1 ]]; then
    TLS_PORT=$(free_port) WS_PORT=$(free_port) WSS_PORT=$(free_port)
  fi
  conf=$(write_config "$name" "$port")
  local logf=$RUN_DIR/$name.log
  case $name in
    ringmq) (ulimit -n "$FD_LIMIT" && exec "${BROKER_TASKSET[@]}" "$RINGMQ_BIN" --config "$conf") >>"$logf" 2>&1 & ;;
    mosquitto) (ulimit -n "$FD_LIMIT" && exec "${BROKER_TASKSET[@]}" mosquitto -c "$conf") >>"$logf" 2>&1 & ;;
    rumqttd) (ulimit -n "$FD_LIMIT" && exec "${BROKER_TASKSET[@]}" "$BENCH_CACHE/rumqttd/bin/rumqttd" -q -c "$conf") >>"$logf" 2>&1 & ;;
    flashmq*) (ulimit -n "$FD_LIMIT" && exec "${BROKER_TASKSET[@]}" "$FLASHMQ_BIN" --config-file "$conf") >>"$logf" 2>&1 & ;;
    mochi) (ulimit -n "$FD_LIMIT" && exec "${BROKER_TASKSET[@]}" "$BENCH_CACHE/mochi/mochi-peer" -listen "127.0.0.1:$port") >>"$logf" 2>&1 & ;;
    aedes) (ulimit -n "$FD_LIMIT" && cd "$BENCH_CACHE/aedes" && exec "${BROKER_TASKSET[@]}" node server.mjs 127.0.0.1 "$port") >>"$logf" 2>&1 & ;;
    *) log "unknown broker $name"; return 1 ;;
  esac
  BROKER_PID=$! BROKER_NAME=$name BROKER_PORT=$port
  local i
  for i in $(seq 1 100); do
    if ss -Hltn "sport = :$port" | grep -q LISTEN &&
      { [[ -z $WSS_PORT ]] || ss -Hltn "sport = :$WSS_PORT" | grep -q LISTEN; }; then
      sleep 0.2
      profile_start
      return 0
    fi
    kill -0 "$BROKER_PID" 2>/dev/null || break
    sleep 0.1
  done
  log "broker $name did not start; its log:"; tail -20 "$logf" >&2
  return 1
}

broker_alive() { [[ -n $BROKER_PID ]] && kill -0 "$BROKER_PID" 2>/dev/null; }

broker_stop() {
  [[ -z $BROKER_PID ]] && return 0
  profile_stop
  kill -TERM "$BROKER_PID" 2>/dev/null || true
  local i
  for i in $(seq 1 50); do
    kill -0 "$BROKER_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$BROKER_PID" 2>/dev/null || true
  wait "$BROKER_PID" 2>/dev/null || true
  BROKER_PID=""
  # Every start stores in a fresh directory (write_config) that nothing reads again, and a
  # persistent run leaves hundreds of MB there; KEEP_DATA=1 keeps them for a look.
  [[ -n ${KEEP_DATA:-} ]] || rm -rf "$RUN_DIR"/ringmq-data-* "$RUN_DIR"/mosquitto-data-*
}

# With PERF_DATA set (scripts/flamegraph.sh), the broker is profiled from start to stop:
# perf record with the software clock event (works where hardware counters are not exposed).
PERF_PID=""
profile_start() {
  [[ -z ${PERF_DATA:-} ]] && return 0
  perf record -e cpu-clock -F "${PERF_FREQ:-499}" ${PERF_CALL_GRAPH:--g} -p "$BROKER_PID" -o "$PERF_DATA" \
    >>"$RUN_DIR/perf.log" 2>&1 &
  PERF_PID=$!
  sleep 0.5
}

profile_stop() {
  [[ -z $PERF_PID ]] && return 0
  kill -INT "$PERF_PID" 2>/dev/null || true
  wait "$PERF_PID" 2>/dev/null || true
  PERF_PID=""
}

# ---------------------------------------------------------------------------------------------
# Sampling the broker

# CPU seconds (user + system, all threads) of a process.
cpu_s() {
  awk -v hz="$CLK_TCK" '{ sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / hz }' "/proc/$1/stat"
}

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# The anonymous part of a process's resident memory, kB (heap, stacks, rings: RSS less the
# binary's and libraries' pages read in from their files, which no connection owns).
rss_anon_kb() { awk '/^RssAnon:/ { print $2 }' "/proc/$1/status"; }

# Established connections on the broker's port, counted from the broker's side.
conn_count() { ss -Htn state established "( sport = :$1 )" | wc -l; }

# Starts sampling the broker every SAMPLE_INTERVAL seconds (default 1; elapsed s, RSS kB, CPU s,
# connections) into a file. SAMPLE_CONNS=0 records -1 for the connections instead of counting
# them: with 12,000 connections open, each `ss` takes 30 to 50 ms of wall time and 20 to 50 ms
# of CPU, once a second, which a latency probe on a 2-vCPU machine would otherwise measure
# (latency.sh sets it).
sampler_start() {
  SAMPLES=$(mktemp "$RUN_DIR/samples.XXXXXX")
  local pid=$BROKER_PID port=$BROKER_PORT count_conns=${SAMPLE_CONNS:-1}
  (
    start=$(date +%s.%N)
    for _ in $(seq 1 7200); do
      kill -0 "$pid" 2>/dev/null || exit 0
      now=$(date +%s.%N)
      conns=-1
      [[ $count_conns == 1 ]] && conns=$(conn_count "$port")
      echo "$(fsub "$now" "$start") $(rss_kb "$pid") $(cpu_s "$pid") $conns"
      sleep "${SAMPLE_INTERVAL:-1}"
    done
  ) >"$SAMPLES" 2>/dev/null &
  SAMPLER_PID=$!
}

# Stops the sampler; prints {"rss_peak_kb":..,"rss_steady_kb":..,"samples":[[t,rss,cpu,conns]..]}.
# Steady is the median of the second half of the samples.
sampler_stop() {
  kill "$SAMPLER_PID" 2>/dev/null || true
  wait "$SAMPLER_PID" 2>/dev/null || true
  SAMPLER_PID=""
  jq -R -s -c '
    [split("\n")[] | select(length > 0) | split(" ") | map(tonumber)] as $s
    | ($s | map(.[1])) as $rss
    | ($rss[(($rss | length) / 2 | floor):] | sort) as $tail
    | { rss_peak_kb: ($rss | max // 0),
        rss_steady_kb: (if ($tail | length) > 0 then $tail[(($tail | length) / 2 | floor)] else 0 end),
        samples: $s }' "$SAMPLES"
  rm -f "$SAMPLES"
}

# ---------------------------------------------------------------------------------------------
# Running the load generator and recording results

# bench_json_path NAME: a fresh path for one ringmq-bench summary.
bench_json_path() { mktemp "$RUN_DIR/$1.XXXXXX.json"; }

# run_bench JSON ARGS...: ringmq-bench with its own fd limit, summary to JSON, progress to the log.
run_bench() {
  (bench_exec "$@") >>"$RUN_DIR/bench.log" 2>&1
}

# bench_exec JSON ARGS...: replaces the calling (sub)shell with ringmq-bench, on LOADGEN_CPUS.
bench_exec() {
  local json=$1
  shift
  ulimit -n "$FD_LIMIT" && exec "${LOADGEN_TASKSET[@]}" "$BENCH_BIN" "$@" --threads "$BENCH_THREADS" --json "$json"
}

# bench_bg JSON ARGS...: run_bench in the background; BENCH_PID is the load generator itself (so
# that a kill reaches it), also remembered in BG_PIDS for background_stop.
bench_bg() {
  (bench_exec "$@") >>"$RUN_DIR/bench.log" 2>&1 &
  BENCH_PID=$!
  BG_PIDS+=("$BENCH_PID")
}

# record SCENARIO EXTRA_JSON: appends one result line (run id, broker, rep, machine + EXTRA).
record() {
  local scenario=$1 extra=$2 out=$BENCH_RESULTS/$1.jsonl
  jq -c -n --arg run "$RUN_ID" --arg broker "$BROKER_NAME" --arg scenario "$scenario" \
    --argjson rep "${REP:-1}" --argjson extra "$extra" \
    '{run: $run, scenario: $scenario, broker: $broker, rep: $rep} + $extra' >>"$out"
  log "$scenario $BROKER_NAME: $(jq -c -n --argjson e "$extra" '$e | del(.bench, .samples, .phases)')"
}

# measured_bench SCENARIO EXTRA_JSON COMMAND ARGS...: runs ringmq-bench COMMAND against the running broker with
# its CPU and RSS sampled over the run, and records bench summary + broker figures.
# Sets LAST_RESULT to the recorded line (without run/broker fields).
measured_bench() {
  local scenario=$1 extra=$2
  shift 2
  local json cpu0 cpu1 sampled
  json=$(bench_json_path "$scenario")
  sampler_start
  cpu0=$(cpu_s "$BROKER_PID")
  local command=$1
  shift
  run_bench "$json" "$command" --host "127.0.0.1:${TARGET_PORT:-$BROKER_PORT}" --label "$scenario" "$@" || true
  if ! broker_alive; then
    sampler_stop >/dev/null
    record "$scenario" "$(jq -c -n --argjson extra "$extra" '$extra + {broker_died: true}')"
    log "$scenario $BROKER_NAME: the broker died (see $RUN_DIR/$BROKER_NAME.log)"
    LAST_RESULT=null
    return 1
  fi
  cpu1=$(cpu_s "$BROKER_PID")
  sampled=$(sampler_stop)
  if [[ ! -s $json ]]; then
    log "$scenario $BROKER_NAME: the load generator wrote no summary (see $RUN_DIR/bench.log)"
    LAST_RESULT=null
    return 1
  fi
  LAST_RESULT=$(jq -c -n --slurpfile b "$json" --argjson s "$sampled" --argjson extra "$extra" \
    --argjson cpu "$(fsub "$cpu1" "$cpu0")" '
    $b[0] as $b
    | $extra + {
        delivered: $b.totals.received, sent: $b.totals.sent, expected: $b.expected,
        lost: $b.lost, duplicates: $b.totals.duplicates,
        delivered_ratio: (if $b.expected > 0 then $b.totals.received / $b.expected else null end),
        delivered_per_s: ($b.window_received_per_s // $b.received_per_s),
        broker_cpu_s: $cpu,
        msgs_per_broker_cpu_s: (if $cpu > 0 then $b.totals.received / $cpu else null end),
        rss_peak_kb: $s.rss_peak_kb, rss_steady_kb: $s.rss_steady_kb,
        latency_us: $b.latency_us, bench: $b, samples: $s.samples }')
  rm -f "$json"
  record "$scenario" "$LAST_RESULT"
}

# Load generators running in the background (stopped at the end of a measurement or on exit).
BG_PIDS=()

background_stop() {
  local pid
  for pid in "${BG_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${BG_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  BG_PIDS=()
}

# wait_conns COUNT SECONDS: until the broker holds COUNT connections or SECONDS passed (wall
# clock: counting 20k sockets takes a while); prints how many it holds.
wait_conns() {
  local n=0 deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    n=$(conn_count "${TARGET_PORT:-$BROKER_PORT}")
    ((n >= $1)) && break
    sleep 0.2
  done
  echo "$n"
}

# idle_start COUNT PREFIX BIND...: COUNT idle clients (keep-alive 300 s, bounded at 300 s) from
# the given source addresses, in the background (IDLE_PID); does not wait for them. They connect
# at IDLE_RATE per second (default 2500; 0 = all at once): background connections are set up,
# not measured, and a burst beyond a broker's listen backlog (mosquitto's is 100) costs SYN
# retransmissions of 1, 3, 7 s.
idle_start() {
  local count=$1 prefix=$2 binds=() b
  shift 2
  for b in "$@"; do binds+=(--bind "$b"); done
  bench_bg "$(bench_json_path "idle-$prefix")" conn --host "127.0.0.1:$BROKER_PORT" \
    -c "$count" --client-prefix "$prefix" "${binds[@]}" --keep-alive 300 -d 300 --quiet \
    --connect-rate "${IDLE_RATE:-2500}"
  IDLE_PID=$BENCH_PID
}

# idle_background COUNT PREFIX BIND...: idle_start, then waits until the broker holds them.
idle_background() {
  local held
  idle_start "$@"
  held=$(wait_conns "$1" 150)
  ((held >= $1)) || log "$BROKER_NAME: only $held of $1 idle connections"
}

# for_each_broker FUNCTION: REPS times, each broker in turn: start, FUNCTION, stop.
for_each_broker() {
  local fn=$1 b
  for REP in $(seq 1 "$REPS"); do
    for b in $BROKERS; do
      broker_start "$b" || continue
      "$fn" || log "$fn failed for $b"
      broker_stop
    done
  done
}

on_exit() {
  local rc=$?
  background_stop
  if [[ -n $SAMPLER_PID ]]; then kill "$SAMPLER_PID" 2>/dev/null || true; fi
  broker_stop
  exit "$rc"
}
trap on_exit EXIT
trap "exit 143" TERM INT
