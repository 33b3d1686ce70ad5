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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::wire_name;

    /// A query for `name` (as spelled) of type A, class IN, with `ar` more records appended.
    fn query(name: &str, extra: &[u8], arcount: u16) -> Vec<u8> {
        let mut m = vec![0xAB, 0xCD, 0x01 | (5 << 3), 0x10, 0, 1, 0, 0, 0, 0];
        m.extend(arcount.to_be_bytes());
        // Spelled as given: wire_name lower-cases, so write the labels by hand.
        for label in name.split('.').filter(|l| !l.is_empty()) {
            m.push(label.len() as u8);
            m.extend(label.as_bytes());
        }
        m.push(0);
        m.extend([0, 1, 0, 1]);
        m.extend(extra);
        m
    }

    /// An OPT record: owner `owner`, payload size, version, DO, and `options` as its RDATA.
    fn opt(owner: u8, payload: u16, version: u8, options: &[u8]) -> Vec<u8> {
        let mut r = vec![owner, 0, 41];
        r.extend(payload.to_be_bytes());
        r.extend([0, version, 0x80, 0]);
        r.extend((options.len() as u16).to_be_bytes());
        r.extend(options);
        r
    }

    fn is_formerr(p: &[u8]) -> bool {
        matches!(parse(p, &mut [0; 255]), Parsed::FormErr(_))
    }

    #[test]
    fn the_header_and_question_are_read_and_the_name_lower_cased() {
        let p = query("WwW.Shop.SVC.clusterset.LOCAL", &[], 0);
        let mut name = [0; 255];
        let Parsed::Query(q) = parse(&p, &mut name) else {
            panic!("not a query")
        };
        assert_eq!((q.id, q.opcode, q.rd, q.cd), (0xABCD, 5, true, true));
        assert_eq!(q.lname, wire_name("www.shop.svc.clusterset.local").unwrap());
        assert_eq!((q.qtype, q.qclass), (1, 1));
        // The question is kept as sent, for the echo (0x20 case survives).
        assert_eq!(q.question, Some(&p[12..]));
        assert!(q.edns.is_none());
    }

    #[test]
    fn runts_and_responses_are_dropped_bad_questions_are_formerr() {
        let p = query("a.b", &[], 0);
        assert!(matches!(parse(&p[..11], &mut [0; 255]), Parsed::Drop));
        let mut reply = p.clone();
        reply[2] |= 0x80;
        assert!(matches!(parse(&reply, &mut [0; 255]), Parsed::Drop));
        for qdcount in [0, 2] {
            let mut m = p.clone();
            m[5] = qdcount;
            let mut name = [0; 255];
            let Parsed::FormErr(q) = parse(&m, &mut name) else {
                panic!("qdcount {qdcount} accepted")
            };
            assert_eq!(q.id, 0xABCD, "the id is read for the FORMERR");
        }
        // A compression pointer, or a label type above 63, in the question.
        let mut pointer = p[..12].to_vec();
        pointer.extend([0xC0, 12, 0, 1, 0, 1]);
        assert!(is_formerr(&pointer));
        let mut ext = p[..12].to_vec();
        ext.extend([0x41, 0, 0, 1, 0, 1]);
        assert!(is_formerr(&ext));
        // A name longer than 255 octets, and a question cut before its type.
        let long = vec!["a".repeat(63); 4].join(".") + ".b";
        assert!(is_formerr(&query(&long, &[], 0)));
        let mut name = [0; 255];
        let Parsed::FormErr(q) = parse(&p[..p.len() - 2], &mut name) else {
            panic!("a cut question accepted")
        };
        assert!(q.question.is_none());
    }

    #[test]
    fn one_opt_from_the_root_in_the_additional_section_is_edns() {
        let p = query("a.b", &opt(0, 1232, 0, &[0, 10, 0, 2, 1, 2]), 1);
        let mut name = [0; 255];
        let Parsed::Query(q) = parse(&p, &mut name) else {
            panic!("refused")
        };
        let e = q.edns.unwrap();
        assert_eq!((e.payload, e.version, e.dnssec_ok), (1232, 0, true));
        // Version 1 is read (the answer is BADVERS), not refused here.
        let p = query("a.b", &opt(0, 512, 1, &[]), 1);
        assert!(
            matches!(parse(&p, &mut [0; 255]), Parsed::Query(q) if q.edns.unwrap().version == 1)
        );
        // Two OPTs, an OPT not owned by the root, a bad option length, RDATA past the end.
        let mut two = opt(0, 1232, 0, &[]);
        two.extend(opt(0, 1232, 0, &[]));
        assert!(is_formerr(&query("a.b", &two, 2)));
        assert!(is_formerr(&query("a.b", &opt(1, 1232, 0, &[]), 1)));
        assert!(is_formerr(&query(
            "a.b",
            &opt(0, 1232, 0, &[0, 10, 0, 9, 1]),
            1
        )));
        let mut past = opt(0, 1232, 0, &[]);
        past[10] = 40;
        assert!(is_formerr(&query("a.b", &past, 1)));
        // An OPT in the answer section, and a record the counts promise but the packet lacks.
        let mut answer = query("a.b", &opt(0, 1232, 0, &[]), 0);
        answer[7] = 1;
        assert!(is_formerr(&answer));
        assert!(is_formerr(&query("a.b", &[], 1)));
    }

    #[test]
    fn other_records_are_skipped_whatever_their_names() {
        // An A record in the additional section with a compressed owner, then the OPT.
        let mut extra = vec![0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 10, 0, 0, 1];
        extra.extend(opt(0, 4096, 0, &[]));
        let p = query("a.b", &extra, 2);
        assert!(
            matches!(parse(&p, &mut [0; 255]), Parsed::Query(q) if q.edns.unwrap().payload == 4096)
        );
    }
}
