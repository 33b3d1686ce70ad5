//! The served zone: a table from lower-cased wire names to precompiled answers, plus the
//! zone-wide facts (apexes, serial, synced) that negative answers and readiness need. Written only
//! by [`build::Builder`]; read by every DNS path through a [`View`] of one published generation.

pub mod budget;
pub mod build;
mod encode;
mod entry;
pub mod render;
pub mod schema;
mod table;

pub use entry::{AnswerRef, Entry, EntryRef};
pub use render::Answer;

/// Starts loading the cache line at `p` (a hint only).
pub(crate) use table::prefetch;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arc_swap::{ArcSwap, Guard};

use table::{Root, Writer};

use crate::wire::wire_name;

/// The zone's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Served zones, e.g. `clusterset.local`.
    pub zones: Zones,
    pub ttl: u32,
    /// Addresses of `ns.dns.<zone>`, given as glue with the apex NS record.
    pub ns_addresses: Vec<std::net::IpAddr>,
    /// The zone's budget.
    pub limits: budget::Limits,
}

#[derive(Debug, thiserror::Error)]
pub enum ZoneError {
    #[error("zone {0:?} is not a DNS name short enough to hold service names")]
    BadZone(String),
    #[error("zone {0:?} is given twice")]
    DuplicateZone(String),
    #[error("at least one zone must be served")]
    NoZone,
}

/// The served zones, checked: lower-case wire names, at least one, none twice.
#[derive(Clone, PartialEq, Eq)]
pub struct Zones(Vec<Vec<u8>>);

impl Zones {
    pub fn parse<S: AsRef<str>>(zones: &[S]) -> Result<Zones, ZoneError> {
        if zones.is_empty() {
            return Err(ZoneError::NoZone);
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        for z in zones.iter().map(AsRef::as_ref) {
            // Room for `dns-version.<zone>` and a short service name at least.
            let w = wire_name(z)
                .filter(|w| w.len() > 1 && w.len() <= 200)
                .ok_or_else(|| ZoneError::BadZone(z.to_string()))?;
            if out.contains(&w) {
                return Err(ZoneError::DuplicateZone(z.to_string()));
            }
            out.push(w);
        }
        Ok(Zones(out))
    }

    /// The zones' wire names, in the order given.
    pub fn apexes(&self) -> &[Vec<u8>] {
        &self.0
    }
}

impl std::fmt::Debug for Zones {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|a| crate::wire::name_text(a)))
            .finish()
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
        entry: Option<EntryRef<'a>>,
    },
}

pub struct Zone {
    /// The table readers look at; replaced whole by each publish.
    root: ArcSwap<Root>,
    /// The builder's changes not yet published.
    writer: Mutex<Writer>,
    hasher: foldhash::fast::RandomState,
    apexes: Box<[Box<[u8]>]>,
    ttl: u32,
    serial: AtomicU32,
    synced: AtomicBool,
    /// Unix seconds of the last change.
    changed_at: AtomicU64,
}

/// What probing a name's slots found: the first entry stored under its hash, if any. Nothing
/// under the hash means no such name; an entry under it is the name's unless two names share
/// all 64 bits of hash, which [`View::lookup_candidate`] checks.
#[derive(Clone, Copy)]
pub struct Candidate<'v> {
    hash: u64,
    entry: Option<EntryRef<'v>>,
}

/// A reader's hold on one published generation of the zone: everything it looks up comes from
/// that generation, which stays in memory while the view does. Cheap to keep and to
/// [`refresh`](View::refresh) (a lock-free load and a pointer comparison when nothing changed), so
/// a UDP worker keeps one and refreshes it once per batch.
pub struct View<'z> {
    zone: &'z Zone,
    root: Arc<Root>,
}

