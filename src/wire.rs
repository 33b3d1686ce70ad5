//! The DNS vocabulary every part shares: type, class and response codes with their mnemonics, and
//! names in wire form (length-prefixed lower-case labels) and as master-file text. It depends on
//! nothing else in the crate, so the zone, the DNS paths and the metrics all build on it.

pub const TYPE_A: u16 = 1;
pub const TYPE_NS: u16 = 2;
pub const TYPE_SOA: u16 = 6;
pub const TYPE_TXT: u16 = 16;
pub const TYPE_AAAA: u16 = 28;
pub const TYPE_SRV: u16 = 33;
pub const TYPE_OPT: u16 = 41;
pub const TYPE_IXFR: u16 = 251;
pub const TYPE_AXFR: u16 = 252;
pub const TYPE_ANY: u16 = 255;
pub const CLASS_IN: u16 = 1;

pub const RCODE_NOERROR: u16 = 0;
pub const RCODE_FORMERR: u16 = 1;
pub const RCODE_SERVFAIL: u16 = 2;
pub const RCODE_NXDOMAIN: u16 = 3;
pub const RCODE_NOTIMP: u16 = 4;
pub const RCODE_REFUSED: u16 = 5;
pub const RCODE_BADVERS: u16 = 16;

/// A resource record's owner, type, class IN, TTL and data length: the 12 bytes before its
/// data, the owner a compression pointer to message offset `owner`.
#[inline]
pub fn record_head(owner: u16, rtype: u16, ttl: [u8; 4], rdlen: u16) -> [u8; 12] {
    let ([o0, o1], [t0, t1], [c0, c1], [r0, r1]) = (
        (0xC000 | owner).to_be_bytes(),
        rtype.to_be_bytes(),
        CLASS_IN.to_be_bytes(),
        rdlen.to_be_bytes(),
    );
    [
        o0, o1, t0, t1, c0, c1, ttl[0], ttl[1], ttl[2], ttl[3], r0, r1,
    ]
}

/// Size of the OPT record we append to answers of EDNS queries; bodies leave room for it.
pub const OPT_LEN: usize = 11;

/// Mnemonics of the types a query to this server may name that anyone reads the figures for:
/// the types CoreDNS's metrics give their own label (`monitorType`), and OPT.
const TYPES: [(u16, &str); 20] = [
    (TYPE_A, "A"),
    (TYPE_NS, "NS"),
    (5, "CNAME"),
    (TYPE_SOA, "SOA"),
    (12, "PTR"),
    (15, "MX"),
    (TYPE_TXT, "TXT"),
    (TYPE_AAAA, "AAAA"),
    (TYPE_SRV, "SRV"),
    (TYPE_OPT, "OPT"),
    (43, "DS"),
    (46, "RRSIG"),
    (47, "NSEC"),
    (48, "DNSKEY"),
    (50, "NSEC3"),
    (64, "SVCB"),
    (65, "HTTPS"),
    (TYPE_IXFR, "IXFR"),
    (TYPE_AXFR, "AXFR"),
    (TYPE_ANY, "ANY"),
];

/// Mnemonics of the response codes this server sends.
const RCODES: [(u16, &str); 7] = [
    (RCODE_NOERROR, "NOERROR"),
    (RCODE_FORMERR, "FORMERR"),
    (RCODE_SERVFAIL, "SERVFAIL"),
    (RCODE_NXDOMAIN, "NXDOMAIN"),
    (RCODE_NOTIMP, "NOTIMP"),
    (RCODE_REFUSED, "REFUSED"),
    (RCODE_BADVERS, "BADVERS"),
];

/// The mnemonic of type `t`, if it is one this table knows.
pub fn type_name(t: u16) -> Option<&'static str> {
    TYPES.iter().find(|(c, _)| *c == t).map(|(_, n)| *n)
}

/// The mnemonic of response code `r`, if this server sends it.
pub fn rcode_name(r: u16) -> Option<&'static str> {
    RCODES.iter().find(|(c, _)| *c == r).map(|(_, n)| *n)
}

/// Lower-case wire form of a dotted name (`a.b.` or `a.b`); `None` if a label is empty or over
/// 63 octets, or the name is over 255 octets.
pub fn wire_name(text: &str) -> Option<Vec<u8>> {
    let text = text.strip_suffix('.').unwrap_or(text);
    if text.is_empty() {
        return Some(vec![0]);
    }
    child(text, &[0])
}

/// `label` (one or more dotted labels) prepended to the wire name `parent`, lower-cased, or
/// `None` when a label is empty or too long, or the result is.
pub fn child(label: &str, parent: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(label.len() + 1 + parent.len());
    for l in label.split('.') {
        if l.is_empty() || l.len() > 63 {
            return None;
        }
        out.push(l.len() as u8);
        out.extend(l.bytes().map(|b| b.to_ascii_lowercase()));
    }
    out.extend_from_slice(parent);
    (out.len() <= 255).then_some(out)
}

