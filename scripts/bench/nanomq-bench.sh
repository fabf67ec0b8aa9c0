#!/usr/bin/env bash
# The fan-out and p2p scenarios driven by an independent load generator, `nanomq_cli bench`
# (NanoMQ 0.25.3, built by ../shared/peers/nanomq.sh into $LAB/bin), against every broker in
# BROKERS (lib.sh), one JSON line per step in bench-results/scenarios/nanomq-<SCENARIO>.jsonl
# with the same figures as measured_bench: sent, expected, delivered, broker CPU s, messages
# delivered per broker CPU-second, RSS.
#
# How it counts: one `nanomq_cli bench sub` process holds every subscriber and prints its exact
# cumulative count of received packets once a second ("recv: total=N"); that count holds each
# subscriber's SUBACK (2 subscribers, 2 messages each print total=6), so delivered is the
# total less the subscribers it connected (its last "connected: N"); one `bench pub`
# process holds every publisher, stops at its global limit (-L) and prints "sent: total=N". A
# step starts the subscribers (waits until the broker holds them), then the publishers; the
# broker's CPU is read from just before the publishers start (their CONNECTs included, as in
# measured_bench) until the subscribers' count has stopped growing for 2 s (the drain), at most
# WINDOW + 30 s + 15 s. `nanomq_cli bench` never exits by itself: each process runs under
# `timeout` and is stopped at the end of the step.
#
# Pacing: `-I` is a whole number of milliseconds between one publisher's messages, so a rate R
# per publisher runs at 1000 / round(1000 / R) msg/s: 303 and 400 both run at -I 3 (333 msg/s),
# and a step whose interval equals the previous step's is skipped; each row records step_rate
# (asked), interval_ms and rate (run). p2p's 20/40/67/100 are exact (-I 50/25/15/10).
#
#   SCENARIO=fanout|p2p (default fanout)  WINDOW=5 (s of paced publishing per step)
#   fanout: NANO_PUBS=10 NANO_SUBS=500 NANO_FANOUT_SIZE=16 NANO_FANOUT_QOS="0 1"
#           NANO_FANOUT_STEPS="100 200 303 400 500" (msg/s per publisher); a step below 99 %
#           delivered ends that QoS's steps for the broker, as in fanout.sh
#   p2p:    NANO_PAIRS=1000 NANO_P2P_SIZE=256 NANO_P2P_RATES="20 40 67 100" (QoS 0, msg/s per
#           pair) NANO_P2P_FLOOD_QOS="1 2" (unpaced, -I 0; "" for none) NANO_P2P_FLOOD_LIMIT=100 (per
#           publisher: nanomq_cli's 1,000 publishers reached about 15k msg/s at QoS 1/2 here, so
#           p2p.sh's 1,000 would run into the time bound)
#   NANO_CONNECT_MS=2: ms between two client connects (nanomq_cli -i; mosquitto's listen backlog
#   is 100)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SCENARIO=${SCENARIO:-fanout}
WINDOW=${WINDOW:-5}
NANO_PUBS=${NANO_PUBS:-10}
NANO_SUBS=${NANO_SUBS:-500}
NANO_FANOUT_SIZE=${NANO_FANOUT_SIZE:-16}
NANO_FANOUT_QOS=${NANO_FANOUT_QOS:-0 1}
NANO_FANOUT_STEPS=${NANO_FANOUT_STEPS:-100 200 303 400 500}
NANO_PAIRS=${NANO_PAIRS:-1000}
NANO_P2P_SIZE=${NANO_P2P_SIZE:-256}
NANO_P2P_RATES=${NANO_P2P_RATES-20 40 67 100}
NANO_P2P_FLOOD_QOS=${NANO_P2P_FLOOD_QOS-1 2}
NANO_P2P_FLOOD_LIMIT=${NANO_P2P_FLOOD_LIMIT:-100}
NANO_CONNECT_MS=${NANO_CONNECT_MS:-2}
NANO_VERSION=${NANO_VERSION:-nanomq_cli 0.25.3}

