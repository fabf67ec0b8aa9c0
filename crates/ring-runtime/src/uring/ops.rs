//! The op table: every in-flight io_uring operation with the resources it lends to the kernel
//! (write batches and their iovecs/msghdr, connect addresses, the eventfd read buffer). An
//! entry is removed only when the operation's last completion arrives — also after a cancel —
//! so nothing the kernel may touch is freed early.

use bytes::Bytes;

use super::udp_state::{UdpRecv, UdpSend};
use crate::conn::WriteBatch;
use crate::ids::ConnId;
use crate::slab::GenSlab;

/// A write in flight: the frames, their iovecs and the msghdr pointing at them. Boxed so
/// the addresses stay put while the table moves entries around.
pub(crate) struct UringWrite {
    /// The connection written to (set when the write starts).
    pub(crate) conn: ConnId,
    /// Sent with `SENDMSG_ZC`: a notification follows the result.
    pub(crate) zerocopy: bool,
    pub(crate) batch: WriteBatch,
    pub(crate) msg: libc::msghdr,
    /// Zero-copy sends keep their frames here from the result until the notification.
    pub(crate) hold: Vec<Bytes>,
}

impl Default for UringWrite {
    fn default() -> Self {
        Self {
            conn: ConnId::from_u64(0),
            zerocopy: false,
            batch: WriteBatch::default(),
            // SAFETY: all-zero is a valid msghdr (no name, no iovecs, no control data).
            msg: unsafe { std::mem::zeroed() },
            hold: Vec::new(),
        }
    }
}

impl UringWrite {
    /// Points the msghdr at the batch's iovecs.
    pub(crate) fn prepare(&mut self) {
        self.msg.msg_iov = self.batch.iovecs.as_mut_ptr();
        self.msg.msg_iovlen = self.batch.iovecs.len() as _;
    }
}

/// An outbound connect in flight: the address must outlive the operation.
pub(crate) struct UringConnect {
    pub(crate) conn: ConnId,
    /// Kept alive for the kernel; never read back.
    pub(crate) addr: socket2::SockAddr,
}

/// What an in-flight operation is, and what it owns (16 bytes: every payload is one word, so
/// that an idle connection's receive costs a 24-byte slot with its generation).
pub(crate) enum Op {
    /// Multishot accept on listener `listener`.
    Accept { listener: usize },
    /// Multishot receive with the shard's buffer group.
    Recv { conn: ConnId },
    /// sendmsg / sendmsg_zc of one batch.
    Write(Box<UringWrite>),
    /// Outbound connect.
    Connect(Box<UringConnect>),
    /// 8-byte read of the shard's eventfd.
    WakeRead {
        /// Kept alive for the kernel; the value read is not needed.
        _buf: Box<[u8; 8]>,
    },
    /// An `ASYNC_CANCEL` request (its own completion is just accounted).
    Cancel,
    /// A single-shot datagram receive on an endpoint's socket.
    UdpRecv(Box<UdpRecv>),
    /// The multishot datagram receive of endpoint `endpoint`'s socket (its buffer ring).
    UdpRecvMulti { endpoint: usize },
    /// A datagram send on an endpoint's socket.
    UdpSend(Box<UdpSend>),
}

/// In-flight operations by user_data (`generation << 32 | (index + 1)`, never 0).
pub(crate) struct OpTable {
    slab: GenSlab<Op>,
}

impl OpTable {
    pub(crate) fn new() -> Self {
        Self {
            slab: GenSlab::new(),
        }
    }

    pub(crate) fn insert(&mut self, op: Op) -> u64 {
        let (index, generation) = self.slab.insert(op);
        u64::from(generation) << 32 | (u64::from(index) + 1)
    }

    pub(crate) fn get_mut(&mut self, user_data: u64) -> Option<&mut Op> {
        let (index, generation) = split(user_data)?;
        self.slab.get_mut(index, generation)
    }

    pub(crate) fn remove(&mut self, user_data: u64) -> Option<Op> {
        let (index, generation) = split(user_data)?;
        self.slab.remove(index, generation)
    }

    pub(crate) fn len(&self) -> usize {
        self.slab.len()
    }

    /// Gives up every entry without dropping it: what the kernel may still touch stays
    /// allocated for the life of the process. Only for a teardown that could not reap them.
    pub(crate) fn leak(&mut self) {
        std::mem::forget(std::mem::replace(&mut self.slab, GenSlab::new()));
    }

    /// user_data of every in-flight operation.
    pub(crate) fn keys(&self) -> Vec<u64> {
        self.slab
            .keys()
            .into_iter()
            .map(|(index, generation)| u64::from(generation) << 32 | (u64::from(index) + 1))
            .collect()
    }
}

fn split(user_data: u64) -> Option<(u32, u32)> {
    let low = (user_data & u64::from(u32::MAX)) as u32;
    Some((low.checked_sub(1)?, (user_data >> 32) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_is_never_zero_and_round_trips() {
        let mut table = OpTable::new();
        let first = table.insert(Op::Cancel);
        assert_ne!(first, 0);
        assert!(matches!(table.remove(first), Some(Op::Cancel)));
        let second = table.insert(Op::Cancel);
        assert_ne!(first, second, "reused slot, new generation");
        assert!(table.remove(first).is_none());
        assert!(table.get_mut(0).is_none());
        assert_eq!(table.keys(), vec![second]);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_op_is_two_words() {
        // Every idle connection has one in flight (its multishot receive).
        assert!(std::mem::size_of::<Op>() <= 16);
    }
}
