//! One name's answers as the table stores them, the read side: every query type's precompiled
//! body in one run of bytes, with SRV targets kept compressed and the record headers the writer
//! can derive left out, written back byte for byte as rendered. The layout is [`Entry`]'s; the
//! builder's side, which chooses each answer's form, is `encode.rs`.

use crate::wire::{TYPE_A, TYPE_AAAA, TYPE_SRV, record_head};

/// An answer as stored in an [`Entry`]. SRV targets are kept compressed (a target repeats the
/// question name or one of its suffixes, so an endpoint name's SRV answer would otherwise hold its
/// own 40-odd-octet name twice), and records whose only varying part is their data are kept as
/// that data; [`AnswerRef::write`] spells them out again, giving exactly the bytes the builder
/// rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerRef<'a> {
    pub ancount: u16,
    pub arcount: u16,
    /// Where the additional section starts in the answer as written.
    pub additional_at: usize,
    /// Length of the answer as written.
    pub len: usize,
    pub(super) body: Body<'a>,
    /// The owner name (lower-case wire form), which the question spells.
    pub(super) name: &'a [u8],
    /// What the additional section is when it is not stored with the body: the entry's own A
    /// and AAAA answers (as an endpoint name's SRV answer gives its target's addresses).
    pub(super) glue: [Plain<'a>; 2],
}

/// How an answer's bytes are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body<'a> {
    /// As rendered, but for the compressed targets.
    Stored {
        /// The stored bytes, SRV targets compressed.
        stored: &'a [u8],
        stored_additional_at: usize,
        /// Big-endian offsets in `stored` of the compressed targets, ascending.
        expand: &'a [u8],
    },
    /// Stored as written, or an address answer's data.
    Plain(Plain<'a>),
    /// SRV records whose target is the owner itself (an endpoint name's), each
    /// `C00C SRV IN ttl rdlen` then priority, weight and port, which is all that is kept of it,
    /// then the owner's name.
    SelfSrv { ttl: [u8; 4], rdata: &'a [u8] },
    /// SRV records with their targets' addresses as the additional section, one TTL (a
    /// service's): see [`super::encode`]'s `srv_records_form` for the layout.
    SrvRecords {
        stored: &'a [u8],
        stored_additional_at: usize,
        ancount: u16,
    },
}

/// An answer with no additional section and no compressed target, stored as written, or, as
/// [`Plain::Addresses`], an A or AAAA answer kept as its addresses alone (every record
/// `C00C type IN ttl rdlen`, one TTL). The entry's own A and AAAA answers are one or the other,
/// which is what glue needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Plain<'a> {
    #[default]
    None,
    Written(&'a [u8]),
    Addresses {
        qtype: u16,
        ttl: [u8; 4],
        rdata: &'a [u8],
    },
}

/// The question's offset in a message, which the owner's own records point at.
pub(super) const QUESTION: u16 = 12;

/// The data length of an address record of `qtype` (A or AAAA).
pub(super) fn address_len(qtype: u16) -> usize {
    if qtype == TYPE_AAAA { 16 } else { 4 }
}

impl Plain<'_> {
    fn written_len(&self) -> usize {
        match *self {
            Plain::None => 0,
            Plain::Written(b) => b.len(),
            Plain::Addresses { qtype, rdata, .. } => {
                let n = address_len(qtype);
                rdata.len() / n * (12 + n)
            }
        }
    }

    #[inline]
    pub(super) fn write(&self, out: &mut Vec<u8>) {
        match *self {
            Plain::None => {}
            Plain::Written(b) => out.extend_from_slice(b),
            Plain::Addresses { qtype, ttl, rdata } => {
                let n = address_len(qtype);
                let head = record_head(QUESTION, qtype, ttl, n as u16);
                out.reserve(rdata.len() / n * (12 + n));
                for r in rdata.chunks_exact(n) {
                    out.extend_from_slice(&head);
                    out.extend_from_slice(r);
                }
            }
        }
    }
}

impl AnswerRef<'_> {
    /// Appends the answer, from its first record through the answer and authority sections and,
    /// with `additional`, the additional section. `out` must hold the message from its first
    /// byte: header, then the question for [`AnswerRef::name`].
    pub fn write(&self, out: &mut Vec<u8>, additional: bool) {
        match self.body {
            Body::Plain(p) => p.write(out),
            Body::SelfSrv { ttl, rdata } => {
                let rdlen = (SRV_FIXED + self.name.len()) as u16;
                let head = record_head(QUESTION, TYPE_SRV, ttl, rdlen);
                out.reserve(self.len);
                for r in rdata.chunks_exact(6) {
                    out.extend_from_slice(&head);
                    out.extend_from_slice(r);
                    out.extend_from_slice(self.name);
                }
            }
            Body::Stored {
                stored,
                stored_additional_at,
                expand,
            } => write_stored(
                out,
                additional,
                stored,
                stored_additional_at,
                expand,
                self.name,
            ),
            Body::SrvRecords {
                stored,
                stored_additional_at,
                ancount,
            } => write_srv_records(
                out,
                additional,
                stored,
                stored_additional_at,
                ancount,
                self.name,
            ),
        }
        if additional {
            self.glue[0].write(out);
            self.glue[1].write(out);
        }
    }
}

