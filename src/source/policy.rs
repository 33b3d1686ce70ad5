//! The trust boundary between member clusters and the clients who resolve their names. Imported
//! objects come from clusters this one does not control (an exporting cluster may be wrong or
//! compromised), so before an address reaches the zone it must be one a client may be sent to,
//! and objects in the namespaces the cluster's own system lives in are not served at all.
//!
//! An address is refused alone (the object's other addresses and names stay): loopback,
//! unspecified (all of 0.0.0.0/8: Linux connects 0.0.0.0 to the local host), link-local (which
//! holds the cloud metadata address 169.254.169.254), multicast, the limited broadcast, the
//! metadata addresses that lie outside link-local (AWS's fd00:ec2::254, Alibaba's
//! 100.100.100.200), IPv4-mapped and IPv4-compatible IPv6 forms of all of those (a dual-stack
//! client reaches `::ffff:127.0.0.1` at 127.0.0.1), and whatever `--deny-cidr` adds or
//! `--allow-cidr` leaves out.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::cidr::Cidr;
use crate::model::Refusal;

/// The namespaces not served unless the operator says so: the cluster's own system.
pub const EXCLUDED_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// What imported data may say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// `--deny-cidr`: refused on top of the classes every server refuses.
    pub deny: Vec<Cidr>,
    /// `--allow-cidr`: when not empty, only addresses inside these are answered.
    pub allow: Vec<Cidr>,
    /// `--exclude-namespace`: ServiceImports and EndpointSlices here are not served.
    pub exclude_namespaces: Vec<String>,
}

/// A `--exclude-namespace` that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("--exclude-namespace {0:?} is not a namespace name (a lower-case DNS label)")]
    ExcludeNamespace(String),
    #[error(
        "namespace {0:?} is given to --namespace but excluded by --exclude-namespace \
         (default kube-system,kube-public,kube-node-lease); give --exclude-namespace without it \
         to serve it"
    )]
    NamespaceExcluded(String),
}

impl Policy {
    /// From `--deny-cidr`, `--allow-cidr` and `--exclude-namespace` (blank entries dropped),
    /// checked against the namespaces watched (`--namespace`): one both watched and excluded
    /// would never be served.
    pub fn from_flags(
        deny: &[Cidr],
        allow: &[Cidr],
        exclude: &[String],
        watched: &[String],
    ) -> Result<Self, PolicyError> {
        let exclude: Vec<String> = exclude
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .map(String::from)
            .collect();
        if let Some(bad) = exclude.iter().find(|n| !crate::wire::is_label(n)) {
            return Err(PolicyError::ExcludeNamespace(bad.clone()));
        }
        if let Some(both) = watched.iter().find(|n| exclude.contains(n)) {
            return Err(PolicyError::NamespaceExcluded(both.clone()));
        }
        Ok(Policy {
            deny: deny.to_vec(),
            allow: allow.to_vec(),
            exclude_namespaces: exclude,
        })
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            deny: Vec::new(),
            allow: Vec::new(),
            exclude_namespaces: EXCLUDED_NAMESPACES.map(String::from).to_vec(),
        }
    }
}

/// Why an address is never answered; the word is the metric's `reason` label.
pub fn refusal(policy: &Policy, ip: IpAddr) -> Option<Refusal> {
    if let Some(reason) = special(ip) {
        return Some(reason);
    }
    // Cidr::contains treats IPv4-mapped addresses as IPv4, so an IPv4 block covers both forms.
    let ip = as_v4(ip).map_or(ip, IpAddr::V4);
    if policy.deny.iter().any(|c| c.contains(ip)) {
        return Some(Refusal::Denied);
    }
    if !policy.allow.is_empty() && !policy.allow.iter().any(|c| c.contains(ip)) {
        return Some(Refusal::NotAllowed);
    }
    None
}

impl Policy {
    /// Whether objects in `namespace` are served.
    pub fn serves_namespace(&self, namespace: &str) -> bool {
        !self.exclude_namespaces.iter().any(|n| n == namespace)
    }
}

/// The IPv4 address an IPv6 one stands for: mapped (`::ffff:a.b.c.d`) or compatible
/// (`::a.b.c.d`, deprecated but still routed so by some stacks); not `::` or `::1`.
fn as_v4(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V6(v6) if !v6.is_unspecified() && !v6.is_loopback() => v6.to_ipv4(),
        _ => None,
    }
}

