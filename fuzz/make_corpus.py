#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/<target>/ from the codec's golden fixtures
(crates/codec/tests/golden_v3.rs and golden_v5.rs). Re-run after changing the fixtures."""
import pathlib

V3 = {
    "connect_minimal": "10 0E 00 04 4D 51 54 54 04 02 00 3C 00 02 63 31",
    "connect_3_1": "10 10 00 06 4D 51 49 73 64 70 03 02 00 3C 00 02 63 31",
    "connect_will_credentials": "10 1F 00 04 4D 51 54 54 04 CE 00 0A 00 02 69 64 00 03 77 2F 74"
    " 00 03 62 79 65 00 01 75 00 02 70 77",
    "connack": "20 02 01 00",
    "connack_refused": "20 02 00 05",
    "publish_qos0": "30 07 00 03 61 2F 62 68 69",
    "publish_qos1": "3B 09 00 03 61 2F 62 00 0A 68 69",
    "publish_qos2": "34 05 00 01 74 FF FF",
    "acks": "40 02 00 0A 50 02 00 0A 62 02 00 0A 70 02 01 02",
    "subscribe": "82 0E 00 0A 00 03 61 2F 62 01 00 03 63 2F 64 02",
    "suback": "90 06 00 0A 00 01 02 80",
    "unsubscribe": "A2 0C 00 0A 00 03 61 2F 62 00 03 63 2F 64",
    "unsuback": "B0 02 00 0A",
    "ping_disconnect": "C0 00 D0 00 E0 00",
}

V5 = {
    "connect_spec": "10 1B 00 04 4D 51 54 54 05 C2 00 0A 05 11 00 00 00 0A 00 02 69 64 00 01 75"
    " 00 02 70 77",
    "connect_will_props": "10 2D 00 04 4D 51 54 54 05 2E 00 3C 0D 21 00 14 22 00 0A 26 00 01 6B"
    " 00 01 76 00 01 63 0B 18 00 00 00 05 01 01 03 00 01 74 00 01 77 00 01 78",
    "connack_props": "20 0D 00 00 0A 21 00 64 12 00 01 61 22 00 0A",
    "connack_capabilities": "20 10 01 00 0D 24 01 25 00 28 01 29 00 2A 01 13 00 1E",
    "publish_spec": "32 0A 00 03 61 2F 62 00 0A 00 68 69",
    "publish_all_props": "30 28 00 01 74 23 01 01 08 00 01 72 09 00 02 01 02 26 00 01 6B 00 01"
    " 76 03 00 01 63 02 00 00 00 3C 23 00 05 0B 01 0B AC 02 78",
    "publish_alias": "30 07 00 00 03 23 00 05 78",
    "acks": "40 02 00 0A 40 03 00 0A 10 40 08 00 0A 87 04 1F 00 01 78 62 03 00 0A 92",
    "subscribe": "82 0F 00 0A 02 0B 07 00 03 61 2F 2B 2D 00 01 23 00",
    "suback_unsub_unsuback": "90 05 00 0A 00 01 8F A2 08 00 0A 00 00 03 61 2F 62"
    " B0 05 00 0A 00 00 11",
    "disconnect": "E0 00 E0 01 04 E0 06 8E 04 1F 00 01 78",
    "auth": "F0 00 F0 0E 18 0C 15 00 05 53 43 52 41 4D 16 00 01 AB",
}


def unhex(text):
    return bytes.fromhex(text.replace(" ", ""))


def connect_body(frame):
    """Strips the fixed header (first byte and a one-byte remaining length)."""
    return frame[2:]


def session_connect(slot, v5, receive_max=0, alias=0, clean=1, keep_alive=0, expiry=0):
    """CONNECT for `slot` (fuzz_targets/broker_session.rs reads it in fuzz/src/session/ops.rs)."""
    return [slot, 0, v5, receive_max, alias, clean, keep_alive, 0, expiry, 1]


def session_seeds():
    """Hand-made programs for broker_session: config bytes, then (slot, op, arguments...)."""
    config = [1, 2, 1, 0]  # window 2, receive maximum 16, 2 queued messages, drop oldest

    def sub(slot, pid, flt, qos):
        return [slot, 1, pid, flt, qos, 0]

    def unsub(slot, pid, flt):
        return [slot, 2, pid, flt]

    def pub(slot, topic, qos, pid=1):
        return [slot, 3, topic, qos, 1] + ([pid] if qos else []) + [0, 1]

    def ack(slot, op, pick=0):
        return [slot, op, pick]

    v5_window = (config + session_connect(0, 1, receive_max=2) + sub(0, 1, 1, 1)
                 + session_connect(1, 0) + pub(1, 0, 1, 1) + pub(1, 1, 1, 2) + pub(1, 0, 1, 3)
                 + ack(0, 4) + ack(0, 4) + unsub(0, 2, 1) + pub(1, 0, 1, 4) + ack(0, 4))
    v311_qos2 = (config + session_connect(0, 0) + sub(0, 1, 3, 2) + session_connect(1, 1)
                 + pub(1, 1, 2, 5) + ack(0, 5) + ack(0, 6) + [1, 7, 5] + pub(1, 2, 2, 6))
    resume = (config + session_connect(0, 1, clean=0, keep_alive=1, expiry=2) + sub(0, 1, 0, 1)
              + [2, 13, 8] + session_connect(1, 0) + pub(1, 0, 1, 1) + pub(1, 0, 1, 2)
              + session_connect(0, 1, clean=0, expiry=2) + ack(0, 4) + [1, 8] + [0, 9, 1])
    garbage = (config + session_connect(0, 0) + [0, 10, 5, 0x30, 0xFF, 0xFF, 0xFF, 0xFF]
               + session_connect(1, 1, alias=2) + [1, 14] + sub(1, 3, 4, 1)
               + [1, 3, 0, 1, 1, 2, 2, 0, 1] + [1, 3, 0, 1, 1, 3, 2, 1, 1] + [1, 11])
    return {"v5_window": v5_window, "v311_qos2": v311_qos2, "resume_keep_alive": resume,
            "garbage_alias_close": garbage}


def main():
    root = pathlib.Path(__file__).parent / "corpus"
    targets = {"decode_v311": {}, "decode_v5": {}, "decode_connect": {}, "roundtrip": {}}
    for selector, fixtures in ((1, V3), (2, V5)):
        for name, text in fixtures.items():
            wire = unhex(text)
            target = "decode_v311" if selector == 1 else "decode_v5"
            targets[target][name] = wire
            targets["roundtrip"][f"v{selector}_{name}"] = bytes([selector]) + wire
            if name.startswith("connect"):
                targets["decode_connect"][name] = connect_body(wire)
    targets["roundtrip"]["v0_connect_3_1"] = bytes([0]) + unhex(V3["connect_3_1"])
    targets["broker_session"] = {name: bytes(ops) for name, ops in session_seeds().items()}
    for target, seeds in targets.items():
        folder = root / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            (folder / name).write_bytes(data)


if __name__ == "__main__":
    main()
