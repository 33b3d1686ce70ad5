//! The zone as records: what `clusterset-dns zone` prints (RFC 1035 master-file lines) and what
//! AXFR sends to clients in `--allow-transfer`. Both are read back from the very answers
//! [`super::respond`] gives for every name and type the zone holds, so they show exactly what
//! the server answers.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use hickory_proto::ProtoError;
use hickory_proto::op::Message;
use hickory_proto::rr::Name;
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder, NameEncoding};

use super::query::{Parsed, parse};
use super::{Transport, opt, outcome, respond_in};
use crate::dns::Outcome;
use crate::wire::{
    CLASS_IN, RCODE_NOERROR, TYPE_A, TYPE_AAAA, TYPE_ANY, TYPE_AXFR, TYPE_IXFR, TYPE_NS, TYPE_SOA,
    TYPE_SRV, TYPE_TXT, WireName,
};
use crate::zone::Zone;

const TYPE_CNAME: u16 = 5;
const TYPE_PTR: u16 = 12;
const TYPE_MX: u16 = 15;

/// One resource record, names uncompressed in lower-case wire form (as a transfer sends it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub name: Vec<u8>,
    pub rtype: u16,
    pub ttl: u32,
    /// With any names in it expanded (no compression pointers).
    pub rdata: Vec<u8>,
    /// The owner as hickory-proto reads it, whose order is RFC 4034's canonical order.
    owner: Name,
}

/// What `emit` writes with names uncompressed and lower-cased.
fn uncompressed(
    emit: impl FnOnce(&mut BinEncoder<'_>) -> Result<(), ProtoError>,
) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut encoder = BinEncoder::new(&mut out);
    encoder.set_name_encoding(NameEncoding::UncompressedLowercase);
    emit(&mut encoder).ok()?;
    Some(out)
}

/// The answer section of a response (read by hickory-proto), names expanded; `None` when the
/// message does not parse.
pub fn answers(msg: &[u8]) -> Option<Vec<Record>> {
    let message = Message::from_vec(msg).ok()?;
    message
        .answers
        .into_iter()
        .map(|r| {
            Some(Record {
                name: uncompressed(|e| r.name.emit(e))?,
                rtype: u16::from(r.record_type()),
                ttl: r.ttl,
                rdata: uncompressed(|e| r.data.emit(e))?,
                owner: r.name,
            })
        })
        .collect()
}

/// Every record of served zone `apex` (an index into [`Zone::apexes`]): the SOA first, then the
/// rest in canonical order of name, then type, then data. All from one generation of the zone,
/// so a transfer never mixes states.
pub fn records(zone: &Zone, apex: usize) -> Vec<Record> {
    let apex_name = &zone.apexes()[apex];
    let view = zone.view();
    let mut all = Vec::new();
    let mut out = Vec::new();
    let mut query = Vec::with_capacity(300);
    let mut ask = |name: &[u8], qtype: u16, all: &mut Vec<Record>| {
        query.clear();
        query.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        query.extend_from_slice(name);
        query.extend_from_slice(&qtype.to_be_bytes());
        query.extend_from_slice(&CLASS_IN.to_be_bytes());
        if respond_in(&view, &query, Transport::Tcp, &mut out)
            .is_some_and(|o| o.rcode == RCODE_NOERROR && o.apex == Some(apex))
        {
            all.extend(answers(&out).unwrap_or_default());
        }
    };
    ask(apex_name, TYPE_SOA, &mut all);
    for entry in view.snapshot() {
        // Names of a zone nested inside this one belong to that zone.
        if zone.apex_index(entry.name()) != Some(apex) {
            continue;
        }
        for qtype in entry.types().filter(|&t| t != TYPE_ANY && t != TYPE_SOA) {
            ask(entry.name(), qtype, &mut all);
        }
    }
    let first = all.len().min(1);
    all[first..].sort_by(|a, b| {
        a.owner
            .cmp(&b.owner)
            .then(a.rtype.cmp(&b.rtype))
            .then(a.rdata.cmp(&b.rdata))
    });
    all.dedup();
    all
}

fn name_text(out: &mut String, wire: &[u8]) {
    let _ = write!(out, "{}", WireName(wire));
}

/// Splits the names off the front of `rdata`.
fn take_name(rdata: &[u8]) -> (&[u8], &[u8]) {
    let mut i = 0;
    while i < rdata.len() && rdata[i] != 0 {
        i += 1 + rdata[i] as usize;
    }
    let end = (i + 1).min(rdata.len());
    rdata.split_at(end)
}

fn type_text(rtype: u16) -> String {
    crate::wire::type_name(rtype).map_or_else(|| format!("TYPE{rtype}"), str::to_string)
}

