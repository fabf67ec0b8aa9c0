#!/usr/bin/env python3
"""What the CPUs did while a latency probe's slow samples were in flight.

Reads a scheduler trace (`perf script` text of `perf record -e sched:sched_switch -e
sched:sched_wakeup -a -k CLOCK_MONOTONIC`, on stdin or --trace) and the probe's slow-sample log
(paho_probe.py --slow-log: "sent_at_ns latency_us" per line, the same clock), and for each slow
sample reports:
  - how long the broker's threads (those of --broker-pid) and the probe (--probe-pid) were
    runnable but not running (woken, waiting for a CPU) inside the sample's window,
  - the broker's longest uninterrupted run inside it (a long turn of its own),
  - the threads that held the CPUs longest meanwhile.
Then a summary: how many slow samples had a broker or probe thread waiting for a CPU longer
than --wait-us (contention for the CPUs) and how many had a broker run longer than --run-us (its
own long turn). Prints text; reads nothing else.

usage: latency_sched.py --slow-log FILE --probe-pid PID --broker-pid PID [--trace perf.txt]
                        [--wait-us 500] [--run-us 500] [--show 15]
The trace is `perf script -F comm,pid,tid,cpu,time,event,trace`.
"""
import argparse
import collections
import re
import sys

SWITCH = re.compile(
    r"prev_comm=(?P<prev_comm>.+?) prev_pid=(?P<prev_pid>\d+) .*?prev_state=(?P<state>\S+) "
    r"==> next_comm=(?P<next_comm>.+?) next_pid=(?P<next_pid>\d+)")
WAKEUP = re.compile(r"comm=(?P<comm>.+?) pid=(?P<pid>\d+) ")
LINE = re.compile(r"^\s*(?P<comm>.+?)\s+(?P<pid>\d+)/(?P<tid>\d+)\s+\[(?P<cpu>\d+)\]\s+"
                  r"(?P<time>\d+\.\d+):\s+"
                  r"(?P<event>sched:sched_\w+):\s+(?P<rest>.*)$")


def parse(lines, pids):
    """Events in time order: (ns, kind, cpu, fields); `pids` gathers each thread's process from
    the events it ran in."""
    events = []
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        pids[int(m["tid"])] = int(m["pid"])
        ns = int(round(float(m["time"]) * 1e9))
        cpu = int(m["cpu"])
        if m["event"] == "sched:sched_switch":
            s = SWITCH.search(m["rest"])
            if s:
                events.append((ns, "switch", cpu, (s["prev_comm"], int(s["prev_pid"]),
                                                    s["next_comm"], int(s["next_pid"]))))
        elif m["event"] in ("sched:sched_wakeup", "sched:sched_waking"):
            w = WAKEUP.search(m["rest"])
            if w:
                events.append((ns, "wakeup", cpu, (w["comm"], int(w["pid"]))))
    events.sort(key=lambda e: e[0])
    return events


def intervals(events):
    """Per thread: its running intervals and its waits (woken until switched in)."""
    running = collections.defaultdict(list)  # tid -> [(start, end)]
    waits = collections.defaultdict(list)  # tid -> [(woken, ran)]
    names = {}
    on_cpu = {}  # cpu -> (tid, since)
    woken = {}  # tid -> ns
    for ns, kind, cpu, f in events:
        if kind == "wakeup":
            names[f[1]] = f[0]
            woken.setdefault(f[1], ns)
            continue
        prev_comm, prev, next_comm, nxt = f
        names[prev], names[nxt] = prev_comm, next_comm
        if cpu in on_cpu:
            tid, since = on_cpu[cpu]
            running[tid].append((since, ns))
        on_cpu[cpu] = (nxt, ns)
        if nxt in woken:
            waits[nxt].append((woken.pop(nxt), ns))
    return running, waits, names


def overlap(spans, t0, t1):
    return [(max(a, t0), min(b, t1)) for a, b in spans if b > t0 and a < t1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slow-log", required=True)
    ap.add_argument("--probe-pid", type=int, required=True)
    ap.add_argument("--broker-pid", type=int, required=True)
    ap.add_argument("--broker-tids", type=int, nargs="*", help="the broker's thread ids")
    ap.add_argument("--trace")
    ap.add_argument("--wait-us", type=float, default=500)
    ap.add_argument("--run-us", type=float, default=500)
    ap.add_argument("--show", type=int, default=15)
    args = ap.parse_args()
    lines = open(args.trace) if args.trace else sys.stdin
    pids = {}
    running, waits, names = intervals(parse(lines, pids))
    broker = {t for t, p in pids.items() if p == args.broker_pid}
    # A thread first seen switched in or woken has no event of its own yet: its process is
    # the broker's if its id is one of the broker's threads' (listed by the caller).
    broker |= set(args.broker_tids or [])
    samples = []
    for line in open(args.slow_log):
        sent, latency_us = line.split()
        samples.append((int(sent), float(latency_us)))
    print(f"{len(samples)} slow samples; broker threads {sorted(broker)}; probe {args.probe_pid}")
    contended = own_turn = 0
    rows = []
    for sent, latency_us in samples:
        t0, t1 = sent, sent + int(latency_us * 1000)
        broker_wait = max((b - a for t in broker for a, b in overlap(waits[t], t0, t1)),
                          default=0)
        probe_wait = max((b - a for a, b in overlap(waits[args.probe_pid], t0, t1)), default=0)
        broker_run = max((b - a for t in broker for a, b in overlap(running[t], t0, t1)),
                         default=0)
        held = collections.Counter()
        for tid, spans in running.items():
            for a, b in overlap(spans, t0, t1):
                held[f"{names.get(tid, '?')}/{tid}"] += b - a
        waited = max(broker_wait, probe_wait) > args.wait_us * 1000
        long_turn = broker_run > args.run_us * 1000
        contended += waited
        own_turn += long_turn
        top = ", ".join(f"{k} {v / 1000:.0f}" for k, v in held.most_common(3))
        rows.append((latency_us, broker_wait / 1000, probe_wait / 1000, broker_run / 1000, top))
    rows.sort(reverse=True)
    print("latency_us  broker_wait_us  probe_wait_us  broker_longest_run_us  CPUs held longest (us)")
    for r in rows[:args.show]:
        print(f"{r[0]:10.0f}  {r[1]:14.0f}  {r[2]:13.0f}  {r[3]:21.0f}  {r[4]}")
    print(f"waiting for a CPU > {args.wait_us:.0f} us (broker or probe): {contended} of "
          f"{len(samples)}; a broker run > {args.run_us:.0f} us: {own_turn} of {len(samples)}")


if __name__ == "__main__":
    main()
