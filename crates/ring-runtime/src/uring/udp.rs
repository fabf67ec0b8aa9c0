//! The io_uring backend's datagram sockets. Receiving: one multishot `RECVMSG` per socket into
//! the datagram buffer ring (`udp_multi.rs`), or, without it (`RuntimeConfig::
//! datagram_recv_multishot` off, or a kernel before 6.0), `RuntimeConfig::datagram_recv_depth`
//! single-shot `RECVMSG`s per socket, each re-armed with its record when it completes. Sending:
//! one `SENDMSG` per datagram (or GSO train), at most `RuntimeConfig::datagram_sends_in_flight`
//! per socket, the rest waiting in the endpoint's queue. Every record is owned by its op table
//! entry until the completion; the sockets close with the backend, after the teardown reaped
//! every operation.

use io_uring::{opcode, types};

use super::UringBackend;
use super::ops::Op;
use super::udp_state::{UdpRecv, UdpSend};
use crate::backend::InboundDatagram;
use crate::datagram::{OutQueue, refuses_gso};
use crate::error::RuntimeError;
use crate::sys::udp::{RecvSlot, SendSlot};

impl UringBackend {
    /// Arms every socket's receives.
    pub(super) fn arm_udp(&mut self) -> Result<(), RuntimeError> {
        for endpoint in 0..self.udp.sockets.len() {
            self.arm_udp_endpoint(endpoint)?;
        }
        Ok(())
    }

    /// Arms one socket's receives: its multishot receive, or its single-shot ones.
    pub(super) fn arm_udp_endpoint(&mut self, endpoint: usize) -> Result<(), RuntimeError> {
        if self.udp.multishot {
            return self.arm_udp_multi(endpoint);
        }
        for _ in 0..self.udp.recv_depth {
            let slot = RecvSlot::new(self.udp.recv_size);
            self.arm_udp_recv(Box::new(UdpRecv { endpoint, slot }))?;
        }
        Ok(())
    }

    fn arm_udp_recv(&mut self, mut recv: Box<UdpRecv>) -> Result<(), RuntimeError> {
        let Some(fd) = self.udp.fd(recv.endpoint) else {
            return Ok(());
        };
        let msg = recv.slot.prepare();
        let entry = opcode::RecvMsg::new(types::Fd(fd), msg).build();
        let user_data = self.ops.insert(Op::UdpRecv(recv));
        // SAFETY: the header and everything it points at are boxed in the op table entry until
        // the completion; the socket closes only with the backend, after the teardown.
        unsafe { self.push(entry.user_data(user_data)) }
    }

    /// A receive completed: report the datagram, arm the record again.
    pub(super) fn udp_received(&mut self, user_data: u64, result: i32) -> Result<(), RuntimeError> {
        let Some(Op::UdpRecv(recv)) = self.ops.remove(user_data) else {
            return Ok(());
        };
        if let Ok(len) = usize::try_from(result)
            && let Some(received) = recv.slot.take(len)
        {
            let endpoint = recv.endpoint;
            self.udp
                .received
                .push(InboundDatagram { endpoint, received });
        }
        let ended = result == -libc::ECANCELED || result == -libc::EBADF;
        if ended || self.quiescing || self.udp.closing {
            return Ok(());
        }
        // An error (an ICMP report on the socket) ends only that receive.
        self.arm_udp_recv(recv)
    }

    /// Starts sends from the front of `out` while the socket has room for more in flight.
    pub(super) fn send_udp(&mut self, endpoint: usize, out: &mut OutQueue) {
        let Some(fd) = self.udp.fd(endpoint) else {
            return;
        };
        if std::mem::take(&mut self.udp.gso_refused[endpoint]) {
            out.refuse_gso();
        }
        while self.udp.sends_in_flight[endpoint] < self.udp.max_sends {
            let Some(datagram) = out.pop() else {
                return;
            };
            let mut send = self.udp.spare_sends.pop().unwrap_or_else(|| {
                let slot = SendSlot::new();
                Box::new(UdpSend { endpoint, slot })
            });
            send.endpoint = endpoint;
            let msg = send.slot.prepare(datagram);
            let flags = libc::MSG_NOSIGNAL as u32;
            let entry = opcode::SendMsg::new(types::Fd(fd), msg)
                .flags(flags)
                .build();
            let user_data = self.ops.insert(Op::UdpSend(send));
            // SAFETY: the header, the peer address and the datagram are boxed in the op table
            // entry until the completion; the socket outlives every operation.
            if unsafe { self.push(entry.user_data(user_data)) }.is_err() {
                // Not submitted: the ring failed; the datagram is lost like on the network.
                self.ops.remove(user_data);
                self.udp.stats.send_failed += 1;
                return;
            }
            self.udp.sends_in_flight[endpoint] += 1;
        }
    }

    /// A send completed: count it, keep its record for the next one.
    pub(super) fn udp_sent(&mut self, user_data: u64, result: i32) {
        let Some(Op::UdpSend(mut send)) = self.ops.remove(user_data) else {
            return;
        };
        if let Some(in_flight) = self.udp.sends_in_flight.get_mut(send.endpoint) {
            *in_flight = in_flight.saturating_sub(1);
        }
        if result >= 0 {
            self.udp.stats.sent += 1;
        } else if result != -libc::ECANCELED {
            self.udp.stats.send_failed += 1;
            if let Some(datagram) = &send.slot.datagram
                && refuses_gso(-result, datagram)
                && let Some(refused) = self.udp.gso_refused.get_mut(send.endpoint)
            {
                *refused = true;
            }
        }
        send.slot.datagram = None;
        if self.udp.spare_sends.len() < self.udp.max_sends {
            self.udp.spare_sends.push(send);
        }
    }

    /// Cancels every armed receive; none is armed again.
    pub(super) fn close_udp(&mut self) {
        if self.udp.closing {
            return;
        }
        self.udp.closing = true;
        let receives: Vec<u64> = self
            .ops
            .keys()
            .into_iter()
            .filter(|&key| {
                matches!(
                    self.ops.get_mut(key),
                    Some(Op::UdpRecv(_) | Op::UdpRecvMulti { .. })
                )
            })
            .collect();
        for key in receives {
            self.cancel(key);
        }
    }
}
