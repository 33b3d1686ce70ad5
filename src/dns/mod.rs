//! From query bytes to response bytes: parse the header, question and EDNS, look the name up in
//! the zone, and write header + the query's own question + the precompiled body (+ OPT). This is
//! the one lookup every serving path shares, so all of them answer alike.

mod account;
mod batch;
pub mod coalescing;
mod query;
pub mod tcp;
pub mod transfer;
// The packet paths: recvmmsg/sendmmsg and AF_XDP need unsafe; every block says why it is sound.
#[allow(unsafe_code)]
pub mod udp;
#[allow(unsafe_code)]
pub mod xdp;

pub(crate) use account::account;
pub use account::{QName, QueryLog};
pub use batch::{BATCH, Batch};
use query::{Edns, Parsed, Query, parse};

use crate::wire::{
    CLASS_IN, OPT_LEN, RCODE_BADVERS, RCODE_FORMERR, RCODE_NOERROR, RCODE_NOTIMP, RCODE_NXDOMAIN,
    RCODE_REFUSED, RCODE_SERVFAIL, TYPE_AXFR, TYPE_IXFR, TYPE_OPT, TYPE_SOA, record_head,
};
use crate::zone::{Candidate, Lookup, View, Zone};

/// The UDP payload size we advertise and the most we send over UDP (the DNS Flag Day 2020 value).
pub const UDP_PAYLOAD: u16 = 1232;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

/// What a response said, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Full (extended) response code.
    pub rcode: u16,
    /// Query type, 0 when the question could not be read.
    pub qtype: u16,
    /// Index of the served zone the name is in.
    pub apex: Option<usize>,
    pub truncated: bool,
    /// The query's EDNS DO bit.
    pub dnssec_ok: bool,
}

fn outcome(q: &Query<'_>, rcode: u16, apex: Option<usize>, truncated: bool) -> Outcome {
    Outcome {
        rcode,
        qtype: q.qtype,
        apex,
        truncated,
        dnssec_ok: q.edns.is_some_and(|e| e.dnssec_ok),
    }
}

fn header(out: &mut Vec<u8>, q: &Query<'_>, aa: bool, tc: bool, rcode: u16, counts: [u16; 4]) {
    let [id0, id1] = q.id.to_be_bytes();
    // RD and CD are echoed for QUERY only: to any other opcode (a NOTIMP) only the ID, the
    // opcode and QR carry over, as ISC's compliance tester expects.
    let query = q.opcode == 0;
    let flags0 = 0x80
        | (q.opcode << 3)
        | if aa { 0x04 } else { 0 }
        | if tc { 0x02 } else { 0 }
        | (query && q.rd) as u8;
    let flags1 = if query && q.cd { 0x10 } else { 0 } | (rcode & 0x0F) as u8;
    let c = counts.map(u16::to_be_bytes);
    out.extend_from_slice(&[
        id0, id1, flags0, flags1, c[0][0], c[0][1], c[1][0], c[1][1], c[2][0], c[2][1], c[3][0],
        c[3][1],
    ]);
}

fn opt(out: &mut Vec<u8>, edns: &Option<Edns>, rcode: u16) {
    if let Some(e) = edns {
        out.extend_from_slice(&[0, 0, TYPE_OPT as u8]);
        out.extend_from_slice(&UDP_PAYLOAD.to_be_bytes());
        out.extend_from_slice(&[
            (rcode >> 4) as u8,
            0,
            if e.dnssec_ok { 0x80 } else { 0 },
            0,
            0,
            0,
        ]);
    }
}

/// A response with no records: errors and refusals (no AA).
fn write_error(out: &mut Vec<u8>, q: &Query<'_>, rcode: u16) -> Outcome {
    let qd = q.question.is_some() as u16;
    header(
        out,
        q,
        false,
        false,
        rcode,
        [qd, 0, 0, q.edns.is_some() as u16],
    );
    out.extend_from_slice(q.question.unwrap_or_default());
    opt(out, &q.edns, rcode);
    outcome(q, rcode, None, false)
}

