//! Multishot datagram receiving: one `RECVMSG` with `IORING_RECV_MULTISHOT` per socket; the
//! kernel picks a buffer of the datagram buffer ring for each datagram and lays it out as
//! `io_uring_recvmsg_out`, the sender's address, the control messages and the payload. The
//! buffer is copied out once ([`super::buf_ring::BufRing::take`]) and the payload is a slice
//! of that copy. A receive that ends (the ring ran dry, an error) is armed again; a kernel
//! without multishot `RECVMSG` (before 6.0: `EINVAL`) switches the backend to single-shot
//! receives.

use std::time::Instant;

use bytes::Bytes;
use io_uring::{cqueue, opcode, types};

use super::ops::Op;
use super::{Completion, UringBackend};
use crate::backend::InboundDatagram;
use crate::error::RuntimeError;
use crate::sys::udp::{Received, gro_segment_in, peer_from_name};

impl UringBackend {
    /// Arms endpoint `endpoint`'s multishot receive.
    pub(super) fn arm_udp_multi(&mut self, endpoint: usize) -> Result<(), RuntimeError> {
        let (Some(fd), Some(multi)) = (self.udp.fd(endpoint), self.udp.multi.as_ref()) else {
            return Ok(());
        };
        let template: *const libc::msghdr = &raw const *multi.template;
        let group = multi.ring.group();
        let entry = opcode::RecvMsgMulti::new(types::Fd(fd), template, group).build();
        let user_data = self.ops.insert(Op::UdpRecvMulti { endpoint });
        // SAFETY: the template is boxed in the backend and outlives every operation (the
        // teardown reaps them first); the buffers belong to the registered datagram ring; the
        // socket closes only with the backend.
        unsafe { self.push(entry.user_data(user_data)) }
    }

    /// A multishot completion that may carry a datagram: copy it out of its buffer (which
    /// goes back to the ring) and report it.
    pub(super) fn udp_received_multi(
        &mut self,
        endpoint: usize,
        completion: Completion,
    ) -> Result<(), RuntimeError> {
        let Some(bid) = cqueue::buffer_select(completion.flags) else {
            return Ok(());
        };
        let Some(multi) = self.udp.multi.as_mut() else {
            return Ok(());
        };
        let len = usize::try_from(completion.result).unwrap_or(0);
        let data = multi.ring.take(bid, len);
        if let Some(received) = parse(data, &multi.template) {
            self.udp
                .push_received(InboundDatagram { endpoint, received });
        }
        Ok(())
    }

    /// The multishot receive ended: armed again unless the backend is closing; on a kernel
    /// without multishot `RECVMSG`, single-shot receives from now on.
    pub(super) fn udp_multi_ended(
        &mut self,
        endpoint: usize,
        result: i32,
    ) -> Result<(), RuntimeError> {
        if result == -libc::ENOBUFS
            && let Some(multi) = self.udp.multi.as_mut()
        {
            // The datagram stays in the socket; the offer grows at the wait's end.
            multi.ring.ran_dry();
        }
        let ended = result == -libc::ECANCELED || result == -libc::EBADF;
        if ended || self.quiescing || self.udp.closing {
            return Ok(());
        }
        if result == -libc::EINVAL {
            // Every socket's multishot receive fails so: the first switches them all.
            if self.udp.is_multishot() {
                tracing::info!(
                    "io_uring lacks multishot RECVMSG (Linux 6.0+): single-shot receives"
                );
                self.udp.single_shot_from_now();
                for endpoint in 0..self.udp.socket_count() {
                    self.arm_udp_endpoint(endpoint)?;
                }
            }
            return Ok(());
        }
        self.arm_udp_multi(endpoint)
    }

    /// Once per wait, after the completions: the datagram ring's offer follows the traffic.
    pub(super) fn adjust_udp_ring(&mut self, now: Instant) {
        let Some(multi) = self.udp.multi.as_mut() else {
            return;
        };
        if multi.ring.adjust(now)
            && self.buffers_settled()
            && let Some(multi) = self.udp.multi.as_mut()
        {
            multi.ring.trim();
        }
    }
}

/// The datagram in a provided buffer laid out as `io_uring_recvmsg_out`, name, control
/// messages, payload; `None` for a truncated one or an unknown sender.
fn parse(data: Bytes, template: &libc::msghdr) -> Option<Received> {
    let out = types::RecvMsgOut::parse(&data, template).ok()?;
    if out.is_payload_truncated() || out.is_name_data_truncated() {
        return None;
    }
    let peer = peer_from_name(out.name_data())?;
    let segment_size = gro_segment_in(out.control_data());
    let payload = out.payload_data();
    let start = payload.as_ptr() as usize - data.as_ptr() as usize;
    let end = start + payload.len();
    Some(Received {
        peer,
        data: data.slice(start..end),
        segment_size,
    })
}
