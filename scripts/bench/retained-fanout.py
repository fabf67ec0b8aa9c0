#!/usr/bin/env python3
"""Retained messages to many subscribers of `#` (issue 49): how long until every subscriber has
every retained message, and the broker's peak RSS, for ringmq and mosquitto in the same run.

For each broker in BROKERS: starts it (ringmq memory only; mosquitto with anonymous access and
unbounded queues and inflight window, so it drops nothing by its own bounds), stores RETAINED
retained QoS 0 messages of SIZE bytes on `retained/NNNNNN` from one 3.1.1 client (a PINGREQ
fences them), then connects SUBSCRIBERS 3.1.1 clients that subscribe to `#` at QoS 0 at once
and read as fast as one Python thread can. Every copy has the same length, so a subscriber
counts bytes, checking each frame's first byte (a retained QoS 0 PUBLISH). Prints, per broker:
the time from the SUBSCRIBEs to the last subscriber complete (and the median subscriber), how
many subscribers got everything, the RSS after storing and the peak RSS (VmHWM) over the run.
Standard library only; loopback only; bounded in time (DEADLINE_S).

    scripts/bench/retained-fanout.py                                 # 100,000 x 50, both
    RINGMQ_BIN=/tmp/tgt-after-retained/release/ringmq scripts/bench/retained-fanout.py
    BROKERS=ringmq RETAINED=20000 SUBSCRIBERS=10 scripts/bench/retained-fanout.py
"""

import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import frame, recv_packet, rss_kb, status_kb, string, wait_for_port  # noqa: E402

RETAINED = int(os.environ.get("RETAINED", 100_000))
SUBSCRIBERS = int(os.environ.get("SUBSCRIBERS", 50))
SIZE = int(os.environ.get("SIZE", 16))
PORT = int(os.environ.get("PORT", 18_991))
BIN = os.environ.get("RINGMQ_BIN", "target/release/ringmq")
BROKERS = os.environ.get("BROKERS", "ringmq mosquitto").split()
DEADLINE_S = float(os.environ.get("DEADLINE_S", 300))
CONFIG_EXTRA = os.environ.get("CONFIG_EXTRA", "").replace("\\n", "\n")
TOPIC_FORMAT = "retained/{:06d}"
RETAINED_QOS0 = 0x31  # PUBLISH, QoS 0, RETAIN
CHUNK = 1 << 18


def connect(client_id, receive_buffer=None):
    """A logged-in 3.1.1 client (clean session) as a blocking socket."""
    s = socket.socket()
    if receive_buffer:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    s.settimeout(DEADLINE_S)
    s.connect(("127.0.0.1", PORT))
    s.sendall(frame(0x10, string("MQTT") + bytes([4, 0x02, 0, 60]) + string(client_id)))
    first, ack = recv_packet(s)
    if first != 0x20 or ack[1] != 0:
        sys.exit(f"CONNECT refused: {first:#x} {ack!r}")
    return s


def publish_frame(index):
    """A retained QoS 0 PUBLISH of SIZE bytes, as the broker sends it on."""
    return frame(RETAINED_QOS0, string(TOPIC_FORMAT.format(index)) + b"p" * SIZE)


def store_retained():
    """Publishes RETAINED retained messages; returns once the broker has handled them all."""
    s = connect("retained-publisher")
    for start in range(0, RETAINED, 1000):
        s.sendall(b"".join(publish_frame(i) for i in range(start, min(start + 1000, RETAINED))))
    s.sendall(frame(0xC0, b""))
    while recv_packet(s)[0] != 0xD0:
        pass
    s.sendall(frame(0xE0, b""))
    s.close()


