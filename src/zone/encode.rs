//! One name's answers as the table stores them, the builder's side: [`Entry::new`] chooses for
//! each rendered answer the smallest form that writes back to exactly its bytes (the layout and
//! the reader are `entry.rs`): addresses alone, an endpoint's SRV records as their numbers, a
//! service's SRV records as their data and target tails, glue that repeats the name's own
//! addresses as two bits, or the bytes with their targets compressed. The forms are chosen from
//! the values the writer recorded of each record ([`Record`]), not by parsing its bytes; a
//! debug build (every test) writes each entry back and compares.

use super::entry::*;
use super::render::{Answer, Record};
use crate::wire::{TYPE_A, TYPE_AAAA, TYPE_SRV};

/// Which of the entry's own address answers `a`'s additional section repeats exactly (see
/// [`Entry`]'s glue bits), if any.
fn glue_of(a: &Answer, answers: &[(u16, Answer)]) -> u16 {
    let additional = &a.bytes[a.additional_at as usize..];
    if additional.is_empty() {
        return 0;
    }
    // An address answer has no additional section and no compressed targets, so its bytes are
    // written as they are stored.
    let plain = |qtype: u16| {
        answers
            .iter()
            .find(|(t, b)| {
                *t == qtype && b.targets.is_empty() && b.additional_at as usize == b.bytes.len()
            })
            .map_or(&[][..], |(_, b)| &b.bytes[..])
    };
    let (v4, v6) = (plain(TYPE_A), plain(TYPE_AAAA));
    if additional.len() != v4.len() + v6.len() {
        return 0;
    }
    let (first, second) = additional.split_at(v4.len());
    if first != v4 || second != v6 {
        return 0;
    }
    u16::from(!v4.is_empty()) | u16::from(!v6.is_empty()) << 1
}

/// The stored form of `a`: each SRV target the writer found a known tail for becomes its
/// leading labels and a pointer to that tail. Returns the bytes, the offsets of the compressed
/// targets and where the additional section starts in the bytes.
fn compress_targets(a: &Answer) -> (Vec<u8>, Vec<u16>, usize) {
    let (mut stored, mut expand) = (Vec::with_capacity(a.bytes.len()), Vec::new());
    let (mut cursor, mut saved_before_additional) = (0, 0);
    for t in &a.targets {
        let (at, len, prefix) = (t.at as usize, t.len as usize, t.prefix as usize);
        stored.extend_from_slice(&a.bytes[cursor..at]);
        expand.push(stored.len() as u16);
        stored.extend_from_slice(&a.bytes[at..at + prefix]);
        stored.extend_from_slice(&(0xC000 | t.pointer).to_be_bytes());
        if at < a.additional_at as usize {
            saved_before_additional += len - prefix - 2;
        }
        cursor = at + len;
    }
    stored.extend_from_slice(&a.bytes[cursor..]);
    (
        stored,
        expand,
        a.additional_at as usize - saved_before_additional,
    )
}

/// The records of `a`'s answer section, when each is of `rtype`, owned by the question (written
/// as a pointer to it) and of one TTL, with that TTL.
fn own_records(a: &Answer, rtype: u16) -> Option<(&[Record], [u8; 4])> {
    let answers = &a.records[..a.ancount as usize];
    let ttl = answers.first()?.ttl;
    answers
        .iter()
        .all(|r| r.rtype == rtype && r.ttl == ttl && r.owner == Some(QUESTION))
        .then_some((answers, ttl.to_be_bytes()))
}

/// The address form of `a`, an answer to `qtype`: the TTL and the records' addresses, when
/// they are all it holds (an address answer at the question, of one TTL).
fn address_form(qtype: u16, a: &Answer) -> Option<([u8; 4], Vec<u8>)> {
    if !(qtype == TYPE_A || qtype == TYPE_AAAA) || a.arcount != 0 || !a.targets.is_empty() {
        return None;
    }
    let (records, ttl) = own_records(a, qtype)?;
    Some((
        ttl,
        records.iter().flat_map(|r| a.data(r)).copied().collect(),
    ))
}