const AWS_METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
const ALIBABA_METADATA: Ipv4Addr = Ipv4Addr::new(100, 100, 100, 200);

/// The classes refused whatever the flags say.
fn special(ip: IpAddr) -> Option<Refusal> {
    let v4 = match (ip, as_v4(ip)) {
        (IpAddr::V4(v4), _) | (IpAddr::V6(_), Some(v4)) => v4,
        (IpAddr::V6(v6), None) => {
            return if v6.is_loopback() {
                Some(Refusal::Loopback)
            } else if v6.is_unspecified() {
                Some(Refusal::Unspecified)
            } else if v6.segments()[0] & 0xffc0 == 0xfe80 {
                Some(Refusal::LinkLocal)
            } else if v6.is_multicast() {
                Some(Refusal::Multicast)
            } else if v6 == AWS_METADATA_V6 {
                Some(Refusal::Metadata)
            } else {
                None
            };
        }
    };
    if v4.is_loopback() {
        Some(Refusal::Loopback)
    } else if v4.octets()[0] == 0 {
        Some(Refusal::Unspecified)
    } else if v4.is_link_local() {
        Some(Refusal::LinkLocal)
    } else if v4.is_multicast() {
        Some(Refusal::Multicast)
    } else if v4.is_broadcast() {
        Some(Refusal::Broadcast)
    } else if v4 == ALIBABA_METADATA {
        Some(Refusal::Metadata)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(policy: &Policy, ip: &str) -> Option<Refusal> {
        refusal(policy, ip.parse().unwrap())
    }

    #[test]
    fn every_refused_class_with_its_reason() {
        let p = Policy::default();
        for (ip, why) in [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::127.0.0.1", "loopback"),
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("::", "unspecified"),
            ("::ffff:0.0.0.0", "unspecified"),
            ("169.254.169.254", "link_local"),
            ("169.254.0.1", "link_local"),
            ("fe80::1", "link_local"),
            ("febf::1", "link_local"),
            ("::ffff:169.254.169.254", "link_local"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("ff02::1", "multicast"),
            ("::ffff:224.0.0.251", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("::ffff:255.255.255.255", "broadcast"),
            ("fd00:ec2::254", "metadata"),
            ("100.100.100.200", "metadata"),
            ("::ffff:100.100.100.200", "metadata"),
        ] {
            assert_eq!(reason(&p, ip).map(Refusal::label), Some(why), "{ip}");
        }
        for ip in [
            "10.42.0.10",
            "198.18.0.1",
            "100.64.0.1",
            "100.100.100.201",
            "fd00:ec2::253",
            "fec0::1",
            "2001:db8::1",
            "::ffff:10.0.0.1",
            "fd00::1",
        ] {
            assert_eq!(reason(&p, ip), None, "{ip}");
        }
    }

    #[test]
    fn deny_and_allow_blocks_cover_the_mapped_forms_too() {
        let p = Policy {
            deny: vec![
                "198.18.0.0/24".parse().unwrap(),
                "fd00:1::/32".parse().unwrap(),
            ],
            allow: vec![
                "198.18.0.0/15".parse().unwrap(),
                "fd00::/8".parse().unwrap(),
            ],
            exclude_namespaces: vec![],
        };
        assert_eq!(reason(&p, "198.18.0.7"), Some(Refusal::Denied));
        assert_eq!(reason(&p, "::ffff:198.18.0.7"), Some(Refusal::Denied));
        assert_eq!(reason(&p, "fd00:1::5"), Some(Refusal::Denied));
        assert_eq!(reason(&p, "198.18.1.7"), None);
        assert_eq!(reason(&p, "::ffff:198.19.0.1"), None);
        assert_eq!(reason(&p, "fd42::1"), None);
        assert_eq!(reason(&p, "10.0.0.1"), Some(Refusal::NotAllowed));
        assert_eq!(reason(&p, "2001:db8::1"), Some(Refusal::NotAllowed));
        // The fixed classes come first, whatever the blocks say.
        assert_eq!(reason(&p, "::ffff:127.0.0.1"), Some(Refusal::Loopback));
        assert!(p.serves_namespace("kube-system"));
        assert!(!Policy::default().serves_namespace("kube-node-lease"));
        assert!(Policy::default().serves_namespace("shop"));
    }
}
