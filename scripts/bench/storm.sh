#!/usr/bin/env bash
# Scenario storm: STORM_CLIENTS idle clients (19,000 by default: the fd limit is 20,000 per
# process) are dropped at once (kill -9 of the load generator) and reconnect at full speed from
# other source addresses, while the latency probe runs (QoS 0, 10 ms apart). Records the time
# until the broker's connection count is back and its RSS settles (changes < 2 % over 2 s), the
# probe's latency over the storm, and RSS before/peak/after in storm.jsonl. "back": the broker
# holds every client again with no half-closed socket left.
#   STORM_CLIENTS=19000  STORM_SAMPLES=2500 (probe samples, 10 ms apart)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
STORM_CLIENTS=${STORM_CLIENTS:-19000}
STORM_SAMPLES=${STORM_SAMPLES:-2500}

# Open files of the broker: its accepted connections plus BASE_FDS of its own.
fd_count() { find "/proc/$BROKER_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }

# settle_after T0 TARGET: polls the broker every 0.25 s (at most 60 s) until it has accepted
# TARGET connections (open files beyond BASE_FDS; the target is 99.9 % of the clients, as a
# broker may hold an extra file or two of its own) with none half-closed ("back") and its RSS moved < 2 % over the last 2 s
# ("settled": the start of that stable window); prints "back_s settled_s connections rss_kb",
# seconds counted from T0.
settle_after() {
  local t0=$1 target=$2 rss n cw i back=null times=() hist=()
  for i in $(seq 1 240); do
    n=$(($(fd_count) - BASE_FDS))
    cw=$(ss -Htn state close-wait "( sport = :$BROKER_PORT )" | wc -l)
    rss=$(rss_kb "$BROKER_PID")
    hist+=("$rss")
    times+=("$(fsub "$(date +%s.%N)" "$t0")")
    if ((n >= target && cw == 0)); then
      [[ $back == null ]] && back=${times[-1]}
      if ((${#hist[@]} >= 9)) && awk -v a="${hist[-9]}" -v b="$rss" \
        'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.02 * a) }'; then
        local start=${times[-9]}
        echo "$back $(awk -v a="$start" -v b="$back" 'BEGIN { print (a > b ? a : b) }') $n $rss"
        return 0
      fi
    else
      back=null
    fi
    sleep 0.25
  done
  echo "$back null $n $rss"
}

storm_once() {
  local rss_before settle t0 probe_json probe_pid cpu0 cpu1
  BASE_FDS=$(fd_count)
  idle_background "$STORM_CLIENTS" storm 127.0.3.1 127.0.3.2 127.0.3.3 127.0.3.4
  local victim=$IDLE_PID
  sleep 2
  rss_before=$(rss_kb "$BROKER_PID")
  probe_json=$(bench_json_path storm-probe)
  sampler_start
  cpu0=$(cpu_s "$BROKER_PID")
  bench_bg "$probe_json" latency --host "127.0.0.1:$BROKER_PORT" --samples "$STORM_SAMPLES" \
    --interval-ms 10 -d $((STORM_SAMPLES / 100 + 20)) --client-prefix probe --quiet
  probe_pid=$BENCH_PID
  sleep 3
  log "storm $BROKER_NAME: kill -9 of $STORM_CLIENTS clients"
  t0=$(date +%s.%N)
  kill -KILL "$victim"
  wait "$victim" 2>/dev/null || true
  IDLE_RATE=0 idle_start "$STORM_CLIENTS" storm 127.0.4.1 127.0.4.2 127.0.4.3 127.0.4.4
  settle=$(settle_after "$t0" $((STORM_CLIENTS - STORM_CLIENTS / 1000)))
  log "storm $BROKER_NAME: back, settled: $settle (s, s, connections, RSS kB)"
  wait "$probe_pid" || true
  cpu1=$(cpu_s "$BROKER_PID")
  background_stop
  local sampled
  sampled=$(sampler_stop)
  [[ -s $probe_json ]] || { log "storm $BROKER_NAME: no probe summary"; return 1; }
  local back_s settle_s settle_conns settle_rss
  read -r back_s settle_s settle_conns settle_rss <<<"$settle"
  record storm "$(jq -c -n --slurpfile b "$probe_json" --argjson s "$sampled" \
    --argjson clients "$STORM_CLIENTS" --argjson rss0 "$rss_before" --argjson settle "$settle_s" --argjson back "$back_s" \
    --argjson conns "$settle_conns" --argjson rss1 "$settle_rss" --argjson cpu "$(fsub "$cpu1" "$cpu0")" '
    $b[0] as $b | {
      clients: $clients, back_s: $back, settle_s: $settle, connections_after: $conns,
      rss_before_kb: $rss0, rss_settled_kb: $rss1, rss_peak_kb: $s.rss_peak_kb,
      broker_cpu_s: $cpu, probe_sent: $b.totals.sent, probe_received: $b.totals.received,
      probe_lost: $b.lost, latency_us: $b.latency_us, bench: $b, samples: $s.samples }')"
  rm -f "$probe_json"
}

prepare_brokers
for_each_broker storm_once
