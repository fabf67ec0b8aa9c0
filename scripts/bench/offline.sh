#!/usr/bin/env bash
# Scenario offline: 1,000 persistent QoS 1 sessions subscribe and disconnect, 100 messages are
# published to each session's topic, the sessions reconnect. Records whether all 100,000 were
# delivered exactly once per session, the drain time (reconnect to last message) and the
# broker's RSS while it holds the backlog (peak), in offline.jsonl.
#   OFF_SESSIONS=1000  OFF_MESSAGES=100  OFF_QOS=1
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OFF_SESSIONS=${OFF_SESSIONS:-1000}
OFF_MESSAGES=${OFF_MESSAGES:-100}
OFF_QOS=${OFF_QOS:-1}
# The backlog lives a second or less on a fast broker: sample RSS five times a second.
SAMPLE_INTERVAL=${SAMPLE_INTERVAL:-0.2}

offline_once() {
  local json cpu0 cpu1 sampled rss0
  json=$(bench_json_path offline)
  rss0=$(rss_kb "$BROKER_PID")
  sampler_start
  cpu0=$(cpu_s "$BROKER_PID")
  run_bench "$json" offline --host "127.0.0.1:$BROKER_PORT" --label offline \
    --sessions "$OFF_SESSIONS" -m "$OFF_MESSAGES" -q "$OFF_QOS" -d 60 --quiet || true
  cpu1=$(cpu_s "$BROKER_PID")
  sampled=$(sampler_stop)
  [[ -s $json ]] || { log "offline $BROKER_NAME: no summary"; return 1; }
  record offline "$(jq -c -n --slurpfile b "$json" --argjson s "$sampled" --argjson rss0 "$rss0" \
    --argjson cpu "$(fsub "$cpu1" "$cpu0")" '
    $b[0] as $b | {
      sessions: $b.sessions, messages_per_session: $b.messages_per_session,
      expected: $b.expected, delivered: $b.delivered, duplicates: $b.duplicates,
      out_of_order: $b.out_of_order, sessions_present: $b.sessions_present,
      exactly_once: $b.exactly_once, drain_s: $b.drain_s,
      published: $b.publish.totals.sent, publish_s: $b.publish.duration_s,
      broker_cpu_s: $cpu, rss_before_kb: $rss0,
      rss_peak_kb: $s.rss_peak_kb, rss_steady_kb: $s.rss_steady_kb, bench: $b, samples: $s.samples }')"
  rm -f "$json"
}

prepare_brokers
for_each_broker offline_once
