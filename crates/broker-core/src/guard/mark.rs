//! What a connection keeps of its admission by the guard: its client's address, for the failed
//! logins it may report and for the count it gives back at close, in 6 bytes of its record
//! (an IPv6 address waits beside it, in its shard's door: `shard/door.rs`).

use std::net::{IpAddr, Ipv4Addr};

/// A connection's mark from the `[ip]` guard, set when the guard admitted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DoorMark {
    /// Not judged by the guard (it had no rules when the connection came, or the connection
    /// still waits for its PROXY protocol header).
    #[default]
    Unmarked,
    /// An IPv4 client (an IPv4-mapped IPv6 address counts as IPv4).
    V4 {
        ip: Ipv4Addr,
        /// Counted against its address's open connections (given back at close).
        counted: bool,
    },
    /// An IPv6 client, whose address its shard's door keeps.
    V6 {
        /// Counted against its address's open connections (given back at close).
        counted: bool,
    },
}

impl DoorMark {
    /// The mark of a client at `ip` (canonical), counted or not.
    pub fn of(ip: IpAddr, counted: bool) -> Self {
        match ip {
            IpAddr::V4(ip) => Self::V4 { ip, counted },
            IpAddr::V6(_) => Self::V6 { counted },
        }
    }

    /// Whether its address's count holds this connection.
    pub fn counted(self) -> bool {
        match self {
            Self::Unmarked => false,
            Self::V4 { counted, .. } | Self::V6 { counted } => counted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_fits_in_six_bytes() {
        assert!(std::mem::size_of::<DoorMark>() <= 6);
    }

    #[test]
    fn a_mark_says_what_it_counted() {
        let v4 = DoorMark::of(IpAddr::from([10, 0, 0, 1]), true);
        assert_eq!(
            v4,
            DoorMark::V4 {
                ip: Ipv4Addr::new(10, 0, 0, 1),
                counted: true
            }
        );
        let v6 = DoorMark::of("2001:db8::1".parse().unwrap(), false);
        assert_eq!(v6, DoorMark::V6 { counted: false });
        assert!(v4.counted() && !v6.counted() && !DoorMark::Unmarked.counted());
    }
}
