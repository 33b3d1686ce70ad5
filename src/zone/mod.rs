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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub ancount: u16,
    pub arcount: u16,
    /// Where the additional section starts in `bytes`, so UDP can drop it when it does not fit.
    pub additional_at: u32,
    pub bytes: Box<[u8]>,
}

/// Everything a name answers. A type without an answer gets NODATA.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Entry {
    pub answers: Box<[(u16, Answer)]>,
    /// The zone apex answers SOA from the zone's current serial.
    pub apex: bool,
}

impl Entry {
    pub fn answer(&self, qtype: u16) -> Option<&Answer> {
        self.answers
            .iter()
            .find(|(t, _)| *t == qtype)
            .map(|(_, a)| a)
    }
}

/// The outcome of looking a name up.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// The name is in no served zone.
    Outside,
    /// In zone `apex` (index into [`Zone::apexes`]); `None` when the name does not exist.
    Inside {
        apex: usize,
        entry: Option<Arc<Entry>>,
    },
}

pub struct Zone {
    names: DashMap<Box<[u8]>, Arc<Entry>, foldhash::fast::RandomState>,
    apexes: Box<[Box<[u8]>]>,
    ttl: u32,
    serial: AtomicU32,
    synced: AtomicBool,
    /// Unix seconds of the last change.
    changed_at: AtomicU64,
}

fn now_secs() -> u64 {
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

    /// Finds the served zone that holds `lname` (lower-case wire form) and the name's entry.
    /// The deepest apex wins when zones nest.
    pub fn lookup(&self, lname: &[u8]) -> Lookup {
        let Some(apex) = self.apex_of(lname) else {
            return Lookup::Outside;
        };
        let entry = self.names.get(lname).map(|e| Arc::clone(e.value()));
        Lookup::Inside { apex, entry }
    }

    fn apex_of(&self, lname: &[u8]) -> Option<usize> {
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

    fn insert(&self, name: Box<[u8]>, entry: Arc<Entry>) {
        self.names.insert(name, entry);
    }

    fn remove(&self, name: &[u8]) {
        self.names.remove(name);
    }

    fn get(&self, name: &[u8]) -> Option<Arc<Entry>> {
        self.names.get(name).map(|e| Arc::clone(e.value()))
    }

    fn bump(&self) {
        self.serial.fetch_add(1, Ordering::Relaxed);
        self.changed_at.store(now_secs(), Ordering::Relaxed);
    }

    fn set_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }

    /// Every name with its entry, sorted by name; for inspection and tests, not the hot path.
    pub fn snapshot(&self) -> Vec<(Box<[u8]>, Arc<Entry>)> {
        let mut all: Vec<_> = self
            .names
            .iter()
            .map(|e| (e.key().clone(), Arc::clone(e.value())))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}
