#!/usr/bin/env python3
"""MQTT over QUIC against MQTT over TLS (issue 51): broker RSS per idle connection and broker
CPU per handshake, same run, same broker.

Starts ringmq (memory only, 2 shards, a [[listeners.quic]] and a [[listeners.tls]] on loopback
with a throwaway self-signed certificate), then for each MODE in MODES (default "quic tls"):
opens CONNECTIONS connections (QUIC: Python's aioquic, ALPN "mqtt", the MQTT connection on its
first bidirectional stream; TLS: the standard library's ssl), each logged in with an MQTT 5.0
CONNECT (keep-alive 0) and its CONNACK read, holds them, and prints one JSON line: connections,
broker RSS before and with them (KiB), RSS per connection (bytes), broker CPU seconds for the
handshakes and CONNECTs, CPU per connection (µs), connections per wall second. Then closes them
and lets the broker settle before the next mode. Needs aioquic (`RINGMQ_AIOQUIC_DIR`, as the
test command installs it) and the openssl command; loopback only; bounded in count and time.

    RINGMQ_BIN=target/release/ringmq scripts/bench/quic-idle.py
    CONNECTIONS=5000 MODES=quic scripts/bench/quic-idle.py
"""

import asyncio
import json
import os
import socket
import ssl
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (  # noqa: E402
    cpu_seconds, frame, free_port, recv_packet, rss_kb, self_signed, start_tls_quic_broker,
    string,
)

AIOQUIC = os.environ.get(
    "RINGMQ_AIOQUIC_DIR", os.path.expanduser("~/.cache/ringmq-test/aioquic")
)
sys.path.insert(0, AIOQUIC)
from aioquic.asyncio import connect as quic_connect  # noqa: E402
from aioquic.asyncio.protocol import QuicConnectionProtocol  # noqa: E402
from aioquic.quic.configuration import QuicConfiguration  # noqa: E402
from aioquic.quic.events import StreamDataReceived  # noqa: E402

BIN = os.environ.get("RINGMQ_BIN", "target/release/ringmq")
CONNECTIONS = int(os.environ.get("CONNECTIONS", 2000))
MODES = os.environ.get("MODES", "quic tls").split()
SETTLE_S = float(os.environ.get("SETTLE_S", 3))
DEADLINE_S = 300


PORTS = {"tcp": free_port(), "tls": free_port(), "quic": free_port(socket.SOCK_DGRAM)}


def connect_packet(client_id):
    header = string("MQTT") + bytes([5, 0x02]) + (0).to_bytes(2, "big") + b"\x00"
    return frame(0x10, header + string(client_id))


class Stream(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.got = asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived) and event.data[:1] == b"\x20":
            self.got.set()


async def open_quic(cert, count):
    config = QuicConfiguration(is_client=True, alpn_protocols=["mqtt"], idle_timeout=600)
    config.load_verify_locations(cert)
    config.server_name = "localhost"
    held = []
    for n in range(count):
        manager = quic_connect("127.0.0.1", PORTS["quic"], configuration=config,
                               create_protocol=Stream)
        protocol = await manager.__aenter__()
        stream = protocol._quic.get_next_available_stream_id()
        protocol._quic.send_stream_data(stream, connect_packet(f"quic-idle-{n}"))
        protocol.transmit()
        await asyncio.wait_for(protocol.got.wait(), 30)
        held.append(manager)
    return held


def open_tls(cert, count):
    context = ssl.create_default_context(cafile=cert)
    held = []
    for n in range(count):
        s = socket.create_connection(("127.0.0.1", PORTS["tls"]), timeout=30)
        s = context.wrap_socket(s, server_hostname="localhost")
        s.sendall(connect_packet(f"tls-idle-{n}"))
        first, _ = recv_packet(s)
        assert first == 0x20, first
        held.append(s)
    return held


def measure(broker, mode, cert):
    time.sleep(SETTLE_S)
    before_rss, before_cpu, began = rss_kb(broker.pid), cpu_seconds(broker.pid), time.time()
    loop = asyncio.new_event_loop()
    if mode == "quic":
        held = loop.run_until_complete(open_quic(cert, CONNECTIONS))
    else:
        held = open_tls(cert, CONNECTIONS)
    wall = time.time() - began
    cpu = cpu_seconds(broker.pid) - before_cpu
    time.sleep(SETTLE_S)
    with_rss = rss_kb(broker.pid)
    print(json.dumps({
        "mode": mode, "connections": CONNECTIONS, "rss_before_kib": before_rss,
        "rss_with_kib": with_rss,
        "rss_per_connection_bytes": round((with_rss - before_rss) * 1024 / CONNECTIONS),
        "broker_cpu_s": round(cpu, 3), "cpu_per_connection_us": round(cpu / CONNECTIONS * 1e6),
        "connections_per_s": round(CONNECTIONS / wall),
    }), flush=True)
    if mode == "quic":
        for manager in held:
            loop.run_until_complete(manager.__aexit__(None, None, None))
    else:
        for s in held:
            s.close()
    loop.close()


def main():
    with tempfile.TemporaryDirectory() as directory:
        cert, key = self_signed(directory)
        broker = start_tls_quic_broker(
            BIN, directory, cert, key, PORTS, "max_connections_per_shard = 100000\n"
        )
        try:
            for mode in MODES:
                measure(broker, mode, cert)
        finally:
            broker.terminate()
            broker.wait(timeout=DEADLINE_S)


if __name__ == "__main__":
    main()
