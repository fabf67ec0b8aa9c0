#!/usr/bin/env python3
"""Broker RSS under connections that never log in but send the start of a CONNECT that never
ends (issue 47, defect 2): over WebSocket as one fragmented message (a binary frame without FIN,
then continuation frames, never FIN), over plain TCP or TLS as a partial packet.

Starts ringmq (the default config, memory only, plus a ws, a tls and a wss listener on loopback
with a throwaway self-signed certificate, and the metrics listener), opens SOCKETS connections
of MODE, and sends each a CONNECT fixed header announcing ANNOUNCED bytes followed by zero bytes
in CHUNK-byte pieces (WebSocket: one continuation frame per piece), SEND bytes in all,
round-robin. Prints the broker's RSS before, once the bytes are sent, and after the sockets
close, with how many the broker closed and its ringmq_partial_frame_closed_total. Standard
library and the openssl command only; loopback only; bounded in time (DEADLINE_S per phase).

    scripts/bench/prelogin-memory.py                         # 1000 ws sockets x 2 MB
    MODE=wss SOCKETS=500 scripts/bench/prelogin-memory.py
    MODE=tcp scripts/bench/prelogin-memory.py                # a partial CONNECT, plain TCP
    PAYLOAD=zeros scripts/bench/prelogin-memory.py           # fragments that are no CONNECT
    RINGMQ_BIN=path/to/ringmq CONFIG_EXTRA='[limits]...' scripts/bench/prelogin-memory.py
"""

import base64
import os
import resource
import selectors
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import rss_kb, self_signed, varint, wait_for_port  # noqa: E402

MODE = os.environ.get("MODE", "ws")
SOCKETS = int(os.environ.get("SOCKETS", 1000))
ANNOUNCED = int(os.environ.get("ANNOUNCED", 1_000_000))
SEND = int(os.environ.get("SEND", 2_000_000))
CHUNK = int(os.environ.get("CHUNK", 65_536))
PAYLOAD = os.environ.get("PAYLOAD", "connect")
PORT = int(os.environ.get("PORT", 18_991))
BIN = os.environ.get("RINGMQ_BIN", "target/release/ringmq")
DEADLINE_S = float(os.environ.get("DEADLINE_S", 120))
CONFIG_EXTRA = os.environ.get("CONFIG_EXTRA", "")

PORTS = {"tcp": PORT, "ws": PORT + 1, "tls": PORT + 2, "wss": PORT + 3}
HTTP_PORT = PORT + 4
MASK = b"\x01\x02\x03\x04"


def connect_head():
    """The fixed header and the start of a 3.1.1 CONNECT announcing ANNOUNCED bytes."""
    if PAYLOAD == "zeros":
        return b""
    return bytes([0x10]) + varint(ANNOUNCED) + b"\x00\x04MQTT\x04\x02\x00\x3c"