/// Appends an SRV answer kept in the SRV-records form (see [`super::encode`]'s `srv_records_form`), through its
/// additional section with `additional`.
pub(super) fn write_srv_records(
    out: &mut Vec<u8>,
    additional: bool,
    stored: &[u8],
    stored_additional_at: usize,
    ancount: u16,
    name: &[u8],
) {
    let ttl: [u8; 4] = stored[..4].try_into().expect("the stored TTL");
    // The data length is patched in once the target is spelled out.
    let head = record_head(QUESTION, TYPE_SRV, ttl, 0);
    let mut i = 4;
    for _ in 0..ancount {
        out.extend_from_slice(&head);
        let rdata = out.len();
        out.extend_from_slice(&stored[i..i + SRV_FIXED]);
        i += SRV_FIXED;
        let prefix = i;
        i = labels_end(stored, i, stored_additional_at);
        out.extend_from_slice(&stored[prefix..i]);
        let at = (u16::from_be_bytes([stored[i], stored[i + 1]]) & 0x3FFF) as usize;
        i += 2;
        spell_out(out, at, name);
        let rdlen = (out.len() - rdata) as u16;
        out[rdata - 2..rdata].copy_from_slice(&rdlen.to_be_bytes());
    }
    if !additional {
        return;
    }
    let mut i = stored_additional_at;
    while i + 2 <= stored.len() {
        let owner = u16::from_be_bytes([stored[i], stored[i + 1]]);
        let qtype = if owner & V6_OWNER != 0 {
            TYPE_AAAA
        } else {
            TYPE_A
        };
        let n = address_len(qtype);
        out.extend_from_slice(&record_head(owner & 0x3FFF, qtype, ttl, n as u16));
        out.extend_from_slice(&stored[i + 2..i + 2 + n]);
        i += 2 + n;
    }
}

/// Appends a stored body (through its additional section with `additional`), spelling out
/// its compressed targets.
pub(super) fn write_stored(
    out: &mut Vec<u8>,
    additional: bool,
    stored: &[u8],
    stored_additional_at: usize,
    expand: &[u8],
    name: &[u8],
) {
    let end = if additional {
        stored.len()
    } else {
        stored_additional_at
    };
    let mut cursor = 0;
    for e in expand.chunks_exact(2) {
        let e = u16::from_be_bytes([e[0], e[1]]) as usize;
        if e >= end {
            break;
        }
        out.extend_from_slice(&stored[cursor..e]);
        // Labels, then the pointer that ends the compressed name.
        let i = labels_end(stored, e, stored.len());
        out.extend_from_slice(&stored[e..i]);
        if i + 1 >= stored.len() || stored[i] == 0 {
            // Not compressed after all (cannot happen for what Entry::new stores).
            cursor = i;
            continue;
        }
        let at = (u16::from_be_bytes([stored[i], stored[i + 1]]) & 0x3FFF) as usize;
        spell_out(out, at, name);
        cursor = i + 2;
    }
    out.extend_from_slice(&stored[cursor.min(end)..end]);
}

/// Where the labels of the name at `from` in `b` end (at its pointer or root label), or `end`.
pub(super) fn labels_end(b: &[u8], mut from: usize, end: usize) -> usize {
    while from < end && b[from] & 0xC0 != 0xC0 && b[from] != 0 {
        from += 1 + b[from] as usize;
    }
    from.min(end)
}

