#!/usr/bin/env python3
"""paho-mqtt (2.x) over TLS, WebSocket and secure WebSocket against a running RingMQ broker.

Usage: paho_transport_check.py --tls-port P --ws-port P --wss-port P --cafile CA.pem
For each transport and MQTT 3.1.1 and 5.0: connect, subscribe, publish QoS 1 and receive it,
and receive what a client on another transport published. Prints PASS/FAIL per check; the exit
status is the number of failed checks. Every wait is bounded, so the script always ends.
"""

import argparse
import queue
import ssl
import sys
import uuid

import paho.mqtt.client as mqtt

WAIT = 5.0


class Client:
    """A paho client on one transport, its network loop in a thread."""

    def __init__(self, transport, port, protocol, cafile):
        version = mqtt.MQTTv5 if protocol == "5" else mqtt.MQTTv311
        self.mqtt = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=f"{transport}-{protocol}-{uuid.uuid4().hex[:8]}",
            protocol=version,
            transport="websockets" if transport in ("ws", "wss") else "tcp",
        )
        if transport in ("ws", "wss"):
            self.mqtt.ws_set_options(path="/mqtt")
        if transport in ("tls", "wss"):
            self.mqtt.tls_set(ca_certs=cafile, cert_reqs=ssl.CERT_REQUIRED)
        self.messages = queue.Queue()
        self.subscribed = queue.Queue()
        connected = queue.Queue()
        self.mqtt.on_message = lambda c, u, msg: self.messages.put(msg)
        self.mqtt.on_subscribe = lambda c, u, mid, codes, props: self.subscribed.put(codes)
        self.mqtt.on_connect = lambda c, u, flags, code, props: connected.put(code)
        self.mqtt.connect("127.0.0.1", port, keepalive=30)
        self.mqtt.loop_start()
        code = connected.get(timeout=WAIT)
        if code.is_failure:
            raise RuntimeError(f"CONNACK {code}")

    def subscribe(self, topic):
        self.mqtt.subscribe(topic, qos=1)
        self.subscribed.get(timeout=WAIT)

    def publish(self, topic, payload):
        self.mqtt.publish(topic, payload, qos=1).wait_for_publish(timeout=WAIT)

    def expect(self, topic, payload):
        msg = self.messages.get(timeout=WAIT)
        if msg.topic != topic or msg.payload != payload:
            raise RuntimeError(f"got {msg.topic}={msg.payload!r}, wanted {topic}={payload!r}")

    def close(self):
        self.mqtt.disconnect()
        self.mqtt.loop_stop()


def check(name, body, failures):
    try:
        body()
        print(f"PASS paho {name}")
    except Exception as error:  # noqa: BLE001 - every failure is reported, none stops the run
        print(f"FAIL paho {name}: {error!r}")
        failures.append(name)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tls-port", type=int, required=True)
    parser.add_argument("--ws-port", type=int, required=True)
    parser.add_argument("--wss-port", type=int, required=True)
    parser.add_argument("--cafile", required=True)
    args = parser.parse_args()
    ports = {"tls": args.tls_port, "ws": args.ws_port, "wss": args.wss_port}
    failures = []
    for transport, port in ports.items():
        for protocol in ("311", "5"):

            def round_trip(transport=transport, port=port, protocol=protocol):
                client = Client(transport, port, protocol, args.cafile)
                topic = f"interop/{transport}/{protocol}"
                client.subscribe(topic)
                client.publish(topic, b"over " + transport.encode())
                client.expect(topic, b"over " + transport.encode())
                client.close()

            check(f"{transport} {protocol} round trip", round_trip, failures)

    def across():
        listeners = {t: Client(t, p, "5", args.cafile) for t, p in ports.items()}
        for client in listeners.values():
            client.subscribe("interop/across")
        for sender in ports:
            listeners[sender].publish("interop/across", sender.encode())
            for client in listeners.values():
                client.expect("interop/across", sender.encode())
        for client in listeners.values():
            client.close()

    check("tls/ws/wss see each other's messages", across, failures)
    sys.exit(len(failures))


if __name__ == "__main__":
    main()
