#!/usr/bin/env python3
"""How often a PUBLISH sent right after another client's SUBSCRIBE misses it, as conformance
suites send them: B's SUBSCRIBE, then at once A's PUBLISH, without waiting for the SUBACK.

Each round B subscribes to a new topic and A publishes a probe to it straight after; once B
has its SUBACK, A publishes a fence to the same topic, and the round counts a miss when the
fence reaches B without the probe before it. B then unsubscribes. PAIRS pairs of clients run
one after the other (the kernel spreads connections over the shards, so some pairs have A and
B on different shards and some on the same one). A one-threaded broker misses none.

usage: subscribe_order_probe.py HOST PORT PAIRS ROUNDS  -> one JSON line
"""
import json
import socket
import sys
import time

from suback_probe import packet, read_packet, string


def connected(host, port, client_id):
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    connect = string("MQTT") + bytes([4, 2]) + (60).to_bytes(2, "big") + string(client_id)
    sock.sendall(packet(0x10, connect))
    kind, _, buf = read_packet(sock, b"")
    assert kind == 2 and buf == b"", "CONNACK expected"
    return sock


def publish(sock, topic, payload):
    sock.sendall(packet(0x30, string(topic) + payload))


class Subscriber:
    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def read_until(self, want, stop):
        """Reads packets until `stop(kind, body)`; the payloads of PUBLISHes met on the way."""
        payloads = []
        while True:
            kind, body, self.buf = read_packet(self.sock, self.buf)
            if kind == 3:
                length = int.from_bytes(body[:2], "big")
                payloads.append(body[2 + length:])
            if stop(kind, body):
                return payloads


def one_round(a, b, n):
    pid = (n % 65000) + 1
    topic = f"order/probe/{n}"
    probe, fence = f"probe {n}".encode(), f"fence {n}".encode()
    b.sock.sendall(packet(0x82, pid.to_bytes(2, "big") + string(topic) + b"\x00"))
    publish(a, topic, probe)
    seen = b.read_until(9, lambda kind, body: kind == 9)
    publish(a, topic, fence)
    seen += b.read_until(3, lambda kind, body: kind == 3 and body.endswith(fence))
    b.sock.sendall(packet(0xA2, pid.to_bytes(2, "big") + string(topic)))
    b.read_until(11, lambda kind, body: kind == 11)
    return probe not in seen[: seen.index(fence)]


def main():
    host, port, pairs, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    misses, start = 0, time.monotonic()
    for p in range(pairs):
        a = connected(host, port, f"order-a-{p}")
        b = Subscriber(connected(host, port, f"order-b-{p}"))
        misses += sum(one_round(a, b, n) for n in range(rounds))
        for sock in (a, b.sock):
            sock.sendall(bytes([0xE0, 0]))
            sock.close()
    print(json.dumps({
        "pairs": pairs,
        "rounds": pairs * rounds,
        "missed": misses,
        "seconds": round(time.monotonic() - start, 1),
    }))


if __name__ == "__main__":
    main()
