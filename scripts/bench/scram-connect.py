#!/usr/bin/env python3
"""Connect rate with MQTT 5 enhanced authentication (SCRAM-SHA-256/512, issue 49) against the
password file (mosquitto_passwd's default $7$, PBKDF2-SHA512 with 101 iterations) on one broker.

Starts the release `ringmq` on a free loopback port with both configured (users written by
`ringmq scram add` and `mosquitto_passwd`), then per mode makes N connections from P client
processes, each: TCP connect, CONNECT (5.0), the AUTH round for SCRAM, CONNACK 0x00 (checked,
and SCRAM's server-final verified), DISCONNECT, close. Prints connects per second (wall clock)
and the broker's CPU per connect (utime + stime from /proc). The client keeps SCRAM's
SaltedPassword per salt and iteration count, as RFC 5802 allows, so that the client's own PBKDF2
is not what is measured.

Usage: scripts/bench/scram-connect.py [--broker target/release/ringmq] [--n 2000] [--procs 1]
"""

import argparse
import base64
import hashlib
import hmac
import multiprocessing
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from benchlib import frame, recv_packet, string, varint, wait_for_port  # noqa: E402

USER, PASSWORD = "bench", "bench-password"
SALTED = {}


def binary(data):
    return struct.pack(">H", len(data)) + data


def connect_packet(client_id, method=None, data=None, password=None):
    props = b""
    if method:
        props = b"\x15" + string(method) + b"\x16" + binary(data)
    flags = 0x02 | (0xC0 if password else 0)
    body = string("MQTT") + bytes([5, flags]) + b"\x00\x00" + varint(len(props)) + props
    body += string(client_id)
    if password:
        body += string(USER) + binary(password.encode())
    return frame(0x10, body)


def properties(body, start):
    """The properties of a packet body from `start` as {id: raw value bytes} (0x15, 0x16 only)."""
    length, shift, i = 0, 0, start
    while True:
        byte = body[i]
        i += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    found, end = {}, i + length
    while i < end:
        pid = body[i]
        i += 1
        if pid in (0x15, 0x16):
            n = struct.unpack(">H", body[i:i + 2])[0]
            found[pid] = body[i + 2:i + 2 + n]
            i += 2 + n
        elif pid in (0x11, 0x27):
            i += 4
        elif pid in (0x21, 0x22, 0x13):
            i += 2
        elif pid in (0x24, 0x25, 0x28, 0x29, 0x2A):
            i += 1
        else:
            raise ValueError(f"unexpected property {pid:#x}")
    return found


def scram_final(algorithm, first_bare, server_first):
    attrs = dict(a.split("=", 1) for a in server_first.decode().split(","))
    key = (algorithm, attrs["s"], attrs["i"])
    if key not in SALTED:
        SALTED[key] = hashlib.pbkdf2_hmac(algorithm, PASSWORD.encode(),
                                          base64.b64decode(attrs["s"]), int(attrs["i"]))
    salted = SALTED[key]
    client_key = hmac.new(salted, b"Client Key", algorithm).digest()
    stored_key = hashlib.new(algorithm, client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, algorithm).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    server_key = hmac.new(salted, b"Server Key", algorithm).digest()
    expected = b"v=" + base64.b64encode(hmac.new(server_key, auth_message, algorithm).digest())
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode(), expected


def one_connect(port, mode, index):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client_id = f"b{os.getpid()}-{index}"
    if mode == "password":
        sock.sendall(connect_packet(client_id, password=PASSWORD))
    else:
        algorithm = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mode]
        first_bare = f"n={USER},r={os.urandom(12).hex()}"
        sock.sendall(connect_packet(client_id, mode, b"n,," + first_bare.encode()))
        kind, body = recv_packet(sock)
        assert kind == 0xF0 and body[0] == 0x18, (kind, body[:1])
        client_final, expected = scram_final(algorithm, first_bare, properties(body, 1)[0x16])
        props = b"\x15" + string(mode) + b"\x16" + binary(client_final)
        auth = b"\x18" + varint(len(props)) + props
        sock.sendall(frame(0xF0, auth))
    kind, body = recv_packet(sock)
    assert kind == 0x20 and body[1] == 0, f"CONNACK {body[1]:#x}"
    if mode != "password":
        assert properties(body, 2)[0x16] == expected, "server-final"
    sock.sendall(b"\xe0\x00")
    sock.close()


def run_share(args):
    port, mode, count = args
    for index in range(count):
        one_connect(port, mode, index)
    return count


def broker_cpu(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(port, pid, mode, n, procs):
    cpu, start = broker_cpu(pid), time.perf_counter()
    shares = [(port, mode, n // procs)] * procs
    with multiprocessing.Pool(procs) as pool:
        done = sum(pool.map(run_share, shares))
    wall = time.perf_counter() - start
    used = broker_cpu(pid) - cpu
    print(f"{mode:14} procs={procs} n={done}: {done / wall:8.0f} connects/s, "
          f"broker CPU {used * 1e6 / done:6.0f} us/connect")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--broker", default="target/release/ringmq")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--modes", default="password SCRAM-SHA-256 SCRAM-SHA-512")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="scram-bench-")
    scram, passwd = os.path.join(work, "scram"), os.path.join(work, "passwd")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        subprocess.run([args.broker, "scram", "add", "--file", scram, "--user", USER,
                        "--mechanism", mechanism, "--password", PASSWORD],
                       check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["mosquitto_passwd", "-c", "-b", passwd, USER, PASSWORD], check=True)
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    config = os.path.join(work, "ringmq.toml")
    with open(config, "w") as out:
        out.write(f'[auth]\npassword_file = "{passwd}"\n[auth.scram]\nfile = "{scram}"\n'
                  '[sys]\ninterval = 0\n[persistence]\nengine = "none"\n[log]\nlevel = "warn"\n')
    broker = subprocess.Popen([args.broker, "--config", config, "--listen", f"127.0.0.1:{port}"])
    try:
        wait_for_port(port)
        for mode in args.modes.split():
            one_connect(port, mode, 0)  # warm-up
            measure(port, broker.pid, mode, args.n, args.procs)
    finally:
        broker.terminate()
        broker.wait()


if __name__ == "__main__":
    main()
