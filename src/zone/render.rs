//! Renders DNS names and records into precompiled answer bodies: wire bytes that follow the
//! question section of a response, with owner names compressed to pointers into the question, so
//! one body serves any spelling (0x20 case) of the name it belongs to.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::wire::{CLASS_IN, OPT_LEN, TYPE_A, TYPE_AAAA, TYPE_NS, TYPE_SRV, TYPE_TXT};

/// Largest offset a compression pointer can hold.
const MAX_POINTER: usize = 0x3FFF;

/// An SRV target that the zone may store compressed: it starts at `at` in the body and is `len`
/// bytes long, and after its first `prefix` bytes it repeats the name at message offset
/// `pointer` (in the question or an earlier target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub at: u16,
    pub len: u16,
    pub prefix: u16,
    pub pointer: u16,
}

/// One record as [`BodyWriter`] wrote it: its values, so the zone chooses how to store an
/// answer from them instead of reading the bytes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub rtype: u16,
    pub ttl: u32,
    /// The owner's offset in the message, when the owner was written as a pointer alone.
    pub owner: Option<u16>,
    /// Where the record's data starts in the body, and its length.
    pub data_at: u16,
    pub data_len: u16,
}

/// The answer to one query type at one name, encoded as the bytes that follow the question.
/// The builder's form; the zone stores it inside an [`Entry`](super::Entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub ancount: u16,
    pub arcount: u16,
    /// Where the additional section starts in `bytes`, so UDP can drop it when it does not fit.
    pub additional_at: u32,
    pub bytes: Box<[u8]>,
    /// SRV targets (written in full on the wire, RFC 2782) whose tail is already in the message.
    pub targets: Vec<Target>,
    /// Every record in `bytes`, in order: the answer section's `ancount`, then the additional
    /// section's `arcount`.
    pub records: Vec<Record>,
}

impl Answer {
    /// The data of `r`, one of [`Answer::records`].
    pub fn data(&self, r: &Record) -> &[u8] {
        let at = r.data_at as usize;
        &self.bytes[at..at + r.data_len as usize]
    }
}

/// Writes one answer body for a question whose name is `qname` (lower-case wire form).
pub struct BodyWriter {
    buf: Vec<u8>,
    /// Offset in the final message where `buf` starts: header + question.
    base: usize,
    /// Known name suffixes and where they are in the message, for compression.
    table: HashMap<Vec<u8>, u16>,
    ancount: u16,
    arcount: u16,
    additional_at: Option<usize>,
    /// SRV targets whose tail is already in the message.
    targets: Vec<Target>,
    records: Vec<Record>,
}

impl BodyWriter {
    pub fn new(qname: &[u8]) -> Self {
        let mut table = HashMap::new();
        let mut i = 0;
        while qname[i] != 0 {
            table.insert(qname[i..].to_vec(), (12 + i) as u16);
            i += 1 + qname[i] as usize;
        }
        BodyWriter {
            buf: Vec::new(),
            base: 12 + qname.len() + 4,
            table,
            ancount: 0,
            arcount: 0,
            additional_at: None,
            targets: Vec::new(),
            records: Vec::new(),
        }
    }

    fn pos(&self) -> usize {
        self.base + self.buf.len()
    }

    /// Whether a record of at most `len` bytes still fits in a 64 KiB message with an OPT.
    fn fits(&self, len: usize) -> bool {
        self.pos() + len + OPT_LEN <= u16::MAX as usize
    }

    /// The longest tail of `name` already in the message: how many bytes precede it in `name`,
    /// and its offset in the message.
    fn known_tail(&self, name: &[u8]) -> Option<(usize, u16)> {
        let mut i = 0;
        while name[i] != 0 {
            if let Some(&off) = self.table.get(&name[i..]) {
                return Some((i, off));
            }
            i += 1 + name[i] as usize;
        }
        None
    }

    fn name(&mut self, name: &[u8], compress: bool) {
        let tail = if compress {
            self.known_tail(name)
        } else {
            None
        };
        let end = tail.map_or(name.len() - 1, |(i, _)| i);
        let mut i = 0;
        while i < end {
            let here = self.pos();
            if here <= MAX_POINTER {
                self.table.entry(name[i..].to_vec()).or_insert(here as u16);
            }
            let l = name[i] as usize;
            self.buf.extend_from_slice(&name[i..i + 1 + l]);
            i += 1 + l;
        }
        match tail {
            Some((_, off)) => self.buf.extend_from_slice(&(0xC000 | off).to_be_bytes()),
            None => self.buf.push(0),
        }
    }

