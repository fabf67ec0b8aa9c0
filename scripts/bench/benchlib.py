"""Helpers shared by the Python bench scripts: the broker's RSS and MQTT's variable-length
integer."""


def rss_kb(pid):
    """VmRSS of process `pid` in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def varint(n):
    """MQTT's Variable Byte Integer encoding of `n`."""
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)
