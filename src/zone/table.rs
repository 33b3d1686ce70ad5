//! The zone's name table, built for readers that never write shared memory.
//!
//! A published [`Root`] is immutable: a power-of-two array of segments, each one allocation that
//! holds an open-addressing array of slots and, after it, the entries' bytes. A slot is 32 bits
//! of the name's hash beside where its entry is, so a probe that does not match costs no second
//! cache line, and a name costs its entry's bytes and a 12-byte slot: no allocation, header or
//! pointer of its own. A reader holds an `Arc` of the root it looked at, so nothing it can see is
//! freed under it, and it takes no lock and makes no atomic read-modify-write per lookup.
//!
//! The one writer (the zone builder) gathers its changes in a [`Writer`], which copies only the
//! segments it touches, and publishes them as a new root that shares every other segment with
//! the old one. A lookup reads the segment's slot (one cache line, usually) and the entry.

use std::sync::Arc;

use super::entry::{Entry, EntryRef};

/// Average names per segment the table aims at when it grows or shrinks.
const TARGET: usize = 64;
/// Average names per segment above which the segments double.
const MOST: usize = 128;
/// Most segments: indexes come from hash bits 40 and up.
const MAX_SEGMENTS: usize = 1 << 24;
/// A slot's bytes: the hash's low 32 bits (4), where the entry starts in the segment (4) and its
/// length (4; zero for an empty slot, as no entry is empty).
const SLOT: usize = 12;

/// The table's hash of a name (lower-case wire form). The writer hashes names again when it
/// copies a segment, as the slots keep only part of each hash.
pub type NameHash = Arc<dyn Fn(&[u8]) -> u64 + Send + Sync>;

/// One published segment: `cap` slots, then the entries they point at.
#[derive(Clone)]
struct Segment {
    data: Arc<[u8]>,
    cap: u32,
}

/// A slot as read: the hash's low 32 bits, and where its entry's bytes are.
#[derive(Clone, Copy)]
struct Slot {
    tag: u32,
    at: u32,
    len: u32,
}

impl Segment {
    #[inline]
    fn slot(&self, i: usize) -> Slot {
        let s = &self.data[i * SLOT..(i + 1) * SLOT];
        Slot {
            tag: u32::from_ne_bytes(s[..4].try_into().expect("4 bytes")),
            at: u32::from_ne_bytes(s[4..8].try_into().expect("4 bytes")),
            len: u32::from_ne_bytes(s[8..].try_into().expect("4 bytes")),
        }
    }

    #[inline]
    fn entry(&self, slot: Slot) -> EntryRef<'_> {
        Entry(&self.data[slot.at as usize..(slot.at + slot.len) as usize])
    }

    fn cap(&self) -> usize {
        self.cap as usize
    }

    /// Every entry, in slot order.
    fn entries(&self) -> impl Iterator<Item = EntryRef<'_>> {
        (0..self.cap())
            .map(|i| self.slot(i))
            .filter(|s| s.len != 0)
            .map(|s| self.entry(s))
    }

    /// Every entry with its full hash.
    fn items<'s>(&'s self, hash: &'s NameHash) -> impl Iterator<Item = (u64, EntryRef<'s>)> {
        self.entries().map(move |e| (hash(e.name()), e))
    }

    /// The entry named `name` whose hash is `hash`.
    fn get(&self, hash: u64, name: &[u8]) -> Option<EntryRef<'_>> {
        self.probe(hash, |e| e.name() == name)
    }

    /// The first entry along `hash`'s probe sequence whose slot holds `hash` and that `accept`
    /// takes; `accept` sees only entries stored under `hash`.
    #[inline]
    fn probe(&self, hash: u64, accept: impl Fn(EntryRef<'_>) -> bool) -> Option<EntryRef<'_>> {
        let cap = self.cap();
        let mut i = home(hash, cap);
        loop {
            let slot = self.slot(i);
            if slot.len == 0 {
                return None;
            }
            if slot.tag == hash as u32 {
                let e = self.entry(slot);
                if accept(e) {
                    return Some(e);
                }
            }
            i = next(i, cap);
        }
    }
}

fn segment_index(hash: u64, segments: usize) -> usize {
    (hash >> 40) as usize & (segments - 1)
}

/// Where a probe for `hash` starts in a segment of `cap` slots (any size: the low 32 bits of
/// the hash scaled to it, so segments need not be powers of two).
fn home(hash: u64, cap: usize) -> usize {
    ((hash as u32 as u64 * cap as u64) >> 32) as usize
}

/// The slot after `i` in a segment of `cap` slots, wrapping at the end.
fn next(i: usize, cap: usize) -> usize {
    if i + 1 == cap { 0 } else { i + 1 }
}

/// A published segment for `items` (hash and entry bytes): three quarters full at most (and no
/// more slots than that needs, so the table costs little over its entries), so a probe always
/// ends at an empty slot.
fn build_segment<'a>(items: impl Iterator<Item = (u64, &'a [u8])> + Clone) -> Segment {
    let (count, bytes) = items
        .clone()
        .fold((0, 0), |(n, b), (_, e)| (n + 1, b + e.len()));
    let cap = (count + count / 3 + 1).max(4);
    let mut data = vec![0u8; cap * SLOT];
    data.reserve_exact(bytes);
    for (hash, entry) in items {
        let mut i = home(hash, cap);
        while data[i * SLOT + 8..(i + 1) * SLOT] != [0; 4] {
            i = next(i, cap);
        }
        let at = u32::try_from(data.len()).expect("a segment holds under 4 GiB");
        let len = u32::try_from(entry.len()).expect("an entry is under 4 GiB");
        let slot = &mut data[i * SLOT..(i + 1) * SLOT];
        slot[..4].copy_from_slice(&(hash as u32).to_ne_bytes());
        slot[4..8].copy_from_slice(&at.to_ne_bytes());
        slot[8..].copy_from_slice(&len.to_ne_bytes());
        data.extend_from_slice(entry);
    }
    Segment {
        data: data.into(),
        cap: cap as u32,
    }
}

