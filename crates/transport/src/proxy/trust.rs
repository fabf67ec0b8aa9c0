//! [`ProxyTrust`]: the addresses whose PROXY protocol headers are believed (the load
//! balancers). A header is a claim about someone else's address: from anyone else it would let
//! a client choose the address the `[ip]` rules, bans and logs see.

use std::net::IpAddr;

use crate::cidr::Cidr;

/// The address blocks a PROXY protocol header may come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyTrust(Vec<Cidr>);

impl ProxyTrust {
    pub fn new(blocks: Vec<Cidr>) -> Self {
        Self(blocks)
    }

    /// Loopback only (`127.0.0.0/8` and `::1`): a balancer on the broker's own host.
    pub fn loopback() -> Self {
        let block = |text: &str| text.parse().expect("invariant: a valid block");
        Self(vec![block("127.0.0.0/8"), block("::1")])
    }

    /// Whether a header from `peer` is believed.
    pub fn trusts(&self, peer: IpAddr) -> bool {
        self.0.iter().any(|block| block.contains(peer))
    }

    /// The blocks, as configured.
    pub fn blocks(&self) -> &[Cidr] {
        &self.0
    }
}

impl Default for ProxyTrust {
    fn default() -> Self {
        Self::loopback()
    }
}
