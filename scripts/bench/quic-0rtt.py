#!/usr/bin/env python3
"""What 0-RTT saves a device that reconnects over a slow network (issue 51): the time from the
start of a connection to the CONNACK and to the PUBACK of a QoS 1 PUBLISH sent right behind
the CONNECT, over a link with DELAY_MS each way, for

- `quic-0rtt`: MQTT over QUIC resuming with the ticket of the previous connection, CONNECT and
  PUBLISH in its first flight (0-RTT; each ticket is single-use, each connection leaves new ones);
- `quic-full`: MQTT over QUIC with a full handshake (CONNECT and PUBLISH sent once it completes);
- `tls`: MQTT over TLS 1.3 over TCP (the TCP handshake, the TLS handshake, then the packets).

Starts ringmq (memory only, 2 shards, a [[listeners.quic]] and a [[listeners.tls]] on loopback
with a throwaway certificate) behind two relays on loopback (UDP for QUIC, TCP for TLS) that
hold every datagram or chunk DELAY_MS before passing it on, in order. ROUNDS connections per
mode; prints one JSON line per mode: median and p90 of both times in ms and in round trips
(2 x DELAY_MS). QUIC: Python's aioquic (`RINGMQ_AIOQUIC_DIR`, as the test command installs it);
TLS: the standard library's ssl (the TCP relay accepts locally and delays only the SYN's way
to the broker, so TLS's figure is half a round trip shorter than on a real network). Loopback
only; bounded in count and time.

    RINGMQ_BIN=target/release/ringmq scripts/bench/quic-0rtt.py
    DELAY_MS=50 ROUNDS=30 scripts/bench/quic-0rtt.py
"""

