#!/usr/bin/env python3
"""Round-trip latency seen by an independent client (paho-mqtt, not ringmq-bench).

One MQTT 3.1.1 client subscribes (QoS 0) to a topic of its own, then publishes QoS 0 to it
SAMPLES times, INTERVAL_MS apart on a fixed schedule (a late sample does not shift the next), and
times each message from just before its PUBLISH is written to when paho hands it back. One thread
drives the socket (`loop()` between sends), so the figure holds no thread hand-off; it does hold
paho's and Python's own cost on both sides, the same for every broker. A sample not back within
TIMEOUT_S of the last send is counted as lost. Bounded: at most SAMPLES messages and
SAMPLES x INTERVAL_MS + TIMEOUT_S + 10 s.

usage: paho_probe.py [--host 127.0.0.1] --port PORT [--samples 2000] [--interval-ms 10]
                     [--size 16] [--client-id paho-probe] [--timeout-s 5]
                     [--slow-log FILE --slow-us 1000]
prints one JSON line: samples, received, lost, min/p50/p90/p99/p99.9/max/mean in microseconds.
--slow-log writes one line per sample slower than --slow-us: the CLOCK_MONOTONIC nanosecond it
was sent at and its latency in microseconds, to line samples up with a scheduler trace taken
with `perf record -k CLOCK_MONOTONIC` (scripts/bench/latency-sched.sh).
Needs paho-mqtt >= 2 (`pip install --break-system-packages paho-mqtt`).
"""
import argparse
import json
import struct
import sys
import time

import paho.mqtt
import paho.mqtt.client as mqtt


def percentile(sorted_values, q):
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * q // 100))
    return round(sorted_values[int(rank) - 1], 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--interval-ms", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=16, help="payload bytes (at least 12)")
    ap.add_argument("--client-id", default="paho-probe")
    ap.add_argument("--timeout-s", type=float, default=5.0)
    ap.add_argument("--slow-log", help="file for the samples slower than --slow-us")
    ap.add_argument("--slow-us", type=float, default=1000.0)
    args = ap.parse_args()

    topic = f"probe/{args.client_id}"
    sent_at = {}
    latencies_ns = []
    slow = []  # (sent at, CLOCK_MONOTONIC ns; latency, ns)
    state = {"subscribed": False, "connected": False}

    def on_connect(client, _userdata, _flags, reason_code, _properties):
        if reason_code.is_failure:
            sys.exit(f"connect refused: {reason_code}")
        state["connected"] = True
        client.subscribe(topic, qos=0)

    def on_subscribe(_client, _userdata, _mid, _reason_codes, _properties):
        state["subscribed"] = True

    def on_message(_client, _userdata, message):
        now = time.perf_counter_ns()
        seq = struct.unpack_from(">I", message.payload)[0]
        start = sent_at.pop(seq, None)
        if start is not None:
            latencies_ns.append(now - start)
            if now - start > args.slow_us * 1000:
                slow.append((start, now - start))

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=args.client_id,
                         protocol=mqtt.MQTTv311, clean_session=True)
    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    client.connect(args.host, args.port, keepalive=60)

    deadline = time.monotonic() + 10
    while not state["subscribed"]:
        if time.monotonic() > deadline:
            sys.exit("no CONNACK/SUBACK within 10 s")
        client.loop(timeout=0.05)

    interval_ns = int(args.interval_ms * 1e6)
    pad = b"x" * max(0, args.size - 12)
    next_send = time.perf_counter_ns()
    for seq in range(args.samples):
        # Serve the socket until this sample's slot comes.
        while (wait := next_send - time.perf_counter_ns()) > 0:
            client.loop(timeout=wait / 1e9)
        start = time.perf_counter_ns()
        sent_at[seq] = start
        client.publish(topic, struct.pack(">IQ", seq, start) + pad, qos=0)
        next_send += interval_ns
    deadline = time.monotonic() + args.timeout_s
    while sent_at and time.monotonic() < deadline:
        client.loop(timeout=0.05)
    client.disconnect()

    if args.slow_log:
        with open(args.slow_log, "w") as out:
            for start, latency in slow:
                out.write(f"{start} {latency / 1000:.1f}\n")

    lat = sorted(v / 1000 for v in latencies_ns)
    print(json.dumps({
        "tool": f"paho-mqtt {paho.mqtt.__version__}",
        "samples": args.samples, "interval_ms": args.interval_ms, "size": args.size,
        "received": len(lat), "lost": args.samples - len(lat),
        "min_us": percentile(lat, 0),
        "p50_us": percentile(lat, 50), "p90_us": percentile(lat, 90),
        "p99_us": percentile(lat, 99), "p999_us": percentile(lat, 99.9),
        "max_us": percentile(lat, 100),
        "mean_us": round(sum(lat) / len(lat), 1) if lat else None,
    }))


if __name__ == "__main__":
    main()