/// One record as a master-file line (the layout `dig` prints): `name TTL IN TYPE data`.
pub fn record_line(r: &Record) -> String {
    let mut s = String::new();
    name_text(&mut s, &r.name);
    let _ = write!(s, "\t{}\tIN\t{}\t", r.ttl, type_text(r.rtype));
    let d = &r.rdata[..];
    let u16_at = |i: usize| u16::from_be_bytes([d[i], d[i + 1]]);
    match r.rtype {
        TYPE_A if d.len() == 4 => {
            let _ = write!(s, "{}", Ipv4Addr::new(d[0], d[1], d[2], d[3]));
        }
        TYPE_AAAA if d.len() == 16 => {
            let a: [u8; 16] = d.try_into().expect("16 bytes");
            let _ = write!(s, "{}", Ipv6Addr::from(a));
        }
        TYPE_NS | TYPE_CNAME | TYPE_PTR => name_text(&mut s, d),
        TYPE_SRV if d.len() > 6 => {
            let _ = write!(s, "{} {} {} ", u16_at(0), u16_at(2), u16_at(4));
            name_text(&mut s, &d[6..]);
        }
        TYPE_MX if d.len() > 2 => {
            let _ = write!(s, "{} ", u16_at(0));
            name_text(&mut s, &d[2..]);
        }
        TYPE_SOA => {
            let (mname, rest) = take_name(d);
            let (rname, nums) = take_name(rest);
            name_text(&mut s, mname);
            s.push(' ');
            name_text(&mut s, rname);
            for n in nums.chunks_exact(4) {
                let _ = write!(s, " {}", u32::from_be_bytes(n.try_into().expect("4 bytes")));
            }
        }
        TYPE_TXT => {
            let mut i = 0;
            while i < d.len() {
                let l = d[i] as usize;
                if i > 0 {
                    s.push(' ');
                }
                s.push('"');
                for &b in d.get(i + 1..i + 1 + l).unwrap_or_default() {
                    match b {
                        b'"' | b'\\' => {
                            s.push('\\');
                            s.push(b as char);
                        }
                        0x20..=0x7E => s.push(b as char),
                        _ => {
                            let _ = write!(s, "\\{b:03}");
                        }
                    }
                }
                s.push('"');
                i += 1 + l;
            }
        }
        _ => {
            // RFC 3597 generic form.
            let _ = write!(s, "\\# {}", d.len());
            if !d.is_empty() {
                s.push(' ');
                d.iter().for_each(|b| {
                    let _ = write!(s, "{b:02x}");
                });
            }
        }
    }
    s
}

/// Every served zone in master-file form, each starting with a comment naming it.
pub fn zone_text(zone: &Zone) -> String {
    let mut out = String::new();
    for apex in 0..zone.apexes().len() {
        let mut origin = String::new();
        name_text(&mut origin, &zone.apexes()[apex]);
        let recs = records(zone, apex);
        let _ = writeln!(
            out,
            "; zone {origin} serial {} ({} records)",
            zone.serial(),
            recs.len()
        );
        for r in &recs {
            out.push_str(&record_line(r));
            out.push('\n');
        }
    }
    out
}

/// Most bytes of records per transfer message (well under the 64 KiB a TCP message can hold).
const MESSAGE_BUDGET: usize = 16 * 1024;

