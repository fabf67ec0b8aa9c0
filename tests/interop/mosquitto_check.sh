#!/usr/bin/env bash
# mosquitto_pub/mosquitto_sub round trips against a running RingMQ broker, MQTT 3.1.1 and 5.0.
# Usage: mosquitto_check.sh PORT
# Prints PASS/FAIL per check; the exit status is the number of failed checks. Every client runs
# under `timeout`, so the script always ends.
set -uo pipefail

port=$1
failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

report() { # name, ok (0/1), detail
  if [ "$2" -eq 0 ]; then
    echo "PASS mosquitto $1"
  else
    echo "FAIL mosquitto $1: $3"
    failed=$((failed + 1))
  fi
}

# A live round trip: a subscriber waits for one message while the publisher repeats its message
# until the subscriber has it (the subscription may not be in place for the first one).
round_trip() { # name, version, qos, format, expected line, extra mosquitto_pub args...
  local name=$1 version=$2 qos=$3 format=$4 expected=$5
  shift 5
  local topic="interop/mosq/$name" out="$work/$name.out"
  timeout 15 mosquitto_sub -h 127.0.0.1 -p "$port" -V "$version" -q "$qos" -t "$topic" \
    -C 1 -W 10 -F "$format" >"$out" 2>&1 &
  local sub=$!
  for _ in $(seq 50); do
    kill -0 "$sub" 2>/dev/null || break
    timeout 5 mosquitto_pub -h 127.0.0.1 -p "$port" -V "$version" -q "$qos" -t "$topic" \
      -m "hello-$name" "$@" >/dev/null 2>&1 || true
    sleep 0.2
  done
  local rc=0
  wait "$sub" || rc=$?
  local got
  got=$(cat "$out")
  if [ "$rc" -eq 0 ] && [ "$got" = "$expected" ]; then
    report "$name" 0 ""
  else
    report "$name" 1 "exit $rc, got '$got', expected '$expected'"
  fi
}

# A retained message is delivered to a later subscriber with the retain flag, then cleared.
retained() { # version
  local version=$1 topic="interop/mosq/retained-$1" got rc=0
  timeout 5 mosquitto_pub -h 127.0.0.1 -p "$port" -V "$version" -q 1 -r -t "$topic" -m kept \
    || rc=$?
  got=$(timeout 10 mosquitto_sub -h 127.0.0.1 -p "$port" -V "$version" -t "$topic" -C 1 -W 5 \
    -F '%r|%p' 2>&1) || rc=$?
  timeout 5 mosquitto_pub -h 127.0.0.1 -p "$port" -V "$version" -q 1 -r -n -t "$topic" || rc=$?
  local after
  after=$(timeout 10 mosquitto_sub -h 127.0.0.1 -p "$port" -V "$version" -t "$topic" -C 1 -W 1 \
    -F '%r|%p' 2>/dev/null)
  if [ "$rc" -eq 0 ] && [ "$got" = "1|kept" ] && [ -z "$after" ]; then
    report "retained-$version" 0 ""
  else
    report "retained-$version" 1 "exit $rc, got '$got', after clearing '$after'"
  fi
}

for qos in 0 1 2; do
  round_trip "v311-qos$qos" 311 "$qos" '%t|%q|%p' "interop/mosq/v311-qos$qos|$qos|hello-v311-qos$qos"
done
for qos in 0 1 2; do
  round_trip "v5-qos$qos" 5 "$qos" '%t|%q|%p' "interop/mosq/v5-qos$qos|$qos|hello-v5-qos$qos"
done
round_trip "v5-properties" 5 1 '%p|%P|%C|%R' "hello-v5-properties|k:v|text/plain|reply/here" \
  -D PUBLISH user-property k v -D PUBLISH content-type text/plain \
  -D PUBLISH response-topic reply/here
retained 311
retained 5

exit "$failed"
