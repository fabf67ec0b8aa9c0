//! CIDR blocks (`10.0.0.0/8`, `2001:db8::/32`, or a single address): the broker's `[ip]` allow
//! and deny lists, and the balancers trusted to send a PROXY protocol header.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// Why a CIDR block did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not an address or an address block like 10.0.0.0/8 ({problem})")]
pub struct CidrError {
    text: String,
    problem: &'static str,
}

impl Cidr {
    /// Whether `ip` is in the block (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_matches(
                u128::from(u32::from(net)) << 96,
                u128::from(u32::from(ip)) << 96,
                self.prefix,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_matches(u128::from(net), u128::from(ip), self.prefix)
            }
            _ => false,
        }
    }
}

/// Whether the first `prefix` bits of `a` and `b` are equal.
fn prefix_matches(a: u128, b: u128, prefix: u8) -> bool {
    if prefix == 0 {
        return true;
    }
    let mask = u128::MAX << (128 - u32::from(prefix));
    a & mask == b & mask
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |problem| CidrError {
            text: text.to_owned(),
            problem,
        };
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address.trim().parse().map_err(|_| error("bad address"))?;
        let network = network.to_canonical();
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(prefix) => prefix
                .trim()
                .parse()
                .map_err(|_| error("bad prefix length"))?,
        };
        if prefix > max {
            return Err(error("prefix length too long for the address"));
        }
        Ok(Self { network, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        text.parse().expect("valid block")
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("valid address")
    }

    #[test]
    fn blocks_contain_their_addresses() {
        assert!(cidr("10.0.0.0/8").contains(ip("10.255.0.1")));
        assert!(!cidr("10.0.0.0/8").contains(ip("11.0.0.1")));
        assert!(cidr("127.0.0.2").contains(ip("127.0.0.2")));
        assert!(!cidr("127.0.0.2").contains(ip("127.0.0.1")));
        assert!(cidr("0.0.0.0/0").contains(ip("1.2.3.4")));
        assert!(!cidr("0.0.0.0/0").contains(ip("::1")));
        assert!(cidr("2001:db8::/32").contains(ip("2001:db8:1::5")));
        assert!(!cidr("2001:db8::/32").contains(ip("2001:db9::5")));
        assert!(cidr("192.168.1.0/24").contains(ip("::ffff:192.168.1.7")));
    }

    #[test]
    fn bad_blocks_say_why() {
        for bad in ["10.0.0.0/33", "10.0.0/8", "::1/129", "x", "10.0.0.0/-1"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }
}
