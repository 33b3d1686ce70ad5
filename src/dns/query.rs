//! Reading a query: header, question (lower-cased into the caller's buffer) and EDNS, without
//! allocating. A query that cannot be read far enough to be answered is `Drop`; one that is read
//! far enough but is malformed is `FormErr`, with what was read.

use crate::wire::TYPE_OPT;

#[derive(Debug, Clone, Copy)]
pub(super) struct Edns {
    pub(super) payload: u16,
    pub(super) version: u8,
    pub(super) dnssec_ok: bool,
}

/// A parsed query; fields after a parse error are whatever was read before it.
pub(super) struct Query<'a> {
    pub(super) id: u16,
    pub(super) opcode: u8,
    pub(super) rd: bool,
    pub(super) cd: bool,
    /// The question exactly as sent (name, type, class), when it could be read.
    pub(super) question: Option<&'a [u8]>,
    /// The question name, lower-cased, in wire form (in the caller's buffer).
    pub(super) lname: &'a [u8],
    pub(super) qtype: u16,
    pub(super) qclass: u16,
    pub(super) edns: Option<Edns>,
}

pub(super) enum Parsed<'a> {
    /// Not worth an answer: too short for a header, or itself a response.
    Drop,
    Query(Query<'a>),
    FormErr(Query<'a>),
}

pub(super) fn u16_at(p: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*p.get(i)?, *p.get(i + 1)?]))
}

/// Reads the uncompressed question name at `i` into `lname`, lower-cased; returns the end offset.
fn read_qname(p: &[u8], i: usize, lname: &mut [u8; 255], len: &mut usize) -> Option<usize> {
    // Walk the labels to find the name's end, then copy and lower-case it in one pass: length
    // bytes are at most 63, below b'A', so lower-casing leaves them as they are.
    let mut at = i;
    loop {
        let l = *p.get(at)? as usize;
        // Compression pointers (pointless in the only question) and extended label types.
        if l > 63 {
            return None;
        }
        at += 1 + l;
        if at - i > 255 {
            return None;
        }
        if l == 0 {
            break;
        }
    }
    let name = p.get(i..at)?;
    for (d, s) in lname.iter_mut().zip(name) {
        *d = s | (((s.wrapping_sub(b'A') < 26) as u8) << 5);
    }
    *len = name.len();
    Some(at)
}

/// Skips a possibly compressed name; returns the offset after it.
fn skip_name(p: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let l = *p.get(i)?;
        match l {
            0 => return Some(i + 1),
            1..=63 => i += 1 + l as usize,
            0xC0..=0xFF => return p.get(i + 1).map(|_| i + 2),
            _ => return None,
        }
    }
}

/// Parses `p`; the lower-cased question name goes into `name`, so the parsed query stays small.
pub(super) fn parse<'a>(p: &'a [u8], name: &'a mut [u8; 255]) -> Parsed<'a> {
    if p.len() < 12 || p[2] & 0x80 != 0 {
        return Parsed::Drop;
    }
    let mut q = Query {
        id: u16::from_be_bytes([p[0], p[1]]),
        opcode: (p[2] >> 3) & 0x0F,
        rd: p[2] & 0x01 != 0,
        cd: p[3] & 0x10 != 0,
        question: None,
        lname: &[],
        qtype: 0,
        qclass: 0,
        edns: None,
    };
    let count = |i| u16::from_be_bytes([p[i], p[i + 1]]);
    let (qd, an, ns, ar) = (count(4), count(6), count(8), count(10));
    if qd != 1 {
        return Parsed::FormErr(q);
    }
    let mut len = 0;
    let Some(end) = read_qname(p, 12, name, &mut len) else {
        return Parsed::FormErr(q);
    };
    let name: &'a [u8; 255] = name;
    q.lname = &name[..len];
    let (Some(qtype), Some(qclass)) = (u16_at(p, end), u16_at(p, end + 2)) else {
        return Parsed::FormErr(q);
    };
    q.qtype = qtype;
    q.qclass = qclass;
    q.question = Some(&p[12..end + 4]);
    let mut i = end + 4;
    for section in [an, ns, ar] {
        for _ in 0..section {
            let start = i;
            let Some(after) = skip_name(p, i) else {
                return Parsed::FormErr(q);
            };
            let (Some(rtype), Some(class), Some(rdlen)) =
                (u16_at(p, after), u16_at(p, after + 2), u16_at(p, after + 8))
            else {
                return Parsed::FormErr(q);
            };
            let rdata = after + 10;
            if rdata + rdlen as usize > p.len() {
                return Parsed::FormErr(q);
            }
            i = rdata + rdlen as usize;
            if rtype != TYPE_OPT {
                continue;
            }
            // RFC 6891: one OPT, in the additional section, owned by the root.
            if section != ar || q.edns.is_some() || p[start] != 0 || !valid_options(&p[rdata..i]) {
                q.edns = None;
                return Parsed::FormErr(q);
            }
            q.edns = Some(Edns {
                payload: class,
                version: p[after + 5],
                dnssec_ok: p[after + 6] & 0x80 != 0,
            });
        }
    }
    Parsed::Query(q)
}

fn valid_options(mut rdata: &[u8]) -> bool {
    while !rdata.is_empty() {
        let Some(len) = u16_at(rdata, 2) else {
            return false;
        };
        let Some(rest) = rdata.get(4 + len as usize..) else {
            return false;
        };
        rdata = rest;
    }
    true
}
