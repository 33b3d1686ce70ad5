//! Address blocks as flags take them (`--allow-transfer`, `--deny-cidr`, `--allow-cidr`).

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

/// An address block, as the flags take it: `10.0.0.0/8`, `::1/128`, or a bare address. The
/// block is `ipnet`'s; on top of it, an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, how a
/// dual-stack socket sees an IPv4 client) counts as the IPv4 address it maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr(IpNet);

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let not_a_block = || format!("{s:?} is not an address or CIDR block like 10.0.0.0/8");
        let Some((addr, prefix)) = s.split_once('/') else {
            return s
                .parse::<IpAddr>()
                .map(|a| Cidr(IpNet::from(a)))
                .map_err(|_| not_a_block());
        };
        let addr: IpAddr = addr.parse().map_err(|_| not_a_block())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        prefix
            .parse::<u8>()
            .ok()
            .and_then(|p| IpNet::new(addr, p).ok())
            .map(Cidr)
            .ok_or_else(|| format!("{s:?} has a prefix length outside 0-{max}"))
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Cidr {
    /// Whether `ip` is in the block; IPv4-mapped IPv6 clients count as IPv4.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&ip.to_canonical())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parse_and_contains() {
        let c: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(c.contains("10.1.200.3".parse().unwrap()));
        assert!(!c.contains("10.2.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:10.1.0.9".parse().unwrap()));
        assert!(!c.contains("::1".parse().unwrap()));
        let one: Cidr = "::1".parse().unwrap();
        assert!(one.contains("::1".parse().unwrap()));
        assert!(!one.contains("::2".parse().unwrap()));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("192.0.2.1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Cidr>().unwrap_err().contains("0-32"));
        assert!("ten".parse::<Cidr>().is_err());
        assert!("10.0.0.0/x".parse::<Cidr>().unwrap_err().contains("0-32"));
        // A block given with host bits keeps them in its text, and contains its network.
        let host: Cidr = "10.1.2.3/16".parse().unwrap();
        assert_eq!(host.to_string(), "10.1.2.3/16");
        assert!(host.contains("10.1.99.1".parse().unwrap()));
        assert_eq!(
            "fd00::1".parse::<Cidr>().unwrap().to_string(),
            "fd00::1/128"
        );
    }
}
