//! [`OwnLinks`]: the source addresses of the broker's own connections to itself (the bridges'
//! local links), which the `[ip]` guard neither limits nor bans.
//!
//! A bridge binds its local socket (loopback, a port the kernel picks) before it connects and
//! registers that address here, so the shard that accepts the connection finds it already
//! registered. While the bridge's socket holds the port no other process can connect from it,
//! so a local process cannot pass for a bridge by its address alone (as it could if all of
//! loopback were exempt). The registration ends when the link's [`OwnLink`] is dropped.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The registered source addresses; shared by the guard and the bridges.
#[derive(Debug, Default)]
pub struct OwnLinks {
    addrs: Mutex<HashSet<SocketAddr>>,
    /// How many are registered (the guard's fast path skips the lock at 0).
    count: AtomicUsize,
}

impl OwnLinks {
    fn addrs(&self) -> MutexGuard<'_, HashSet<SocketAddr>> {
        self.addrs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `addr` until the returned handle is dropped.
    pub fn register(self: &Arc<Self>, addr: SocketAddr) -> OwnLink {
        let addr = canonical(addr);
        if self.addrs().insert(addr) {
            self.count.fetch_add(1, Ordering::AcqRel);
        }
        OwnLink {
            links: Arc::clone(self),
            addr,
        }
    }

    /// Whether a connection from `peer` is one of the broker's own.
    pub fn contains(&self, peer: SocketAddr) -> bool {
        self.count.load(Ordering::Acquire) != 0 && self.addrs().contains(&canonical(peer))
    }
}

/// IPv4-mapped IPv6 addresses as IPv4.
fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

/// One registered source address; dropping it ends the registration.
#[derive(Debug)]
pub struct OwnLink {
    links: Arc<OwnLinks>,
    addr: SocketAddr,
}

impl Drop for OwnLink {
    fn drop(&mut self) {
        if self.links.addrs().remove(&self.addr) {
            self.links.count.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_lasts_as_long_as_its_handle() {
        let links = Arc::new(OwnLinks::default());
        let addr: SocketAddr = "127.0.0.1:40000".parse().unwrap_or_else(|_| unreachable!());
        assert!(!links.contains(addr));
        let link = links.register(addr);
        assert!(links.contains(addr));
        assert!(!links.contains("127.0.0.1:40001".parse().unwrap_or_else(|_| unreachable!())));
        drop(link);
        assert!(!links.contains(addr));
    }
}