/// Appends the name at message offset `at` in full: from the question's lower-case spelling
/// (`qname`) when `at` is inside it, else from what is already written in `out`, following any
/// pointer there.
pub(super) fn spell_out(out: &mut Vec<u8>, mut at: usize, qname: &[u8]) {
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
/// per type, short:     qtype(2) ancount(2) len(2)
///        or addresses: qtype|0x4000(2) ancount(2) ttl(4)
///        or self-SRV:  qtype|0xC000(2) glue(2 bits) ancount(14 bits) ttl(4)
///        or full:      qtype|0x8000(2) ancount(2) arcount(2) additional_at(2) len(2)
///                      stored_additional_at(2) stored_len(2) glue(2 bits) compressed_targets(14 bits)
/// name
/// per type: compressed target offsets (2 each), stored bytes
/// ```
///
/// The short form is for an answer with no additional section and no compressed target: stored
/// as written. The address form is for an A or AAAA answer whose records are all
/// `C00C type IN ttl rdlen` with one TTL (every address answer the zone renders): stored as the
/// addresses alone, 4 or 16 bytes a record instead of 16 or 28. The self-SRV form is for an SRV
/// answer whose records all point at the owner itself with one TTL, and whose additional section
/// is the glue or nothing (an endpoint name's): stored as each record's priority, weight and
/// port. Bodies follow the name in descriptor order, so each starts where the one before ended.
/// A body is at most 64 KiB (it must fit in a message), so 16-bit lengths and offsets suffice.
/// An additional section that is byte for byte the entry's own A answer, AAAA answer or both
/// (glue bits 1, 2, 3) is not stored twice. Every compact form is kept only when writing it back
/// gives the rendered bytes exactly. A type without an answer gets NODATA.
///
/// The builder renders owned entries (`Entry`, its own allocation); the table copies their bytes
/// into its segments and hands readers an [`EntryRef`] into them, so a served name costs no
/// allocation of its own.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Entry<B = Box<[u8]>>(pub(super) B);

/// An entry as the table holds it: borrowed from a published segment.
pub type EntryRef<'a> = Entry<&'a [u8]>;

pub(super) const HEAD: usize = 4;
pub(super) const SHORT: usize = 6;
pub(super) const COMPACT: usize = 8;
pub(super) const FULL: usize = 16;
/// The form bits of a descriptor's qtype field.
pub(super) const FORM_MASK: u16 = 0xC000;
pub(super) const FULL_FORM: u16 = 0x8000;
pub(super) const ADDRESS_FORM: u16 = 0x4000;
pub(super) const SELF_SRV_FORM: u16 = 0xC000;
pub(super) const APEX: u8 = 1;
/// The glue bits of a full descriptor's last field and a self-SRV descriptor's count: the
/// additional section is the A answer (1), the AAAA answer (2) or both, A first (3).
pub(super) const GLUE_SHIFT: u32 = 14;
pub(super) const TARGETS_MASK: usize = (1 << GLUE_SHIFT) - 1;
/// An SRV record's priority, weight and port.
pub(super) const SRV_FIXED: usize = 6;
/// Set in a full descriptor's ancount: the SRV-records form.
pub(super) const SRV_RECORDS: u16 = 0x8000;
/// Set in a stored additional record's owner offset (SRV-records form): an AAAA record.
pub(super) const V6_OWNER: u16 = 0x8000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Short,
    Addresses,
    SelfSrv,
    Full,
    SrvRecords,
}

/// One descriptor, read.
struct Descriptor {
    form: Form,
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
    ttl: [u8; 4],
    /// Its bytes.
    size: usize,
}

impl Descriptor {
    #[inline]
    fn read(b: &[u8], d: usize) -> Descriptor {
        let u16_at = |i: usize| u16::from_be_bytes([b[d + i], b[d + i + 1]]);
        let (field, ancount) = (u16_at(0), u16_at(2));
        let qtype = field & !FORM_MASK;
        let short = |form, ancount, stored_len, len, glue, ttl, size| Descriptor {
            form,
            qtype,
            ancount,
            arcount: 0,
            additional_at: len,
            len,
            stored_additional_at: stored_len,
            stored_len,
            targets: 0,
            glue,
            ttl,
            size,
        };
        match field & FORM_MASK {
            0 => {
                let len = u16_at(4) as usize;
                short(Form::Short, ancount, len, len, 0, [0; 4], SHORT)
            }
            ADDRESS_FORM => {
                let n = address_len(qtype);
                let ttl = [b[d + 4], b[d + 5], b[d + 6], b[d + 7]];
                let count = ancount as usize;
                short(
                    Form::Addresses,
                    ancount,
                    count * n,
                    count * (12 + n),
                    0,
                    ttl,
                    COMPACT,
                )
            }
            SELF_SRV_FORM => {
                let ttl = [b[d + 4], b[d + 5], b[d + 6], b[d + 7]];
                let count = ancount as usize & TARGETS_MASK;
                // The written length is the caller's: it depends on the name and the glue.
                short(
                    Form::SelfSrv,
                    count as u16,
                    count * SRV_FIXED,
                    0,
                    ancount as usize >> GLUE_SHIFT,
                    ttl,
                    COMPACT,
                )
            }
            _ => {
                let last = u16_at(14) as usize;
                Descriptor {
                    form: if ancount & SRV_RECORDS != 0 {
                        Form::SrvRecords
                    } else {
                        Form::Full
                    },
                    qtype,
                    ancount: ancount & !SRV_RECORDS,
                    arcount: u16_at(4),
                    additional_at: u16_at(6) as usize,
                    len: u16_at(8) as usize,
                    stored_additional_at: u16_at(10) as usize,
                    stored_len: u16_at(12) as usize,
                    targets: last & TARGETS_MASK,
                    glue: last >> GLUE_SHIFT,
                    ttl: [0; 4],
                    size: FULL,
                }
            }
        }
    }
}

