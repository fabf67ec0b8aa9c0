#!/usr/bin/env bash
# mosquitto_pub/mosquitto_sub over TLS (--cafile) against a running RingMQ broker, MQTT 3.1.1
# and 5.0. Usage: mosquitto_tls_check.sh TLS_PORT CA_FILE
# Prints PASS/FAIL per check; the exit status is the number of failed checks.
set -uo pipefail

port=$1
ca=$2
failed=0

for version in mqttv311 mqttv5; do
  topic="interop/mosq-tls/$version"
  expected="hello over tls $version"
  # Retained, so the subscriber started afterwards gets it at once.
  timeout 10 mosquitto_pub -h 127.0.0.1 -p "$port" --cafile "$ca" -V "$version" -q 1 -r \
    -t "$topic" -m "$expected"
  got=$(timeout 10 mosquitto_sub -h 127.0.0.1 -p "$port" --cafile "$ca" -V "$version" -q 1 \
    -t "$topic" -C 1 -W 5 2>&1)
  if [ "$got" = "$expected" ]; then
    echo "PASS mosquitto tls $version"
  else
    echo "FAIL mosquitto tls $version: got '$got'"
    failed=$((failed + 1))
  fi
  # Clear the retained message.
  timeout 10 mosquitto_pub -h 127.0.0.1 -p "$port" --cafile "$ca" -V "$version" -r -n -t "$topic"
done
exit "$failed"
