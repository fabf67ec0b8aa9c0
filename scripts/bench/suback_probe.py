#!/usr/bin/env python3
"""Time from SUBSCRIBE (and UNSUBSCRIBE) to its acknowledgement, one request at a time.

RingMQ acknowledges a SUBSCRIBE only once the subscription is in effect on every shard, so this
bounds the window in which a PUBLISH from another client, sent right after the SUBSCRIBE, can
miss it (plus one loopback round trip). Each sample subscribes to a new topic filter and then
unsubscribes it, so every sample is a real change of the subscription table.

usage: suback_probe.py HOST PORT SAMPLES  -> one JSON line of percentiles in microseconds
"""
import json
import socket
import sys
import time


def varint(n):
    out = bytearray()
    while True:
        byte = n % 128
        n //= 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def string(text):
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


def packet(first, body):
    return bytes([first]) + varint(len(body)) + body


def read_packet(sock, buf):
    """Reads one whole packet; returns (type nibble, body, rest of buf)."""
    while True:
        if len(buf) >= 2:
            length, shift, i = 0, 0, 1
            while i < len(buf) and i <= 4:
                length += (buf[i] & 0x7F) << shift
                shift += 7
                if buf[i] & 0x80 == 0:
                    break
                i += 1
            else:
                i = None
            if i is not None and len(buf) >= i + 1 + length:
                start = i + 1
                return buf[0] >> 4, buf[start:start + length], buf[start + length:]
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk


def percentiles(samples):
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return {
        "n": len(ordered),
        "p50_us": pick(0.50),
        "p90_us": pick(0.90),
        "p99_us": pick(0.99),
        "max_us": ordered[-1],
    }


def main():
    host, port, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    connect = string("MQTT") + bytes([4, 2]) + (60).to_bytes(2, "big") + string("suback-probe")
    sock.sendall(packet(0x10, connect))
    kind, _, buf = read_packet(sock, b"")
    assert kind == 2, "CONNACK expected"
    sub_us, unsub_us = [], []
    for n in range(samples):
        pid = (n % 65000) + 1
        topic = string(f"suback/probe/{n}")
        for first, body, want, out in (
            (0x82, pid.to_bytes(2, "big") + topic + b"\x00", 9, sub_us),
            (0xA2, pid.to_bytes(2, "big") + topic, 11, unsub_us),
        ):
            start = time.perf_counter_ns()
            sock.sendall(packet(first, body))
            while True:
                kind, body_in, buf = read_packet(sock, buf)
                if kind == want and body_in[:2] == pid.to_bytes(2, "big"):
                    break
            out.append((time.perf_counter_ns() - start) // 1000)
    sock.sendall(bytes([0xE0, 0]))
    sock.close()
    print(json.dumps({"suback": percentiles(sub_us), "unsuback": percentiles(unsub_us)}))


if __name__ == "__main__":
    main()
