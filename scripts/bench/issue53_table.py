#!/usr/bin/env python3
"""Issue 53's table from the rows of one scripts/bench/issue53.sh run.

Reads bench-results/scenarios/{fanout,fanout-qos1,p2p,nanomq-fanout,nanomq-p2p,latency-paho}.jsonl,
keeps the rows whose run is <SET>-r<n>, and prints one markdown row per scenario and load
generator: each broker's median over the rounds (messages delivered per broker CPU-second; for
the paho probe p50 and p99 in µs), then RingMQ against FlashMQ, as shipped and, where measured,
with tcp_nodelay (RingMQ's figure over FlashMQ's
for throughput, FlashMQ's over RingMQ's for latency: above 1 favours RingMQ either way). A cell
whose median delivered share is below 99 % is marked with its share.

usage: issue53_table.py --set SET [--results DIR] [--brokers "ringmq flashmq mosquitto rumqttd"]
"""
import argparse
import json
import os
import re
import statistics
from collections import defaultdict

FILES = ["fanout", "fanout-qos1", "p2p", "nanomq-fanout", "nanomq-p2p", "latency-paho"]


def rate_text(rate):
    return "unpaced" if not rate else f"{rate:g}/s per pair"


def keys(row):
    """(sort key, scenario text, load generator, figure name, value, lower is better) tuples."""
    s, qos = row["scenario"], row.get("qos")
    if s == "latency-paho":
        lat, load = row["latency_us"], row["load"]
        order = 0 if load == "unloaded" else 1
        where = "unloaded" if order == 0 else (
            f"{row['idle']:,} idle + {row['bg_rate_per_s']:,} msg/s p2p")
        for q in ("p50", "p99"):
            yield ((3, order, q), f"latency {q}, {where}", "paho-mqtt", "µs", lat.get(f"{q}_us"), True)
        return
    value = row.get("msgs_per_broker_cpu_s")
    if s.endswith("fanout") or s == "fanout-qos1":
        gen = "nanomq_cli" if s.startswith("nanomq") else "ringmq-bench"
        rate = row["step_rate"]
        if "interval_ms" in row and row["rate"] != rate:
            rate_desc = f"{rate:g}/s per pub (ran {row['rate']:g})"
        else:
            rate_desc = f"{rate:g}/s per pub"
        yield ((1, qos, rate, gen), f"fan-out QoS {qos}, {rate_desc}", gen, "msg/CPU-s", value, False)
    else:
        gen = "nanomq_cli" if s.startswith("nanomq") else "ringmq-bench"
        rate = row.get("step_rate", row.get("rate", 0)) or 0
        flood = 1 if not rate else 0
        yield ((2, flood, qos, rate, gen), f"p2p QoS {qos}, {rate_text(rate)}", gen,
               "msg/CPU-s", value, False)


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "µs":
        return f"{v:,.0f} µs"
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.1f}k"


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--results", default=os.path.join(here, "../../bench-results/scenarios"))
    ap.add_argument("--set", required=True)
    ap.add_argument("--brokers", default="ringmq flashmq mosquitto rumqttd")
    args = ap.parse_args()
    brokers = args.brokers.split()
    run_re = re.compile(re.escape(args.set) + r"-r(\d+)$")
    cells = defaultdict(lambda: defaultdict(list))  # sort key -> broker -> [(value, share)]
    meta, rounds = {}, set()
    for name in FILES:
        path = os.path.join(args.results, name + ".jsonl")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                m = run_re.match(row.get("run", ""))
                if not m or row.get("broker_died"):
                    continue
                rounds.add(int(m.group(1)))
                for sort_key, text, gen, unit, value, lower in keys(row):
                    if value is None:
                        continue
                    meta[sort_key] = (text, gen, unit, lower)
                    cells[sort_key][row["broker"]].append((value, row.get("delivered_ratio")))
    versus = [b for b in ("flashmq", "flashmq-nodelay") if b in brokers]
    head = ["scenario", "load generator", "figure"] + brokers + [f"RingMQ vs {b}" for b in versus]
    print(f"Set `{args.set}`, {len(rounds)} round(s), brokers rotated per round; medians of the "
          "rounds. Ratio: RingMQ over FlashMQ for msg/CPU-s, FlashMQ over RingMQ for latency "
          "(above 1 favours RingMQ). A share in brackets: median delivered share below 99 %.\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for sort_key in sorted(cells, key=lambda k: tuple(str(x).zfill(8) for x in k)):
        text, gen, unit, lower = meta[sort_key]
        med = {}
        row = [text, gen, unit]
        for b in brokers:
            vals = cells[sort_key].get(b)
            if not vals:
                row.append("-")
                continue
            med[b] = statistics.median(v for v, _ in vals)
            cell = fmt(med[b], unit)
            shares = [s for _, s in vals if s is not None]
            if shares and statistics.median(shares) < 0.99:
                cell += f" ({statistics.median(shares):.1%})"
            row.append(cell)
        r = med.get("ringmq")
        for b in versus:
            f = med.get(b)
            row.append(f"{(f / r if lower else r / f):.2f}x" if r and f else "-")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
