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

/// The shard's virtual connections (empty without datagram endpoints).
#[derive(Default)]
pub(crate) struct VirtualConns {
    conns: HashMap<ConnId, VirtualConn>,
}

impl VirtualConns {
    pub(crate) fn insert(&mut self, id: ConnId, conn: VirtualConn) {
        self.conns.insert(id, conn);
    }

    pub(crate) fn get(&self, id: ConnId) -> Option<&VirtualConn> {
        self.conns.get(&id)
    }

    pub(crate) fn get_mut(&mut self, id: ConnId) -> Option<&mut VirtualConn> {
        self.conns.get_mut(&id)
    }

    pub(crate) fn remove(&mut self, id: ConnId) -> Option<VirtualConn> {
        self.conns.remove(&id)
    }

    pub(crate) fn shrink(&mut self) {
        self.conns.shrink_to_fit();
    }
}