class Subscriber:
    """One subscriber of `#`: counts the bytes of retained copies after its SUBACK."""

    def __init__(self, index):
        self.sock = connect(f"retained-sub-{index}")
        self.pending = b""  # the SUBACK, then bytes of a partial copy
        self.copies = 0
        self.suback_seen = False
        self.done_at = None

    def subscribe(self):
        self.sock.sendall(frame(0x82, b"\x00\x01" + string("#") + b"\x00"))
        self.sock.setblocking(False)

    def take(self, data, frame_len, now):
        """Counts the copies in `data`; false on an unexpected packet."""
        data = self.pending + data
        if not self.suback_seen:
            if len(data) < 5:
                self.pending = data
                return True
            if data[0] != 0x90:
                return False
            self.suback_seen, data = True, data[5:]
        whole = len(data) - len(data) % frame_len
        if data[0:whole:frame_len].count(RETAINED_QOS0) != whole // frame_len:
            return False
        self.copies += whole // frame_len
        self.pending = data[whole:]
        if self.copies >= RETAINED and self.done_at is None:
            self.done_at = now
        return True


def deliver(pid):
    """Subscribes SUBSCRIBERS clients to `#` and reads until each has RETAINED copies."""
    frame_len = len(publish_frame(0))
    subscribers = [Subscriber(i) for i in range(SUBSCRIBERS)]
    selector = selectors.DefaultSelector()
    started = time.monotonic()
    for sub in subscribers:
        sub.subscribe()
        selector.register(sub.sock, selectors.EVENT_READ, sub)
    open_count = len(subscribers)
    while open_count and time.monotonic() - started < DEADLINE_S:
        for key, _ in selector.select(timeout=1.0):
            sub = key.data
            try:
                data = sub.sock.recv(CHUNK)
            except BlockingIOError:
                continue
            now = time.monotonic()
            if not data or not sub.take(data, frame_len, now):
                print(f"  subscriber closed or sent something else after {sub.copies}")
                selector.unregister(sub.sock)
                open_count -= 1
                continue
            if sub.done_at is not None:
                selector.unregister(sub.sock)
                open_count -= 1
    peak_kb = status_kb(pid, "VmHWM")
    for sub in subscribers:
        sub.sock.close()
    done = [sub.done_at - started for sub in subscribers if sub.done_at is not None]
    copies = [sub.copies for sub in subscribers]
    return done, copies, peak_kb


def start_ringmq(directory):
    config = os.path.join(directory, "ringmq.toml")
    with open(config, "w") as f:
        f.write('[persistence]\nengine = "none"\n'
                f"[retained]\nmax_messages = {max(RETAINED, 100_000)}\n" + CONFIG_EXTRA + "\n")
    args = [BIN, "-l", f"127.0.0.1:{PORT}", "--log-level", "warn", "-c", config]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_mosquitto(directory):
    config = os.path.join(directory, "mosquitto.conf")
    with open(config, "w") as f:
        f.write(f"listener {PORT} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                "max_queued_messages 0\nmax_queued_bytes 0\nmax_inflight_messages 0\n"
                "log_type error\n")
    return subprocess.Popen(["mosquitto", "-c", config],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run(name):
    with tempfile.TemporaryDirectory() as directory:
        broker = {"ringmq": start_ringmq, "mosquitto": start_mosquitto}[name](directory)
        try:
            wait_for_port(PORT)
            t0 = time.monotonic()
            store_retained()
            stored_s = time.monotonic() - t0
            stored_kb = rss_kb(broker.pid)
            done, copies, peak_kb = deliver(broker.pid)
        finally:
            broker.terminate()
            broker.wait(timeout=30)
    complete = len(done)
    print(f"{name}: {RETAINED} retained x {SUBSCRIBERS} subscribers of '#' ({SIZE}-byte payloads)")
    print(f"  stored in {stored_s:.2f} s; RSS after storing {stored_kb / 1024:.1f} MiB")
    if done:
        print(f"  all copies: {complete}/{SUBSCRIBERS} subscribers; last complete after "
              f"{max(done):.2f} s, median {statistics.median(done):.2f} s")
    print(f"  copies per subscriber: min {min(copies)}, max {max(copies)}; "
          f"peak RSS (VmHWM) {peak_kb / 1024:.1f} MiB")


def main():
    for name in BROKERS:
        run(name)
        time.sleep(1)


if __name__ == "__main__":
    main()
