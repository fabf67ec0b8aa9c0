//! The runtime's record of each virtual connection: which endpoint drives it, its addresses,
//! what the driver still holds for it, and where its close stands.

use std::collections::HashMap;
use std::net::SocketAddr;

use crate::ids::ConnId;

/// One virtual connection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VirtualConn {
    /// Index of its endpoint in the shard's endpoint list.
    pub(crate) endpoint: usize,
    pub(crate) peer: SocketAddr,
    pub(crate) local: SocketAddr,
    /// Bytes the driver holds for it and has not sent ([`super::DriverIo::set_unsent`]).
    pub(crate) unsent: usize,
    /// How the driver was told to close it ([`super::DatagramDriver::on_close`]).
    pub(crate) close_told: Option<super::DriverClose>,
    /// The driver reported it closed ([`super::DriverIo::closed`]): release it.
    pub(crate) driver_closed: bool,
    /// The driver was told that the handler shut its writing down.
    pub(crate) finish_told: bool,
}

impl VirtualConn {
    pub(crate) fn new(endpoint: usize, peer: SocketAddr, local: SocketAddr) -> Self {
        Self {
            endpoint,
            peer,
            local,
            unsent: 0,
            close_told: None,
            driver_closed: false,
            finish_told: false,
        }
    }
}

/// Who the transport says is at the other end of a virtual connection (a verified client
/// certificate's name, say): set by its driver, read by the handler
/// ([`crate::ShardCtx::peer_identity`]). The runtime only keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerIdentity {
    /// The transport vouches for this name.
    Named(Box<str>),
    /// The transport was asked for a name and has none (no certificate, or one without a
    /// name): the handler decides (a broker refuses the login).
    Unnamed,
}

/// The shard's virtual connections (empty without datagram endpoints).
#[derive(Default)]
pub(crate) struct VirtualConns {
    conns: HashMap<ConnId, VirtualConn>,
    /// Identities the drivers set, for the connections that have one.
    identities: HashMap<ConnId, PeerIdentity>,
}

impl VirtualConns {
    pub(crate) fn insert(&mut self, id: ConnId, conn: VirtualConn) {
        self.conns.insert(id, conn);
    }

    /// `id`'s record. Asked on TCP paths too (`queued_bytes` per delivery, addresses): a
    /// shard without virtual connections answers without hashing.
    #[inline]
    pub(crate) fn get(&self, id: ConnId) -> Option<&VirtualConn> {
        if self.conns.is_empty() {
            return None;
        }
        self.conns.get(&id)
    }

    pub(crate) fn get_mut(&mut self, id: ConnId) -> Option<&mut VirtualConn> {
        self.conns.get_mut(&id)
    }

    pub(crate) fn remove(&mut self, id: ConnId) -> Option<VirtualConn> {
        self.identities.remove(&id);
        self.conns.remove(&id)
    }

    pub(crate) fn set_identity(&mut self, id: ConnId, identity: PeerIdentity) {
        if self.conns.contains_key(&id) {
            self.identities.insert(id, identity);
        }
    }

    pub(crate) fn identity(&self, id: ConnId) -> Option<&PeerIdentity> {
        self.identities.get(&id)
    }

    pub(crate) fn shrink(&mut self) {
        self.conns.shrink_to_fit();
        self.identities.shrink_to_fit();
    }
}
