#!/usr/bin/env python3
"""Broker RSS across rounds of large offline queues (issue 11, memory retention).

Each round: SESSIONS persistent 3.1.1 sessions subscribe (QoS 1) to their own topic and go
offline, a publisher sends MESSAGES QoS 1 messages of SIZE bytes to each topic, then every session
is discarded (a Clean Session CONNECT, then DISCONNECT). Prints the broker's RSS at start, after
the queues are filled and after the discard, for ROUNDS rounds. Standard library only; every wait
is bounded. The queue byte bounds are raised so the queues really hold MESSAGES x SIZE bytes
(QUEUE_DEFAULTS=1 keeps the default bounds).

    scripts/bench/offline-retention.py                     # 3 sessions x 1,000 x 1 MB, 3 rounds
    RINGMQ_BIN=path/to/ringmq ROUNDS=2 MESSAGES=200 scripts/bench/offline-retention.py
"""

import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import disconnect, frame, recv_packet, rss_detail, string, wait_for_port  # noqa: E402

SESSIONS = int(os.environ.get("SESSIONS", 3))
MESSAGES = int(os.environ.get("MESSAGES", 1000))
SIZE = int(os.environ.get("SIZE", 1_000_000))
ROUNDS = int(os.environ.get("ROUNDS", 3))
PORT = int(os.environ.get("PORT", 18_992))
BIN = os.environ.get("RINGMQ_BIN", "target/release/ringmq")
SETTLE_S = float(os.environ.get("SETTLE_S", 3))
CONFIG = """
[persistence]
engine = "none"
[queues]
max_queued_bytes = 4294967296
max_total_queued_bytes = 17179869184
"""



def connect(client_id, clean):
    sock = socket.create_connection(("127.0.0.1", PORT), timeout=60)
    flags = 0x02 if clean else 0x00
    sock.sendall(frame(0x10, string("MQTT") + bytes([4, flags]) + struct.pack(">H", 0) + string(client_id)))
    first, _ = recv_packet(sock)
    assert first >> 4 == 2, "CONNACK expected"
    return sock


def prepare_sessions(round_no):
    for s in range(SESSIONS):
        sock = connect(f"retention-{s}", clean=False)
        sock.sendall(frame(0x82, struct.pack(">H", 1) + string(f"retention/{s}") + b"\x01"))
        first, _ = recv_packet(sock)
        assert first >> 4 == 9, "SUBACK expected"
        disconnect(sock)


def publish_all():
    sock = connect("retention-publisher", clean=True)
    total = SESSIONS * MESSAGES
    acked = [0]

    def read_acks():
        while acked[0] < total:
            first, _ = recv_packet(sock)
            if first >> 4 == 4:
                acked[0] += 1

    reader = threading.Thread(target=read_acks, daemon=True)
    reader.start()
    payload = bytes(SIZE)
    packet_id = 0
    for m in range(MESSAGES):
        for s in range(SESSIONS):
            packet_id = packet_id % 65535 + 1
            body = string(f"retention/{s}") + struct.pack(">H", packet_id) + payload
            sock.sendall(frame(0x32, body))
            while packet_id and acked[0] + 512 < m * SESSIONS + s:
                time.sleep(0.001)
    reader.join(timeout=120)
    disconnect(sock)


def discard_sessions():
    for s in range(SESSIONS):
        disconnect(connect(f"retention-{s}", clean=True))


def main():
    config = None
    args = [BIN, "-l", f"127.0.0.1:{PORT}", "--log-level", "warn"]
    if os.environ.get("QUEUE_DEFAULTS") != "1":
        config = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        config.write(CONFIG + os.environ.get("CONFIG_EXTRA", "").replace("\\n", "\n"))
        config.close()
        args += ["-c", config.name]
    broker = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.environ.get("BROKER_LOG", os.devnull), "w"))
    try:
        wait_for_port(PORT)
        time.sleep(SETTLE_S)
        print(f"start: {rss_detail(broker.pid)}", flush=True)
        for r in range(1, ROUNDS + 1):
            prepare_sessions(r)
            publish_all()
            time.sleep(SETTLE_S)
            print(f"round {r}: queued {SESSIONS} x {MESSAGES} x {SIZE} B: {rss_detail(broker.pid)}", flush=True)
            discard_sessions()
            time.sleep(SETTLE_S)
            print(f"round {r}: discarded: {rss_detail(broker.pid)}", flush=True)
            if os.environ.get("LATE_S"):
                time.sleep(float(os.environ["LATE_S"]))
                print(f"round {r}: {os.environ['LATE_S']} s later: {rss_detail(broker.pid)}", flush=True)
    finally:
        broker.kill()
        broker.wait()
        if config:
            os.unlink(config.name)


if __name__ == "__main__":
    main()
