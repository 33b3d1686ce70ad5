//! One name's answers as the table stores them: every query type's precompiled body in one
//! run of bytes, with SRV targets kept compressed, written back byte for byte as rendered.

use super::render::Answer;
use crate::wire::{TYPE_A, TYPE_AAAA};

/// An answer as stored in an [`Entry`]. SRV targets are kept compressed (a target repeats the
/// question name or one of its suffixes, so an endpoint name's SRV answer would otherwise hold its
/// own 40-odd-octet name twice); [`AnswerRef::write`] spells them out again, giving exactly the
/// bytes the builder rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerRef<'a> {
    pub ancount: u16,
    pub arcount: u16,
    /// Where the additional section starts in the answer as written.
    pub additional_at: usize,
    /// Length of the answer as written.
    pub len: usize,
    /// The stored bytes, SRV targets compressed.
    stored: &'a [u8],
    stored_additional_at: usize,
    /// Big-endian offsets in `stored` of the compressed targets, ascending.
    expand: &'a [u8],
    /// The owner name (lower-case wire form), which the question spells.
    name: &'a [u8],
    /// What the additional section is when it is not stored in `stored`: the entry's own A
    /// and AAAA answers (as an endpoint name's SRV answer gives its target's addresses).
    glue: [&'a [u8]; 2],
}

impl AnswerRef<'_> {
    /// Appends the answer, from its first record through the answer and authority sections and,
    /// with `additional`, the additional section. `out` must hold the message from its first
    /// byte: header, then the question for [`AnswerRef::name`].
    pub fn write(&self, out: &mut Vec<u8>, additional: bool) {
        let end = if additional {
            self.stored.len()
        } else {
            self.stored_additional_at
        };
        let mut cursor = 0;
        for e in self.expand.chunks_exact(2) {
            let e = u16::from_be_bytes([e[0], e[1]]) as usize;
            if e >= end {
                break;
            }
            out.extend_from_slice(&self.stored[cursor..e]);
            // Labels, then the pointer that ends the compressed name.
            let mut i = e;
            while i < self.stored.len() && self.stored[i] & 0xC0 != 0xC0 && self.stored[i] != 0 {
                i += 1 + self.stored[i] as usize;
            }
            out.extend_from_slice(&self.stored[e..i]);
            if i + 1 >= self.stored.len() || self.stored[i] == 0 {
                // Not compressed after all (cannot happen for what Entry::new stores).
                cursor = i;
                continue;
            }
            let at = (u16::from_be_bytes([self.stored[i], self.stored[i + 1]]) & 0x3FFF) as usize;
            spell_out(out, at, self.name);
            cursor = i + 2;
        }
        out.extend_from_slice(&self.stored[cursor.min(end)..end]);
        if additional {
            out.extend_from_slice(self.glue[0]);
            out.extend_from_slice(self.glue[1]);
        }
    }
}

/// Appends the name at message offset `at` in full: from the question's lower-case spelling
/// (`qname`) when `at` is inside it, else from what is already written in `out`, following any
/// pointer there.
fn spell_out(out: &mut Vec<u8>, mut at: usize, qname: &[u8]) {
    // Pointers only go back, so a well-formed message needs few hops; the bound keeps a bug
    // from looping.
    for _ in 0..128 {
        if let Some(rest) = at.checked_sub(12).and_then(|i| qname.get(i..)) {
            out.extend_from_slice(rest);
            return;
        }
        let mut end = at;
        while end < out.len() && out[end] != 0 && out[end] & 0xC0 == 0 {
            end += 1 + out[end] as usize;
        }
        if end >= out.len() {
            return;
        }
        if out[end] == 0 {
            out.extend_from_within(at..=end);
            return;
        }
        if end + 1 >= out.len() {
            return;
        }
        let next = (u16::from_be_bytes([out[end], out[end + 1]]) & 0x3FFF) as usize;
        out.extend_from_within(at..end);
        at = next;
    }
}

/// Everything one name answers, in one run of bytes so that matching the name and copying the
/// answer touch the same few cache lines:
///
/// ```text
/// flags(1) types(1) name_len(1) descriptors_len(1)
/// per type, short: qtype(2) ancount(2) len(2)
///        or full:  qtype|0x8000(2) ancount(2) arcount(2) additional_at(2) len(2)
///                  stored_additional_at(2) stored_len(2) glue(2 bits) compressed_targets(14 bits)
/// name
/// per type: compressed target offsets (2 each), stored bytes
/// ```
///
/// The short form is for an answer with no additional section and no compressed target (every
/// A and AAAA answer): stored as written. Bodies follow the name in descriptor order, so each
/// starts where the one before ended. A body is at most 64 KiB (it must fit in a message), so
/// 16-bit lengths and offsets suffice. An additional section that is byte for byte the entry's
/// own A answer, AAAA answer or both (glue bits 1, 2, 3) is not stored twice.
/// A type without an answer gets NODATA.
///
/// The builder renders owned entries (`Entry`, its own allocation); the table copies their bytes
/// into its segments and hands readers an [`EntryRef`] into them, so a served name costs no
/// allocation of its own.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Entry<B = Box<[u8]>>(pub(super) B);