    fn rr(
        &mut self,
        owner: &[u8],
        rtype: u16,
        ttl: u32,
        rdata_max: usize,
        rdata: impl FnOnce(&mut Self),
    ) -> bool {
        if !self.fits(owner.len() + 10 + rdata_max) {
            return false;
        }
        let pointer = match self.known_tail(owner) {
            Some((0, at)) => Some(at),
            _ => None,
        };
        self.name(owner, true);
        self.buf.extend_from_slice(&rtype.to_be_bytes());
        self.buf.extend_from_slice(&CLASS_IN.to_be_bytes());
        self.buf.extend_from_slice(&ttl.to_be_bytes());
        let len_at = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        rdata(self);
        let len = (self.buf.len() - len_at - 2) as u16;
        self.buf[len_at..len_at + 2].copy_from_slice(&len.to_be_bytes());
        self.records.push(Record {
            rtype,
            ttl,
            owner: pointer,
            // A body fits in a message, so its offsets fit in 16 bits.
            data_at: (len_at + 2) as u16,
            data_len: len,
        });
        if self.additional_at.is_some() {
            self.arcount += 1;
        } else {
            self.ancount += 1;
        }
        true
    }

    /// An A or AAAA record; false when the message is full.
    pub fn addr(&mut self, owner: &[u8], ip: IpAddr, ttl: u32) -> bool {
        match ip {
            IpAddr::V4(v4) => self.rr(owner, TYPE_A, ttl, 4, |w| {
                w.buf.extend_from_slice(&v4.octets());
            }),
            IpAddr::V6(v6) => self.rr(owner, TYPE_AAAA, ttl, 16, |w| {
                w.buf.extend_from_slice(&v6.octets());
            }),
        }
    }

    /// An SRV record. The target is written in full (RFC 2782 forbids compressing it), but later
    /// names may point into it.
    pub fn srv(
        &mut self,
        owner: &[u8],
        priority: u16,
        weight: u16,
        port: u16,
        target: &[u8],
        ttl: u32,
    ) -> bool {
        self.rr(owner, TYPE_SRV, ttl, 6 + target.len(), |w| {
            w.buf.extend_from_slice(&priority.to_be_bytes());
            w.buf.extend_from_slice(&weight.to_be_bytes());
            w.buf.extend_from_slice(&port.to_be_bytes());
            // Noted for the zone, which stores the target compressed when that saves bytes.
            if let Some((prefix, pointer)) = w.known_tail(target) {
                if prefix + 2 < target.len() {
                    w.targets.push(Target {
                        at: w.buf.len() as u16,
                        len: target.len() as u16,
                        prefix: prefix as u16,
                        pointer,
                    });
                }
            }
            w.name(target, false);
        })
    }

    pub fn ns(&mut self, owner: &[u8], target: &[u8], ttl: u32) -> bool {
        self.rr(owner, TYPE_NS, ttl, target.len(), |w| w.name(target, true))
    }

    pub fn txt(&mut self, owner: &[u8], text: &str, ttl: u32) -> bool {
        self.rr(owner, TYPE_TXT, ttl, 1 + text.len(), |w| {
            w.buf.push(text.len() as u8);
            w.buf.extend_from_slice(text.as_bytes());
        })
    }

    /// Records written from now on go to the additional section.
    pub fn additional(&mut self) {
        self.additional_at.get_or_insert(self.buf.len());
    }

    pub fn finish(self) -> Answer {
        let len = self.buf.len();
        Answer {
            ancount: self.ancount,
            arcount: self.arcount,
            additional_at: self.additional_at.unwrap_or(len) as u32,
            bytes: self.buf.into_boxed_slice(),
            targets: self.targets,
            records: self.records,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{child, wire_name};

    #[test]
    fn owner_points_at_the_question_and_targets_are_not_compressed() {
        let q = wire_name("svc.ns.svc.z").unwrap();
        let target = child("h.c", &q).unwrap();
        let mut w = BodyWriter::new(&q);
        assert!(w.srv(&q, 0, 100, 80, &target, 5));
        w.additional();
        assert!(w.addr(&target, "10.0.0.1".parse().unwrap(), 5));
        let a = w.finish();
        assert_eq!((a.ancount, a.arcount), (1, 1));
        assert_eq!(&a.bytes[..2], &[0xC0, 12]);
        // SRV rdata: priority, weight, port, then the target spelled out.
        assert_eq!(&a.bytes[12..18], &[0, 0, 0, 100, 0, 80]);
        assert_eq!(&a.bytes[18..18 + target.len()], &target[..]);
        // The A record's owner points at the SRV target inside the body.
        let target_at = 12 + q.len() + 4 + 18;
        let add = a.additional_at as usize;
        assert_eq!(
            &a.bytes[add..add + 2],
            &(0xC000u16 | target_at as u16).to_be_bytes()
        );
    }
}
