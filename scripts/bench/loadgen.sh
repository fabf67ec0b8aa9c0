#!/usr/bin/env bash
# Load generator efficiency: messages handled per CPU-second of the load generator itself,
# ringmq-bench against mosquitto_pub / mosquitto_sub (libmosquitto, C: the most efficient MQTT
# load tools installable from a registry here; the Go tools mqtt-benchmark and mqtt-stresser are
# refused by the Go module proxy), each against the same RingMQ broker, QoS 0, 16 B payloads,
# one connection, LG_MESSAGES messages (the receivers get what the broker delivers of a flood:
# QoS 0 beyond the broker's per-connection bound is dropped). CPU = the tool's user + system s.
# One JSON line per tool and direction in bench-results/scenarios/loadgen.jsonl.
#   LG_MESSAGES=2000000  LG_BROKER=ringmq
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LG_MESSAGES=${LG_MESSAGES:-2000000}
BROKERS=${LG_BROKER:-ringmq}

# timed_cpu OUTFILE CMD...: runs CMD, writes "user+system seconds" of it (and its children).
timed_cpu() {
  local out=$1
  shift
  /usr/bin/time -f "%U %S" -o "$out.time" "$@" || true
  # The last line: GNU time puts "Command exited with non-zero status" before it.
  awk 'END { printf "%.3f\n", $1 + $2 }' "$out.time" >"$out"
  rm -f "$out.time"
}

lg_record() { # tool direction messages cpu_s
  record loadgen "$(jq -c -n --arg tool "$1" --arg dir "$2" --argjson n "$3" --argjson cpu "$4" \
    '{tool: $tool, direction: $dir, messages: $n, tool_cpu_s: $cpu,
      msgs_per_tool_cpu_s: (if $cpu > 0 then $n / $cpu else null end)}')"
}

loadgen_once() {
  local host=127.0.0.1 port=$BROKER_PORT json cpu_file=$RUN_DIR/lg-cpu n
  # Publishing: ringmq-bench.
  json=$(bench_json_path lg-pub)
  run_bench "$json" pub --host "$host:$port" -c 1 -s 16 -q 0 -r 0 -L "$LG_MESSAGES" \
    -t bench/lg -d 120 --warmup 0 --quiet
  lg_record ringmq-bench publish "$(jq .totals.sent "$json")" "$(jq .bench_cpu_s "$json")"
  # Publishing: mosquitto_pub, one message per stdin line (-l), 16 B lines.
  seq -f "%015g" 1 "$LG_MESSAGES" >"$RUN_DIR/lg-lines"
  timed_cpu "$cpu_file" mosquitto_pub -h "$host" -p "$port" -t bench/lg -q 0 -l <"$RUN_DIR/lg-lines"
  lg_record mosquitto_pub publish "$LG_MESSAGES" "$(cat "$cpu_file")"
  # Receiving: ringmq-bench sub, fed by a ringmq-bench publisher.
  json=$(bench_json_path lg-sub)
  bench_bg "$json" sub --host "$host:$port" -c 1 -t bench/lg -q 0 --expect "$LG_MESSAGES" \
    -d 20 --client-prefix lgsub --quiet
  local sub_pid=$BENCH_PID
  sleep 1
  run_bench "$(bench_json_path lg-feed)" pub --host "$host:$port" -c 1 -s 16 -q 0 -r 0 \
    -L "$LG_MESSAGES" -t bench/lg -d 120 --warmup 0 --client-prefix lgfeed --quiet
  wait "$sub_pid" || true
  lg_record ringmq-bench receive "$(jq .totals.received "$json")" "$(jq .bench_cpu_s "$json")"
  # Receiving: mosquitto_sub, ends after the count (-C) or 20 s, fed the same way; it prints
  # one line per message received (-F x).
  (timed_cpu "$cpu_file" timeout 20 mosquitto_sub -h "$host" -p "$port" -t bench/lg -q 0 \
    -C "$LG_MESSAGES" -F x >"$RUN_DIR/lg-received") &
  sub_pid=$!
  sleep 1
  run_bench "$(bench_json_path lg-feed)" pub --host "$host:$port" -c 1 -s 16 -q 0 -r 0 \
    -L "$LG_MESSAGES" -t bench/lg -d 120 --warmup 0 --client-prefix lgfeed --quiet
  wait "$sub_pid" || true
  n=$(wc -l <"$RUN_DIR/lg-received")
  lg_record mosquitto_sub receive "$n" "$(cat "$cpu_file")"
  rm -f "$RUN_DIR/lg-lines" "$RUN_DIR/lg-received" "$cpu_file"
}

prepare_brokers
for_each_broker loadgen_once