/// An entry as the table holds it: borrowed from a published segment.
pub type EntryRef<'a> = Entry<&'a [u8]>;

const HEAD: usize = 4;
const SHORT: usize = 6;
const FULL: usize = 16;
/// Set in a descriptor's qtype field: the full form.
const FULL_FORM: u16 = 0x8000;
const APEX: u8 = 1;
/// The glue bits of a descriptor's last field: the additional section is the A answer (1), the
/// AAAA answer (2) or both, A first (3).
const GLUE_SHIFT: u32 = 14;
const TARGETS_MASK: usize = (1 << GLUE_SHIFT) - 1;

/// One descriptor, read.
struct Descriptor {
    qtype: u16,
    ancount: u16,
    arcount: u16,
    additional_at: usize,
    len: usize,
    stored_additional_at: usize,
    stored_len: usize,
    /// Compressed targets.
    targets: usize,
    glue: usize,
    /// Its bytes.
    size: usize,
}

impl Descriptor {
    #[inline]
    fn read(b: &[u8], d: usize) -> Descriptor {
        let u16_at = |i: usize| u16::from_be_bytes([b[d + i], b[d + i + 1]]);
        let (qtype, ancount) = (u16_at(0), u16_at(2));
        if qtype & FULL_FORM == 0 {
            let len = u16_at(4) as usize;
            return Descriptor {
                qtype,
                ancount,
                arcount: 0,
                additional_at: len,
                len,
                stored_additional_at: len,
                stored_len: len,
                targets: 0,
                glue: 0,
                size: SHORT,
            };
        }
        let last = u16_at(14) as usize;
        Descriptor {
            qtype: qtype & !FULL_FORM,
            ancount,
            arcount: u16_at(4),
            additional_at: u16_at(6) as usize,
            len: u16_at(8) as usize,
            stored_additional_at: u16_at(10) as usize,
            stored_len: u16_at(12) as usize,
            targets: last & TARGETS_MASK,
            glue: last >> GLUE_SHIFT,
            size: FULL,
        }
    }
}

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

impl Entry {
    /// `name` in lower-case wire form; `apex` marks the zone apex, which answers SOA from the
    /// zone's current serial.
    pub fn new(name: &[u8], apex: bool, answers: &[(u16, Answer)]) -> Self {
        let glue: Vec<u16> = answers.iter().map(|(_, a)| glue_of(a, answers)).collect();
        let stored: Vec<_> = answers
            .iter()
            .zip(&glue)
            .map(|((_, a), &g)| {
                let (mut bytes, expand, additional_at) = compress_targets(a);
                if g != 0 {
                    bytes.truncate(additional_at);
                }
                (bytes, expand, additional_at)
            })
            .collect();
        // Short where the answer is stored as written, with no additional section.
        let short: Vec<bool> = answers
            .iter()
            .zip(&stored)
            .map(|((_, a), (bytes, expand, _))| {
                a.arcount == 0 && expand.is_empty() && bytes.len() == a.bytes.len()
            })
            .collect();
        let descriptors: usize = short.iter().map(|&s| if s { SHORT } else { FULL }).sum();
        let body_len: usize = stored.iter().map(|(b, e, _)| b.len() + 2 * e.len()).sum();
        let mut blob = Vec::with_capacity(HEAD + descriptors + name.len() + body_len);
        blob.extend_from_slice(&[
            if apex { APEX } else { 0 },
            answers.len() as u8,
            name.len() as u8,
            u8::try_from(descriptors).expect("an entry has at most 15 types"),
        ]);
        for ((((qtype, a), (bytes, expand, stored_add)), g), short) in
            answers.iter().zip(&stored).zip(&glue).zip(&short)
        {
            assert!(qtype & FULL_FORM == 0, "query types stay under 32768 here");
            let len = u16::try_from(a.bytes.len()).expect("an answer body fits in a message");
            let fields: &[u16] = if *short {
                &[*qtype, a.ancount, len]
            } else {
                &[
                    *qtype | FULL_FORM,
                    a.ancount,
                    a.arcount,
                    a.additional_at as u16,
                    len,
                    *stored_add as u16,
                    bytes.len() as u16,
                    u16::try_from(expand.len())
                        .ok()
                        .filter(|&n| n as usize <= TARGETS_MASK)
                        .expect("a body of 64 KiB has fewer than 16,384 SRV targets")
                        | g << GLUE_SHIFT,
                ]
            };
            for field in fields {
                blob.extend_from_slice(&field.to_be_bytes());
            }
        }
        blob.extend_from_slice(name);
        for (bytes, expand, _) in &stored {
            for e in expand {
                blob.extend_from_slice(&e.to_be_bytes());
            }
            blob.extend_from_slice(bytes);
        }
        Entry(blob.into_boxed_slice())
    }