/// The zone's SOA record, its owner a pointer to the apex's place in the question.
fn soa(out: &mut Vec<u8>, apex_at: usize, serial: u32, ttl: u32) {
    let [p0, p1] = (0xC000 | apex_at as u16).to_be_bytes();
    // ns.dns.<ptr> (9) + hostmaster.<ptr> (13) + five 32-bit fields (20).
    const RDLEN: u8 = 9 + 13 + 20;
    let mut rr = [0u8; 12 + RDLEN as usize];
    rr[..12].copy_from_slice(&record_head(
        apex_at as u16,
        TYPE_SOA,
        ttl.min(300).to_be_bytes(),
        RDLEN as u16,
    ));
    rr[12..21].copy_from_slice(&[2, b'n', b's', 3, b'd', b'n', b's', p0, p1]);
    rr[21..34].copy_from_slice(&[
        10, b'h', b'o', b's', b't', b'm', b'a', b's', b't', b'e', b'r', p0, p1,
    ]);
    for (k, v) in [serial, 7200, 1800, 86400, ttl].into_iter().enumerate() {
        rr[34 + 4 * k..38 + 4 * k].copy_from_slice(&v.to_be_bytes());
    }
    out.extend_from_slice(&rr);
}

/// Writes the response to `packet` into `out` (cleared first). `None`: send nothing.
pub fn respond(
    zone: &Zone,
    packet: &[u8],
    transport: Transport,
    out: &mut Vec<u8>,
) -> Option<Outcome> {
    respond_in(&zone.view(), packet, transport, out)
}

/// [`respond`] from a view the caller keeps (and refreshes) across queries.
pub fn respond_in(
    view: &View<'_>,
    packet: &[u8],
    transport: Transport,
    out: &mut Vec<u8>,
) -> Option<Outcome> {
    let mut name = [0u8; 255];
    respond_to(view, &parse(packet, &mut name), None, transport, out)
}

/// Writes the response to a parsed query; `candidate` is what [`View::candidate`] found for its
/// name when the caller probed the table already (a batch), else the name is looked up here.
fn respond_to(
    view: &View<'_>,
    parsed: &Parsed<'_>,
    candidate: Option<Candidate<'_>>,
    transport: Transport,
    out: &mut Vec<u8>,
) -> Option<Outcome> {
    out.clear();
    let zone = view.zone();
    // An error answer counts under the served zone its question is in, when the question can
    // be read (as CoreDNS counts it), else under "dropped".
    let error = |out: &mut Vec<u8>, q: &Query<'_>, rcode: u16| {
        let mut o = write_error(out, q, rcode);
        o.apex = q.question.and_then(|_| zone.apex_index(q.lname));
        Some(o)
    };
    let q = match parsed {
        Parsed::Drop => return None,
        Parsed::FormErr(q) if q.opcode != 0 => return error(out, q, RCODE_NOTIMP),
        Parsed::FormErr(q) => return error(out, q, RCODE_FORMERR),
        Parsed::Query(q) => q,
    };
    if q.opcode != 0 {
        return error(out, q, RCODE_NOTIMP);
    }
    if q.qclass != CLASS_IN {
        return error(out, q, RCODE_FORMERR);
    }
    if q.edns.is_some_and(|e| e.version > 0) {
        return error(out, q, RCODE_BADVERS);
    }
    if q.qtype == TYPE_AXFR || q.qtype == TYPE_IXFR {
        return error(out, q, RCODE_REFUSED);
    }
    let answer = |found: Lookup<'_>| write_answer(zone, q, found, transport, out);
    Some(match candidate {
        Some(candidate) => view.lookup_candidate(q.lname, candidate, answer),
        None => view.lookup(q.lname, answer),
    })
}

