//! The served zone: a concurrent map from lower-cased wire names to precompiled answers, plus the
//! zone-wide facts (apexes, serial, synced) that negative answers and readiness need. Written only
//! by [`build::Builder`]; read by every DNS path through [`Zone::lookup`].

pub mod build;
pub mod render;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use dashmap::DashMap;

/// The answer to one query type at one name, encoded as the bytes that follow the question.
/// The builder's form; the zone stores it inside an [`Entry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub ancount: u16,
    pub arcount: u16,
    /// Where the additional section starts in `bytes`, so UDP can drop it when it does not fit.
    pub additional_at: u32,
    pub bytes: Box<[u8]>,
}

/// An answer as stored in an [`Entry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerRef<'a> {
    pub ancount: u16,
    pub arcount: u16,
    pub additional_at: usize,
    pub bytes: &'a [u8],
}

/// Everything one name answers, in one allocation so that matching the name and copying the
/// answer touch the same few cache lines:
///
/// ```text
/// flags(1) types(1) name_len(1) | per type: qtype(2) ancount(2) arcount(2) additional_at(2) len(2) | name | bodies
/// ```
///
/// Bodies follow the name in descriptor order, so each starts where the one before ended. A body
/// is at most 64 KiB (it must fit in a message), so 16-bit lengths and offsets suffice.
/// A type without an answer gets NODATA.
#[derive(Clone, PartialEq, Eq)]
pub struct Entry(Arc<[u8]>);

const DESCRIPTOR: usize = 10;
const APEX: u8 = 1;

impl Entry {
    /// `name` in lower-case wire form; `apex` marks the zone apex, which answers SOA from the
    /// zone's current serial.
    pub fn new(name: &[u8], apex: bool, answers: &[(u16, Answer)]) -> Self {
        let head = 3 + answers.len() * DESCRIPTOR;
        let body_len: usize = answers.iter().map(|(_, a)| a.bytes.len()).sum();
        let mut blob = Vec::with_capacity(head + name.len() + body_len);
        blob.extend_from_slice(&[
            if apex { APEX } else { 0 },
            answers.len() as u8,
            name.len() as u8,
        ]);
        for (qtype, a) in answers {
            let len = u16::try_from(a.bytes.len()).expect("an answer body fits in a message");
            blob.extend_from_slice(&qtype.to_be_bytes());
            blob.extend_from_slice(&a.ancount.to_be_bytes());
            blob.extend_from_slice(&a.arcount.to_be_bytes());
            blob.extend_from_slice(&(a.additional_at as u16).to_be_bytes());
            blob.extend_from_slice(&len.to_be_bytes());
        }
        blob.extend_from_slice(name);
        for (_, a) in answers {
            blob.extend_from_slice(&a.bytes);
        }
        Entry(blob.into())
    }

    /// An empty non-terminal: the name exists, every type is NODATA.
    pub fn empty(name: &[u8]) -> Self {
        Entry::new(name, false, &[])
    }

    pub fn name(&self) -> &[u8] {
        let types = self.0[1] as usize;
        let at = 3 + types * DESCRIPTOR;
        &self.0[at..at + self.0[2] as usize]
    }

    pub fn apex(&self) -> bool {
        self.0[0] & APEX != 0
    }

    pub fn answer(&self, qtype: u16) -> Option<AnswerRef<'_>> {
        let b = &self.0[..];
        let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let types = b[1] as usize;
        let mut start = 3 + types * DESCRIPTOR + b[2] as usize;
        for d in (0..types).map(|t| 3 + t * DESCRIPTOR) {
            let len = u16_at(d + 8) as usize;
            if u16_at(d) == qtype {
                return Some(AnswerRef {
                    ancount: u16_at(d + 2),
                    arcount: u16_at(d + 4),
                    additional_at: u16_at(d + 6) as usize,
                    bytes: &b[start..start + len],
                });
            }
            start += len;
        }
        None
    }

    /// The query types this name has answers for.
    pub fn types(&self) -> impl Iterator<Item = u16> + '_ {
        (0..self.0[1] as usize).map(move |t| {
            u16::from_be_bytes([self.0[3 + t * DESCRIPTOR], self.0[4 + t * DESCRIPTOR]])
        })
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &render::name_text(self.name()))
            .field("apex", &self.apex())
            .field("types", &self.types().collect::<Vec<_>>())
            .finish()
    }
}

