#!/usr/bin/env python3
"""Interop checks of a running RingMQ broker with paho-mqtt (2.x), MQTT 3.1.1 or 5.0.

Usage: paho_check.py --port PORT --protocol 311|5
Prints PASS/FAIL per check; the exit status is the number of failed checks.
Every wait is bounded (WAIT seconds), so the script always ends.
"""

import argparse
import queue
import sys
import time
import uuid

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

WAIT = 5.0


class Client:
    """A paho client running its network loop in a thread, with received messages in a queue."""

    def __init__(self, port, protocol, name, will=None):
        version = mqtt.MQTTv5 if protocol == "5" else mqtt.MQTTv311
        self.protocol = protocol
        self.client_id = f"{name}-{uuid.uuid4().hex[:8]}"
        self.mqtt = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id, protocol=version
        )
        self.messages = queue.Queue()
        self.acks = queue.Queue()
        self.mqtt.on_message = lambda c, u, msg: self.messages.put(msg)
        self.mqtt.on_subscribe = lambda c, u, mid, codes, props: self.acks.put(("sub", mid))
        self.mqtt.on_publish = lambda c, u, mid, code, props: self.acks.put(("pub", mid))
        if will is not None:
            topic, payload = will
            self.mqtt.will_set(topic, payload, qos=1)
        connected = queue.Queue()
        self.mqtt.on_connect = lambda c, u, flags, code, props: connected.put(code)
        self.mqtt.connect("127.0.0.1", port, keepalive=30)
        self.mqtt.loop_start()
        code = connected.get(timeout=WAIT)
        if code != 0:
            raise AssertionError(f"CONNACK {code}")

    def subscribe(self, topic, qos):
        _, mid = self.mqtt.subscribe(topic, qos)
        self._wait_ack("sub", mid)

    def publish(self, topic, payload, qos, retain=False, properties=None):
        info = self.mqtt.publish(topic, payload, qos=qos, retain=retain, properties=properties)
        self._wait_ack("pub", info.mid)

    def _wait_ack(self, kind, mid):
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                got = self.acks.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if got == (kind, mid):
                return
        raise AssertionError(f"no {kind} acknowledgement for message id {mid}")

    def receive(self):
        try:
            return self.messages.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError("no message within the wait") from None

    def close(self, abruptly=False):
        if abruptly:
            # Close the socket under paho: the broker sees a connection lost without DISCONNECT.
            self.mqtt.socket().close()
        else:
            self.mqtt.disconnect()
        self.mqtt.loop_stop()


def check_qos(port, protocol, prefix):
    sub = Client(port, protocol, "sub")
    sub.subscribe(f"{prefix}/qos/#", 2)
    pub = Client(port, protocol, "pub")
    for qos in (0, 1, 2):
        pub.publish(f"{prefix}/qos/{qos}", f"payload-{qos}".encode(), qos)
    got = {}
    for _ in range(3):
        msg = sub.receive()
        got[msg.topic] = (msg.qos, msg.payload)
    for qos in (0, 1, 2):
        assert got[f"{prefix}/qos/{qos}"] == (qos, f"payload-{qos}".encode()), got
    sub.close()
    pub.close()


def check_retained(port, protocol, prefix):
    pub = Client(port, protocol, "retainer")
    topic = f"{prefix}/retained"
    pub.publish(topic, b"kept", 1, retain=True)
    late = Client(port, protocol, "late")
    late.subscribe(topic, 1)
    msg = late.receive()
    assert msg.retain and msg.payload == b"kept", (msg.retain, msg.payload)
    pub.publish(topic, b"", 1, retain=True)
    later = Client(port, protocol, "later")
    later.subscribe(topic, 1)
    try:
        msg = later.messages.get(timeout=0.5)
        raise AssertionError(f"cleared retained message still sent: {msg.payload!r}")
    except queue.Empty:
        pass
    for client in (pub, late, later):
        client.close()


def check_will(port, protocol, prefix):
    topic = f"{prefix}/will"
    watcher = Client(port, protocol, "watcher")
    watcher.subscribe(topic, 1)
    dying = Client(port, protocol, "dying", will=(topic, b"gone"))
    polite = Client(port, protocol, "polite", will=(topic, b"must not appear"))
    polite.close()
    dying.close(abruptly=True)
    msg = watcher.receive()
    assert msg.payload == b"gone", msg.payload
    try:
        extra = watcher.messages.get(timeout=0.5)
        raise AssertionError(f"will after a normal DISCONNECT: {extra.payload!r}")
    except queue.Empty:
        pass
    watcher.close()


def check_v5_properties(port, protocol, prefix):
    topic = f"{prefix}/props"
    sub = Client(port, protocol, "props-sub")
    sub.subscribe(topic, 1)
    pub = Client(port, protocol, "props-pub")
    props = Properties(PacketTypes.PUBLISH)
    props.UserProperty = [("k1", "v1"), ("k2", "v2")]
    props.ContentType = "application/json"
    props.ResponseTopic = f"{prefix}/reply"
    props.CorrelationData = b"corr-42"
    pub.publish(topic, b"{}", 1, properties=props)
    msg = sub.receive()
    got = msg.properties
    assert got.UserProperty == [("k1", "v1"), ("k2", "v2")], got.UserProperty
    assert got.ContentType == "application/json", got.ContentType
    assert got.ResponseTopic == f"{prefix}/reply", got.ResponseTopic
    assert got.CorrelationData == b"corr-42", got.CorrelationData
    sub.close()
    pub.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--protocol", choices=["311", "5"], required=True)
    args = parser.parse_args()
    prefix = f"interop/paho{args.protocol}"
    checks = [check_qos, check_retained, check_will]
    if args.protocol == "5":
        checks.append(check_v5_properties)
    failed = 0
    for check in checks:
        name = f"paho {args.protocol}: {check.__name__[len('check_'):]}"
        try:
            check(args.port, args.protocol, prefix)
            print(f"PASS {name}")
        except Exception as error:  # every failure is reported, then the next check runs
            failed += 1
            print(f"FAIL {name}: {error!r}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
