"""Helpers shared by the Python bench scripts: the broker's RSS, MQTT's variable-length integer
and a minimal packet reader/writer over a blocking socket."""

import os
import socket
import subprocess
import struct
import sys
import time


def status_kb(pid, field):
    """A memory line (`VmRSS`, `RssAnon`, `RssFile`, ...) of /proc/PID/status in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def rss_kb(pid):
    """VmRSS of process `pid` in KiB."""
    return status_kb(pid, "VmRSS")


def rss_detail(pid):
    """VmRSS with its anonymous (heap) and file-backed (the binary's pages) parts."""
    return (f"RSS {rss_kb(pid)} KiB (anon {status_kb(pid, 'RssAnon')}, "
            f"file {status_kb(pid, 'RssFile')})")


def varint(n):
    """MQTT's Variable Byte Integer encoding of `n`."""
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def string(text):
    """An MQTT UTF-8 string: two length bytes, then the text."""
    data = text.encode()
    return struct.pack(">H", len(data)) + data


def frame(first, body):
    """A whole packet: the first header byte, the remaining length, the body."""
    return bytes([first]) + varint(len(body)) + body


def recv_exact(sock, n):
    """Exactly `n` bytes from `sock`."""
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return data


def recv_packet(sock):
    """One packet from `sock`: (first header byte, body)."""
    first = recv_exact(sock, 1)[0]
    length, shift = 0, 0
    while True:
        byte = recv_exact(sock, 1)[0]
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return first, recv_exact(sock, length)


def wait_for_port(port):
    """Waits (at most about 10 s) until a broker accepts on 127.0.0.1:`port`; exits otherwise."""
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("broker did not start")


def disconnect(sock):
    """Sends DISCONNECT and waits for the broker to close the connection."""
    sock.sendall(b"\xe0\x00")
    try:
        while sock.recv(65536):
            pass
    except OSError:
        pass
    sock.close()


def self_signed(directory):
    """A throwaway self-signed P-256 certificate for `localhost` (CN and SAN) in `directory`,
    made with the openssl command: (cert path, key path)."""
    key, cert = os.path.join(directory, "key.pem"), os.path.join(directory, "cert.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return cert, key


def free_port(kind=socket.SOCK_STREAM):
    """A port on 127.0.0.1 free now (TCP by default, UDP with `socket.SOCK_DGRAM`)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """User plus system CPU seconds process `pid` has used."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_tls_quic_broker(binary, directory, cert, key, ports, quic_extra=""):
    """Starts `binary` (memory only, 2 shards) with a plain listener on ports["tcp"], a
    [[listeners.tls]] on ports["tls"] and a [[listeners.quic]] on ports["quic"] (plus
    `quic_extra` TOML), all on loopback with `cert` and `key`; returns the process once the TLS
    port accepts."""
    config = os.path.join(directory, "ringmq.toml")
    with open(config, "w") as f:
        f.write(
            '[persistence]\nengine = "none"\n[runtime]\nshards = 2\n'
            f'[[listeners.tls]]\nbind = "127.0.0.1:{ports["tls"]}"\ncert = "{cert}"\nkey = "{key}"\n'
            f'[[listeners.quic]]\nbind = "127.0.0.1:{ports["quic"]}"\ncert = "{cert}"\nkey = "{key}"\n'
            + quic_extra
        )
    args = [binary, "-l", f"127.0.0.1:{ports['tcp']}", "--log-level", "warn", "-c", config]
    broker = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(ports["tls"])
    return broker
