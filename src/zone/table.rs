//! The zone's name table, built for readers that never write shared memory.
//!
//! A published [`Root`] is immutable: a power-of-two array of segments, each an open-addressing
//! array of slots (the name's full hash beside its entry, so a probe that does not match costs no
//! second cache line). A reader holds an `Arc` of the root it looked at, so nothing it can see is
//! freed under it, and it takes no lock and makes no atomic read-modify-write per lookup.
//!
//! The one writer (the zone builder) gathers its changes in a [`Writer`], which copies only the
//! segments it touches, and publishes them as a new root that shares every other segment with
//! the old one. A lookup reads the segment's slot (one cache line, usually) and the entry.

use std::sync::Arc;

use super::entry::Entry;

/// Average names per segment the table aims at when it grows or shrinks.
const TARGET: usize = 64;
/// Average names per segment above which the segments double.
const MOST: usize = 128;
/// Most segments: indexes come from hash bits 40 and up.
const MAX_SEGMENTS: usize = 1 << 24;

#[derive(Clone)]
struct Slot {
    hash: u64,
    entry: Option<Entry>,
}

/// An immutable generation of the table.
pub struct Root {
    segments: Box<[Arc<[Slot]>]>,
    len: usize,
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

/// A segment's slots for `items`: three quarters full at most (and no more slots than that
/// needs, so the table costs little over its entries), so a probe always ends at an empty slot.
fn build_segment(items: &[(u64, Entry)]) -> Arc<[Slot]> {
    let cap = (items.len() + items.len() / 3 + 1).max(4);
    let mut slots = vec![
        Slot {
            hash: 0,
            entry: None
        };
        cap
    ];
    for (hash, entry) in items {
        let mut i = home(*hash, cap);
        while slots[i].entry.is_some() {
            i = next(i, cap);
        }
        slots[i] = Slot {
            hash: *hash,
            entry: Some(entry.clone()),
        };
    }
    slots.into()
}

pub(crate) use crate::sys::prefetch;

impl Root {
    pub fn empty() -> Self {
        Root {
            segments: vec![build_segment(&[])].into(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The segment where a name whose hash is `hash` belongs.
    #[inline]
    fn segment(&self, hash: u64) -> &Arc<[Slot]> {
        &self.segments[segment_index(hash, self.segments.len())]
    }

    /// The entry named `name` (lower-case wire form) whose hash is `hash`.
    #[inline]
    pub fn get(&self, hash: u64, name: &[u8]) -> Option<&Entry> {
        self.probe(hash, |e| e.name() == name)
    }

    /// The first entry along `hash`'s probe sequence whose slot holds `hash` and that `accept`
    /// takes; `accept` sees only entries stored under `hash`.
    #[inline]
    fn probe(&self, hash: u64, accept: impl Fn(&Entry) -> bool) -> Option<&Entry> {
        let segment = self.segment(hash);
        let mut i = home(hash, segment.len());
        loop {
            let slot = &segment[i];
            match &slot.entry {
                None => return None,
                Some(e) if slot.hash == hash && accept(e) => return Some(e),
                Some(_) => i = next(i, segment.len()),
            }
        }
    }

    /// Starts loading the segment pointer a lookup of `hash` reads first (a zone of 100,000
    /// names has tens of kilobytes of them, which other lookups keep pushing out of cache).
    #[inline]
    pub fn prefetch_segment(&self, hash: u64) {
        prefetch(self.segment(hash) as *const Arc<[Slot]>);
    }

    /// Starts loading the slot a lookup of `hash` begins at, without waiting for it.
    #[inline]
    pub fn prefetch_slot(&self, hash: u64) {
        let segment = self.segment(hash);
        prefetch(&segment[home(hash, segment.len())] as *const Slot);
    }

    /// The first entry in `hash`'s probe sequence whose slot holds `hash` (`None`: no name with
    /// that hash is here), and starts loading it, up to its first four cache lines. The slot
    /// should be in cache by now: see [`Root::prefetch_slot`]. Reads no entry.
    #[inline]
    pub fn candidate(&self, hash: u64) -> Option<&Entry> {
        let found = self.probe(hash, |_| true)?;
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
        candidate: Option<&'r Entry>,
        name: &[u8],
    ) -> Option<&'r Entry> {
        match candidate {
            // Another name with all 64 bits of the hash: look further.
            Some(e) if e.name() != name => self.get(hash, name),
            found => found,
        }
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.segments
            .iter()
            .flat_map(|s| s.iter().filter_map(|slot| slot.entry.as_ref()))
    }

    fn items(&self, segment: usize) -> Vec<(u64, Entry)> {
        self.segments[segment]
            .iter()
            .filter_map(|s| s.entry.as_ref().map(|e| (s.hash, e.clone())))
            .collect()
    }
}

/// The writer's changes since the last publish.
pub struct Writer {
    /// The root the changes apply to (the last one published).
    base: Arc<Root>,
    /// Working copies of the segments changed, by index; `None`: as in `base`. Its length is the
    /// segment count the next root will have.
    changed: Vec<Option<Vec<(u64, Entry)>>>,
    len: usize,
}

impl Writer {
    pub fn new(base: Arc<Root>) -> Self {
        let segments = base.segments.len();
        Writer {
            len: base.len,
            base,
            changed: vec![None; segments],
        }
    }

    fn working(&mut self, hash: u64) -> &mut Vec<(u64, Entry)> {
        let k = segment_index(hash, self.changed.len());
        let base = &self.base;
        self.changed[k].get_or_insert_with(|| base.items(k))
    }

    /// Inserts `entry`, or replaces the entry of the same name.
    pub fn insert(&mut self, hash: u64, entry: Entry) {
        let items = self.working(hash);
        match items
            .iter_mut()
            .find(|(h, e)| *h == hash && e.name() == entry.name())
        {
            Some(item) => item.1 = entry,
            None => {
                items.push((hash, entry));
                self.len += 1;
                self.reserve(self.len);
            }
        }
    }

    pub fn remove(&mut self, hash: u64, name: &[u8]) {
        let items = self.working(hash);
        if let Some(i) = items
            .iter()
            .position(|(h, e)| *h == hash && e.name() == name)
        {
            items.swap_remove(i);
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

    /// Spreads every name over the segment count that suits `names` names.
    fn resize_for(&mut self, names: usize) {
        let segments = (names / TARGET).next_power_of_two().clamp(1, MAX_SEGMENTS);
        let per = names / segments + names / segments / 4 + 1;
        let mut all: Vec<Vec<(u64, Entry)>> =
            (0..segments).map(|_| Vec::with_capacity(per)).collect();
        for k in 0..self.changed.len() {
            let items = match self.changed[k].take() {
                Some(items) => items,
                None => self.base.items(k),
            };
            for (hash, entry) in items {
                all[segment_index(hash, segments)].push((hash, entry));
            }
        }
        self.changed = all.into_iter().map(Some).collect();
    }

    /// The new root, if anything changed; the writer then applies to it.
    pub fn publish(&mut self) -> Option<Arc<Root>> {
        if self.changed.iter().all(Option::is_none) {
            return None;
        }
        if self.changed.len() > 1 && self.len < self.changed.len() * TARGET / 8 {
            self.resize_for(self.len);
        }
        let segments = self
            .changed
            .iter()
            .enumerate()
            .map(|(k, c)| match c {
                Some(items) => build_segment(items),
                None => self.base.segments[k].clone(),
            })
            .collect();
        let root = Arc::new(Root {
            segments,
            len: self.len,
        });
        *self = Writer::new(root.clone());
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
        w.addr(&n, [10, 0, 0, last].into(), 5);
        Entry::new(&n, false, &[(TYPE_A, w.finish())])
    }

    /// Through growth, shrinking and many publishes, the table holds exactly what a plain map
    /// fed the same changes holds, and an earlier root is unchanged by later ones.
    #[test]
    fn matches_a_map_through_growth_and_shrinking() {
        let hasher = foldhash::fast::RandomState::default();
        let h = |n: &[u8]| hasher.hash_one(n);
        let mut w = Writer::new(Arc::new(Root::empty()));
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
                    w.insert(h(&wire), e.clone());
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
                assert_eq!(root.get(h(name), name), Some(e));
            }
            for i in (0..20_000).step_by(13) {
                let name = wire_name(&format!("svc{i}.ns{}.svc.clusterset.local", i % 7)).unwrap();
                assert_eq!(root.get(h(&name), &name), expect.get(&name));
                let found = root.candidate(h(&name));
                assert_eq!(root.confirm(h(&name), found, &name), expect.get(&name));
            }
            for s in root.segments.iter() {
                let used = s.iter().filter(|x| x.entry.is_some()).count();
                assert!(used * 4 <= s.len() * 3, "{used} of {}", s.len());
            }
        }
    }

    /// A name whose hash equals another's is still told apart by its name.
    #[test]
    fn equal_hashes_are_told_apart_by_name() {
        let mut w = Writer::new(Arc::new(Root::empty()));
        let (a, b) = (
            entry("a.clusterset.local", 1),
            entry("b.clusterset.local", 2),
        );
        w.insert(7, a.clone());
        w.insert(7, b.clone());
        let root = w.publish().unwrap();
        assert_eq!(root.get(7, a.name()), Some(&a));
        assert_eq!(root.get(7, b.name()), Some(&b));
        assert_eq!(root.get(7, &wire_name("c.clusterset.local").unwrap()), None);
        // The batch path: one probe finds the first entry under the hash, and the name decides.
        let first = root.candidate(7);
        assert!(first == Some(&a) || first == Some(&b));
        assert_eq!(root.confirm(7, first, a.name()), Some(&a));
        assert_eq!(root.confirm(7, first, b.name()), Some(&b));
        let c = wire_name("c.clusterset.local").unwrap();
        assert_eq!(root.confirm(7, first, &c), None);
        assert_eq!(root.candidate(8), None, "no name has this hash");
        w.remove(7, a.name());
        let root = w.publish().unwrap();
        assert_eq!(
            (root.get(7, a.name()), root.get(7, b.name())),
            (None, Some(&b))
        );
        assert!(w.publish().is_none(), "nothing changed since");
    }
}
