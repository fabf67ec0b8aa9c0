#!/usr/bin/env python3
"""Where a server's CPU goes, by cost category, from `perf script` output.

Reads the call chains of `perf record -e cpu-clock -g` samples on stdin and prints one line per
category with its share of the samples (tab-separated), largest first. A sample belongs to the
first category of this list that matches its call chain:

  timers            run_timer_softirq / TCP timers (delayed ACKs, retransmits)
  send: own TCP     under tcp_sendmsg, outside softirq (the server's own transmit path)
  send: peer rx     under tcp_sendmsg, inside softirq: on loopback the peer's receive runs on
                    the sender's CPU and, without IRQ time accounting, is charged to the sender
  other softirq     packet receive outside a send
  recv              under tcp_recvmsg / sock_recvmsg (receive and copy)
  user space        the sample's leaf is not in the kernel
  scheduler         sleeping, waking up, context switches
  epoll             epoll_wait and its callbacks
  io_uring          io_uring's own code (submission, task work, completion, waiting)
  syscall/other     syscall entry and exit, fd lookup, everything else in the kernel

Usage: perf script -i perf.data | scripts/bench/perf-categories.py [US_PER_MESSAGE]
With the server's CPU microseconds per message, each share is also given in microseconds.
"""

import collections
import sys

SCHED = {"schedule", "__schedule", "finish_task_switch.isra.0", "try_to_wake_up", "do_idle"}
EPOLL = {"do_epoll_wait", "ep_poll", "ep_send_events", "ep_poll_callback"}
TIMERS = {"run_timer_softirq", "tcp_delack_timer", "tcp_write_timer"}
SEND = {"tcp_sendmsg", "tcp_sendmsg_locked"}
SOFTIRQ = {"net_rx_action", "handle_softirqs"}
RECV = {"tcp_recvmsg", "tcp_recvmsg_locked", "sock_recvmsg"}


def category(frames):
    """frames: symbol names, leaf first; user-space ones carry a "[user]" prefix."""
    names = set(frames)
    if names & TIMERS:
        return "timers (delayed ACKs, retransmits)"
    if names & SEND:
        if names & SOFTIRQ:
            return "send: peer's receive (loopback softirq)"
        return "send: own TCP transmit"
    if names & SOFTIRQ:
        return "other softirq receive"
    if names & RECV:
        return "recv: TCP receive and copy"
    if frames and frames[0].startswith("[user]"):
        return "user space"
    if names & SCHED:
        return "scheduler (sleep, wake-up, context switch)"
    if names & EPOLL:
        return "readiness: epoll"
    # The outermost frames are the syscall entry; io_uring's own code lies below them.
    if any(name.startswith(("io_", "__io_")) for name in frames[:-3]):
        return "readiness: io_uring (submit, task work, wait)"
    return "syscall entry/exit, fd lookup, other kernel"


def samples(lines):
    """Yields the call chain (leaf first) of every sample."""
    frames = []
    for line in lines:
        if line.startswith(("\t", " ")) and line.strip():
            parts = line.split()
            if len(parts) >= 2:
                symbol = parts[1].split("+")[0]
                if "kernel" not in parts[-1] and "vmlinux" not in parts[-1]:
                    symbol = "[user]" + symbol
                frames.append(symbol)
            continue
        if frames:
            yield frames
        frames = []
    if frames:
        yield frames


def main():
    counts = collections.Counter(category(chain) for chain in samples(sys.stdin))
    total = sum(counts.values())
    if total == 0:
        sys.exit("no samples with call chains on stdin")
    per_message = float(sys.argv[1]) if len(sys.argv) > 1 else None
    for name, count in counts.most_common():
        share = count / total
        micros = f"\t{share * per_message:.2f} us" if per_message else ""
        print(f"{name}\t{100.0 * share:.1f}%{micros}")
    print(f"samples\t{total}")


if __name__ == "__main__":
    main()
