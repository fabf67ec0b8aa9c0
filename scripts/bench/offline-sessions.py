#!/usr/bin/env python3
"""Broker RSS per offline persistent session with one subscription and nothing queued.

Starts ringmq, creates WARM offline sessions (so fixed costs are touched), reads VmRSS, creates
COUNT more, reads VmRSS again and prints (after - before) / COUNT. Each session: a 3.1.1 CONNECT
with Clean Session 0 (client id `offline-<n>`), one SUBSCRIBE (QoS 1) to its own topic
`offline/<n>`, SUBACK, DISCONNECT. Standard library only; every wait is bounded.

    scripts/bench/offline-sessions.py                      # 10,000 measured after 2,000
    RINGMQ_BIN=path/to/ringmq COUNT=5000 SHARDS=16 scripts/bench/offline-sessions.py

SHARDS sets `runtime.shards` (0, the default, is one per core): the subscription and the
session's owner are replicated on every shard, so the figure grows with the shard count.
"""

import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import disconnect, frame, recv_packet, rss_kb, string, wait_for_port  # noqa: E402

COUNT = int(os.environ.get("COUNT", 10_000))
WARM = int(os.environ.get("WARM", 2_000))
PORT = int(os.environ.get("PORT", 18_993))
BIN = os.environ.get("RINGMQ_BIN", "target/release/ringmq")
SETTLE_S = float(os.environ.get("SETTLE_S", 2))
SHARDS = int(os.environ.get("SHARDS", 0))



def offline_session(n):
    sock = socket.create_connection(("127.0.0.1", PORT), timeout=30)
    connect = string("MQTT") + bytes([4, 0]) + struct.pack(">H", 0) + string(f"offline-{n}")
    sock.sendall(frame(0x10, connect))
    assert recv_packet(sock)[0] >> 4 == 2, "CONNACK expected"
    sock.sendall(frame(0x82, struct.pack(">H", 1) + string(f"offline/{n}") + b"\x01"))
    assert recv_packet(sock)[0] >> 4 == 9, "SUBACK expected"
    disconnect(sock)


def main():
    config = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    # Memory only: this measures what an offline session costs in RAM.
    config.write(f"[runtime]\nshards = {SHARDS}\n[persistence]\nengine = \"none\"\n")
    config.close()
    args = [BIN, "-l", f"127.0.0.1:{PORT}", "--log-level", "warn", "-c", config.name]
    broker = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(PORT)
        for n in range(WARM):
            offline_session(n)
        time.sleep(SETTLE_S)
        before = rss_kb(broker.pid)
        for n in range(WARM, WARM + COUNT):
            offline_session(n)
        time.sleep(SETTLE_S)
        after = rss_kb(broker.pid)
        print(
            f"offline sessions: {WARM} warm-up + {COUNT} measured; RSS {before} KiB -> {after} KiB;"
            f" {(after - before) * 1024 // COUNT} bytes per offline session (shards = {SHARDS})"
        )
    finally:
        broker.kill()
        broker.wait()
        os.unlink(config.name)


if __name__ == "__main__":
    main()
