#!/usr/bin/env python3
"""Splits the latency probe's round trip at the broker, from a packet capture of its connection.

Usage: latency_split.py CAPTURE.pcap PROBE_PORT

The probe (`ringmq-bench latency`) publishes QoS 0 to a topic it subscribes to, on one
connection, and stamps each payload with its send time (`CLOCK_REALTIME` ns, then the publisher
index and a sequence number: crates/bench/src/payload.rs). On loopback a packet is captured in
the sender's context, so per message:
  client: stamp -> the PUBLISH leaves the probe (its send path);
  broker: the PUBLISH reaches the broker -> the broker sends the copy back (everything the
          broker does, including waiting for a CPU).
What follows the broker's send (the probe's wake-up) is the probe's latency minus both.
The capture needs nanosecond stamps (`tcpdump --time-stamp-precision=nano`).
"""

import struct
import sys

PCAP_NS_MAGIC = 0xA1B23C4D
ETHERNET_HEADER = 14
STAMP = struct.Struct("<QII")  # sent_ns, publisher, seq
MAX_CLOCK_GAP_NS = 5 * 10**9


def packets(path):
    """(timestamp ns, frame bytes) of each captured packet."""
    with open(path, "rb") as f:
        data = f.read()
    (magic,) = struct.unpack_from("<I", data, 0)
    if magic != PCAP_NS_MAGIC:
        sys.exit(f"{path}: not a nanosecond pcap (magic {magic:#x}); capture with "
                 "--time-stamp-precision=nano")
    offset = 24
    while offset + 16 <= len(data):
        seconds, nanos, captured, _ = struct.unpack_from("<IIII", data, offset)
        offset += 16
        yield seconds * 10**9 + nanos, data[offset:offset + captured]
        offset += captured


def tcp_payload(frame):
    """(source port, TCP payload) of an IPv4 frame."""
    ip = frame[ETHERNET_HEADER:]
    tcp = ip[(ip[0] & 0x0F) * 4:]
    (source_port,) = struct.unpack_from(">H", tcp, 0)
    return source_port, tcp[(tcp[12] >> 4) * 4:]


def publish_payloads(stream):
    """The application payload's first bytes of each PUBLISH in one segment (3.1.1 or 5.0:
    the caller picks the offset whose stamp fits the capture's clock)."""
    i = 0
    while i < len(stream):
        header, j, length, shift = stream[i], i + 1, 0, 0
        while j < len(stream):
            byte = stream[j]
            length |= (byte & 0x7F) << shift
            shift += 7
            j += 1
            if byte < 0x80:
                break
        if header >> 4 == 3 and j + 2 <= len(stream):
            (topic_len,) = struct.unpack_from(">H", stream, j)
            body = j + 2 + topic_len + (2 if header & 0x06 else 0)
            yield stream[body:body + STAMP.size + 1]
        i = j + length


def stamp_near(candidate, captured_ns):
    """The stamp at offset 0 (3.1.1) or 1 (5.0, empty properties) that fits the clock."""
    for offset in (0, 1):
        if len(candidate) >= offset + STAMP.size:
            sent_ns, _, seq = STAMP.unpack_from(candidate, offset)
            if abs(sent_ns - captured_ns) < MAX_CLOCK_GAP_NS:
                return sent_ns, seq
    return None


def probe_messages(path, probe_port):
    """(stamp, reached the broker, left the broker) in ns, per probe message."""
    sent, inbound, outbound = {}, {}, {}
    for captured_ns, frame in packets(path):
        source_port, stream = tcp_payload(frame)
        for candidate in publish_payloads(stream):
            stamp = stamp_near(candidate, captured_ns)
            if stamp is None:
                continue
            sent_ns, seq = stamp
            if source_port == probe_port:
                sent[seq], inbound[seq] = sent_ns, captured_ns
            else:
                outbound[seq] = captured_ns
    return [(sent[s], inbound[s], outbound[s]) for s in sorted(sent) if s in outbound]


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = probe_messages(sys.argv[1], int(sys.argv[2]))
    if not rows:
        sys.exit("no probe message seen in both directions")
    parts = {
        "client (stamp -> wire)": [inbound - sent for sent, inbound, _ in rows],
        "broker (wire in -> wire out)": [outbound - inbound for _, inbound, outbound in rows],
    }
    for name, values in parts.items():
        figures = " ".join(f"p{int(q * 100)} {percentile(values, q) / 1000:,.0f}"
                           for q in (0.5, 0.9, 0.99))
        print(f"{name:30s} n={len(values)} {figures} max {max(values) / 1000:,.0f} us")


if __name__ == "__main__":
    main()