/// The map key: the entry itself, hashed and compared by its name, so a lookup by name bytes
/// needs no separate key allocation.
struct Key(Entry);

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Must hash exactly as `[u8]` does, for lookups through `Borrow<[u8]>`.
        self.0.name().hash(state)
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for Key {}

impl std::borrow::Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self.0.name()
    }
}

/// The outcome of looking a name up.
#[derive(Debug, Clone, Copy)]
pub enum Lookup<'a> {
    /// The name is in no served zone.
    Outside,
    /// In zone `apex` (index into [`Zone::apexes`]); `None` when the name does not exist.
    Inside {
        apex: usize,
        entry: Option<&'a Entry>,
    },
}

pub struct Zone {
    /// Readers hold a shard's read lock only while they copy an answer out.
    names: DashMap<Key, (), foldhash::fast::RandomState>,
    apexes: Box<[Box<[u8]>]>,
    ttl: u32,
    serial: AtomicU32,
    synced: AtomicBool,
    /// Unix seconds of the last change.
    changed_at: AtomicU64,
}

/// Unix seconds now (0 if the clock is before 1970).
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Zone {
    /// An empty, not yet synced zone. `apexes` are lower-case wire names.
    pub fn new(apexes: Vec<Vec<u8>>, ttl: u32) -> Self {
        let now = now_secs();
        Zone {
            names: DashMap::with_hasher(foldhash::fast::RandomState::default()),
            apexes: apexes.into_iter().map(Vec::into_boxed_slice).collect(),
            ttl,
            // Seconds since the epoch, so a restarted server's serial still moves forward.
            serial: AtomicU32::new(now as u32),
            synced: AtomicBool::new(false),
            changed_at: AtomicU64::new(now),
        }
    }

    pub fn apexes(&self) -> &[Box<[u8]>] {
        &self.apexes
    }

    pub fn ttl(&self) -> u32 {
        self.ttl
    }

    pub fn serial(&self) -> u32 {
        self.serial.load(Ordering::Relaxed)
    }

    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub fn changed_at(&self) -> u64 {
        self.changed_at.load(Ordering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Finds the served zone that holds `lname` (lower-case wire form) and the name's entry,
    /// and hands both to `f` (while a shard read lock is held: `f` should only copy bytes out).
    /// The deepest apex wins when zones nest.
    pub fn lookup<R>(&self, lname: &[u8], f: impl FnOnce(Lookup<'_>) -> R) -> R {
        let Some(apex) = self.apex_index(lname) else {
            return f(Lookup::Outside);
        };
        match self.names.get(lname) {
            Some(r) => f(Lookup::Inside {
                apex,
                entry: Some(&r.key().0),
            }),
            None => f(Lookup::Inside { apex, entry: None }),
        }
    }

    /// The served zone (index into [`Zone::apexes`]) that holds `lname`; the deepest wins.
    pub fn apex_index(&self, lname: &[u8]) -> Option<usize> {
        let mut i = 0;
        while i < lname.len() {
            let rest = &lname[i..];
            if let Some(z) = self.apexes.iter().position(|a| a[..] == *rest) {
                return Some(z);
            }
            if lname[i] == 0 {
                break;
            }
            i += 1 + lname[i] as usize;
        }
        None
    }

    // ---- writer side, used by build::Builder only ----

    /// Inserts or replaces the entry for its name, atomically for readers.
    fn insert(&self, entry: Entry) {
        match self.names.entry(Key(entry)) {
            dashmap::Entry::Occupied(o) => {
                o.replace_entry(());
            }
            dashmap::Entry::Vacant(v) => {
                v.insert(());
            }
        }
    }

    fn remove(&self, name: &[u8]) {
        self.names.remove(name);
    }

    fn bump(&self) {
        self.serial.fetch_add(1, Ordering::Relaxed);
        self.changed_at.store(now_secs(), Ordering::Relaxed);
    }

    fn set_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }

    /// Every entry, sorted by name; for inspection and tests, not the hot path.
    pub fn snapshot(&self) -> Vec<Entry> {
        let mut all: Vec<Entry> = self.names.iter().map(|e| e.key().0.clone()).collect();
        all.sort_by(|a, b| a.name().cmp(b.name()));
        all
    }
}
