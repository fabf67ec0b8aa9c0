#!/usr/bin/env python3
"""Restart with a large stored state: recovery time, RSS after recovery, disk bytes per message.

Starts ringmq with ENGINE on an empty directory, creates SESSIONS persistent offline sessions
(3.1.1, Clean Session 0, one QoS 1 subscription each to `restart/<n>`), publishes MESSAGES QoS 1
messages of SIZE bytes to each session's topic (a window of 1,000 unacknowledged), reads RSS,
stops the broker (SIGTERM, or SIGKILL with KILL=1), measures the data directory, restarts it and
reports how long it took to listen again, what its recovery log line says, and its RSS after
SETTLE_S. Then one session reconnects and must find all its MESSAGES messages. Standard library
only; every wait is bounded. One JSON line on stdout.

    ENGINE=redb SESSIONS=100000 MESSAGES=10 scripts/bench/restart.py
    MEMORY_QUEUE=4 ...   persistence.memory_queue_messages (default 32)
    PERSISTENCE_EXTRA='log_max_mb = 64' ...   more [persistence] lines
"""

import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import disconnect, frame, recv_packet, rss_kb, string, wait_for_port  # noqa: E402

ENGINE = os.environ.get("ENGINE", "redb")
SESSIONS = int(os.environ.get("SESSIONS", 100_000))
MESSAGES = int(os.environ.get("MESSAGES", 10))
SIZE = int(os.environ.get("SIZE", 64))
PORT = int(os.environ.get("PORT", 18_994))
BIN = os.environ.get("RINGMQ_BIN", "target/release/ringmq")
SETTLE_S = float(os.environ.get("SETTLE_S", 2))
KILL = os.environ.get("KILL", "0") == "1"
THREADS = int(os.environ.get("THREADS", 8))
# More [persistence] lines, e.g. "log_max_mb = 64\n".
PERSISTENCE_EXTRA = os.environ.get("PERSISTENCE_EXTRA", "").replace("\\n", "\n")
if PERSISTENCE_EXTRA and not PERSISTENCE_EXTRA.endswith("\n"):
    PERSISTENCE_EXTRA += "\n"
MEMORY_QUEUE = int(os.environ.get("MEMORY_QUEUE", 32))
WINDOW = 1000


def connect(client_id, clean):
    sock = socket.create_connection(("127.0.0.1", PORT), timeout=60)
    flags = 0x02 if clean else 0x00
    body = string("MQTT") + bytes([4, flags]) + struct.pack(">H", 0) + string(client_id)
    sock.sendall(frame(0x10, body))
    packet = recv_packet(sock)
    assert packet[0] >> 4 == 2, "CONNACK expected"
    return sock, packet[1][0] & 1 == 1


def create_sessions(first, last):
    for n in range(first, last):
        sock, _ = connect(f"restart-{n}", False)
        sock.sendall(frame(0x82, struct.pack(">H", 1) + string(f"restart/{n}") + b"\x01"))
        assert recv_packet(sock)[0] >> 4 == 9, "SUBACK expected"
        disconnect(sock)


def publish_all():
    sock, _ = connect("restart-publisher", True)
    payload = b"x" * SIZE
    sent = acked = 0
    total = SESSIONS * MESSAGES
    while acked < total:
        while sent < total and sent - acked < WINDOW:
            n = sent % SESSIONS
            pid = sent % 65535 + 1
            body = string(f"restart/{n}") + struct.pack(">H", pid) + payload
            sock.sendall(frame(0x32, body))
            sent += 1
        kind, _ = recv_packet(sock)
        assert kind >> 4 == 4, "PUBACK expected"
        acked += 1
    disconnect(sock)


def start(config, log):
    started = time.monotonic()
    args = [BIN, "-l", f"127.0.0.1:{PORT}", "--log-level", "info", "-c", config]
    env = dict(os.environ, NO_COLOR="1")
    broker = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, env=env)
    wait_for_port(PORT)
    return broker, time.monotonic() - started


def count_backlog(n):
    sock, present = connect(f"restart-{n}", False)
    got = 0
    sock.settimeout(10)
    while got < MESSAGES:
        kind, body = recv_packet(sock)
        if kind >> 4 == 3:
            got += 1
            topic_len = struct.unpack(">H", body[:2])[0]
            pid = body[2 + topic_len:4 + topic_len]
            sock.sendall(frame(0x40, pid))
    disconnect(sock)
    return present, got


def main():
    work = tempfile.mkdtemp(prefix="ringmq-restart-")
    data = os.path.join(work, "data")
    config = os.path.join(work, "ringmq.toml")
    with open(config, "w") as f:
        f.write(f'[persistence]\nengine = "{ENGINE}"\ndir = "{data}"\n'
                f'memory_queue_messages = {MEMORY_QUEUE}\n{PERSISTENCE_EXTRA}'
                '[queues]\nmax_queued_messages = 100000\n[sessions]\nmax_sessions = 1000000\n')
    log_path = os.path.join(work, "broker.log")
    log = open(log_path, "w")
    broker = None
    try:
        broker, _ = start(config, log)
        t0 = time.monotonic()
        step = (SESSIONS + THREADS - 1) // THREADS
        workers = [threading.Thread(target=create_sessions, args=(i * step, min(SESSIONS, (i + 1) * step)))
                   for i in range(THREADS)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        t1 = time.monotonic()
        publish_all()
        t2 = time.monotonic()
        time.sleep(SETTLE_S)
        rss_filled = rss_kb(broker.pid)
        broker.send_signal(signal.SIGKILL if KILL else signal.SIGTERM)
        broker.wait(timeout=120)
        disk = sum(os.path.getsize(os.path.join(root, f))
                   for root, _, files in os.walk(data) for f in files)
        broker, listen_s = start(config, log)
        time.sleep(SETTLE_S)
        rss_recovered = rss_kb(broker.pid)
        present, got = count_backlog(SESSIONS // 2)
        log.flush()
        with open(log_path) as f:
            lines = [line for line in f if "persistent state recovered" in line]
        recovered = lines[-1].strip() if lines else ""
        elapsed = re.search(r"elapsed_ms=(\d+)", recovered)
        result = {
            "engine": ENGINE, "sessions": SESSIONS, "messages_per_session": MESSAGES,
            "memory_queue_messages": MEMORY_QUEUE,
            "queued": SESSIONS * MESSAGES, "payload": SIZE, "stop": "SIGKILL" if KILL else "SIGTERM",
            "create_sessions_s": round(t1 - t0, 1), "publish_s": round(t2 - t1, 1),
            "publish_per_s": round(SESSIONS * MESSAGES / (t2 - t1)),
            "rss_filled_kb": rss_filled, "disk_bytes": disk,
            "disk_bytes_per_queued": round(disk / (SESSIONS * MESSAGES), 1),
            "restart_listen_s": round(listen_s, 2),
            "recovery_ms": int(elapsed.group(1)) if elapsed else None,
            "rss_after_recovery_kb": rss_recovered,
            "sample_session_present": present, "sample_backlog": got,
        }
        print(json.dumps(result))
        assert present and got == MESSAGES, "the sample session lost its backlog"
    finally:
        if broker and broker.poll() is None:
            broker.kill()
            broker.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