pub(crate) use crate::sys::prefetch;

/// An immutable generation of the table.
pub struct Root {
    segments: Box<[Segment]>,
    len: usize,
}

impl Root {
    pub fn empty() -> Self {
        Root {
            segments: vec![build_segment(std::iter::empty())].into(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The segment where a name whose hash is `hash` belongs.
    #[inline]
    fn segment(&self, hash: u64) -> &Segment {
        &self.segments[segment_index(hash, self.segments.len())]
    }

    /// The entry named `name` (lower-case wire form) whose hash is `hash`.
    #[inline]
    pub fn get(&self, hash: u64, name: &[u8]) -> Option<EntryRef<'_>> {
        self.segment(hash).get(hash, name)
    }

    /// Starts loading the segment a lookup of `hash` reads first (a zone of 100,000 names has
    /// tens of kilobytes of them, which other lookups keep pushing out of cache).
    #[inline]
    pub fn prefetch_segment(&self, hash: u64) {
        prefetch(self.segment(hash) as *const Segment);
    }

    /// Starts loading the slot a lookup of `hash` begins at, without waiting for it.
    #[inline]
    pub fn prefetch_slot(&self, hash: u64) {
        let segment = self.segment(hash);
        let at = home(hash, segment.cap()) * SLOT;
        prefetch(segment.data.as_ptr().wrapping_add(at));
    }

    /// The first entry in `hash`'s probe sequence whose slot holds `hash` (`None`: no name with
    /// that hash is here), and starts loading it, up to its first four cache lines. The slot
    /// should be in cache by now: see [`Root::prefetch_slot`]. Reads no entry.
    #[inline]
    pub fn candidate(&self, hash: u64) -> Option<EntryRef<'_>> {
        let found = self.segment(hash).probe(hash, |_| true)?;
        let bytes = found.0.as_ptr();
        for line in (0..found.0.len().min(4 * 64)).step_by(64) {
            prefetch(bytes.wrapping_add(line));
        }
        Some(found)
    }

    /// The entry named `name`, given what [`Root::candidate`] found for its `hash`.
    #[inline]
    pub fn confirm<'r>(
        &'r self,
        hash: u64,
        candidate: Option<EntryRef<'r>>,
        name: &[u8],
    ) -> Option<EntryRef<'r>> {
        match candidate {
            // Another name with the same 32 bits of hash: look further.
            Some(e) if e.name() != name => self.get(hash, name),
            found => found,
        }
    }

    pub fn entries(&self) -> impl Iterator<Item = EntryRef<'_>> {
        self.segments.iter().flat_map(Segment::entries)
    }
}

/// Where an entry is in a [`Working`] segment's bytes.
#[derive(Clone, Copy)]
struct Item {
    hash: u64,
    at: u32,
    len: u32,
}