/// The self-SRV form of `a`, an SRV answer at `name` whose additional section is the glue
/// `glue` (or nothing): the TTL and each record's priority, weight and port, when each record
/// has `name` itself as its target and they share one TTL.
fn self_srv_form(
    name: &[u8],
    a: &Answer,
    glue: u16,
    glue_count: u16,
) -> Option<([u8; 4], Vec<u8>)> {
    if a.ancount as usize > TARGETS_MASK
        || !(a.arcount == 0 || glue != 0 && a.arcount == glue_count)
    {
        return None;
    }
    let (records, ttl) = own_records(a, TYPE_SRV)?;
    let mut rdata = Vec::with_capacity(records.len() * SRV_FIXED);
    for r in records {
        let (fixed, target) = a.data(r).split_at_checked(SRV_FIXED)?;
        if target != name {
            return None;
        }
        rdata.extend_from_slice(fixed);
    }
    Some((ttl, rdata))
}

/// The SRV-records form of `a`, an SRV answer at `name` whose records share one TTL, each
/// target has a known tail, and whose additional section is A and AAAA records of the same TTL
/// with compressed owners (a service's SRV answer): the stored bytes and where their additional
/// part starts. Stored: the TTL, then per SRV record its priority, weight and port, its
/// target's leading labels and the pointer to its tail; then per additional record its owner's
/// offset (with [`V6_OWNER`] for AAAA) and its address.
fn srv_records_form(a: &Answer) -> Option<(Vec<u8>, usize)> {
    if a.ancount & SRV_RECORDS != 0 || a.targets.len() != a.ancount as usize {
        return None;
    }
    let (records, ttl) = own_records(a, TYPE_SRV)?;
    let mut stored = ttl.to_vec();
    for (r, t) in records.iter().zip(&a.targets) {
        let (at, len, prefix) = (t.at as usize, t.len as usize, t.prefix as usize);
        let data_at = r.data_at as usize;
        if at != data_at + SRV_FIXED || at + len != data_at + r.data_len as usize {
            return None;
        }
        stored.extend_from_slice(&a.bytes[data_at..at + prefix]);
        stored.extend_from_slice(&(0xC000 | t.pointer).to_be_bytes());
    }
    let stored_additional_at = stored.len();
    for r in &a.records[a.ancount as usize..] {
        let flag = match r.rtype {
            TYPE_A => 0,
            TYPE_AAAA => V6_OWNER,
            _ => return None,
        };
        if r.ttl.to_be_bytes() != ttl {
            return None;
        }
        stored.extend_from_slice(&(r.owner? | flag).to_be_bytes());
        stored.extend_from_slice(a.data(r));
    }
    Some((stored, stored_additional_at))
}

/// How `Entry::new` keeps one answer.
enum Kept {
    Short(Vec<u8>),
    Addresses([u8; 4], Vec<u8>),
    SelfSrv([u8; 4], Vec<u8>, u16),
    Full {
        bytes: Vec<u8>,
        expand: Vec<u16>,
        stored_additional_at: usize,
        glue: u16,
    },
    SrvRecords(Vec<u8>, usize),
}

impl Kept {
    fn descriptor_len(&self) -> usize {
        match self {
            Kept::Short(_) => SHORT,
            Kept::Addresses(..) | Kept::SelfSrv(..) => COMPACT,
            Kept::Full { .. } | Kept::SrvRecords(..) => FULL,
        }
    }

    fn body_len(&self) -> usize {
        match self {
            Kept::Short(b)
            | Kept::Addresses(_, b)
            | Kept::SelfSrv(_, b, _)
            | Kept::SrvRecords(b, _) => b.len(),
            Kept::Full { bytes, expand, .. } => bytes.len() + 2 * expand.len(),
        }
    }
}