/// When `packet` asks for a transfer (AXFR, or IXFR, answered with the full zone as RFC 1995
/// §4 allows) of exactly a served zone's apex, writes the transfer's messages into `messages`
/// (unframed) and returns its outcome. `None`: not a transfer this function serves; answer it
/// through [`respond`](super::respond) (which refuses transfers).
pub fn transfer(zone: &Zone, packet: &[u8], messages: &mut Vec<Vec<u8>>) -> Option<Outcome> {
    messages.clear();
    let mut name = [0u8; 255];
    let Parsed::Query(q) = parse(packet, &mut name) else {
        return None;
    };
    if q.opcode != 0
        || q.qclass != CLASS_IN
        || !(q.qtype == TYPE_AXFR || q.qtype == TYPE_IXFR)
        || q.edns.is_some_and(|e| e.version > 0)
    {
        return None;
    }
    let apex = zone.apexes().iter().position(|a| a[..] == *q.lname)?;
    if !zone.synced() {
        // Half a zone must not look like the whole one.
        return None;
    }
    let mut recs = records(zone, apex);
    let soa = recs.first().cloned()?;
    recs.push(soa);
    let question = q.question.expect("a parsed query has its question");
    let mut i = 0;
    while i < recs.len() {
        let mut body = Vec::with_capacity(MESSAGE_BUDGET + 512);
        let mut n = 0u16;
        while i < recs.len() && (n == 0 || body.len() < MESSAGE_BUDGET) && n < u16::MAX {
            let r = &recs[i];
            body.extend_from_slice(&r.name);
            body.extend_from_slice(&r.rtype.to_be_bytes());
            body.extend_from_slice(&CLASS_IN.to_be_bytes());
            body.extend_from_slice(&r.ttl.to_be_bytes());
            body.extend_from_slice(&(r.rdata.len() as u16).to_be_bytes());
            body.extend_from_slice(&r.rdata);
            n += 1;
            i += 1;
        }
        // The question in the first message only (RFC 5936 §2.2.1).
        let first = messages.is_empty();
        let mut m = Vec::with_capacity(12 + question.len() + body.len() + 11);
        super::header(
            &mut m,
            &q,
            true,
            false,
            RCODE_NOERROR,
            [first as u16, n, 0, q.edns.is_some() as u16],
        );
        if first {
            m.extend_from_slice(question);
        }
        m.extend_from_slice(&body);
        opt(&mut m, &q.edns, RCODE_NOERROR);
        messages.push(m);
    }
    Some(outcome(&q, RCODE_NOERROR, Some(apex), false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_soa_first_then_in_canonical_order() {
        use std::sync::Arc;

        use crate::model::{
            Endpoint, ObjectKind, Port, Protocol, Service, ServiceKey, ServiceType, Slice, Update,
        };
        use crate::wire::wire_name;
        let zone = Arc::new(Zone::new(vec![wire_name("clusterset.local").unwrap()], 5));
        let metrics = Arc::new(crate::metrics::Metrics::new(
            "dns://test".into(),
            vec!["clusterset.local.".into()],
        ));
        let mut builder = crate::zone::build::Builder::new(zone.clone(), &[], metrics);
        let service = |ns: &str, name: &str, kind, hosts: &[&str]| Service {
            locality: crate::model::Locality::Any,
            slices_absent: false,
            key: ServiceKey {
                namespace: ns.into(),
                name: name.into(),
            },
            origin: ObjectKind::ServiceImport,
            kind,
            ips: if kind == ServiceType::ClusterSetIp {
                vec![[10, 0, 0, 1].into(), "fd00::1".parse().unwrap()]
            } else {
                vec![]
            },
            ports: vec![Port {
                name: Some("http".into()),
                protocol: Protocol::Tcp,
                port: 80,
            }],
            slices: vec![Slice {
                name: "s".into(),
                cluster: Some("east".into()),
                ports: vec![],
                endpoints: hosts
                    .iter()
                    .enumerate()
                    .map(|(i, h)| Endpoint {
                        addresses: vec![[10, 1, 0, i as u8 + 1].into()],
                        hostname: Some(h.to_string()),
                    })
                    .collect(),
            }],
        };
        // Given out of order: names, namespaces and hosts.
        builder.apply(Update::Reset(
            vec![
                service("zeta", "web", ServiceType::ClusterSetIp, &[]),
                service("alpha", "db", ServiceType::Headless, &["z", "a", "m"]),
                service("alpha", "api", ServiceType::ClusterSetIp, &[]),
            ]
            .into(),
        ));
        let records = records(&zone, 0);
        assert_eq!(records[0].rtype, TYPE_SOA);
        assert_eq!(records[0].name, wire_name("clusterset.local").unwrap());
        // RFC 4034 6.1: by labels from the right, each compared as lower-case octets; then by
        // type, then by data. The apex sorts first, so the SOA is also first among its names.
        let key = |r: &Record| {
            let mut labels = Vec::new();
            let mut n = &r.name[..];
            while n[0] != 0 {
                labels.push(n[1..1 + n[0] as usize].to_vec());
                n = &n[1 + n[0] as usize..];
            }
            labels.reverse();
            (labels, r.rtype, r.rdata.clone())
        };
        let mut expected = records[1..].to_vec();
        expected.sort_by_key(key);
        assert_eq!(records[1..], expected[..]);
        assert!(records.windows(2).all(|w| w[0] != w[1]), "no record twice");
        // Every answered name is there: the hosts of db, in their order.
        let hosts: Vec<String> = records
            .iter()
            .filter(|r| r.rtype == TYPE_A)
            .map(|r| crate::wire::name_text(&r.name))
            .filter(|n| n.ends_with(".east.db.alpha.svc.clusterset.local."))
            .collect();
        assert_eq!(
            hosts,
            [
                "a.east.db.alpha.svc.clusterset.local.",
                "m.east.db.alpha.svc.clusterset.local.",
                "z.east.db.alpha.svc.clusterset.local."
            ]
        );
    }

    #[test]
    fn answers_are_read_with_names_expanded() {
        use crate::wire::wire_name;
        // An SRV answer whose owner is a pointer to the question and whose target repeats it.
        let q = wire_name("_http._tcp.web.shop.svc.clusterset.local").unwrap();
        let mut m = vec![0, 1, 0x84, 0, 0, 1, 0, 1, 0, 0, 0, 0];
        m.extend_from_slice(&q);
        m.extend_from_slice(&[0, 33, 0, 1]);
        m.extend_from_slice(&[0xC0, 12, 0, 33, 0, 1, 0, 0, 0, 5, 0, 12, 0, 0, 0, 10, 0, 80]);
        m.extend_from_slice(&[3, b'w', b'e', b'b', 0xC0, 12 + 11]);
        let r = answers(&m).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].name, q);
        assert_eq!((r[0].rtype, r[0].ttl), (33, 5));
        let target = wire_name("web.web.shop.svc.clusterset.local").unwrap();
        assert_eq!(&r[0].rdata[..6], &[0, 0, 0, 10, 0, 80]);
        assert_eq!(&r[0].rdata[6..], &target[..]);
        assert!(
            answers(&m[..m.len() - 1]).is_none(),
            "a cut message does not parse"
        );
    }
}
