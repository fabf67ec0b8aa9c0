#!/usr/bin/env bash
# Broker CPU per delivered message, fan-out 2 -> 200 QoS 0 at 200 msg/s per publisher (80k
# deliveries/s), 15 s: with nothing else, with the dashboard's polling (the requests the page
# makes each second), with a trace on one subscriber among 1,000 idle clients; two rounds,
# modes alternated (docs/bench/history/issue-50-operator.md). Needs a release build
# (`cargo build --release -p ringmq -p bench`), curl and python3; loopback ports 18990-18991.
# SCENARIO="p2p -H 127.0.0.1:18991 --threads 1 --pairs 200 -s 256 -r 100 -d 15" runs p2p.
set -u
cd "$(dirname "$0")/../.."
cat > /tmp/cfg-dash.toml <<TOML
[runtime]
shards = 2
[persistence]
engine = "none"
[http]
bind = "127.0.0.1:18990"
TOML
BIN=target/release/ringmq; BENCH=target/release/ringmq-bench
run() { # mode round
  local mode=$1 round=$2
  $BIN --config /tmp/cfg-dash.toml --listen 127.0.0.1:18991 >/dev/null 2>&1 &
  local pid=$!
  sleep 0.7
  local idle=""
  if [[ $mode == trace ]]; then
    timeout 60 $BENCH conn -H 127.0.0.1:18991 -c 1000 --duration 40 --threads 1 --quiet --client-prefix idle --json /dev/null >/dev/null 2>&1 & idle=$!
    sleep 3
    curl -s -X POST -H 'Content-Type: application/json' -d '{"client_id":"fb-sub-7","seconds":120,"max_bytes":16000000}' http://127.0.0.1:18990/api/v1/traces >/dev/null
  fi
  local poller=""
  if [[ $mode == poll ]]; then
    ( for i in $(seq 1 40); do for p in /metrics /api/v1/history "/api/v1/clients?limit=100" /api/v1/slow_subscribers "/api/v1/subscriptions?limit=500" /api/v1/traces; do curl -s "http://127.0.0.1:18990$p" >/dev/null; done; sleep 1; done ) & poller=$!
  fi
  local before=$(awk '{print $14+$15}' /proc/$pid/stat)
  # shellcheck disable=SC2086 # the scenario's arguments are words
  timeout 60 $BENCH ${SCENARIO:-fanout -H 127.0.0.1:18991 --threads 1 --pubs 2 --subs 200 -s 16 -r 200 -d 15} --client-prefix fb --json /tmp/fb-$mode-$round.json --quiet >/dev/null 2>&1
  local after=$(awk '{print $14+$15}' /proc/$pid/stat)
  local lines=""
  [[ $mode == trace ]] && lines=$(curl -s http://127.0.0.1:18990/api/v1/traces | python3 -c 'import json,sys; t=json.load(sys.stdin)["traces"]; print(t[0]["lines"] if t else 0)')
  [[ -n $poller ]] && kill $poller 2>/dev/null
  [[ -n $idle ]] && kill $idle 2>/dev/null
  kill $pid; wait $pid 2>/dev/null
  python3 - "$mode" "$round" "$before" "$after" "/tmp/fb-$mode-$round.json" "$lines" <<'PY'
import json,sys,os
mode,rnd,b,a,path,lines=sys.argv[1:]
d=json.load(open(path))
tick=os.sysconf('SC_CLK_TCK')
cpu=(int(a)-int(b))/tick
recv=d['totals']['received'] if 'received' in d['totals'] else d['totals']
print(f"{mode:6} r{rnd}: delivered {recv}, broker cpu {cpu:.2f} s, {recv/cpu/1000 if cpu else 0:.0f}k msg per broker cpu-s, lost {d['lost']}, trace lines {lines or '-'}")
PY
}
for round in 1 2; do for mode in none poll trace; do run $mode $round; done; done