/// Writes the answer for a looked-up name.
fn write_answer(
    zone: &Zone,
    q: &Query<'_>,
    found: Lookup<'_>,
    transport: Transport,
    out: &mut Vec<u8>,
) -> Outcome {
    let Lookup::Inside { apex, entry } = found else {
        return write_error(out, q, RCODE_REFUSED);
    };
    let lname = q.lname;
    let question = q.question.expect("a parsed query has its question");
    let apex_at = 12 + lname.len() - zone.apexes()[apex].len();
    let opt_count = q.edns.is_some() as u16;
    let answer = |out: &mut Vec<u8>, tc: bool, counts: [u16; 4]| {
        header(out, q, true, tc, RCODE_NOERROR, counts);
        out.extend_from_slice(question);
    };
    let negative = |out: &mut Vec<u8>, rcode: u16| {
        header(out, q, true, false, rcode, [1, 0, 1, opt_count]);
        out.extend_from_slice(question);
        soa(out, apex_at, zone.serial(), zone.ttl());
        opt(out, &q.edns, rcode);
        outcome(q, rcode, Some(apex), false)
    };
    let Some(entry) = entry else {
        // Before the first full sync a missing name may only be missing from us.
        let rcode = if zone.synced() {
            RCODE_NXDOMAIN
        } else {
            RCODE_SERVFAIL
        };
        return negative(out, rcode);
    };
    if q.qtype == TYPE_SOA && entry.apex() {
        answer(out, false, [1, 1, 0, opt_count]);
        soa(out, apex_at, zone.serial(), zone.ttl());
        opt(out, &q.edns, RCODE_NOERROR);
        return outcome(q, RCODE_NOERROR, Some(apex), false);
    }
    let Some(a) = entry.answer(q.qtype) else {
        return negative(out, RCODE_NOERROR);
    };
    let limit = match transport {
        Transport::Tcp => u16::MAX as usize,
        Transport::Udp => q.edns.map_or(512, |e| e.payload.clamp(512, UDP_PAYLOAD)) as usize,
    };
    // Whole; else without the additional section (RFC 2181 9: no TC for that); else as many
    // whole answer records as fit, with TC so that the client retries over TCP. CoreDNS sends
    // the same partial answer, and a stub resolver that never retries over TCP (musl before
    // 1.2.4) still gets addresses from it.
    let opt_len = if q.edns.is_some() { OPT_LEN } else { 0 };
    let fixed = 12 + question.len() + opt_len;
    let base = out.len();
    let tc = if fixed + a.len <= limit {
        answer(out, false, [1, a.ancount, 0, a.arcount + opt_count]);
        a.write(out, true);
        false
    } else if fixed + a.additional_at <= limit {
        answer(out, false, [1, a.ancount, 0, opt_count]);
        a.write(out, false);
        false
    } else {
        answer(out, true, [1, 0, 0, opt_count]);
        let records = out.len();
        a.write(out, false);
        let (n, end) = whole_records(&out[records..], limit - fixed, a.ancount);
        out.truncate(records + end);
        out[base + 6..base + 8].copy_from_slice(&n.to_be_bytes());
        true
    };
    opt(out, &q.edns, RCODE_NOERROR);
    outcome(q, RCODE_NOERROR, Some(apex), tc)
}

