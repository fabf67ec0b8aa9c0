#!/usr/bin/env bash
# Scenario auth (issue 14): what authentication and an ACL cost, RingMQ vs mosquitto with the
# same files (mosquitto_passwd's default $7$ PBKDF2-SHA512 hash; one ACL for both), and RingMQ
# with its external backends. Per broker and rep, in bench-results/scenarios/:
#   auth-connect.jsonl  AUTH_CLIENTS clients connecting at once (connect + CONNACK), per mode of
#                       AUTH_CONNECT_MODES (default "none password"): connects per second and
#                       broker CPU per connect. Two storms per broker start: "cold" on the
#                       fresh broker, then "warm", the same clients (same client ids, username
#                       and password) again on the same broker, so that RingMQ's login cache
#                       (auth.cache_ttl) answers for the external backends. Modes:
#                         none      no authentication
#                         password  the password file
#                         http      RingMQ only: auth.backends = ["http"], a login service
#                                   (http_auth_server.py, Python's ThreadingHTTPServer) on
#                                   loopback answering 200 for the bench user, 403 otherwise
#                         redis     RingMQ only: auth.backends = ["redis"], a redis-server on a
#                                   free loopback port (no persistence) holding the bench user's
#                                   $7$ hash from the password file under key "bench"
#                         jwt       RingMQ only: auth.backends = ["jwt"], an HS256 secret file;
#                                   the password is a token for the bench user (exp in an hour)
#                       (mosquitto has no built-in HTTP, Redis or JWT authentication.)
#   auth-backend.jsonl  per external-backend storm: what the service answered during it (http:
#                       logins allowed + refused; redis: commands processed, one INFO included)
#                       and the CPU seconds it used
#   auth-fanout.jsonl   10 publishers -> 1 topic -> 500 subscribers, 16 B, QoS 0, AUTH_FANOUT_RATE
#                       msg/s per publisher for WINDOW s, with no ACL, then logged in with an ACL of
#                       AUTH_ACL_RULES rules for the bench user: messages per broker CPU-second
#   AUTH_SCENARIOS="connect fanout"
#   AUTH_BACKEND_CONFIG  TOML lines added to [auth] in the http, redis and jwt modes (e.g.
#                       "workers = 8\nmax_pending = 8192"; default none: the defaults)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BROKERS=${AUTH_BROKERS:-ringmq mosquitto}
AUTH_SCENARIOS=${AUTH_SCENARIOS:-connect fanout}
AUTH_CONNECT_MODES=${AUTH_CONNECT_MODES:-none password}
AUTH_BACKEND_CONFIG=${AUTH_BACKEND_CONFIG:-}
AUTH_CLIENTS=${AUTH_CLIENTS:-5000}
AUTH_ACL_RULES=${AUTH_ACL_RULES:-10000}
AUTH_FANOUT_RATE=${AUTH_FANOUT_RATE:-50}
WINDOW=${WINDOW:-6}
AUTH_USER=bench
AUTH_PASSWORD=bench-password