/// Master-file text of an uncompressed wire name, with the trailing dot.
pub fn name_text(wire: &[u8]) -> String {
    WireName(wire).to_string()
}

/// An uncompressed wire name as master-file text: absolute, with dots and odd bytes escaped so
/// the text is unambiguous. It stops at the root label or at anything that is not a label.
pub struct WireName<'a>(pub &'a [u8]);

impl std::fmt::Display for WireName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.0;
        let mut i = 0;
        let mut any = false;
        while let Some(&l) = p.get(i) {
            if l == 0 || l > 63 {
                break;
            }
            let Some(label) = p.get(i + 1..i + 1 + l as usize) else {
                break;
            };
            for &b in label {
                match b {
                    b'.' | b'\\' => write!(f, "\\{}", b as char)?,
                    0x21..=0x7E => write!(f, "{}", b as char)?,
                    _ => write!(f, "\\{b:03}")?,
                }
            }
            f.write_str(".")?;
            any = true;
            i += 1 + l as usize;
        }
        if !any {
            f.write_str(".")?;
        }
        Ok(())
    }
}

/// A lower-case RFC 1123 DNS label: 1-63 of `[a-z0-9-]`, not starting or ending with `-`.
pub fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A DNS label as an object may spell it: lower-cased, if it then is one (see [`is_label`]).
pub fn label(text: &str) -> Option<String> {
    let l = text.to_ascii_lowercase();
    is_label(&l).then_some(l)
}

/// A cluster id as names carry it: one lower-case DNS label, or two (`name.context`, as
/// KEP-1645 allows).
pub fn is_cluster_id(s: &str) -> bool {
    (1..=2).contains(&s.split('.').count()) && s.split('.').all(is_label)
}

/// A cluster id as a person wrote it (a flag, a ClusterProperty's value): trimmed and
/// lower-cased, if it then is one (see [`is_cluster_id`]).
pub fn cluster_id(text: &str) -> Option<String> {
    let id = text.trim().to_ascii_lowercase();
    is_cluster_id(&id).then_some(id)
}

/// Whether `key` is a label or annotation key Kubernetes accepts (`[prefix/]name`: a DNS
/// subdomain of at most 253 and a name as [`is_label_value`], not empty); if not, why.
pub fn label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let subdomain = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                let b = l.as_bytes();
                !b.is_empty()
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                    && b[0] != b'-'
                    && b[b.len() - 1] != b'-'
            });
        if !subdomain {
            return Err(format!(
                "prefix {p:?} is not a lower-case DNS subdomain of at most 253 characters"
            ));
        }
    }
    if name.is_empty() || !is_label_value(name) {
        return Err(format!(
            "name {name:?} is not 1-63 of [A-Za-z0-9-_.], beginning and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// Whether `v` is a label value Kubernetes accepts: empty, or at most 63 of
/// `[A-Za-z0-9-_.]` beginning and ending with a letter or digit.
pub fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_go_to_wire_form_and_back() {
        let w = wire_name("Web.Shop.svc.clusterset.local.").unwrap();
        assert_eq!(&w[..4], b"\x03web");
        assert_eq!(name_text(&w), "web.shop.svc.clusterset.local.");
        assert_eq!(wire_name("."), Some(vec![0]));
        assert_eq!(wire_name(""), Some(vec![0]));
        assert_eq!(name_text(&[0]), ".");
        assert_eq!(wire_name("a..b"), None);
        assert_eq!(wire_name(&"a".repeat(64)), None);
        let long = vec!["a".repeat(63); 4].join(".");
        assert_eq!(wire_name(&long), None, "256 octets");
        assert_eq!(name_text(b"\x03a.b\x00"), "a\\.b.");
        assert_eq!(name_text(b"\x02a\x01\x00"), "a\\001.");
        assert_eq!(name_text(&child("x.Y", b"\x01b\x00").unwrap()), "x.y.b.");
    }

    #[test]
    fn mnemonics() {
        assert_eq!(type_name(28), Some("AAAA"));
        assert_eq!(type_name(99), None);
        assert_eq!(rcode_name(3), Some("NXDOMAIN"));
        assert_eq!(rcode_name(9), None);
    }

    #[test]
    fn label_keys_and_values_as_kubernetes_takes_them() {
        for ok in ["app", "example.com/tier", "a.b-c/x_y.z", &"a".repeat(63)] {
            assert_eq!(label_key(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("", "name \"\""),
            ("Example.com/x", "prefix"),
            ("-a.com/x", "prefix"),
            ("a.com/", "name"),
            ("a/b/c", "prefix \"a/b\""),
            ("x_", "name"),
            (&"a".repeat(64), "name"),
        ] {
            let e = label_key(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(is_label_value(""));
        assert!(is_label_value("v1.2_3-x"));
        assert!(!is_label_value("-v"));
        assert!(!is_label_value("a b"));
        assert!(!is_label_value(&"a".repeat(64)));
    }
}
