"""A third-party QUIC stack against RingMQ's MQTT over QUIC: aioquic (installed by
scripts/test.d/00-tools.sh into RINGMQ_AIOQUIC_DIR) opens a connection with ALPN "mqtt",
speaks MQTT 5.0 on its first bidirectional stream (packets encoded here), subscribes to a
topic, publishes one QoS 1 message to it and prints one line: "OK <topic> <payload>" when the
CONNACK, SUBACK, PUBACK and the message itself came back, else "ERROR <what>".

usage: quic_aioquic.py HOST PORT CA_FILE CLIENT_ID
"""

import asyncio
import sys

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamDataReceived

TOPIC = "interop/aioquic"
PAYLOAD = b"hello from aioquic"


def varint(n):
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def string(text):
    data = text.encode()
    return len(data).to_bytes(2, "big") + data


def packet(first, body):
    return bytes([first]) + varint(len(body)) + body


def connect_packet(client_id):
    # protocol name, level 5, clean start, keep alive 60, no properties
    header = string("MQTT") + bytes([5, 0x02]) + (60).to_bytes(2, "big") + b"\x00"
    return packet(0x10, header + string(client_id))


def subscribe_packet(packet_id, topic):
    return packet(0x82, packet_id.to_bytes(2, "big") + b"\x00" + string(topic) + b"\x01")


def publish_packet(packet_id, topic, payload):
    return packet(0x32, string(topic) + packet_id.to_bytes(2, "big") + b"\x00" + payload)


def puback_packet(packet_id):
    return packet(0x40, packet_id.to_bytes(2, "big"))


class MqttStream(QuicConnectionProtocol):
    """Collects the stream's bytes and hands out whole MQTT packets."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.buffer = b""
        self.arrived = asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived):
            self.buffer += event.data
            self.arrived.set()

    async def next_packet(self):
        while True:
            parsed = self.take()
            if parsed:
                return parsed
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 10)

    def take(self):
        if len(self.buffer) < 2:
            return None
        length, shift, at = 0, 0, 1
        while True:
            if at >= len(self.buffer):
                return None
            byte = self.buffer[at]
            length += (byte & 0x7F) << shift
            shift += 7
            at += 1
            if not byte & 0x80:
                break
        if len(self.buffer) < at + length:
            return None
        first, body = self.buffer[0], self.buffer[at : at + length]
        self.buffer = self.buffer[at + length :]
        return first, body


async def run(host, port, ca, client_id):
    config = QuicConfiguration(is_client=True, alpn_protocols=["mqtt"])
    config.load_verify_locations(ca)
    config.server_name = "localhost"
    async with connect(host, port, configuration=config, create_protocol=MqttStream) as quic:
        stream = quic._quic.get_next_available_stream_id()

        def send(data):
            quic._quic.send_stream_data(stream, data)
            quic.transmit()

        send(connect_packet(client_id))
        first, body = await quic.next_packet()
        if first != 0x20 or body[1] != 0:
            return f"ERROR CONNACK {first:#x} {body.hex()}"
        send(subscribe_packet(1, TOPIC))
        first, body = await quic.next_packet()
        if first != 0x90 or body[-1] != 1:
            return f"ERROR SUBACK {first:#x} {body.hex()}"
        send(publish_packet(2, TOPIC, PAYLOAD))
        acked, message = False, None
        while not (acked and message):
            first, body = await quic.next_packet()
            if first == 0x40 and body[:2] == (2).to_bytes(2, "big"):
                acked = True
            elif first >> 4 == 3:
                topic_len = int.from_bytes(body[:2], "big")
                topic = body[2 : 2 + topic_len].decode()
                rest = body[2 + topic_len :]
                packet_id, rest = rest[:2], rest[2:]
                props = rest[0]
                message = (topic, rest[1 + props :])
                send(puback_packet(int.from_bytes(packet_id, "big")))
        send(packet(0xE0, b"\x00\x00"))
        return f"OK {message[0]} {message[1].decode()}"


def main():
    host, port, ca, client_id = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    try:
        print(asyncio.run(asyncio.wait_for(run(host, port, ca, client_id), 30)))
    except Exception as error:  # noqa: BLE001 - the test reads the line
        print(f"ERROR {type(error).__name__}: {error}")


if __name__ == "__main__":
    main()