    /// An empty non-terminal: the name exists, every type is NODATA.
    pub fn empty(name: &[u8]) -> Self {
        Entry::new(name, false, &[])
    }

    /// This entry as the table would hand it out.
    pub fn as_ref(&self) -> EntryRef<'_> {
        Entry(&self.0)
    }
}

impl EntryRef<'_> {
    /// An owned copy.
    pub fn to_owned(self) -> Entry {
        Entry(self.0.into())
    }
}

impl<B: AsRef<[u8]>> Entry<B> {
    /// The stored bytes, as laid out above.
    pub fn bytes(&self) -> &[u8] {
        self.0.as_ref()
    }

    pub fn name(&self) -> &[u8] {
        let b = self.bytes();
        let at = HEAD + b[3] as usize;
        &b[at..at + b[2] as usize]
    }

    pub fn apex(&self) -> bool {
        self.bytes()[0] & APEX != 0
    }

    pub fn answer(&self, qtype: u16) -> Option<AnswerRef<'_>> {
        let b = self.bytes();
        let name_at = HEAD + b[3] as usize;
        let name = &b[name_at..name_at + b[2] as usize];
        let mut start = name_at + b[2] as usize;
        // The answer asked for, and the stored A and AAAA answers for glue.
        let (mut found, mut bits, mut glue): (Option<AnswerRef<'_>>, usize, [&[u8]; 2]) =
            (None, 0, [&[], &[]]);
        let mut d = HEAD;
        while d < name_at {
            let desc = Descriptor::read(b, d);
            let bytes = start + 2 * desc.targets;
            let stored = &b[bytes..bytes + desc.stored_len];
            if desc.qtype == qtype {
                found = Some(AnswerRef {
                    ancount: desc.ancount,
                    arcount: desc.arcount,
                    additional_at: desc.additional_at,
                    len: desc.len,
                    stored,
                    stored_additional_at: desc.stored_additional_at,
                    expand: &b[start..bytes],
                    name,
                    glue: [&[], &[]],
                });
                bits = desc.glue;
                if bits == 0 {
                    return found;
                }
            }
            if desc.qtype == TYPE_A {
                glue[0] = stored;
            } else if desc.qtype == TYPE_AAAA {
                glue[1] = stored;
            }
            start = bytes + desc.stored_len;
            d += desc.size;
        }
        let mut found = found?;
        for (k, g) in glue.iter().enumerate() {
            if bits & (1 << k) != 0 {
                found.glue[k] = g;
            }
        }
        Some(found)
    }

    /// The query types this name has answers for.
    pub fn types(&self) -> impl Iterator<Item = u16> + '_ {
        let b = self.bytes();
        let mut d = HEAD;
        std::iter::from_fn(move || {
            (d < HEAD + b[3] as usize).then(|| {
                let desc = Descriptor::read(b, d);
                d += desc.size;
                desc.qtype
            })
        })
    }
}

impl<B: AsRef<[u8]>> std::fmt::Debug for Entry<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &crate::wire::name_text(self.name()))
            .field("apex", &self.apex())
            .field("types", &self.types().collect::<Vec<_>>())
            .finish()
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
        // Header, descriptor, name, one target offset, and the body with the target as a pointer.
        assert_eq!(
            entry.0.len(),
            HEAD + FULL + ep.len() + 2 + srv.bytes.len() - ep.len() + 2
        );
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
            let glue_len = srv.bytes.len() - srv.additional_at as usize;
            // Address answers take the short descriptor, the SRV answer the full one.
            let unshared: usize = HEAD
                + (answers.len() - 1) * SHORT
                + FULL
                + ep.len()
                + answers.iter().map(|(_, a)| a.bytes.len()).sum::<usize>()
                // The SRV target, stored as a pointer, and its offset.
                - ep.len()
                + 2
                + 2;
            let expect = if shared {
                unshared - glue_len
            } else {
                unshared
            };
            assert_eq!(entry.0.len(), expect, "{addrs:?}, shared: {shared}");
        }
    }
}