impl Entry {
    /// `name` in lower-case wire form; `apex` marks the zone apex, which answers SOA from the
    /// zone's current serial.
    pub fn new(name: &[u8], apex: bool, answers: &[(u16, Answer)]) -> Self {
        let count_of = |qtype: u16| {
            answers
                .iter()
                .find(|(t, _)| *t == qtype)
                .map_or(0, |(_, a)| a.ancount)
        };
        let kept: Vec<Kept> = answers
            .iter()
            .map(|(qtype, a)| {
                assert!(qtype & FORM_MASK == 0, "query types stay under 16384 here");
                let g = glue_of(a, answers);
                if let Some((ttl, rdata)) = address_form(*qtype, a) {
                    return Kept::Addresses(ttl, rdata);
                }
                if *qtype == TYPE_SRV {
                    let glue_count = (g & 1) * count_of(TYPE_A) + (g >> 1) * count_of(TYPE_AAAA);
                    if let Some((ttl, rdata)) = self_srv_form(name, a, g, glue_count) {
                        return Kept::SelfSrv(ttl, rdata, g);
                    }
                    if g == 0
                        && let Some((bytes, at)) = srv_records_form(a)
                    {
                        return Kept::SrvRecords(bytes, at);
                    }
                }
                let (mut bytes, expand, stored_additional_at) = compress_targets(a);
                if g != 0 {
                    bytes.truncate(stored_additional_at);
                }
                if a.arcount == 0 && expand.is_empty() && bytes.len() == a.bytes.len() {
                    Kept::Short(bytes)
                } else {
                    Kept::Full {
                        bytes,
                        expand,
                        stored_additional_at,
                        glue: g,
                    }
                }
            })
            .collect();
        let descriptors: usize = kept.iter().map(Kept::descriptor_len).sum();
        let body_len: usize = kept.iter().map(Kept::body_len).sum();
        let mut blob = Vec::with_capacity(HEAD + descriptors + name.len() + body_len);
        blob.extend_from_slice(&[
            if apex { APEX } else { 0 },
            answers.len() as u8,
            name.len() as u8,
            u8::try_from(descriptors).expect("an entry has at most 15 types"),
        ]);
        for ((qtype, a), kept) in answers.iter().zip(&kept) {
            let len = u16::try_from(a.bytes.len()).expect("an answer body fits in a message");
            let (fields, ttl): (&[u16], _) = match kept {
                Kept::Short(_) => (&[*qtype, a.ancount, len], None),
                Kept::Addresses(ttl, _) => (&[*qtype | ADDRESS_FORM, a.ancount], Some(ttl)),
                Kept::SelfSrv(ttl, _, g) => (
                    &[*qtype | SELF_SRV_FORM, a.ancount | g << GLUE_SHIFT],
                    Some(ttl),
                ),
                Kept::Full {
                    bytes,
                    expand,
                    stored_additional_at,
                    glue,
                } => (
                    &[
                        *qtype | FULL_FORM,
                        a.ancount,
                        a.arcount,
                        a.additional_at as u16,
                        len,
                        *stored_additional_at as u16,
                        bytes.len() as u16,
                        u16::try_from(expand.len())
                            .ok()
                            .filter(|&n| n as usize <= TARGETS_MASK)
                            .expect("a body of 64 KiB has fewer than 16,384 SRV targets")
                            | glue << GLUE_SHIFT,
                    ],
                    None,
                ),
                Kept::SrvRecords(bytes, stored_additional_at) => (
                    &[
                        *qtype | FULL_FORM,
                        a.ancount | SRV_RECORDS,
                        a.arcount,
                        a.additional_at as u16,
                        len,
                        *stored_additional_at as u16,
                        bytes.len() as u16,
                        0,
                    ],
                    None,
                ),
            };
            for field in fields {
                blob.extend_from_slice(&field.to_be_bytes());
            }
            if let Some(ttl) = ttl {
                blob.extend_from_slice(ttl);
            }
        }
        blob.extend_from_slice(name);
        for kept in &kept {
            match kept {
                Kept::Short(b)
                | Kept::Addresses(_, b)
                | Kept::SelfSrv(_, b, _)
                | Kept::SrvRecords(b, _) => blob.extend_from_slice(b),
                Kept::Full { bytes, expand, .. } => {
                    for e in expand {
                        blob.extend_from_slice(&e.to_be_bytes());
                    }
                    blob.extend_from_slice(bytes);
                }
            }
        }
        let entry = Entry(blob.into_boxed_slice());
        debug_assert!(
            entry.writes_back(answers),
            "an entry must write back what was rendered: {entry:?}"
        );
        entry
    }

    /// Whether each of `answers` comes back from the entry exactly as rendered, whole and
    /// without its additional section. The forms are chosen from the records' values, so this
    /// is what proves them: a debug build (every test) checks it for each entry it builds.
    fn writes_back(&self, answers: &[(u16, Answer)]) -> bool {
        let name = self.name();
        answers.iter().all(|(qtype, a)| {
            [(true, a.bytes.len()), (false, a.additional_at as usize)]
                .into_iter()
                .all(|(additional, len)| {
                    let mut out = vec![0u8; 12];
                    out.extend_from_slice(name);
                    out.extend_from_slice(&qtype.to_be_bytes());
                    out.extend_from_slice(&[0, 1]);
                    let base = out.len();
                    self.answer(*qtype).is_some_and(|r| {
                        r.write(&mut out, additional);
                        out[base..] == a.bytes[..len]
                    })
                })
        })
    }