impl Entry {
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
        // The answer asked for, and the stored A and AAAA answers (and their counts) for glue.
        let mut found: Option<(AnswerRef<'_>, Form)> = None;
        let mut bits = 0;
        let mut glue: [(Plain<'_>, u16); 2] = [(Plain::None, 0); 2];
        let mut d = HEAD;
        while d < name_at {
            let desc = Descriptor::read(b, d);
            let bytes = start + 2 * desc.targets;
            let stored = &b[bytes..bytes + desc.stored_len];
            let plain = match desc.form {
                Form::Short => Plain::Written(stored),
                Form::Addresses => Plain::Addresses {
                    qtype: desc.qtype,
                    ttl: desc.ttl,
                    rdata: stored,
                },
                _ => Plain::None,
            };
            if desc.qtype == qtype {
                let body = match desc.form {
                    Form::Short | Form::Addresses => Body::Plain(plain),
                    Form::SelfSrv => Body::SelfSrv {
                        ttl: desc.ttl,
                        rdata: stored,
                    },
                    Form::Full => Body::Stored {
                        stored,
                        stored_additional_at: desc.stored_additional_at,
                        expand: &b[start..bytes],
                    },
                    Form::SrvRecords => Body::SrvRecords {
                        stored,
                        stored_additional_at: desc.stored_additional_at,
                        ancount: desc.ancount,
                    },
                };
                // A self-SRV answer's length follows from the name; its glue is added below.
                let (additional_at, len) = if desc.form == Form::SelfSrv {
                    let at = desc.ancount as usize * (12 + SRV_FIXED + name.len());
                    (at, at)
                } else {
                    (desc.additional_at, desc.len)
                };
                let answer = AnswerRef {
                    ancount: desc.ancount,
                    arcount: desc.arcount,
                    additional_at,
                    len,
                    body,
                    name,
                    glue: [Plain::None; 2],
                };
                bits = desc.glue;
                if bits == 0 {
                    return Some(answer);
                }
                found = Some((answer, desc.form));
            }
            if desc.qtype == TYPE_A {
                glue[0] = (plain, desc.ancount);
            } else if desc.qtype == TYPE_AAAA {
                glue[1] = (plain, desc.ancount);
            }
            start = bytes + desc.stored_len;
            d += desc.size;
        }
        let (mut found, form) = found?;
        for (k, (g, count)) in glue.iter().enumerate() {
            if bits & (1 << k) != 0 {
                found.glue[k] = *g;
                if form == Form::SelfSrv {
                    found.arcount += count;
                    found.len += g.written_len();
                }
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
    use super::*;
    use crate::wire::{TYPE_A, TYPE_TXT, child, wire_name};
    use crate::zone::render::BodyWriter;

    /// What a reader asks of an entry: its name and apex flag, the types it answers (in the
    /// order given), NODATA for the rest, and a borrowed entry reading the same as its owner.
    #[test]
    fn an_entry_reads_back_its_name_types_and_answers() {
        let apex = wire_name("clusterset.local").unwrap();
        let name = child("web.shop.svc", &apex).unwrap();
        let mut w = BodyWriter::new(&name);
        assert!(w.addr(&name, [10, 0, 0, 1].into(), 5));
        let a = w.finish();
        let entry = Entry::new(&name, false, &[(TYPE_A, a.clone())]);
        assert_eq!(entry.name(), &name[..]);
        assert!(!entry.apex());
        assert_eq!(entry.types().collect::<Vec<_>>(), [TYPE_A]);
        assert!(
            entry.answer(TYPE_TXT).is_none(),
            "a type it lacks is NODATA"
        );
        let answer = entry.answer(TYPE_A).unwrap();
        assert_eq!((answer.ancount, answer.arcount), (1, 0));
        let (mut whole, mut borrowed) = (vec![0u8; 12], vec![0u8; 12]);
        for out in [&mut whole, &mut borrowed] {
            out.extend_from_slice(&name);
            out.extend_from_slice(&[0, 1, 0, 1]);
        }
        answer.write(&mut whole, true);
        entry
            .as_ref()
            .answer(TYPE_A)
            .unwrap()
            .write(&mut borrowed, true);
        assert_eq!(whole, borrowed);
        assert_eq!(whole[12 + name.len() + 4..], a.bytes[..]);
        assert_eq!(entry.as_ref().to_owned().bytes(), entry.bytes());
        let empty = Entry::empty(&name);
        assert_eq!(empty.types().count(), 0);
        assert!(empty.answer(TYPE_A).is_none());
        assert!(Entry::new(&apex, true, &[]).apex());
    }
}