impl<'z> View<'z> {
    pub fn zone(&self) -> &'z Zone {
        self.zone
    }

    /// Moves the view to the newest published generation, if it is not there.
    pub fn refresh(&mut self) {
        let current = self.zone.root.load();
        if !Arc::ptr_eq(&current, &self.root) {
            self.root = Guard::into_inner(current);
        }
    }

    /// Every entry of this generation, sorted by name.
    pub fn snapshot(&self) -> Vec<Entry> {
        let mut all: Vec<Entry> = self.root.entries().map(EntryRef::to_owned).collect();
        all.sort_by(|a, b| a.name().cmp(b.name()));
        all
    }

    /// Finds the served zone that holds `lname` (lower-case wire form) and the name's entry,
    /// and hands both to `f`. The deepest apex wins when zones nest.
    #[inline]
    pub fn lookup<R>(&self, lname: &[u8], f: impl FnOnce(Lookup<'_>) -> R) -> R {
        let Some(apex) = self.zone.apex_index(lname) else {
            return f(Lookup::Outside);
        };
        f(Lookup::Inside {
            apex,
            entry: self.root.get(self.hash(lname), lname),
        })
    }

    /// The table hash of `lname` (lower-case wire form), for [`View::candidate`].
    #[inline]
    pub fn hash(&self, lname: &[u8]) -> u64 {
        self.zone.hash(lname)
    }

    /// [`View::lookup`] for a name whose slots [`View::candidate`] has already probed.
    #[inline]
    pub fn lookup_candidate<R>(
        &self,
        lname: &[u8],
        candidate: Candidate<'_>,
        f: impl FnOnce(Lookup<'_>) -> R,
    ) -> R {
        let Some(apex) = self.zone.apex_index(lname) else {
            return f(Lookup::Outside);
        };
        f(Lookup::Inside {
            apex,
            entry: self.root.confirm(candidate.hash, candidate.entry, lname),
        })
    }

    /// Starts loading what a lookup of `hash` reads first: the pointer to its table segment.
    /// A batch of lookups that prefetches that for every name, then every slot
    /// ([`View::prefetch_slot`]), then every entry ([`View::candidate`]), waits for memory
    /// about once per stage instead of up to three times per name.
    #[inline]
    pub fn prefetch_segment(&self, hash: u64) {
        self.root.prefetch_segment(hash);
    }

    /// Starts loading the table slot a lookup of `hash` reads first, once its segment pointer
    /// is in cache.
    #[inline]
    pub fn prefetch_slot(&self, hash: u64) {
        self.root.prefetch_slot(hash);
    }

    /// Probes the slots for `hash`, once they are in cache, and starts loading the entry
    /// found, for [`View::lookup_candidate`].
    #[inline]
    pub fn candidate(&self, hash: u64) -> Candidate<'_> {
        Candidate {
            hash,
            entry: self.root.candidate(hash),
        }
    }
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded values are replaced whole, never left half-changed by a panic.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Zone {
    /// An empty, not yet synced zone. `apexes` are lower-case wire names.
    pub fn new(apexes: Vec<Vec<u8>>, ttl: u32) -> Self {
        let now = crate::clock::unix_now();
        let root = Arc::new(Root::empty());
        let hasher = foldhash::fast::RandomState::default();
        let rehash = hasher.clone();
        Zone {
            writer: Mutex::new(Writer::new(
                root.clone(),
                Arc::new(move |name| rehash.hash_one(name)),
            )),
            root: ArcSwap::new(root),
            hasher,
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

    /// Names in the published zone.
    pub fn len(&self) -> usize {
        self.root.load().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The table hash of a lower-case wire name, the same for readers and the writer.
    #[inline]
    fn hash(&self, lname: &[u8]) -> u64 {
        self.hasher.hash_one(lname)
    }

    /// A view of the newest published generation.
    pub fn view(&self) -> View<'_> {
        View {
            zone: self,
            root: self.root.load_full(),
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

    /// Inserts or replaces the entry for its name; readers see it from the next
    /// [`publish`](Zone::publish).
    /// An entry equal to the one the zone holds changes nothing.
    fn insert(&self, entry: &Entry) {
        locked(&self.writer).insert(self.hash(entry.name()), entry);
    }

    fn remove(&self, name: &[u8]) {
        locked(&self.writer).remove(self.hash(name), name);
    }

    /// Expects about `names` names soon (a full load).
    fn reserve(&self, names: usize) {
        locked(&self.writer).reserve(names);
    }

    /// Makes every change since the last publish visible to readers at once.
    fn publish(&self) {
        let Some(root) = locked(&self.writer).publish() else {
            return;
        };
        self.root.store(root);
    }

    fn bump(&self) {
        self.serial.fetch_add(1, Ordering::Relaxed);
        self.changed_at
            .store(crate::clock::unix_now(), Ordering::Relaxed);
    }

    fn set_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }

    /// Every entry, sorted by name; for inspection and tests, not the hot path.
    pub fn snapshot(&self) -> Vec<Entry> {
        self.view().snapshot()
    }
}

/// What the zone's tests share.
#[cfg(test)]
pub(crate) mod testing {
    use hickory_proto::op::Message;

    use super::entry::Entry;
    use crate::wire::CLASS_IN;

    /// The records of type `qtype` that `entry` answers, as hickory-proto reads them back:
    /// `TYPE data` for each, the answer section then the additional section.
    pub(crate) fn records<B: AsRef<[u8]>>(entry: &Entry<B>, qtype: u16) -> Vec<String> {
        let Some(answer) = entry.answer(qtype) else {
            return Vec::new();
        };
        let mut msg = vec![0, 0, 0x84, 0, 0, 1];
        msg.extend(answer.ancount.to_be_bytes());
        msg.extend([0, 0]);
        msg.extend(answer.arcount.to_be_bytes());
        msg.extend(entry.name());
        msg.extend(qtype.to_be_bytes());
        msg.extend(CLASS_IN.to_be_bytes());
        answer.write(&mut msg, true);
        let m = Message::from_vec(&msg).expect("a rendered answer parses");
        m.answers
            .iter()
            .chain(&m.additionals)
            .map(|r| format!("{} {}", r.record_type(), r.data))
            .collect()
    }
}