import asyncio
import json
import os
import socket
import ssl
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (  # noqa: E402
    frame, free_port, self_signed, start_tls_quic_broker, string,
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
DELAY_S = float(os.environ.get("DELAY_MS", 25)) / 1000
ROUNDS = int(os.environ.get("ROUNDS", 20))
MODES = os.environ.get("MODES", "quic-0rtt quic-full tls").split()
WAIT_S = 30
PORTS = {"tcp": free_port(), "tls": free_port(), "quic": free_port(socket.SOCK_DGRAM)}
CONNACK, PUBACK = 0x20, 0x40


def first_packets(client_id):
    """An MQTT 5.0 CONNECT (clean start, no Will) and a QoS 1 PUBLISH (packet id 1)."""
    connect = frame(0x10, string("MQTT") + bytes([5, 0x02, 0, 60, 0]) + string(client_id))
    publish = frame(0x32, string("reconnect/probe") + b"\x00\x01\x00" + b"payload")
    return connect + publish


class UdpRelay(asyncio.DatagramProtocol):
    """Clients' datagrams to the broker and back, each held DELAY_S: one socket towards the
    broker per client address."""

    def __init__(self, loop, server):
        self.loop, self.server, self.backs, self.front = loop, server, {}, None

    def connection_made(self, transport):
        self.front = transport

    def datagram_received(self, data, client):
        self.loop.call_later(DELAY_S, self.loop.create_task, self.forward(data, client))

    async def forward(self, data, client):
        if client not in self.backs:
            self.backs[client] = asyncio.ensure_future(self.open_back(client))
        back = await self.backs[client]
        back.sendto(data)

    async def open_back(self, client):
        """The socket towards the broker for `client` (made once: datagrams that wait for it
        go on in order)."""
        relay = self

        class Back(asyncio.DatagramProtocol):
            def datagram_received(self, reply, _):
                relay.loop.call_later(DELAY_S, relay.front.sendto, reply, client)

        back, _ = await self.loop.create_datagram_endpoint(Back, remote_addr=self.server)
        return back


async def delayed_pipe(reader, writer):
    """Copies `reader` to `writer`, each chunk DELAY_S after it arrived, in order."""
    queue = asyncio.Queue()

    async def deliver():
        while (item := await queue.get()) is not None:
            due, chunk = item
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            writer.write(chunk)
            await writer.drain()
        writer.close()

    sender = asyncio.ensure_future(deliver())
    while chunk := await reader.read(65536):
        queue.put_nowait((time.monotonic() + DELAY_S, chunk))
    queue.put_nowait(None)
    await sender


async def tcp_relay_client(reader, writer):
    await asyncio.sleep(DELAY_S)  # the SYN's way to the broker
    back_reader, back_writer = await asyncio.open_connection("127.0.0.1", PORTS["tls"])
    await asyncio.gather(delayed_pipe(reader, back_writer), delayed_pipe(back_reader, writer),
                         return_exceptions=True)


class Arrivals:
    """The MQTT stream's bytes as they arrive: when each packet type was first whole."""

    def __init__(self, began):
        self.began, self.seen, self.buffer = began, {}, b""

    def take(self, data):
        self.buffer += data
        while len(self.buffer) >= 2:
            length, shift, at = 0, 0, 1
            while at < len(self.buffer):
                byte = self.buffer[at]
                length |= (byte & 0x7F) << shift
                shift, at = shift + 7, at + 1
                if not byte & 0x80:
                    break
            else:
                return
            if len(self.buffer) < at + length:
                return
            kind = self.buffer[0] & 0xF0
            self.seen.setdefault(kind, time.monotonic() - self.began)
            self.buffer = self.buffer[at + length:]

    def complete(self):
        return PUBACK in self.seen


class Probe(QuicConnectionProtocol):
    """Notes when the CONNACK and the PUBACK arrive on the MQTT stream."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.arrivals, self.done = None, asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived):
            self.arrivals.take(event.data)
            if self.arrivals.complete():
                self.done.set()


async def quic_round(port, cert, n, ticket_box, resume):
    config = QuicConfiguration(is_client=True, alpn_protocols=["mqtt"], idle_timeout=30)
    config.load_verify_locations(cert)
    config.server_name = "localhost"
    if resume:
        config.session_ticket = ticket_box.pop() if ticket_box else None
    began = time.monotonic()
    manager = quic_connect("127.0.0.1", port, configuration=config, create_protocol=Probe,
                           session_ticket_handler=ticket_box.append, wait_connected=False)
    protocol = await manager.__aenter__()
    protocol.arrivals = Arrivals(began)
    stream = protocol._quic.get_next_available_stream_id()
    protocol._quic.send_stream_data(stream, first_packets(f"reconnect-{n}"))
    protocol.transmit()
    await asyncio.wait_for(protocol.done.wait(), WAIT_S)
    # The new tickets follow the handshake (after the PUBACK, when that came in 0-RTT): wait
    # for one before closing, so the next round can resume.
    tickets = len(ticket_box)
    for _ in range(100):
        if len(ticket_box) > tickets:
            break
        await asyncio.sleep(DELAY_S / 5)
    early = resume and protocol._quic.tls.early_data_accepted
    await manager.__aexit__(None, None, None)
    seen = protocol.arrivals.seen
    return seen[CONNACK], seen[PUBACK], early


async def tls_round(port, cert, n):
    context = ssl.create_default_context(cafile=cert)
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                   server_hostname="localhost")
    writer.write(first_packets(f"reconnect-tls-{n}"))
    arrivals = Arrivals(began)
    while not arrivals.complete():
        arrivals.take(await asyncio.wait_for(reader.read(65536), WAIT_S))
    writer.close()
    return arrivals.seen[CONNACK], arrivals.seen[PUBACK], False


def summary(mode, rounds):
    rtt = 2 * DELAY_S
    line = {"mode": mode, "delay_ms_each_way": DELAY_S * 1000, "rounds": len(rounds),
            "early_data_accepted": sum(1 for r in rounds if r[2])}
    for name, index in (("connack", 0), ("puback", 1)):
        times = sorted(r[index] for r in rounds)
        median, p90 = statistics.median(times), times[int(0.9 * (len(times) - 1))]
        line[f"{name}_median_ms"] = round(median * 1000, 1)
        line[f"{name}_p90_ms"] = round(p90 * 1000, 1)
        line[f"{name}_median_rtts"] = round(median / rtt, 2)
    return line


async def run(cert):
    loop = asyncio.get_running_loop()
    # The relays' tasks are cancelled when the run ends: not an error.
    loop.set_exception_handler(lambda _, context: None)
    udp_port, tcp_port = free_port(socket.SOCK_DGRAM), free_port()
    await loop.create_datagram_endpoint(lambda: UdpRelay(loop, ("127.0.0.1", PORTS["quic"])),
                                        local_addr=("127.0.0.1", udp_port))
    await asyncio.start_server(tcp_relay_client, "127.0.0.1", tcp_port)
    tickets = []
    # A first connection for a ticket.
    await quic_round(udp_port, cert, -1, tickets, False)
    for mode in MODES:
        rounds = []
        for n in range(ROUNDS):
            if mode == "tls":
                rounds.append(await tls_round(tcp_port, cert, n))
            else:
                rounds.append(await quic_round(udp_port, cert, n, tickets, mode == "quic-0rtt"))
        print(json.dumps(summary(mode, rounds)), flush=True)


def main():
    with tempfile.TemporaryDirectory() as directory:
        cert, key = self_signed(directory)
        broker = start_tls_quic_broker(BIN, directory, cert, key, PORTS)
        try:
            asyncio.run(asyncio.wait_for(run(cert), 600))
        finally:
            broker.terminate()
            broker.wait(timeout=30)


if __name__ == "__main__":
    main()