/// Of the `count` resource records at the start of `rr`, how many whole ones fit in `room`
/// octets, and where the last of them ends. Names are labels ending in a root label or a
/// pointer, as the zone writes them.
fn whole_records(rr: &[u8], room: usize, count: u16) -> (u16, usize) {
    let (mut n, mut at) = (0, 0);
    while n < count {
        let mut i = at;
        loop {
            match rr.get(i) {
                None => return (n, at),
                Some(&l) if l & 0xC0 == 0xC0 => {
                    i += 2;
                    break;
                }
                Some(0) => {
                    i += 1;
                    break;
                }
                Some(&l) => i += 1 + l as usize,
            }
        }
        let Some(len) = rr.get(i + 8..i + 10) else {
            return (n, at);
        };
        let end = i + 10 + u16::from_be_bytes([len[0], len[1]]) as usize;
        if end > room || end > rr.len() {
            break;
        }
        n += 1;
        at = end;
    }
    (n, at)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::metrics::Metrics;
    use crate::model::Update;
    use crate::wire::wire_name;
    use crate::zone::build::Builder;

    pub(super) fn q(name: &str) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        m.extend(wire_name(name).unwrap());
        m.extend_from_slice(&[0, 1, 0, 1]);
        m
    }

    #[test]
    fn servfail_until_the_first_sync_then_nxdomain() {
        let zone = Arc::new(Zone::new(vec![wire_name("clusterset.local").unwrap()], 5));
        let metrics = Arc::new(Metrics::new(
            "dns://test".into(),
            vec!["clusterset.local.".into()],
        ));
        let mut builder = Builder::new(zone.clone(), &[], metrics);
        let mut out = Vec::new();
        let o = respond(
            &zone,
            &q("nope.ns.svc.clusterset.local"),
            Transport::Udp,
            &mut out,
        )
        .unwrap();
        assert_eq!(o.rcode, RCODE_SERVFAIL);
        assert_eq!(out[3] & 0x0F, 2);
        assert_eq!(&out[8..10], &[0, 1], "SOA in authority");
        // Names that exist whatever the source says still get NODATA.
        let o = respond(&zone, &q("svc.clusterset.local"), Transport::Udp, &mut out).unwrap();
        assert_eq!(o.rcode, RCODE_NOERROR);
        let serial = zone.serial();
        builder.apply(Update::Reset(Vec::new().into()));
        assert!(zone.synced());
        let o = respond(
            &zone,
            &q("nope.ns.svc.clusterset.local"),
            Transport::Udp,
            &mut out,
        )
        .unwrap();
        assert_eq!(o.rcode, RCODE_NXDOMAIN);
        // The serial moves when the data does, and the negative answers' SOA carries it.
        let soa_serial = |out: &[u8]| {
            let m = hickory_proto::op::Message::from_vec(out).unwrap();
            match &m.authorities[0].data {
                hickory_proto::rr::RData::SOA(soa) => soa.serial,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(
            zone.serial(),
            serial,
            "an empty reset of an empty zone changes nothing"
        );
        assert_eq!(soa_serial(&out), serial);
        let web = crate::model::Service {
            locality: crate::model::Locality::Any,
            slices_absent: false,
            key: crate::model::ServiceKey {
                namespace: "ns".into(),
                name: "web".into(),
            },
            origin: crate::model::ObjectKind::ServiceImport,
            kind: crate::model::ServiceType::ClusterSetIp,
            ips: vec![[10, 0, 0, 1].into()],
            ports: vec![],
            slices: vec![],
        };
        builder.apply(Update::Upsert(web.clone()));
        assert_eq!(zone.serial(), serial + 1);
        respond(
            &zone,
            &q("nope.ns.svc.clusterset.local"),
            Transport::Udp,
            &mut out,
        )
        .unwrap();
        assert_eq!(soa_serial(&out), serial + 1);
        builder.apply(Update::Upsert(web));
        assert_eq!(
            zone.serial(),
            serial + 1,
            "the same service again changes nothing"
        );
    }

    /// A zone of `n` services: nine in ten ClusterSetIP (v4 and v6), one in ten headless with
    /// `wide` endpoints each in two clusters, every one with a named port.
    pub(super) fn big_zone(n: usize, wide: usize) -> Arc<Zone> {
        use crate::model::{Endpoint, Port, Protocol, Service, ServiceKey, ServiceType, Slice};
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
        let http = Port {
            name: Some("http".into()),
            protocol: Protocol::Tcp,
            port: 80,
        };
        let services: Vec<Service> = (0..n)
            .map(|i| {
                let key = ServiceKey {
                    namespace: format!("ns{}", i % 7),
                    name: format!("svc{i}"),
                };
                let v4 = |a: u8| IpAddr::V4(Ipv4Addr::new(10, a, (i >> 8) as u8, i as u8));
                let (kind, ips, slices) = if i % 10 == 9 {
                    let slices = ["east", "west"]
                        .iter()
                        .map(|c| Slice {
                            name: format!("svc{i}-{c}"),
                            cluster: Some(c.to_string()),
                            ports: vec![http.clone()],
                            endpoints: (0..wide)
                                .map(|k| Endpoint {
                                    addresses: vec![v4(k as u8)],
                                    hostname: Some(format!("pod-{k}")),
                                })
                                .collect(),
                        })
                        .collect();
                    (ServiceType::Headless, vec![], slices)
                } else {
                    let v6 = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i as u16));
                    (ServiceType::ClusterSetIp, vec![v4(100), v6], vec![])
                };
                Service {
                    locality: crate::model::Locality::Any,
                    slices_absent: false,
                    origin: crate::model::ObjectKind::ServiceImport,
                    key,
                    kind,
                    ips,
                    ports: vec![http.clone()],
                    slices,
                }
            })
            .collect();
        let zone = Arc::new(Zone::new(vec![wire_name("clusterset.local").unwrap()], 5));
        let metrics = Arc::new(Metrics::new(
            "dns://test".into(),
            vec!["clusterset.local.".into()],
        ));
        Builder::new(zone.clone(), &[], metrics).apply(Update::Reset(services.into()));
        zone
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let zone = Zone::new(vec![wire_name("clusterset.local").unwrap()], 5);
        let seed = q("a.b.svc.clusterset.local");
        let mut out = Vec::new();
        // Every truncation and every single-byte change of a valid query.
        for len in 0..seed.len() {
            respond(&zone, &seed[..len], Transport::Udp, &mut out);
        }
        for i in 0..seed.len() {
            for b in [0u8, 1, 0x3F, 0x40, 0x7F, 0xC0, 0xFF] {
                let mut p = seed.clone();
                p[i] = b;
                respond(&zone, &p, Transport::Tcp, &mut out);
            }
        }
    }
}