    /// An empty non-terminal: the name exists, every type is NODATA.
    pub fn empty(name: &[u8]) -> Self {
        Entry::new(name, false, &[])
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;
    use crate::wire::{TYPE_A, TYPE_AAAA, TYPE_SRV, child, wire_name};
    use crate::zone::render::BodyWriter;

    /// The message as a client gets it: header, question (in the client's case), then the
    /// answer written from the stored entry.
    fn written(entry: &Entry, qtype: u16, additional: bool) -> Vec<u8> {
        let mut out = vec![0u8; 12];
        let spelled: Vec<u8> = entry.name().iter().map(u8::to_ascii_uppercase).collect();
        out.extend_from_slice(&spelled);
        out.extend_from_slice(&[0, qtype as u8, 0, 1]);
        let base = out.len();
        entry.answer(qtype).unwrap().write(&mut out, additional);
        out.split_off(base)
    }

    fn srv_answer(owner: &[u8], targets: &[Vec<u8>], glue: bool) -> Answer {
        let mut w = BodyWriter::new(owner);
        for (k, t) in targets.iter().enumerate() {
            assert!(w.srv(owner, 0, 10, 8000 + k as u16, t, 5));
        }
        w.additional();
        if glue {
            for (k, t) in targets.iter().enumerate() {
                let ip: IpAddr = [10, 0, (k >> 8) as u8, k as u8].into();
                assert!(w.addr(t, ip, 5));
            }
        }
        w.finish()
    }

    /// Whatever the targets, the written answer is the rendered one byte for byte, whole and
    /// without its additional section, and the stored entry is smaller when targets repeat the
    /// question.
    #[test]
    fn stored_targets_are_written_back_exactly() {
        let apex = wire_name("clusterset.local").unwrap();
        let svc = child("web.shop.svc", &apex).unwrap();
        let port = child("_http._tcp", &svc).unwrap();
        let ep = child("pod-0.east", &svc).unwrap();
        let other = child("db.other.svc", &apex).unwrap();
        let outside = wire_name("example.org").unwrap();
        let many: Vec<Vec<u8>> = (0..400)
            .map(|i| child(&format!("pod-{i}.c{}", i % 3), &svc).unwrap())
            .collect();
        let cases: Vec<(&[u8], Vec<Vec<u8>>)> = vec![
            (&ep, vec![ep.clone()]),
            (&svc, vec![svc.clone()]),
            (&svc, many[..10].to_vec()),
            (&port, many[..10].to_vec()),
            (
                &port,
                vec![other.clone(), outside.clone(), svc.clone(), other.clone()],
            ),
            // Past 16 KiB, later targets cannot be pointed at.
            (&svc, many.clone()),
        ];
        for (owner, targets) in cases {
            for glue in [false, true] {
                let srv = srv_answer(owner, &targets, glue);
                let mut a = BodyWriter::new(owner);
                a.addr(owner, [10, 9, 8, 7].into(), 5);
                let entry = Entry::new(
                    owner,
                    false,
                    &[(TYPE_A, a.finish()), (TYPE_SRV, srv.clone())],
                );
                let r = entry.answer(TYPE_SRV).unwrap();
                assert_eq!(
                    (r.len, r.additional_at),
                    (srv.bytes.len(), srv.additional_at as usize)
                );
                assert_eq!(written(&entry, TYPE_SRV, true), &srv.bytes[..]);
                assert_eq!(
                    written(&entry, TYPE_SRV, false),
                    &srv.bytes[..srv.additional_at as usize]
                );
                assert_eq!(written(&entry, TYPE_A, true).len(), 16);
            }
        }
        // A target whose tail was written compressed earlier (an NS target pointing into the
        // question): spelling it out follows that pointer too.
        let ns = child("ns.dns", &apex).unwrap();
        let mut w = BodyWriter::new(&svc);
        assert!(w.ns(&svc, &ns, 5));
        assert!(w.srv(&svc, 0, 10, 53, &ns, 5));
        let mixed = w.finish();
        assert_eq!(mixed.targets.len(), 1);
        let entry = Entry::new(&svc, false, &[(TYPE_SRV, mixed.clone())]);
        assert_eq!(written(&entry, TYPE_SRV, true), &mixed.bytes[..]);

        // An endpoint's SRV answer no longer holds its own name twice.
        let srv = srv_answer(&ep, std::slice::from_ref(&ep), true);
        let entry = Entry::new(&ep, false, &[(TYPE_SRV, srv.clone())]);
        // Header, descriptor, name, and the SRV-records form: the TTL, priority, weight and
        // port, the target as a pointer, and the glue record's owner offset and address.
        assert_eq!(entry.0.len(), HEAD + FULL + ep.len() + 4 + 8 + 6);
        assert_eq!(written(&entry, TYPE_SRV, true), &srv.bytes[..]);
    }

    /// An endpoint name's SRV answer gives its own addresses as glue: they are stored once, in
    /// its A and AAAA answers, and the SRV answer is still written byte for byte as rendered.
    /// Glue that differs from the name's own answers is stored as it is.
    #[test]
    fn glue_that_repeats_the_names_own_addresses_is_stored_once() {
        let apex = wire_name("clusterset.local").unwrap();
        let ep = child("pod-0.east.web.shop.svc", &apex).unwrap();
        let v4: IpAddr = [10, 0, 0, 1].into();
        let v6: IpAddr = "fd00::1".parse().unwrap();
        for (addrs, shared) in [
            (vec![v4], true),
            (vec![v6], true),
            (vec![v4, v6], true),
            (vec![v4, v4], true),
            (vec![v4], false),
        ] {
            let answer_of = |v6: bool, ips: &[IpAddr]| {
                let mut w = BodyWriter::new(&ep);
                for ip in ips.iter().filter(|ip| ip.is_ipv6() == v6) {
                    assert!(w.addr(&ep, *ip, 5));
                }
                w.finish()
            };
            let mut srv = BodyWriter::new(&ep);
            assert!(srv.srv(&ep, 0, 10, 80, &ep, 5));
            srv.additional();
            // Unshared: the glue gives an address the name itself does not answer.
            let glue: Vec<IpAddr> = if shared {
                addrs.clone()
            } else {
                vec![[10, 9, 9, 9].into()]
            };
            for v6 in [false, true] {
                for ip in glue.iter().filter(|ip| ip.is_ipv6() == v6) {
                    assert!(srv.addr(&ep, *ip, 5));
                }
            }
            let srv = srv.finish();
            let mut answers = Vec::new();
            for v6 in [false, true] {
                if addrs.iter().any(|ip| ip.is_ipv6() == v6) {
                    answers.push((if v6 { TYPE_AAAA } else { TYPE_A }, answer_of(v6, &addrs)));
                }
            }
            answers.push((TYPE_SRV, srv.clone()));
            let entry = Entry::new(&ep, false, &answers);
            assert_eq!(written(&entry, TYPE_SRV, true), &srv.bytes[..], "{addrs:?}");
            assert_eq!(
                written(&entry, TYPE_SRV, false),
                &srv.bytes[..srv.additional_at as usize]
            );
            for (t, a) in &answers[..answers.len() - 1] {
                assert_eq!(written(&entry, *t, true), &a.bytes[..]);
            }
            let r = entry.answer(TYPE_SRV).unwrap();
            assert_eq!((r.len, r.arcount), (srv.bytes.len(), srv.arcount));
            let types: Vec<u16> = answers.iter().map(|(t, _)| *t).collect();
            assert_eq!(entry.types().collect::<Vec<_>>(), types);
            assert!(entry.answer(crate::wire::TYPE_TXT).is_none());
            // Address answers keep their addresses; the SRV answer with shared glue keeps its
            // priority, weight and port, and otherwise its bytes, the target as a pointer.
            let addresses: usize = addrs
                .iter()
                .map(|ip| if ip.is_ipv6() { 16 } else { 4 })
                .sum();
            let srv_kept = if shared {
                COMPACT + SRV_FIXED
            } else {
                // The SRV-records form: TTL, the record with its target as a pointer, the
                // one glue record as its owner's offset and address.
                FULL + 4 + SRV_FIXED + 2 + 2 + 4
            };
            let expect = HEAD + (answers.len() - 1) * COMPACT + ep.len() + addresses + srv_kept;
            assert_eq!(entry.0.len(), expect, "{addrs:?}, shared: {shared}");
        }
    }

    /// Address answers and SRV answers to the owner itself are kept as their data alone, but
    /// only when that writes back exactly: records with differing TTLs, or SRV records to
    /// another name, keep their bytes, and every answer is written as rendered either way.
    #[test]
    fn compact_forms_write_back_exactly_and_only_when_they_can() {
        let apex = wire_name("clusterset.local").unwrap();
        let ep = child("pod-0.east.web.shop.svc", &apex).unwrap();
        let svc = child("web.shop.svc", &apex).unwrap();
        let v6: IpAddr = "fd00::1".parse().unwrap();
        let addresses = |ips: &[(IpAddr, u32)]| {
            let mut w = BodyWriter::new(&ep);
            for (ip, ttl) in ips {
                assert!(w.addr(&ep, *ip, *ttl));
            }
            w.finish()
        };
        let srv = |ports: &[(u16, u32)], target: &[u8], glue: &[IpAddr]| {
            let mut w = BodyWriter::new(&ep);
            for (port, ttl) in ports {
                assert!(w.srv(&ep, 0, 50, *port, target, *ttl));
            }
            w.additional();
            for ip in glue {
                assert!(w.addr(target, *ip, 5));
            }
            w.finish()
        };
        let v4s: Vec<(IpAddr, u32)> = (0..100u8).map(|i| ([10, 0, 0, i].into(), 5)).collect();
        let mut mixed = v4s.clone();
        mixed[7].1 = 6;
        let cases: Vec<(Vec<(u16, Answer)>, usize)> = vec![
            // 100 addresses: 4 bytes each, the TTL once.
            (vec![(TYPE_A, addresses(&v4s))], COMPACT + 400),
            (vec![(TYPE_A, addresses(&mixed))], SHORT + 1600),
            (
                vec![(TYPE_AAAA, addresses(&[(v6, 5), (v6, 5)]))],
                COMPACT + 32,
            ),
            // Two ports to the owner itself, its address as glue.
            (
                vec![
                    (TYPE_A, addresses(&v4s[..1])),
                    (TYPE_SRV, srv(&[(80, 5), (443, 5)], &ep, &[v4s[0].0])),
                ],
                COMPACT + 4 + COMPACT + 12,
            ),
            (
                vec![(TYPE_SRV, srv(&[(80, 5), (443, 6)], &ep, &[]))],
                // Each record: owner pointer and fixed fields (18), the target as a pointer, its
                // offset.
                FULL + 2 * (18 + 2 + 2),
            ),
            // To another name, with its addresses as the additional section: the TTL, each
            // record's fixed fields and target pointer, each address with its owner's offset.
            (
                vec![(TYPE_SRV, srv(&[(80, 5), (81, 5)], &svc, &[v4s[1].0, v6]))],
                FULL + 4 + 2 * (SRV_FIXED + 2) + (2 + 4) + (2 + 16),
            ),
            // An additional record whose TTL differs keeps the bytes.
            (
                vec![(TYPE_SRV, {
                    let mut w = BodyWriter::new(&ep);
                    assert!(w.srv(&ep, 0, 50, 80, &svc, 5));
                    w.additional();
                    assert!(w.addr(&svc, v6, 6));
                    w.finish()
                })],
                FULL + 18 + 2 + 2 + 28,
            ),
        ];
        for (answers, kept) in cases {
            let entry = Entry::new(&ep, false, &answers);
            assert_eq!(entry.0.len(), HEAD + ep.len() + kept, "{entry:?}");
            for (t, a) in &answers {
                assert_eq!(written(&entry, *t, true), &a.bytes[..], "{t}");
                assert_eq!(
                    written(&entry, *t, false),
                    &a.bytes[..a.additional_at as usize]
                );
                let r = entry.answer(*t).unwrap();
                assert_eq!(
                    (r.ancount, r.arcount, r.additional_at, r.len),
                    (
                        a.ancount,
                        a.arcount,
                        a.additional_at as usize,
                        a.bytes.len()
                    )
                );
            }
        }
    }
}
