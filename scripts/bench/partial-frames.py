#!/usr/bin/env python3
"""Broker RSS while many sockets send a large CONNECT slowly (issue 11, partial-frame memory).

Starts ringmq, opens SOCKETS raw sockets, each sends a CONNECT fixed header announcing ANNOUNCED
bytes and then SEND bytes of its body in CHUNK-byte pieces, round-robin over the sockets; prints
the broker's RSS before, after the bytes are sent (no CONNECT ever completes), and after the
sockets are closed, plus how many sockets the broker closed. Standard library only; bounded in
time (every phase has a deadline).

    scripts/bench/partial-frames.py                      # 4000 sockets x 500 KB of 1,000,000
    SOCKETS=1000 SEND=200000 scripts/bench/partial-frames.py
    RINGMQ_BIN=path/to/ringmq CONFIG=extra.toml scripts/bench/partial-frames.py
"""

import os
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import rss_kb, varint  # noqa: E402

SOCKETS = int(os.environ.get("SOCKETS", 4000))
ANNOUNCED = int(os.environ.get("ANNOUNCED", 1_000_000))
SEND = int(os.environ.get("SEND", 500_000))
CHUNK = int(os.environ.get("CHUNK", 16_384))
PORT = int(os.environ.get("PORT", 18_991))
BIN = os.environ.get("RINGMQ_BIN", "target/release/ringmq")
DEADLINE_S = float(os.environ.get("DEADLINE_S", 240))


def connect_head():
    """The fixed header and the start of a 3.1.1 CONNECT announcing ANNOUNCED bytes."""
    return bytes([0x10]) + varint(ANNOUNCED) + b"\x00\x04MQTT\x04\x02\x00\x3c"


def start_broker():
    args = [BIN, "-l", f"127.0.0.1:{PORT}", "--log-level", "warn"]
    if os.environ.get("CONFIG"):
        args += ["-c", os.environ["CONFIG"]]
    else:
        # Memory only (nothing here is stored; no data directory in the working tree).
        memory_only = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        memory_only.write('[persistence]\nengine = "none"\n')
        memory_only.close()
        args += ["-c", memory_only.name]
    broker = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
            return broker
        except OSError:
            time.sleep(0.05)
    broker.kill()
    sys.exit("broker did not start")


def open_sockets():
    socks = []
    for _ in range(SOCKETS):
        s = socket.create_connection(("127.0.0.1", PORT))
        s.setblocking(False)
        socks.append(s)
    return socks


def trickle(socks):
    """Sends each socket's bytes in chunks; returns how many the broker closed."""
    sent = {s.fileno(): 0 for s in socks}
    head = connect_head()
    filler = head + bytes(max(SEND - len(head), 0))
    closed = set()
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        progress = False
        for s in socks:
            fd = s.fileno()
            if fd in closed or sent[fd] >= SEND:
                continue
            try:
                n = s.send(filler[sent[fd] : min(sent[fd] + CHUNK, SEND)])
                sent[fd] += n
                progress = progress or n > 0
            except BlockingIOError:
                pass
            except OSError:
                closed.add(fd)
        if all(sent[s.fileno()] >= SEND or s.fileno() in closed for s in socks):
            break
        if not progress:
            time.sleep(0.01)
    return count_closed(socks, closed)


def count_closed(socks, closed):
    """Counts the sockets the broker has closed (EOF or reset), waiting a little for late ones."""
    time.sleep(1.0)
    for s in socks:
        try:
            if s.recv(65536) == b"":
                closed.add(s.fileno())
        except BlockingIOError:
            pass
        except OSError:
            closed.add(s.fileno())
    return len(closed)


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, SOCKETS + 1000), hard))
    broker = start_broker()
    try:
        time.sleep(0.5)
        before = rss_kb(broker.pid)
        socks = open_sockets()
        closed = trickle(socks)
        time.sleep(0.5)
        loaded = rss_kb(broker.pid)
        for s in socks:
            s.close()
        time.sleep(2.0)
        after = rss_kb(broker.pid)
        print(
            f"{SOCKETS} sockets x {SEND} B of a CONNECT announcing {ANNOUNCED} B: "
            f"RSS {before} KiB -> {loaded} KiB loaded -> {after} KiB after close; "
            f"{(loaded - before) * 1024 // SOCKETS} B per socket; {closed} closed by the broker"
        )
    finally:
        broker.kill()
        broker.wait()


if __name__ == "__main__":
    main()
