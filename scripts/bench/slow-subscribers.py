#!/usr/bin/env python3
"""Broker RSS under subscribers that never read (issue 47, defect 9): what the send queues of
slow consumers hold, against `queues.outbound_bytes` per connection and
`queues.max_total_outbound_bytes` over the broker.

Starts ringmq (memory only, the metrics listener on), connects SUBSCRIBERS clients that
subscribe to `slow/#` at QoS QOS and then never read again (their receive buffers shrunk so the
kernel holds little for them), and one publisher that sends MESSAGES PUBLISHes of SIZE bytes at
QoS 0 to `slow/t`, reading what the broker sends back. Prints the broker's RSS before and after,
the RSS added per subscriber against the configured bound, and the drop counters. Standard
library only; loopback only; bounded in count and time (DEADLINE_S).

    scripts/bench/slow-subscribers.py                        # 200 subscribers, 4 MiB bound
    SIZE=100 MESSAGES=200000 scripts/bench/slow-subscribers.py
    CONFIG_EXTRA='[queues]\\nmax_total_outbound_bytes = 268435456' scripts/bench/slow-subscribers.py
"""

import os
import resource
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import frame, recv_packet, rss_kb, string, wait_for_port  # noqa: E402

SUBSCRIBERS = int(os.environ.get("SUBSCRIBERS", 200))
MESSAGES = int(os.environ.get("MESSAGES", 20_000))
SIZE = int(os.environ.get("SIZE", 1_000))
QOS = int(os.environ.get("QOS", 0))
PORT = int(os.environ.get("PORT", 18_981))
HTTP_PORT = PORT + 1
BIN = os.environ.get("RINGMQ_BIN", "target/release/ringmq")
DEADLINE_S = float(os.environ.get("DEADLINE_S", 120))
CONFIG_EXTRA = os.environ.get("CONFIG_EXTRA", "").replace("\\n", "\n")


def connect(client_id):
    """A logged-in 3.1.1 client (clean session) as a blocking socket."""
    s = socket.create_connection(("127.0.0.1", PORT), timeout=DEADLINE_S)
    body = string("MQTT") + bytes([4, 0x02, 0, 60]) + string(client_id)
    s.sendall(frame(0x10, body))
    first, ack = recv_packet(s)
    if first != 0x20 or ack[1] != 0:
        sys.exit(f"CONNECT refused: {first:#x} {ack!r}")
    return s


def subscriber(index):
    """Subscribes to slow/# and stops reading once the SUBACK is in."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(DEADLINE_S)
    s.connect(("127.0.0.1", PORT))
    s.sendall(frame(0x10, string("MQTT") + bytes([4, 0x02, 0, 60]) + string(f"slow-{index}")))
    recv_packet(s)
    s.sendall(frame(0x82, b"\x00\x01" + string("slow/#") + bytes([QOS])))
    first, _ = recv_packet(s)
    if first != 0x90:
        sys.exit("no SUBACK")
    return s


def drain(sock, stop):
    """Reads whatever the broker sends the publisher until `stop` is set."""
    while not stop.is_set():
        readable, _, _ = select.select([sock], [], [], 0.2)
        if not readable:
            continue
        try:
            if not sock.recv(65536):
                return
        except OSError:
            return


def publish_all(sock):
    """MESSAGES QoS 0 PUBLISHes of SIZE bytes, in batches of one sendall each."""
    packet = frame(0x30, string("slow/t") + bytes(SIZE))
    deadline = time.monotonic() + DEADLINE_S
    sent = 0
    while sent < MESSAGES and time.monotonic() < deadline:
        batch = min(100, MESSAGES - sent)
        sock.sendall(packet * batch)
        sent += batch
    return sent


def metrics():
    url = f"http://127.0.0.1:{HTTP_PORT}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    wanted = ("ringmq_message_drops_total{", "ringmq_outbound_bytes", "ringmq_queued_bytes ")
    return [line for line in text.splitlines() if line.startswith(wanted)]


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, SUBSCRIBERS + 1000), hard))
    with tempfile.TemporaryDirectory() as directory:
        config = os.path.join(directory, "ringmq.toml")
        with open(config, "w") as f:
            f.write('[persistence]\nengine = "none"\n'
                    f'[http]\nbind = "127.0.0.1:{HTTP_PORT}"\n' + CONFIG_EXTRA + "\n")
        args = [BIN, "-l", f"127.0.0.1:{PORT}", "--log-level", "warn", "-c", config]
        broker = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_port(PORT)
            subs = [subscriber(i) for i in range(SUBSCRIBERS)]
            publisher = connect("slow-publisher")
            time.sleep(1.0)
            before = rss_kb(broker.pid)
            stop = threading.Event()
            reader = threading.Thread(target=drain, args=(publisher, stop))
            reader.start()
            started = time.monotonic()
            sent = publish_all(publisher)
            took = time.monotonic() - started
            time.sleep(2.0)
            loaded = rss_kb(broker.pid)
            stop.set()
            reader.join()
            added = loaded - before
            print(f"{SUBSCRIBERS} subscribers at QoS {QOS} that never read, {sent} PUBLISHes "
                  f"of {SIZE} B in {took:.1f} s: RSS {before} KiB -> {loaded} KiB, "
                  f"{added // 1024} MiB added, {added // SUBSCRIBERS} KiB per subscriber")
            for line in metrics():
                print("  " + line)
            for s in subs:
                s.close()
            publisher.close()
            time.sleep(2.0)
            print(f"RSS after the subscribers close: {rss_kb(broker.pid)} KiB")
        finally:
            broker.kill()
            broker.wait()


if __name__ == "__main__":
    main()