# The password file (one user, made by mosquitto_passwd) and the ACL: AUTH_ACL_RULES - 1
# rules that do not match the bench topics, then the one that does (mosquitto checks them in
# order). Readable by all: mosquitto drops root before reading them.
make_auth_files() {
  local dir=$RUN_DIR/auth i
  mkdir -p "$dir"
  rm -f "$dir/passwd"
  mosquitto_passwd -c -b "$dir/passwd" "$AUTH_USER" "$AUTH_PASSWORD"
  {
    echo "user $AUTH_USER"
    for ((i = 1; i < AUTH_ACL_RULES; i++)); do echo "topic readwrite other/$i/#"; done
    echo "topic readwrite bench/#"
  } >"$dir/acl"
  chmod 755 "$dir"
  chmod 644 "$dir"/*
  AUTH_PASSWD=$dir/passwd AUTH_ACL=$dir/acl
}

# with_auth none|password|acl|http|redis|jwt: the broker configuration for the next start.
with_auth() {
  case $1 in
    none) RINGMQ_CONFIG_EXTRA="" MOSQUITTO_CONFIG_EXTRA="" LOGIN=() ;;
    password)
      RINGMQ_CONFIG_EXTRA="[auth]\npassword_file = \"$AUTH_PASSWD\""
      MOSQUITTO_CONFIG_EXTRA="allow_anonymous false\npassword_file $AUTH_PASSWD"
      LOGIN=(--username "$AUTH_USER" --password "$AUTH_PASSWORD")
      ;;
    acl)
      RINGMQ_CONFIG_EXTRA="[auth]\npassword_file = \"$AUTH_PASSWD\"\nacl_file = \"$AUTH_ACL\""
      MOSQUITTO_CONFIG_EXTRA="allow_anonymous false\npassword_file $AUTH_PASSWD\nacl_file $AUTH_ACL"
      LOGIN=(--username "$AUTH_USER" --password "$AUTH_PASSWORD")
      ;;
    http | redis | jwt)
      local table
      case $1 in
        http) table="login_url = \"http://127.0.0.1:$HTTP_AUTH_PORT/mqtt/login\"" ;;
        redis) table="url = \"redis://127.0.0.1:$REDIS_AUTH_PORT/0\"" ;;
        jwt) table="hs256_secret_file = \"$AUTH_JWT_SECRET\"" ;;
      esac
      RINGMQ_CONFIG_EXTRA="[auth]\nbackends = [\"$1\"]\n$AUTH_BACKEND_CONFIG\n[auth.$1]\n$table"
      MOSQUITTO_CONFIG_EXTRA=""
      LOGIN=(--username "$AUTH_USER" --password "$AUTH_PASSWORD")
      [[ $1 == jwt ]] && LOGIN=(--username "$AUTH_USER" --password "$AUTH_JWT_TOKEN")
      ;;
  esac
  export RINGMQ_CONFIG_EXTRA MOSQUITTO_CONFIG_EXTRA
  AUTH_MODE=$1
}

# The external service's process (http: the Python server; redis: redis-server under its
# timeout); empty for the other modes.
service_pid() {
  case $AUTH_MODE in
    http) echo "$HTTP_AUTH_PID" ;;
    redis) pgrep -P "$REDIS_AUTH_PID" -x redis-server ;;
  esac
}

# The logins the running external service has answered so far (http: allowed + refused; redis:
# commands processed); 0 for the other modes.
backend_requests() {
  case $AUTH_MODE in
    http) curl -fsS "http://127.0.0.1:$HTTP_AUTH_PORT/stats" | jq '.allowed + .refused' ;;
    redis) redis-cli -p "$REDIS_AUTH_PORT" info stats |
      awk -F: '/^total_commands_processed:/ { print $2 + 0 }' ;;
    *) echo 0 ;;
  esac
}

# Two storms on one broker start: cold (fresh broker and login cache), then warm (the same
# client ids, username and password again, once the first storm's connections are gone).
auth_connect() {
  local storm before left asked service cpu0=0
  for storm in cold warm; do
    if [[ $storm == warm ]]; then
      left=$(wait_no_conns 30)
      ((left == 0)) || log "$BROKER_NAME: $left connections of the cold storm still open"
    fi
    before=$(backend_requests)
    service=$(service_pid)
    [[ -n $service ]] && cpu0=$(cpu_s "$service")
    measured_bench auth-connect \
      "{\"auth\":\"$AUTH_MODE\",\"storm\":\"$storm\",\"clients\":$AUTH_CLIENTS}" \
      conn -c "$AUTH_CLIENTS" --connect-rate 0 --keep-alive 300 --hold 1 -d 60 --quiet \
      --bind 127.0.6.1 --bind 127.0.6.2 --bind 127.0.6.3 --bind 127.0.6.4 "${LOGIN[@]}" || return 1
    jq -c '{auth: .auth, storm: .storm, connected: .bench.totals.connected,
      failures: .bench.totals.connect_failures, connect_rate: .bench.connect_rate,
      broker_cpu_ms_per_connect: (if .bench.totals.connected > 0
        then 1000 * .broker_cpu_s / .bench.totals.connected else null end)}' <<<"$LAST_RESULT" >&2
    case $AUTH_MODE in
      http | redis)
        asked=$(($(backend_requests) - before))
        record auth-backend "{\"auth\":\"$AUTH_MODE\",\"storm\":\"$storm\",\"requests\":$asked,
          \"service_cpu_s\":$(fsub "$(cpu_s "$service")" "$cpu0")}" ;;
    esac
  done
}

# wait_no_conns SECONDS: until the broker holds no connection or SECONDS passed; prints how many
# it holds.
wait_no_conns() {
  local n=0 deadline=$((SECONDS + $1))
  while ((SECONDS < deadline)); do
    n=$(conn_count "$BROKER_PORT")
    ((n == 0)) && break
    sleep 0.2
  done
  echo "$n"
}

auth_fanout() {
  local limit=$((AUTH_FANOUT_RATE * WINDOW))
  measured_bench auth-fanout \
    "{\"auth\":\"$AUTH_MODE\",\"acl_rules\":$AUTH_ACL_RULES,\"pubs\":10,\"subs\":500,\"size\":16,\"step_rate\":$AUTH_FANOUT_RATE,\"planned\":$((limit * 10))}" \
    fanout --pubs 10 --subs 500 -s 16 -q 0 -r "$AUTH_FANOUT_RATE" -L "$limit" -t bench/fanout \
    -d $((WINDOW + 20)) --warmup 1 --quiet "${LOGIN[@]}" || return 1
}

# The external services, started once for the whole run on free loopback ports and bounded by
# AUTH_SERVICE_LIFETIME seconds (default an hour) even if this script is killed; stopped on exit.
AUTH_SERVICE_LIFETIME=${AUTH_SERVICE_LIFETIME:-3600}
HTTP_AUTH_PID="" REDIS_AUTH_PID=""

start_http_auth() {
  HTTP_AUTH_PORT=$(free_port)
  python3 "$BENCH_DIR/http_auth_server.py" --port "$HTTP_AUTH_PORT" --username "$AUTH_USER" \
    --password "$AUTH_PASSWORD" --lifetime "$AUTH_SERVICE_LIFETIME" \
    >>"$RUN_DIR/http-auth.log" 2>&1 &
  HTTP_AUTH_PID=$!
  local i
  for i in $(seq 1 50); do
    curl -fsS -o /dev/null "http://127.0.0.1:$HTTP_AUTH_PORT/stats" 2>/dev/null && return 0
    sleep 0.1
  done
  log "the HTTP login service did not start (see $RUN_DIR/http-auth.log)"
  return 1
}

# The bench user's hash from the password file, under key "bench" (mosquitto-go-auth's layout).
start_redis_auth() {
  REDIS_AUTH_PORT=$(free_port)
  timeout "$AUTH_SERVICE_LIFETIME" redis-server --bind 127.0.0.1 --port "$REDIS_AUTH_PORT" \
    --save '' --appendonly no --dir "$RUN_DIR" >>"$RUN_DIR/redis-auth.log" 2>&1 &
  REDIS_AUTH_PID=$!
  local i
  for i in $(seq 1 50); do
    if [[ $(redis-cli -p "$REDIS_AUTH_PORT" ping 2>/dev/null) == PONG ]]; then
      redis-cli -p "$REDIS_AUTH_PORT" set "$AUTH_USER" \
        "$(sed -n "s/^$AUTH_USER://p" "$AUTH_PASSWD")" >/dev/null
      return 0
    fi
    sleep 0.1
  done
  log "redis-server did not start (see $RUN_DIR/redis-auth.log)"
  return 1
}

b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }

# An HS256 secret (64 hex digits, used as they are: RingMQ takes the file's bytes) and one token
# for the bench user, exp an hour ahead.
make_jwt() {
  AUTH_JWT_SECRET=$RUN_DIR/auth/jwt.secret
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$AUTH_JWT_SECRET"
  local header payload sig
  header=$(printf '{"alg":"HS256","typ":"JWT"}' | b64url)
  payload=$(printf '{"sub":"%s","exp":%d}' "$AUTH_USER" $(($(date +%s) + 3600)) | b64url)
  sig=$(printf '%s.%s' "$header" "$payload" |
    openssl dgst -sha256 -mac HMAC -macopt "key:$(<"$AUTH_JWT_SECRET")" -binary | b64url)
  AUTH_JWT_TOKEN=$header.$payload.$sig
}

stop_auth_services() {
  local pid
  for pid in $HTTP_AUTH_PID $REDIS_AUTH_PID; do kill "$pid" 2>/dev/null || true; done
  for pid in $HTTP_AUTH_PID $REDIS_AUTH_PID; do wait "$pid" 2>/dev/null || true; done
  HTTP_AUTH_PID="" REDIS_AUTH_PID=""
}

# Then lib.sh's on_exit with the exit status (set +e: under errexit a failing `(exit rc)` would
# end the trap before on_exit stops the broker).
auth_on_exit() {
  local rc=$?
  stop_auth_services
  set +e
  (exit "$rc")
  on_exit
}
trap auth_on_exit EXIT

prepare_brokers
make_auth_files
ALL_BROKERS=$BROKERS
for scenario in $AUTH_SCENARIOS; do
  case $scenario in
    connect) modes=$AUTH_CONNECT_MODES ;;
    fanout) modes="none acl" ;;
    *) log "unknown scenario $scenario"; exit 1 ;;
  esac
  for mode in $modes; do
    BROKERS=$ALL_BROKERS
    case $mode in
      http | redis | jwt)
        # RingMQ only: mosquitto has no built-in HTTP, Redis or JWT authentication.
        [[ " $ALL_BROKERS " == *" ringmq "* ]] || continue
        BROKERS=ringmq
        case $mode in
          http) [[ -n $HTTP_AUTH_PID ]] || start_http_auth ;;
          redis) [[ -n $REDIS_AUTH_PID ]] || start_redis_auth ;;
          jwt) [[ -n ${AUTH_JWT_TOKEN:-} ]] || make_jwt ;;
        esac
        ;;
      none | password | acl) ;;
      *) log "unknown mode $mode"; exit 1 ;;
    esac
    with_auth "$mode"
    for_each_broker "auth_$scenario"
  done
done
