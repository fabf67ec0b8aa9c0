//! Registered (fixed) buffers on the send path: streams writes of one size over loopback TCP
//! from one io_uring to a reader thread, once with `SENDMSG` from ordinary heap buffers (what
//! the runtime does: a connection's coalesced frames leave through one iovec array) and once
//! with `WRITE_FIXED` from buffers registered with the ring, and reports throughput and CPU
//! per GiB and per write (whole process: the sender and the reader, the same in both modes).
//! Eight writes are in flight at a time, each from its own buffer; a short write is finished
//! from where it stopped.
//!
//!   cargo run --release -p ring-runtime --example fixed_send_bench -- 512,4096,16384,65536

#![allow(clippy::unwrap_used, reason = "benchmark program: fail loudly")]

#[path = "echo_bench/cpu.rs"]
mod cpu;
#[path = "echo_bench/sink.rs"]
mod sink;

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Instant;

use io_uring::{IoUring, opcode, squeue, types};

/// Bytes streamed per measurement.
const TOTAL: usize = 1 << 30;
/// Writes in flight.
const DEPTH: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Sendmsg,
    WriteFixed,
}

/// One buffer and the write in flight from it.
struct Slot {
    buffer: Vec<u8>,
    iovec: libc::iovec,
    msghdr: libc::msghdr,
    /// Bytes of the current write already sent.
    done: usize,
}

impl Slot {
    fn new(size: usize, fill: u8) -> Box<Self> {
        // SAFETY: `msghdr` is plain data; all-zero is a valid empty header (no name, no control).
        let msghdr: libc::msghdr = unsafe { std::mem::zeroed() };
        let iovec = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        Box::new(Self {
            buffer: vec![fill; size],
            iovec,
            msghdr,
            done: 0,
        })
    }

    /// The operation that sends the rest of this slot's buffer.
    fn entry(&mut self, mode: Mode, fd: types::Fd, index: usize) -> squeue::Entry {
        let rest = &mut self.buffer[self.done..];
        let len = u32::try_from(rest.len()).unwrap();
        let entry = match mode {
            Mode::Sendmsg => {
                self.iovec = libc::iovec {
                    iov_base: rest.as_mut_ptr().cast(),
                    iov_len: rest.len(),
                };
                self.msghdr.msg_iov = &raw mut self.iovec;
                self.msghdr.msg_iovlen = 1;
                opcode::SendMsg::new(fd, &raw const self.msghdr).build()
            }
            Mode::WriteFixed => {
                let index = u16::try_from(index).unwrap();
                opcode::WriteFixed::new(fd, rest.as_ptr(), len, index).build()
            }
        };
        entry.user_data(index as u64)
    }
}

/// Streams `TOTAL` bytes in writes of `size`; (GiB/s, CPU-s per GiB, CPU-µs per write).
fn measure(size: usize, mode: Mode) -> (f64, f64, f64) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stream = TcpStream::connect(addr).unwrap();
    let done = sink::drain(listener.accept().unwrap().0);
    stream.set_nonblocking(true).unwrap();
    let fd = types::Fd(stream.as_raw_fd());
    let mut ring = IoUring::new(64).unwrap();
    let mut slots: Vec<Box<Slot>> = (0..DEPTH).map(|i| Slot::new(size, i as u8)).collect();
    if mode == Mode::WriteFixed {
        let iovecs: Vec<libc::iovec> = (slots.iter_mut())
            .map(|slot| libc::iovec {
                iov_base: slot.buffer.as_mut_ptr().cast(),
                iov_len: slot.buffer.len(),
            })
            .collect();
        // SAFETY: each iovec names a live buffer of `slots`, which is neither moved nor freed
        // while the ring exists (the ring is dropped first, at the end of this function).
        unsafe { ring.submitter().register_buffers(&iovecs).unwrap() };
    }
    let (cpu_start, start) = (cpu::process_cpu("self"), Instant::now());
    let (mut queued, mut written, mut writes) = (0usize, 0usize, 0u64);
    for (index, slot) in slots.iter_mut().enumerate() {
        let entry = slot.entry(mode, fd, index);
        // SAFETY: the entry's buffer (and, for `SENDMSG`, its header and iovec) live in a boxed
        // slot that stays put until its completion is reaped.
        unsafe { ring.submission().push(&entry).unwrap() };
        queued += size;
    }
    while written < TOTAL {
        ring.submit_and_wait(1).unwrap();
        let completions: Vec<(usize, i32)> = (ring.completion())
            .map(|cqe| (usize::try_from(cqe.user_data()).unwrap(), cqe.result()))
            .collect();
        for (index, result) in completions {
            let slot = &mut slots[index];
            if result == -libc::EAGAIN {
                // Retried below from where it stopped.
            } else {
                let sent = usize::try_from(result).unwrap_or_else(|_| panic!("write: {result}"));
                writes += 1;
                written += sent;
                slot.done += sent;
                if slot.done == size {
                    slot.done = 0;
                    if queued >= TOTAL {
                        continue;
                    }
                    queued += size;
                }
            }
            let entry = slot.entry(mode, fd, index);
            // SAFETY: as above.
            unsafe { ring.submission().push(&entry).unwrap() };
        }
    }
    let (wall, cpu) = (start.elapsed(), cpu::process_cpu("self") - cpu_start);
    drop(ring);
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(done.recv().unwrap(), TOTAL, "every byte arrives");
    let gib = TOTAL as f64 / f64::from(1u32 << 30);
    let per_write_us = cpu.as_secs_f64() * 1e6 / writes as f64;
    (
        gib / wall.as_secs_f64(),
        cpu.as_secs_f64() / gib,
        per_write_us,
    )
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "512,4096,16384,65536".into())
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    let rounds: usize = std::env::args().nth(2).map_or(3, |r| r.parse().unwrap());
    println!(
        "| write | round | sendmsg GiB/s | sendmsg CPU-s/GiB | sendmsg CPU-µs/write | write_fixed GiB/s | write_fixed CPU-s/GiB | write_fixed CPU-µs/write |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for size in sizes {
        for round in 1..=rounds {
            let (s_rate, s_cpu, s_write) = measure(size, Mode::Sendmsg);
            let (f_rate, f_cpu, f_write) = measure(size, Mode::WriteFixed);
            println!(
                "| {size} | {round} | {s_rate:.2} | {s_cpu:.2} | {s_write:.2} | {f_rate:.2} | {f_cpu:.2} | {f_write:.2} |"
            );
        }
    }
}
