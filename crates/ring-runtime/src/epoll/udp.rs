//! The epoll backend's datagram sockets: registered edge-triggered for read and write;
//! `recvmsg` until the socket is empty or its per-turn budget
//! (`RuntimeConfig::datagram_recv_budget`) is spent (then again next turn), `sendmsg` until the
//! queue is empty or the socket is full (the write edge ends the wait when it drains).

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

use crate::backend::InboundDatagram;
use crate::config::RuntimeConfig;
use crate::datagram::{DatagramStats, OutQueue, refuses_gso};
use crate::error::RuntimeError;
use crate::sys::epoll::{EDGE, Epoll, READABLE, WRITABLE};
use crate::sys::udp::{self, RecvSlot, SendSlot};

/// Token of datagram socket `i` is `UDP_BASE - i`: below every listener token (fewer than
/// 2^16 listeners) and above every connection token.
pub(super) const UDP_BASE: u64 = u64::MAX - (1 << 16);

/// The shard's datagram sockets and their records.
pub(super) struct EpollUdp {
    sockets: Vec<Option<UdpSocket>>,
    recv: Box<RecvSlot>,
    send: Box<SendSlot>,
    budget: usize,
    /// Sockets whose budget ran out: read again next turn.
    read_next: Vec<usize>,
    received: Vec<InboundDatagram>,
}

impl EpollUdp {
    pub(super) fn new(
        config: &RuntimeConfig,
        sockets: Vec<UdpSocket>,
        epoll: &Epoll,
    ) -> Result<Self, RuntimeError> {
        for (index, socket) in sockets.iter().enumerate() {
            epoll
                .add(socket.as_raw_fd(), token(index), READABLE | WRITABLE | EDGE)
                .map_err(|e| RuntimeError::syscall("epoll_ctl", e))?;
        }
        Ok(Self {
            // Ready at once: a datagram may have come between the bind and the registration.
            read_next: (0..sockets.len()).collect(),
            sockets: sockets.into_iter().map(Some).collect(),
            recv: RecvSlot::new(config.datagram_recv_size()),
            send: SendSlot::new(),
            budget: config.datagram_recv_budget,
            received: Vec::new(),
        })
    }

    /// The socket a token names, if it is a datagram socket's.
    pub(super) fn socket_of(&self, token: u64) -> Option<usize> {
        let index = UDP_BASE.checked_sub(token)?;
        usize::try_from(index)
            .ok()
            .filter(|&index| index < self.sockets.len())
    }

    /// Whether a socket waits to be read again (the wait must not block).
    pub(super) fn has_pending_reads(&self) -> bool {
        !self.read_next.is_empty()
    }

    /// Reads the sockets whose budget ran out last turn.
    pub(super) fn read_listed(&mut self) {
        for index in std::mem::take(&mut self.read_next) {
            self.read(index);
        }
    }

    /// Receives from socket `index` until it is empty or the budget is spent.
    pub(super) fn read(&mut self, index: usize) {
        let Some(fd) = self.fd(index) else {
            return;
        };
        for _ in 0..self.budget {
            match udp::recv_into(fd, &mut self.recv) {
                Ok(len) => {
                    if let Some(received) = self.recv.take(len) {
                        let endpoint = index;
                        self.received.push(InboundDatagram { endpoint, received });
                    }
                }
                // Drained: the next datagram raises a new edge.
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                // Interrupted, or an error the socket reported (an ICMP error): consumed by
                // this read; datagrams may still wait behind it.
                Err(_) => {}
            }
        }
        if !self.read_next.contains(&index) {
            self.read_next.push(index);
        }
    }

    pub(super) fn take(&mut self, into: &mut Vec<InboundDatagram>) {
        into.append(&mut self.received);
    }

    pub(super) fn send(&mut self, index: usize, out: &mut OutQueue, stats: &mut DatagramStats) {
        let Some(fd) = self.fd(index) else {
            return;
        };
        while let Some(datagram) = out.pop() {
            match udp::send_from(fd, &mut self.send, datagram) {
                Ok(_) => stats.sent += 1,
                Err(error) => {
                    let datagram = self.send.datagram.take();
                    match error.kind() {
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => {
                            if let Some(datagram) = datagram {
                                out.push_front(datagram);
                            }
                            if error.kind() == io::ErrorKind::WouldBlock {
                                return;
                            }
                        }
                        _ => {
                            let refused = error.raw_os_error().zip(datagram.as_ref());
                            if refused.is_some_and(|(errno, d)| refuses_gso(errno, d)) {
                                out.refuse_gso();
                            }
                            stats.send_failed += 1;
                        }
                    }
                }
            }
            self.send.datagram = None;
        }
    }

    pub(super) fn close(&mut self, epoll: &Epoll) {
        for socket in self.sockets.iter_mut().filter_map(Option::take) {
            let _ = epoll.delete(socket.as_raw_fd());
        }
        self.read_next.clear();
    }

    fn fd(&self, index: usize) -> Option<std::os::fd::RawFd> {
        Some(self.sockets.get(index)?.as_ref()?.as_raw_fd())
    }
}

fn token(index: usize) -> u64 {
    UDP_BASE - index as u64
}