/// A segment the writer changes: its entries' bytes one after another, the items that say
/// where each is, and how many bytes no item points at any more (replaced or removed entries).
#[derive(Default)]
struct Working {
    items: Vec<Item>,
    bytes: Vec<u8>,
    dead: usize,
}

impl Working {
    fn with_capacity(items: usize, bytes: usize) -> Self {
        Working {
            items: Vec::with_capacity(items),
            bytes: Vec::with_capacity(bytes),
            dead: 0,
        }
    }

    fn of(segment: &Segment, hash: &NameHash) -> Self {
        let (count, bytes) = segment
            .entries()
            .fold((0, 0), |(n, b), e| (n + 1, b + e.0.len()));
        let mut w = Working::with_capacity(count + count / 4 + 1, bytes + bytes / 4);
        for (h, e) in segment.items(hash) {
            w.push(h, e.0);
        }
        w
    }

    fn entry(&self, item: &Item) -> EntryRef<'_> {
        Entry(&self.bytes[item.at as usize..(item.at + item.len) as usize])
    }

    fn find(&self, hash: u64, name: &[u8]) -> Option<usize> {
        self.items
            .iter()
            .position(|it| it.hash == hash && self.entry(it).name() == name)
    }

    fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> + Clone {
        self.items.iter().map(|it| (it.hash, self.entry(it).0))
    }

    /// Appends `bytes`, growing by a quarter when full (not doubling: these copies are what
    /// the table weighs during a load).
    fn append(&mut self, bytes: &[u8]) -> (u32, u32) {
        if self.bytes.capacity() - self.bytes.len() < bytes.len() {
            let more = (self.bytes.len() / 4).max(bytes.len()).max(256);
            self.bytes.reserve_exact(more);
        }
        let at = u32::try_from(self.bytes.len()).expect("a segment holds under 4 GiB");
        self.bytes.extend_from_slice(bytes);
        (at, bytes.len() as u32)
    }

    fn push(&mut self, hash: u64, bytes: &[u8]) {
        let (at, len) = self.append(bytes);
        self.items.push(Item { hash, at, len });
    }

    /// Puts `entry` in place of item `i`'s.
    fn replace(&mut self, i: usize, entry: &[u8]) {
        let item = self.items[i];
        if item.len as usize == entry.len() {
            let at = item.at as usize;
            self.bytes[at..at + entry.len()].copy_from_slice(entry);
            return;
        }
        self.dead += item.len as usize;
        let (at, len) = self.append(entry);
        self.items[i] = Item {
            hash: item.hash,
            at,
            len,
        };
        self.compact_if_mostly_dead();
    }

    fn remove(&mut self, i: usize) {
        self.dead += self.items[i].len as usize;
        self.items.swap_remove(i);
        self.compact_if_mostly_dead();
    }

    /// Copies the live entries together once more than half the bytes are dead, so a segment
    /// that keeps changing between publishes stays within twice its entries.
    fn compact_if_mostly_dead(&mut self) {
        if self.dead * 2 <= self.bytes.len() {
            return;
        }
        let mut fresh = Working::with_capacity(self.items.len(), self.bytes.len() - self.dead);
        for (hash, e) in self.iter() {
            fresh.push(hash, e);
        }
        *self = fresh;
    }
}

/// The writer's changes since the last publish.
pub struct Writer {
    /// The root the changes apply to (the last one published).
    base: Arc<Root>,
    /// Working copies of the segments changed, by index; `None`: as in `base`. Its length is the
    /// segment count the next root will have.
    changed: Vec<Option<Working>>,
    len: usize,
    hash: NameHash,
}

impl Writer {
    /// A writer of the names `base` holds, which `hash` hashed.
    pub fn new(base: Arc<Root>, hash: NameHash) -> Self {
        let segments = base.segments.len();
        Writer {
            len: base.len,
            base,
            changed: (0..segments).map(|_| None).collect(),
            hash,
        }
    }

    /// Segment `k`'s working copy, made from the base on first use.
    fn working(&mut self, k: usize) -> &mut Working {
        let (base, hash) = (&self.base, &self.hash);
        self.changed[k].get_or_insert_with(|| Working::of(&base.segments[k], hash))
    }