# nano_bg LOG SECONDS ARGS...: `nanomq_cli bench ARGS` in the background on LOADGEN_CPUS, its
# stdout line-buffered into LOG, killed after SECONDS; NANO_PID (also in BG_PIDS).
nano_bg() {
  local logf=$1 secs=$2
  shift 2
  (ulimit -n "$FD_LIMIT" && exec "${LOADGEN_TASKSET[@]}" timeout "$secs" stdbuf -oL \
    "$NANOMQ_CLI" bench "$@" -h 127.0.0.1 -p "$BROKER_PORT" -i "$NANO_CONNECT_MS") >"$logf" 2>&1 &
  NANO_PID=$!
  BG_PIDS+=("$NANO_PID")
}

# nano_total LOG recv|sent: the last cumulative count the process printed (0 before any).
nano_total() {
  local n
  n=$(grep -ao "$2: total=[0-9]*" "$1" 2>/dev/null | tail -1 | cut -d= -f2)
  echo "${n:-0}"
}

# nano_connected LOG: how many clients the process connected (0 before any).
nano_connected() {
  local n
  n=$(grep -ao "^connected: [0-9]*" "$1" | tail -1 | cut -d' ' -f2)
  echo "${n:-0}"
}

# nano_step SCENARIO EXTRA_JSON SUBS PER_MSG LIMIT SUB_ARGS -- PUB_ARGS: one measured step.
# SUBS subscribers are started with SUB_ARGS, then publishers with PUB_ARGS and -L LIMIT; each
# message sent is expected PER_MSG times. Records the row and sets LAST_RESULT.
nano_step() {
  local scenario=$1 extra=$2 subs=$3 per_msg=$4 limit=$5
  shift 5
  local sub_args=() held
  while [[ $1 != -- ]]; do sub_args+=("$1"); shift; done
  shift
  local bound=$((WINDOW + 45)) sub_log=$RUN_DIR/nano-sub.log pub_log=$RUN_DIR/nano-pub.log
  nano_bg "$sub_log" $((bound + 60)) sub -c "$subs" "${sub_args[@]}"
  held=$(wait_conns "$subs" 60)
  ((held >= subs)) || log "$scenario $BROKER_NAME: only $held of $subs subscribers connected"
  sleep 1
  local t0 cpu0 cpu1 sampled sent recv last=-1 stable=0
  sampler_start
  cpu0=$(cpu_s "$BROKER_PID")
  t0=$(date +%s.%N)
  nano_bg "$pub_log" "$bound" pub "$@" -L "$limit"
  local pub_pid=$NANO_PID deadline=$((SECONDS + WINDOW + 30)) time_bound=false
  while (($(nano_total "$pub_log" sent) < limit)); do
    broker_alive || break
    if ((SECONDS >= deadline)); then
      # Stopped before its limit: its last count may miss up to a second of sends.
      time_bound=true
      kill "$pub_pid" 2>/dev/null || true
      wait "$pub_pid" 2>/dev/null || true
      break
    fi
    sleep 0.5
  done
  # Drain: until the subscribers' count stood still for 2 s, or everything expected arrived.
  deadline=$((SECONDS + 15))
  while ((SECONDS < deadline && stable < 2)) && broker_alive; do
    sleep 1
    recv=$(nano_total "$sub_log" recv)
    if ((recv == last)); then stable=$((stable + 1)); else stable=0 last=$recv; fi
    (($(nano_total "$pub_log" sent) * per_msg + subs <= recv)) && break
  done
  if ! broker_alive; then
    sampler_stop >/dev/null
    background_stop
    record "$scenario" "$(jq -c -n --argjson extra "$extra" '$extra + {broker_died: true}')"
    LAST_RESULT=null
    return 1
  fi
  cpu1=$(cpu_s "$BROKER_PID")
  local elapsed
  elapsed=$(fsub "$(date +%s.%N)" "$t0")
  sampled=$(sampler_stop)
  background_stop
  sent=$(nano_total "$pub_log" sent)
  ((sent > limit)) && sent=$limit
  recv=$(($(nano_total "$sub_log" recv) - $(nano_connected "$sub_log")))
  cat "$sub_log" "$pub_log" >>"$RUN_DIR/nanomq-bench.log"
  rm -f "$sub_log" "$pub_log"
  LAST_RESULT=$(jq -c -n --argjson extra "$extra" --argjson s "$sampled" --arg tool "$NANO_VERSION" \
    --argjson sent "$sent" --argjson recv "$recv" --argjson per "$per_msg" --argjson limit "$limit" \
    --argjson cpu "$(fsub "$cpu1" "$cpu0")" --argjson elapsed "$elapsed" --argjson tb "$time_bound" '
    ($sent * $per) as $expected
    | $extra + {
        loadgen: $tool, planned: ($limit * $per), time_bound: $tb, sent: $sent, expected: $expected, delivered: $recv,
        delivered_ratio: (if $expected > 0 then $recv / $expected else null end),
        elapsed_s: $elapsed, delivered_per_s: (if $elapsed > 0 then $recv / $elapsed else null end),
        broker_cpu_s: $cpu,
        msgs_per_broker_cpu_s: (if $cpu > 0 then $recv / $cpu else null end),
        rss_peak_kb: $s.rss_peak_kb, rss_steady_kb: $s.rss_steady_kb, samples: $s.samples }')
  record "$scenario" "$LAST_RESULT"
}

# interval_ms RATE: nanomq_cli's whole-millisecond interval for RATE msg/s per publisher.
interval_ms() { awk -v r="$1" 'BEGIN { i = int(1000 / r + 0.5); print (i < 1) ? 1 : i }'; }

fanout_steps() {
  local qos rate iv prev limit
  for qos in $NANO_FANOUT_QOS; do
    prev=0
    for rate in $NANO_FANOUT_STEPS; do
      iv=$(interval_ms "$rate")
      [[ $iv == "$prev" ]] && continue
      prev=$iv
      limit=$((NANO_PUBS * WINDOW * 1000 / iv))
      nano_step nanomq-fanout \
        "{\"qos\":$qos,\"pubs\":$NANO_PUBS,\"subs\":$NANO_SUBS,\"size\":$NANO_FANOUT_SIZE,\"step_rate\":$rate,\"interval_ms\":$iv,\"rate\":$(awk -v i="$iv" 'BEGIN { print 1000 / i }')}" \
        "$NANO_SUBS" "$NANO_SUBS" "$limit" -t bench/nanofan -q "$qos" -- \
        -c "$NANO_PUBS" -t bench/nanofan -q "$qos" -s "$NANO_FANOUT_SIZE" -I "$iv" || return 1
      if ! jq -e '(.delivered_ratio // 0) >= 0.99' <<<"$LAST_RESULT" >/dev/null; then
        log "nanomq-fanout $BROKER_NAME: QoS $qos step $rate/s per publisher below 99 %; last step"
        break
      fi
    done
  done
}

p2p_steps() {
  local rate iv qos extra="\"pairs\":$NANO_PAIRS,\"size\":$NANO_P2P_SIZE"
  # Topic bench/nanop2p/<n>: nanomq_cli numbers %i per client in connect order, 0..pairs-1.
  local topic=bench/nanop2p/%i
  for rate in $NANO_P2P_RATES; do
    iv=$(interval_ms "$rate")
    nano_step nanomq-p2p "{\"qos\":0,$extra,\"step_rate\":$rate,\"interval_ms\":$iv,\"rate\":$(awk -v i="$iv" 'BEGIN { print 1000 / i }')}" \
      "$NANO_PAIRS" 1 $((NANO_PAIRS * WINDOW * 1000 / iv)) -t "$topic" -q 0 -- \
      -c "$NANO_PAIRS" -t "$topic" -q 0 -s "$NANO_P2P_SIZE" -I "$iv" || return 1
  done
  for qos in $NANO_P2P_FLOOD_QOS; do
    nano_step nanomq-p2p "{\"qos\":$qos,$extra,\"step_rate\":0,\"interval_ms\":0,\"rate\":0}" \
      "$NANO_PAIRS" 1 $((NANO_PAIRS * NANO_P2P_FLOOD_LIMIT)) -t "$topic" -q "$qos" -- \
      -c "$NANO_PAIRS" -t "$topic" -q "$qos" -s "$NANO_P2P_SIZE" -I 0 || return 1
  done
}

case $SCENARIO in
  fanout | p2p) ;;
  *) log "SCENARIO must be fanout or p2p"; exit 2 ;;
esac
install_nanomq_cli || { log "nanomq_cli cannot be built; nothing measured"; exit 1; }
prepare_brokers
for_each_broker "${SCENARIO}_steps"
