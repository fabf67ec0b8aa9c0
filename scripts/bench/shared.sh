#!/usr/bin/env bash
# Scenario shared: 20 publishers flood one topic (16 B, QoS 0, SHARED_LIMIT messages each) that
# 50 members of $share/g/<topic> share. Records delivered msg/s and the spread across members
# (fewest and most messages one member got) in shared.jsonl.
#   SHARED_PUBS=20  SHARED_MEMBERS=50  SHARED_LIMIT=10000  WINDOW=6 (s, upper bound)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SHARED_PUBS=${SHARED_PUBS:-20}
SHARED_MEMBERS=${SHARED_MEMBERS:-50}
SHARED_LIMIT=${SHARED_LIMIT:-10000}
WINDOW=${WINDOW:-6}

shared_once() {
  measured_bench shared "{\"pubs\":$SHARED_PUBS,\"members\":$SHARED_MEMBERS,\"size\":16}" \
    shared --pubs "$SHARED_PUBS" --members "$SHARED_MEMBERS" -s 16 -q 0 -r 0 \
    -L "$SHARED_LIMIT" -d $((WINDOW + 5)) --warmup 1 --quiet
}

prepare_brokers
for_each_broker shared_once
