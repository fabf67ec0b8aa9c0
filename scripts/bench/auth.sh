#!/usr/bin/env bash
# Scenario auth (issue 14): what authentication and an ACL cost, RingMQ vs mosquitto with the
# same files (mosquitto_passwd's default $7$ PBKDF2-SHA512 hash; one ACL for both). Per broker
# and rep, in bench-results/scenarios/:
#   auth-connect.jsonl  AUTH_CLIENTS clients connecting at once (connect + CONNACK) with no
#                       authentication, then with a password file: connects per second and broker
#                       CPU per connect
#   auth-fanout.jsonl   10 publishers -> 1 topic -> 500 subscribers, 16 B, QoS 0, AUTH_FANOUT_RATE
#                       msg/s per publisher for WINDOW s, with no ACL, then logged in with an ACL of
#                       AUTH_ACL_RULES rules for the bench user: messages per broker CPU-second
#   AUTH_SCENARIOS="connect fanout"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BROKERS=${AUTH_BROKERS:-ringmq mosquitto}
AUTH_SCENARIOS=${AUTH_SCENARIOS:-connect fanout}
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

# with_auth none|password|acl: the broker configuration for the next start.
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
  esac
  export RINGMQ_CONFIG_EXTRA MOSQUITTO_CONFIG_EXTRA
  AUTH_MODE=$1
}

auth_connect() {
  measured_bench auth-connect "{\"auth\":\"$AUTH_MODE\",\"clients\":$AUTH_CLIENTS}" \
    conn -c "$AUTH_CLIENTS" --connect-rate 0 --keep-alive 300 --hold 1 -d 60 --quiet \
    --bind 127.0.6.1 --bind 127.0.6.2 --bind 127.0.6.3 --bind 127.0.6.4 "${LOGIN[@]}" || return 1
  jq -c '{auth: .auth, connected: .bench.totals.connected,
    failures: .bench.totals.connect_failures, connect_rate: .bench.connect_rate,
    broker_cpu_ms_per_connect: (if .bench.totals.connected > 0
      then 1000 * .broker_cpu_s / .bench.totals.connected else null end)}' <<<"$LAST_RESULT" >&2
}

auth_fanout() {
  local limit=$((AUTH_FANOUT_RATE * WINDOW))
  measured_bench auth-fanout \
    "{\"auth\":\"$AUTH_MODE\",\"acl_rules\":$AUTH_ACL_RULES,\"pubs\":10,\"subs\":500,\"size\":16,\"step_rate\":$AUTH_FANOUT_RATE,\"planned\":$((limit * 10))}" \
    fanout --pubs 10 --subs 500 -s 16 -q 0 -r "$AUTH_FANOUT_RATE" -L "$limit" -t bench/fanout \
    -d $((WINDOW + 20)) --warmup 1 --quiet "${LOGIN[@]}" || return 1
}

prepare_brokers
make_auth_files
for scenario in $AUTH_SCENARIOS; do
  case $scenario in
    connect) modes="none password" ;;
    fanout) modes="none acl" ;;
    *) log "unknown scenario $scenario"; exit 1 ;;
  esac
  for mode in $modes; do
    with_auth "$mode"
    for_each_broker "auth_$scenario"
  done
done
