#!/usr/bin/env bash
# The ARM gateway's memory (issue 53): RingMQ with configs/examples/edge-gateway.toml (its
# file paths pointed into a scratch directory: a throwaway CA and server certificate, a password
# file with one device user, the data directory; its listeners moved to free loopback ports)
# holding CLIENTS clients that log in with that user over TLS, as the gateway's devices do.
# Prints the broker's RSS before and with them (KiB) and per client (bytes).
#   scripts/bench/edge-gateway.sh                        # target/release/ringmq, 1,000 clients
#   BROKER_CMD="qemu-aarch64-static target/aarch64-unknown-linux-musl/dist/ringmq" \
#     scripts/bench/edge-gateway.sh                      # the static aarch64 binary, emulated
#   (under qemu-user the RSS is the emulator's too: read the growth, not the total)
# Needs openssl and mosquitto_passwd; loopback only; bounded in count and time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BROKER_CMD=${BROKER_CMD:-target/release/ringmq}
BENCH=${BENCH_BIN:-target/release/ringmq-bench}
CLIENTS=${CLIENTS:-1000}
dir=$(mktemp -d)
trap 'kill "${broker:-}" 2>/dev/null || true; rm -rf "$dir"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tls_port=$(port) tcp_port=$(port)

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj "/CN=edge CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
  -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
  "extendedKeyUsage=serverAuth" >"$dir/server.ext"
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
  -CAcreateserial -days 2 -extfile "$dir/server.ext" -out "$dir/server.pem" 2>/dev/null
mosquitto_passwd -c -b "$dir/passwd" device1 secret1
sed -e "s|/etc/ringmq/|$dir/|g; s|/var/lib/ringmq|$dir/data|; s|0.0.0.0:8883|127.0.0.1:$tls_port|" \
  -e "s|127.0.0.1:1883|127.0.0.1:$tcp_port|" configs/examples/edge-gateway.toml >"$dir/edge.toml"

# shellcheck disable=SC2086 # BROKER_CMD is words (an emulator, then the binary)
$BROKER_CMD -c "$dir/edge.toml" >"$dir/broker.log" 2>&1 &
broker=$!
for _ in $(seq 1 100); do
  (echo >"/dev/tcp/127.0.0.1/$tls_port") 2>/dev/null && break
  sleep 0.2
done
sleep 1
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$broker/status"; }
before=$(rss)
timeout 120 "$BENCH" conn -H "127.0.0.1:$tls_port" -c "$CLIENTS" --connect-rate 0 --keep-alive 300 \
  --hold 6 -d 90 --username device1 --password secret1 --tls-ca "$dir/ca.pem" --quiet \
  >"$dir/conn.json" 2>&1 &
bench=$!
sleep 5
with=$(rss)
wait "$bench" || true
connected=$(grep -o '"connected": [0-9]*' "$dir/conn.json" | grep -o '[0-9]*$' || echo 0)
echo "{\"clients\":$CLIENTS,\"connected\":$connected,\"rss_before_kib\":$before,\"rss_with_kib\":$with,\"rss_per_client_bytes\":$(((with - before) * 1024 / CLIENTS))}"
