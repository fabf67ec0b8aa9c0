#!/usr/bin/env python3
"""What waking a sleeping thread costs on this machine: two threads ping-pong over eventfds,
first pinned to two different CPUs, then both on one CPU, optionally with a pause before each
ping (so the woken side's CPU has gone idle, as a shard's does between sparse messages).

For each case it prints the round trip and the CPU time each side used per wake-up
(CLOCK_THREAD_CPUTIME_ID), which is what a broker pays for a wake-up at sparse rates: on a
virtual machine that halts an idle vCPU, waking a thread there costs far more than the system
call that does it. The same-CPU case shows the floor of this Python loop (about 2.5 µs a
wake-up on the 2-vCPU test machine).

usage: scripts/bench/wake-cost.py [--iterations N] [--pause-us US] [--cpus A,B]
Bounded: N round trips per case (default 5,000), each at most one second.
"""

import argparse
import json
import os
import select
import threading
import time


def wait_readable(fd):
    """Blocks until `fd` is readable, at most a second (a lost peer ends the run)."""
    readable, _, _ = select.select([fd], [], [], 1.0)
    if not readable:
        raise TimeoutError("the other thread did not answer within a second")


def responder(cpu, ping, pong, iterations, result):
    os.sched_setaffinity(0, {cpu})
    start = time.thread_time()
    for _ in range(iterations):
        wait_readable(ping)
        os.eventfd_read(ping)
        os.eventfd_write(pong, 1)
    result["responder_cpu_us"] = (time.thread_time() - start) * 1e6 / iterations


def run_case(cpus, iterations, pause_us):
    ping, pong = os.eventfd(0), os.eventfd(0)
    result = {}
    thread = threading.Thread(
        target=responder, args=(cpus[1], ping, pong, iterations, result), daemon=True
    )
    os.sched_setaffinity(0, {cpus[0]})
    thread.start()
    time.sleep(0.05)
    pause = pause_us / 1e6
    cpu_start, wall = time.thread_time(), 0.0
    for _ in range(iterations):
        if pause:
            time.sleep(pause)
        before = time.perf_counter()
        os.eventfd_write(ping, 1)
        wait_readable(pong)
        os.eventfd_read(pong)
        wall += time.perf_counter() - before
    cpu = time.thread_time() - cpu_start
    thread.join(timeout=2)
    os.close(ping)
    os.close(pong)
    return {
        "cpus": list(cpus),
        "pause_us": pause_us,
        "iterations": iterations,
        "round_trip_us": round(wall * 1e6 / iterations, 2),
        "initiator_cpu_us": round(cpu * 1e6 / iterations, 2),
        "responder_cpu_us": round(result.get("responder_cpu_us", float("nan")), 2),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--pause-us", type=int, default=1000)
    parser.add_argument("--cpus", default="0,1")
    args = parser.parse_args()
    first, second = (int(c) for c in args.cpus.split(","))
    for cpus in ((first, second), (first, first)):
        for pause in sorted({0, args.pause_us}):
            print(json.dumps(run_case(cpus, args.iterations, pause)), flush=True)


if __name__ == "__main__":
    main()