def ws_frame(fin, opcode, payload):
    """A masked client frame (built once per kind of piece)."""
    first = (0x80 if fin else 0) | opcode
    n = len(payload)
    if n < 126:
        header = bytes([first, 0x80 | n])
    elif n < 65536:
        header = bytes([first, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        header = bytes([first, 0x80 | 127]) + n.to_bytes(8, "big")
    key = (MASK * (n // 4 + 1))[:n]
    return header + MASK + bytes(a ^ b for a, b in zip(payload, key))


def stream_bytes():
    """What each socket sends after its handshakes, in pieces of about CHUNK bytes."""
    head = connect_head()
    if MODE in ("tcp", "tls"):
        data = head + bytes(max(SEND - len(head), 0))
        return [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    pieces = [ws_frame(False, 0x2, head or bytes(CHUNK))]
    body = ws_frame(False, 0x0, bytes(CHUNK))
    pieces += [body] * max(SEND // CHUNK - 1, 0)
    return pieces


def start_broker(directory):
    cert, key = self_signed(directory)
    config = os.path.join(directory, "ringmq.toml")
    with open(config, "w") as f:
        f.write(
            '[persistence]\nengine = "none"\n'
            f'[http]\nbind = "127.0.0.1:{HTTP_PORT}"\n'
            f'[[listeners.ws]]\nbind = "127.0.0.1:{PORTS["ws"]}"\npath = "/mqtt"\n'
            f'[[listeners.tls]]\nbind = "127.0.0.1:{PORTS["tls"]}"\ncert = "{cert}"\nkey = "{key}"\n'
            f'[[listeners.wss]]\nbind = "127.0.0.1:{PORTS["wss"]}"\npath = "/mqtt"\n'
            f'cert = "{cert}"\nkey = "{key}"\n' + CONFIG_EXTRA + "\n"
        )
    args = [BIN, "-l", f"127.0.0.1:{PORTS['tcp']}", "--log-level", "warn", "-c", config]
    broker = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(PORTS["wss"])
    return broker


def open_socket(context):
    """One connection of MODE, its TLS and WebSocket handshakes done (blocking)."""
    s = socket.create_connection(("127.0.0.1", PORTS[MODE]), timeout=DEADLINE_S)
    if MODE in ("tls", "wss"):
        s = context.wrap_socket(s, server_hostname="localhost")
    if MODE in ("ws", "wss"):
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(
            (f"GET /mqtt HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
             f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
             f"Sec-WebSocket-Protocol: mqtt\r\n\r\n").encode()
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                sys.exit("upgrade refused")
            answer += chunk
        if not answer.startswith(b"HTTP/1.1 101"):
            sys.exit(f"upgrade refused: {answer[:60]!r}")
    s.setblocking(False)
    return s


def attack(socks):
    """Sends every socket its pieces, round-robin; returns how many the broker closed."""
    pieces = stream_bytes()
    state = {s: [0, 0] for s in socks}  # next piece, bytes of it sent
    closed = set()
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        progress = False
        for s, (index, offset) in list(state.items()):
            if s in closed or index >= len(pieces):
                continue
            try:
                n = s.send(pieces[index][offset:])
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                continue
            except OSError:
                closed.add(s)
                continue
            progress = progress or n > 0
            offset += n
            if offset == len(pieces[index]):
                index, offset = index + 1, 0
            state[s] = [index, offset]
        if all(s in closed or state[s][0] >= len(pieces) for s in socks):
            break
        if not progress:
            time.sleep(0.01)
    time.sleep(1.0)
    for s in socks:
        # What the broker sent before closing (a close frame) comes first: read to the end.
        try:
            while s.recv(65536):
                pass
            closed.add(s)
        except (BlockingIOError, ssl.SSLWantReadError):
            pass
        except OSError:
            closed.add(s)
    return len(closed)


def partial_frame_closed():
    url = f"http://127.0.0.1:{HTTP_PORT}/metrics"
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        if line.startswith("ringmq_partial_frame_closed_total"):
            return int(float(line.split()[-1]))
    return -1


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, SOCKETS + 1000), hard))
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with tempfile.TemporaryDirectory() as directory:
        broker = start_broker(directory)
        try:
            time.sleep(0.5)
            idle = rss_kb(broker.pid)
            socks = [open_socket(context) for _ in range(SOCKETS)]
            time.sleep(0.5)
            before = rss_kb(broker.pid)
            started = time.monotonic()
            closed = attack(socks)
            took = time.monotonic() - started
            loaded = rss_kb(broker.pid)
            counted = partial_frame_closed()
            for s in socks:
                s.close()
            time.sleep(2.0)
            after = rss_kb(broker.pid)
            print(
                f"{MODE}: {SOCKETS} connections, no CONNECT completed, each sending {SEND} B "
                f"({'a CONNECT announcing %d B' % ANNOUNCED if PAYLOAD == 'connect' else 'zeros'}"
                f"{', in fragments of %d B' % CHUNK if MODE in ('ws', 'wss') else ''}): "
                f"RSS {idle} KiB idle -> {before} KiB connected -> {loaded} KiB after the attack "
                f"({(loaded - before) // 1024} MiB added in {took:.1f} s) -> {after} KiB after "
                f"close; {closed} closed by the broker; "
                f"ringmq_partial_frame_closed_total {counted}"
            )
        finally:
            broker.kill()
            broker.wait()


if __name__ == "__main__":
    main()
