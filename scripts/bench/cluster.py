#!/usr/bin/env python3
"""Cluster scenario (issue 16): RingMQ nodes over a NATS cluster against one RingMQ node.

Starts a NATS cluster of NODES servers (Debian's nats-server, JetStream on, loopback ports) and
NODES RingMQ nodes, each on its own NATS server, then runs `ringmq-bench`:

  p2p      PAIRS publisher/subscriber pairs, SIZE-byte payloads at RATE msg/s per publisher
           (QoS in QOS): every subscriber on node 1, its publisher on node 0 (every message
           crosses nodes), against the same load on one RingMQ without [cluster].
  fanout   PUBS publishers at FAN_RATE msg/s to SUBS subscribers of one topic, clients spread
           over all nodes (2 of 3 deliveries cross nodes with 3 nodes), against one node.

For each run: messages delivered per CPU-second of all broker processes together (every RingMQ
node and every nats-server; user + system time from /proc; the RingMQ and NATS parts apart),
and the latency percentiles ringmq-bench measured (publish to receipt, same clock). Results: one JSON line per run in
bench-results/cluster/<RUN_ID>.jsonl and a table on stdout. Every load is bounded (DURATION
seconds); every process is stopped at the end.

    SKIP_BUILD=1 RUN_ID=c16 scripts/bench/cluster.py
    NODES=3 PAIRS=200 RATE=50 QOS="0 1" SUBS=300 PUBS=10 FAN_RATE=20 DURATION=10 REPS=2
    PERSISTENT=1 (p2p clients with persistent sessions: mirrored, their QoS 2 journaled)
    FANOUT=0 (p2p only)
    CLUSTER_EXTRA="ack_timeout_ms = 5000" (more [cluster] lines for every node; `;` splits lines)
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
RINGMQ = os.path.join(TARGET, "release", "ringmq")
BENCH = os.path.join(TARGET, "release", "ringmq-bench")
NODES = int(os.environ.get("NODES", 3))
PAIRS = int(os.environ.get("PAIRS", 200))
RATE = float(os.environ.get("RATE", 50))
QOS = os.environ.get("QOS", "0 1").split()
SIZE = int(os.environ.get("SIZE", 256))
SUBS = int(os.environ.get("SUBS", 300))
PUBS = int(os.environ.get("PUBS", 10))
FAN_RATE = float(os.environ.get("FAN_RATE", 20))
DURATION = int(os.environ.get("DURATION", 10))
REPS = int(os.environ.get("REPS", 1))
PERSISTENT = os.environ.get("PERSISTENT", "0") == "1"
FANOUT = os.environ.get("FANOUT", "1") == "1"
# Extra `[cluster]` lines for every node, e.g. CLUSTER_EXTRA="qos2_journal = false".
CLUSTER_EXTRA = os.environ.get("CLUSTER_EXTRA", "")
RUN_ID = os.environ.get("RUN_ID", time.strftime("%Y%m%d-%H%M%S"))
NATS = shutil.which("nats-server") or "/usr/sbin/nats-server"
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, deadline_s=20):
    end = time.time() + deadline_s
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port}")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def start_nats(work, n):
    ports = [(free_port(), free_port()) for _ in range(n)]
    procs = []
    for i, (client, route) in enumerate(ports):
        routes = ", ".join(f'"nats-route://127.0.0.1:{r}"' for j, (_, r) in enumerate(ports) if j != i)
        conf = os.path.join(work, f"nats{i}.conf")
        with open(conf, "w") as f:
            f.write(
                f"server_name: s{i}\nhost: 127.0.0.1\nport: {client}\n"
                f"cluster {{\n  name: bench\n  listen: \"127.0.0.1:{route}\"\n  routes: [{routes}]\n}}\n"
                f"jetstream {{\n  store_dir: \"{work}/js{i}\"\n  max_file_store: 1GB\n}}\n"
            )
        procs.append(subprocess.Popen([NATS, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for client, _ in ports:
        wait_port(client)
    time.sleep(3)  # routes and the JetStream leader
    return procs, [client for client, _ in ports]


def start_ringmq(work, name, cluster):
    port = free_port()
    conf = os.path.join(work, f"{name}.toml")
    with open(conf, "w") as f:
        f.write(f'[listeners]\ntcp = ["127.0.0.1:{port}"]\n[persistence]\nengine = "none"\n')
        f.write('[log]\nlevel = "warn"\n')
        if cluster:
            node_id, nats_port = cluster
            f.write(f'[cluster]\nnode_id = "{node_id}"\nnats = ["nats://127.0.0.1:{nats_port}"]\nreplicas = {min(NODES, 3)}\n')
            if CLUSTER_EXTRA:
                f.write(CLUSTER_EXTRA.replace(";", "\n") + "\n")
    log = open(os.path.join(work, f"{name}.log"), "w")
    proc = subprocess.Popen([RINGMQ, "--config", conf], stdout=log, stderr=subprocess.STDOUT, cwd=work)
    wait_port(port)
    return proc, port


def run_bench(args, work, label):
    out = os.path.join(work, f"{label}.json")
    cmd = [BENCH] + args + ["-d", str(DURATION + 10), "--hold", str(DURATION), "--quiet", "--json", out, "--label", label]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=DURATION + 60)
    with open(out) as f:
        return json.load(f)


def measured(procs, args, work, label):
    """procs: (kind, process) pairs, kind "ringmq" or "nats"."""
    before = [cpu_s(p.pid) for _, p in procs]
    summary = run_bench(args, work, label)
    spent_by = {"ringmq": 0.0, "nats": 0.0}
    for (kind, p), b in zip(procs, before):
        spent_by[kind] += cpu_s(p.pid) - b
    spent = spent_by["ringmq"] + spent_by["nats"]
    received = summary["totals"]["received"]
    return {
        "label": label,
        "received": received,
        "lost": summary["lost"],
        "cpu_s": round(spent, 3),
        "ringmq_cpu_s": round(spent_by["ringmq"], 3),
        "nats_cpu_s": round(spent_by["nats"], 3),
        "msgs_per_cpu_s": round(received / spent) if spent > 0 else None,
        "p50_us": summary["latency_us"]["p50"],
        "p99_us": summary["latency_us"]["p99"],
    }


def scenarios(hosts):
    """(label, ringmq-bench arguments) for a set of node addresses (first: publishers' node)."""
    runs = []
    pub_host, sub_host = hosts[0], hosts[1 % len(hosts)]
    for qos in QOS:
        # p2p adds each pair's subscriber, then its publisher: with two hosts, subscribers on
        # the second and publishers on the first.
        persistent = ["--persistent"] if PERSISTENT else []
        runs.append((f"p2p-q{qos}", ["p2p", "-H", sub_host, "-H", pub_host, "--pairs", str(PAIRS),
                                     "-s", str(SIZE), "-q", qos, "-r", str(RATE), "--threads", "1"]
                     + persistent))
    spread = sum((["-H", h] for h in hosts), [])
    if FANOUT:
        runs.append(("fanout", ["fanout"] + spread + ["--pubs", str(PUBS), "--subs", str(SUBS),
                                                      "-s", "16", "-r", str(FAN_RATE), "--threads", "1"]))
    return runs


def main():
    for binary in (RINGMQ, BENCH):
        if not os.path.exists(binary):
            raise SystemExit(f"{binary} missing: cargo build --release -p ringmq -p bench")
    results_dir = os.path.join(ROOT, "bench-results", "cluster")
    os.makedirs(results_dir, exist_ok=True)
    out_path = os.path.join(results_dir, f"{RUN_ID}.jsonl")
    rows = []
    for rep in range(REPS):
        for setup in ("single", "cluster"):
            work = tempfile.mkdtemp(prefix=f"ringmq-cluster-{setup}-")
            procs = []
            try:
                if setup == "single":
                    proc, port = start_ringmq(work, "single", None)
                    procs.append(("ringmq", proc))
                    hosts = [f"127.0.0.1:{port}"] * 2
                else:
                    nats, nats_ports = start_nats(work, NODES)
                    procs.extend(("nats", proc) for proc in nats)
                    hosts = []
                    for i in range(NODES):
                        proc, port = start_ringmq(work, f"n{i}", (f"n{i}", nats_ports[i]))
                        procs.append(("ringmq", proc))
                        hosts.append(f"127.0.0.1:{port}")
                    time.sleep(2)  # buckets open
                for label, args in scenarios(hosts):
                    row = measured(procs, args, work, label)
                    row.update({"setup": setup, "rep": rep, "nodes": NODES if setup == "cluster" else 1})
                    rows.append(row)
                    with open(out_path, "a") as f:
                        f.write(json.dumps(row) + "\n")
                    print(json.dumps(row), flush=True)
            finally:
                for _, p in procs:
                    p.terminate()
                for _, p in procs:
                    try:
                        p.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        p.kill()
                shutil.rmtree(work, ignore_errors=True)
    print(f"\nresults: {out_path}")
    print(f"{'scenario':<10} {'setup':<8} {'received':>9} {'lost':>6} {'msg/CPU-s':>10} {'NATS share':>10} {'p50 us':>8} {'p99 us':>8}")
    for r in rows:
        share = f"{100 * r['nats_cpu_s'] / r['cpu_s']:.0f} %" if r["cpu_s"] else "-"
        print(f"{r['label']:<10} {r['setup']:<8} {r['received']:>9} {r['lost']:>6} {r['msgs_per_cpu_s'] or 0:>10} {share:>10} {r['p50_us']:>8} {r['p99_us']:>8}")


if __name__ == "__main__":
    sys.exit(main())