    /// The entry named `name` as the next publish would have it.
    #[cfg(test)]
    pub fn get(&self, hash: u64, name: &[u8]) -> Option<EntryRef<'_>> {
        let k = segment_index(hash, self.changed.len());
        match &self.changed[k] {
            Some(w) => w.find(hash, name).map(|i| w.entry(&w.items[i])),
            None => self.base.segments[k].get(hash, name),
        }
    }

    /// Inserts `entry`, or replaces the entry of the same name. An entry equal to the one the
    /// table holds changes nothing (and copies no segment).
    pub fn insert(&mut self, hash: u64, entry: &Entry) {
        let k = segment_index(hash, self.changed.len());
        let bytes = entry.bytes();
        if self.changed[k].is_none() {
            match self.base.segments[k].get(hash, entry.name()) {
                Some(e) if e.0 == bytes => return,
                _ => {}
            }
        }
        let w = self.working(k);
        match w.find(hash, entry.name()) {
            Some(i) if w.entry(&w.items[i]).0 == bytes => {}
            Some(i) => w.replace(i, bytes),
            None => {
                w.push(hash, bytes);
                self.len += 1;
                self.reserve(self.len);
            }
        }
    }

    pub fn remove(&mut self, hash: u64, name: &[u8]) {
        let k = segment_index(hash, self.changed.len());
        if self.changed[k].is_none() && self.base.segments[k].get(hash, name).is_none() {
            return;
        }
        let w = self.working(k);
        if let Some(i) = w.find(hash, name) {
            w.remove(i);
            self.len -= 1;
        }
    }

    /// Makes room for about `names` names: more segments once they would average over
    /// [`MOST`]. A large first load asks up front, so it does not re-spread the names again and
    /// again as they arrive (leaving the heap full of holes).
    pub fn reserve(&mut self, names: usize) {
        if names > MOST * self.changed.len() && self.changed.len() < MAX_SEGMENTS {
            self.resize_for(names);
        }
    }

    /// Spreads every name over the segment count that suits `names` names. Both counts are
    /// powers of two, so the old and new segments fall into groups (those whose indexes agree
    /// in the low bits both have) that exchange names only among themselves: each group's new
    /// copies are sized exactly and its old ones freed before the next, so a resize during a
    /// load holds little more than the entries once.
    fn resize_for(&mut self, names: usize) {
        let segments = (names / TARGET).next_power_of_two().clamp(1, MAX_SEGMENTS);
        let old = self.changed.len();
        let groups = old.min(segments);
        let mut all: Vec<Option<Working>> = (0..segments).map(|_| None).collect();
        for g in 0..groups {
            let (sources, targets) = ((g..old).step_by(groups), (g..segments).step_by(groups));
            let (mut count, mut bytes) =
                (vec![0usize; segments / groups], vec![0; segments / groups]);
            // Where in this group's targets a hash goes.
            let slot = |hash: u64| segment_index(hash, segments) / groups;
            for k in sources.clone() {
                // A segment as published is copied (its names hashed once) to be spread.
                for (hash, e) in self.working(k).iter() {
                    count[slot(hash)] += 1;
                    bytes[slot(hash)] += e.len();
                }
            }
            let mut fresh: Vec<Working> = (0..segments / groups)
                .map(|t| {
                    Working::with_capacity(count[t] + count[t] / 8 + 1, bytes[t] + bytes[t] / 8)
                })
                .collect();
            for k in sources {
                let w = self.changed[k].take().expect("copied above");
                for (hash, e) in w.iter() {
                    fresh[slot(hash)].push(hash, e);
                }
            }
            for (t, w) in targets.zip(fresh) {
                all[t] = Some(w);
            }
        }
        self.changed = all;
    }

    /// The new root, if anything changed; the writer then applies to it.
    pub fn publish(&mut self) -> Option<Arc<Root>> {
        if self.changed.iter().all(Option::is_none) {
            return None;
        }
        if self.changed.len() > 1 && self.len < self.changed.len() * TARGET / 8 {
            self.resize_for(self.len);
        }
        // Each working copy is dropped as soon as its segment is built.
        let rebuilt: Vec<bool> = self.changed.iter().map(Option::is_some).collect();
        let mut segments: Box<[Segment]> = (0..self.changed.len())
            .map(|k| match self.changed[k].take() {
                Some(w) => build_segment(w.iter()),
                None => self.base.segments[k].clone(),
            })
            .collect();
        let count = rebuilt.iter().filter(|r| **r).count();
        if count > 64 && count * 2 > segments.len() {
            // After a large load the new segments sit above the holes the working copies left.
            // Copied once more they fill those holes, and the pages they leave free go back to
            // the system as whole pages (benches/memory.sh: 0.9 MB of 42.8).
            for (s, _) in segments.iter_mut().zip(&rebuilt).filter(|(_, r)| **r) {
                s.data = Arc::from(&s.data[..]);
            }
        }
        let root = Arc::new(Root {
            segments,
            len: self.len,
        });
        *self = Writer::new(root.clone(), self.hash.clone());
        Some(root)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::hash::BuildHasher;

    use super::*;
    use crate::wire::{TYPE_A, wire_name};
    use crate::zone::render::BodyWriter;

    fn entry(name: &str, last: u8) -> Entry {
        let n = wire_name(name).unwrap();
        let mut w = BodyWriter::new(&n);
        // One to three addresses, so replacing an entry changes its length as often as not.
        for k in 0..=last % 3 {
            w.addr(&n, [10, 0, k, last].into(), 5);
        }
        Entry::new(&n, false, &[(TYPE_A, w.finish())])
    }

    /// Through growth, shrinking and many publishes, the table holds exactly what a plain map
    /// fed the same changes holds, and an earlier root is unchanged by later ones.
    #[test]
    fn matches_a_map_through_growth_and_shrinking() {
        let hasher = foldhash::fast::RandomState::default();
        let h = |n: &[u8]| hasher.hash_one(n);
        let mut w = Writer::new(Arc::new(Root::empty()), {
            let hasher = hasher.clone();
            Arc::new(move |n| hasher.hash_one(n))
        });
        type Model = HashMap<Vec<u8>, Entry>;
        let mut model = Model::new();
        let mut roots: Vec<(Arc<Root>, Model)> = Vec::new();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // Grow to 20,000 names, churn, then shrink to a few.
        let phases: [(usize, u64); 3] = [(40_000, 90), (20_000, 50), (60_000, 2)];
        for (steps, insert_pct) in phases {
            for step in 0..steps {
                let i = rand() % 20_000;
                let name = format!("svc{i}.ns{}.svc.clusterset.local", i % 7);
                let wire = wire_name(&name).unwrap();
                if rand() % 100 < insert_pct {
                    let e = entry(&name, (rand() % 250) as u8);
                    w.insert(h(&wire), &e);
                    model.insert(wire, e);
                } else {
                    w.remove(h(&wire), &wire);
                    model.remove(&wire);
                }
                if step % 997 == 0 {
                    if let Some(root) = w.publish() {
                        roots.push((root, model.clone()));
                    }
                }
            }
        }
        roots.extend(w.publish().map(|r| (r, model.clone())));
        assert!(roots.len() > 50);
        let grew = roots.iter().map(|(r, _)| r.segments.len()).max().unwrap();
        assert!(grew >= 64, "{grew} segments at most");
        let last = &roots.last().unwrap().0;
        assert!(
            last.segments.len() < grew / 4,
            "shrank to {}",
            last.segments.len()
        );
        for (root, expect) in roots.iter().step_by(7).chain(roots.last()) {
            assert_eq!(root.len(), expect.len());
            assert_eq!(root.entries().count(), expect.len());
            for (name, e) in expect {
                assert_eq!(root.get(h(name), name), Some(e.as_ref()));
            }
            for i in (0..20_000).step_by(13) {
                let name = wire_name(&format!("svc{i}.ns{}.svc.clusterset.local", i % 7)).unwrap();
                let expected = expect.get(&name).map(Entry::as_ref);
                assert_eq!(root.get(h(&name), &name), expected);
                let found = root.candidate(h(&name));
                assert_eq!(root.confirm(h(&name), found, &name), expected);
            }
            for s in root.segments.iter() {
                let used = s.entries().count();
                assert!(used * 4 <= s.cap() * 3, "{used} of {}", s.cap());
                // A published segment holds its slots and its live entries' bytes, no more.
                let bytes: usize = s.entries().map(|e| e.0.len()).sum();
                assert_eq!(s.data.len(), s.cap() * SLOT + bytes);
            }
        }
    }

    /// A name whose hash equals another's is still told apart by its name.
    #[test]
    fn equal_hashes_are_told_apart_by_name() {
        // Every name hashes to 7 but c., which would be 8.
        let seven: NameHash = Arc::new(|n| if n[0] == 1 && n[1] == b'c' { 8 } else { 7 });
        let mut w = Writer::new(Arc::new(Root::empty()), seven);
        let (a, b) = (
            entry("a.clusterset.local", 1),
            entry("b.clusterset.local", 2),
        );
        w.insert(7, &a);
        w.insert(7, &b);
        let root = w.publish().unwrap();
        let (a, b) = (a.as_ref(), b.as_ref());
        assert_eq!(root.get(7, a.name()), Some(a));
        assert_eq!(root.get(7, b.name()), Some(b));
        assert_eq!(root.get(7, &wire_name("c.clusterset.local").unwrap()), None);
        // The batch path: one probe finds the first entry under the hash, and the name decides.
        let first = root.candidate(7);
        assert!(first == Some(a) || first == Some(b));
        assert_eq!(root.confirm(7, first, a.name()), Some(a));
        assert_eq!(root.confirm(7, first, b.name()), Some(b));
        let c = wire_name("c.clusterset.local").unwrap();
        assert_eq!(root.confirm(7, first, &c), None);
        assert_eq!(root.candidate(8), None, "no name has this hash");
        w.remove(7, a.name());
        let root = w.publish().unwrap();
        assert_eq!(
            (root.get(7, a.name()), root.get(7, b.name())),
            (None, Some(b))
        );
        assert!(w.publish().is_none(), "nothing changed since");
    }

    /// Inserting what the table already holds, or removing what it does not, copies no
    /// segment and publishes nothing; the next publish shares every untouched segment.
    #[test]
    fn unchanged_entries_copy_no_segment() {
        let hasher = foldhash::fast::RandomState::default();
        let names: Vec<String> = (0..5_000)
            .map(|i| format!("s{i}.clusterset.local"))
            .collect();
        let entries: Vec<Entry> = names.iter().map(|n| entry(n, 4)).collect();
        let mut w = Writer::new(Arc::new(Root::empty()), {
            let hasher = hasher.clone();
            Arc::new(move |n| hasher.hash_one(n))
        });
        for e in &entries {
            w.insert(hasher.hash_one(e.name()), e);
        }
        let first = w.publish().unwrap();
        for e in &entries {
            w.insert(hasher.hash_one(e.name()), e);
            assert_eq!(w.get(hasher.hash_one(e.name()), e.name()), Some(e.as_ref()));
        }
        let absent = wire_name("absent.clusterset.local").unwrap();
        w.remove(hasher.hash_one(&absent), &absent);
        assert!(w.changed.iter().all(Option::is_none));
        assert!(w.publish().is_none());
        // One changed name (longer than before) copies one segment.
        let changed = entry(&names[17], 5);
        w.insert(hasher.hash_one(changed.name()), &changed);
        assert_eq!(w.changed.iter().flatten().count(), 1);
        let second = w.publish().unwrap();
        let shared = first
            .segments
            .iter()
            .zip(second.segments.iter())
            .filter(|(a, b)| Arc::ptr_eq(&a.data, &b.data))
            .count();
        assert_eq!(shared, first.segments.len() - 1);
        assert_eq!(
            second.get(hasher.hash_one(changed.name()), changed.name()),
            Some(changed.as_ref())
        );
    }

    /// A segment changed over and over between publishes keeps its bytes within about twice
    /// its live entries, whatever the replacements' lengths.
    #[test]
    fn a_segment_changed_many_times_stays_compact() {
        // Name n<i> hashes to i.
        let index: NameHash = Arc::new(|n| {
            std::str::from_utf8(&n[2..1 + n[0] as usize])
                .unwrap()
                .parse()
                .unwrap()
        });
        let mut w = Writer::new(Arc::new(Root::empty()), index);
        let names: Vec<String> = (0..20).map(|i| format!("n{i}.clusterset.local")).collect();
        for round in 0..1_000u32 {
            let i = round as usize % names.len();
            let e = entry(&names[i], (round % 7) as u8);
            w.insert(i as u64, &e);
            let working = w.changed[0].as_ref().unwrap();
            let live: usize = working.items.iter().map(|it| it.len as usize).sum();
            assert!(
                working.bytes.len() <= 2 * live + 64,
                "{} for {live}",
                working.bytes.len()
            );
            assert_eq!(w.get(i as u64, e.name()), Some(e.as_ref()));
        }
        let root = w.publish().unwrap();
        assert_eq!(root.len(), names.len());
    }
}
