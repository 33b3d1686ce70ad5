//! Which objects of one kind name each service: kept from a watch's events, so that the work
//! on one service reads its own objects instead of every object of the kind.

use std::collections::HashMap;

use super::{Key, SmolStr};

/// The objects of one kind that name each service, by object name (a superset: an entry is
/// checked against the store when used). An object names services of its own namespace only
/// (a Linkerd Service's annotations, a slice's label), so both sides are kept by namespace,
/// by name, not as a `(String, String)` key on each side (docs/performance.md has the cost).
#[derive(Default)]
pub(in crate::bridge) struct Index {
    spaces: HashMap<SmolStr, Space>,
}

/// One namespace's part of an [`Index`].
#[derive(Default)]
struct Space {
    /// The objects that name each service.
    by_service: HashMap<SmolStr, Names>,
    /// The services each object names.
    of: HashMap<SmolStr, Names>,
}

/// A few names: nearly always one (a service's objects are its mirrors, a federated Service,
/// its slices), kept without a list of its own.
enum Names {
    One(SmolStr),
    Many(Vec<SmolStr>),
}

impl Names {
    fn iter(&self) -> impl Iterator<Item = &str> {
        let (one, many): (Option<&str>, &[SmolStr]) = match self {
            Names::One(n) => (Some(n), &[]),
            Names::Many(v) => (None, v),
        };
        one.into_iter().chain(many.iter().map(|n| &**n))
    }

    /// Adds `name` if it is not there.
    fn add(&mut self, name: &str) {
        match self {
            Names::One(n) if **n == *name => {}
            Names::One(n) => {
                let first = std::mem::take(n);
                *self = Names::Many(vec![first, name.into()]);
            }
            Names::Many(v) => {
                if !v.iter().any(|n| **n == *name) {
                    v.push(name.into());
                }
            }
        }
    }

    /// Takes `name` away; whether any is left.
    fn take(&mut self, name: &str) -> bool {
        match self {
            Names::One(n) => **n != *name,
            Names::Many(v) => {
                v.retain(|n| **n != *name);
                !v.is_empty()
            }
        }
    }
}

impl Index {
    /// `ns/name` names `keys` now (services of `ns`); the keys it named before (a change of
    /// what it names changes those services too).
    pub(in crate::bridge) fn set(&mut self, ns: &str, name: &str, keys: Vec<Key>) -> Vec<Key> {
        debug_assert!(
            keys.iter().all(|k| k.0 == ns),
            "an object names services of its own namespace"
        );
        let before = self.remove(&(ns.into(), name.into()));
        if keys.is_empty() {
            return before;
        }
        let space = self.spaces.entry(ns.into()).or_default();
        let mut of: Option<Names> = None;
        for (_, service) in &keys {
            match space.by_service.get_mut(service.as_str()) {
                Some(names) => names.add(name),
                None => {
                    space
                        .by_service
                        .insert(service.as_str().into(), Names::One(name.into()));
                }
            }
            match &mut of {
                Some(names) => names.add(service),
                None => of = Some(Names::One(service.as_str().into())),
            }
        }
        if let Some(of) = of {
            space.of.insert(name.into(), of);
        }
        before
    }

    /// `at` is gone; the keys it named.
    pub(in crate::bridge) fn remove(&mut self, at: &Key) -> Vec<Key> {
        let Some(space) = self.spaces.get_mut(at.0.as_str()) else {
            return Vec::new();
        };
        let Some(services) = space.of.remove(at.1.as_str()) else {
            return Vec::new();
        };
        let keys: Vec<Key> = services.iter().map(|s| (at.0.clone(), s.into())).collect();
        for (_, service) in &keys {
            if let Some(names) = space.by_service.get_mut(service.as_str())
                && !names.take(&at.1)
            {
                space.by_service.remove(service.as_str());
            }
        }
        if space.of.is_empty() {
            self.spaces.remove(at.0.as_str());
        }
        keys
    }

    /// The names of the objects that name `key`.
    pub(in crate::bridge) fn names(&self, key: &Key) -> Vec<String> {
        self.spaces
            .get(key.0.as_str())
            .and_then(|s| s.by_service.get(key.1.as_str()))
            .into_iter()
            .flat_map(Names::iter)
            .map(str::to_string)
            .collect()
    }

    /// Every service some object names.
    pub(in crate::bridge) fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.spaces.iter().flat_map(|(ns, space)| {
            space
                .by_service
                .keys()
                .map(move |s| (ns.clone(), s.clone()))
        })
    }
}

/// What the bridge last wrote of each object of one kind, until the store shows a version it
/// did not write over: a store lags the bridge's own writes, and a key judged again
/// from the store before it caught up would write again what it just wrote (a second create
/// answered 409, then an apply that adds a managed-fields entry to every object). Each write is
/// held as the store keeps an object ([`slim`](super::slim), then
/// [`Store::pack`](super::store::Store::pack)): while the watches trail a burst of writes,
/// every write they trail is held.
pub(in crate::bridge) struct Written<K> {
    map: std::sync::Mutex<HashMap<Key, Write>>,
    store: super::store::Store<K>,
}

/// One write held (or the last of a run of them).
struct Write {
    /// The versions it (and the run before it) went over: what the store may still show.
    over: Vec<Option<String>>,
    /// The version it wrote.
    version: Option<String>,
    /// What it wrote, packed.
    text: std::sync::Arc<[u8]>,
}

impl<K> Written<K> {
    /// A record of the writes of objects `store` holds, packed as it packs them.
    pub(in crate::bridge) fn new(store: &super::store::Store<K>) -> Self {
        Written {
            map: Default::default(),
            store: store.clone(),
        }
    }
}

impl<K> Written<K>
where
    K: kube::Resource + serde::Serialize + serde::de::DeserializeOwned,
{
    /// The object `ns/name` as the bridge knows it: what it wrote last, while the store (which
    /// holds `in_store`) still shows a version that write went over; else the store's.
    pub(in crate::bridge) fn read(
        &self,
        ns: &str,
        name: &str,
        in_store: Option<std::sync::Arc<K>>,
    ) -> Option<std::sync::Arc<K>> {
        let at: Key = (ns.into(), name.into());
        let mut map = self.map.lock().expect("not poisoned");
        let Some(write) = map.get(&at) else {
            return in_store;
        };
        let shown = in_store
            .as_ref()
            .and_then(|o| o.meta().resource_version.clone());
        if write.over.contains(&shown) {
            return Some(self.store.unpack(&write.text));
        }
        map.remove(&at);
        in_store
    }

    /// `written` held as it is kept, under its key (no versions written over yet); None
    /// (nothing held) if it does not encode.
    fn packed(&self, mut written: K) -> Option<(Key, Write)> {
        super::slim(&mut written);
        let text = self.store.pack(&written)?;
        let meta = written.meta();
        let version = meta.resource_version.clone();
        let over = Vec::new();
        Some((
            super::key(meta),
            Write {
                over,
                version,
                text,
            },
        ))
    }

    /// The bridge wrote `written` over the version `over` (None: it created it).
    pub(in crate::bridge) fn wrote(&self, over: Option<String>, written: K) {
        let Some((at, mut write)) = self.packed(written) else {
            return;
        };
        let mut map = self.map.lock().expect("not poisoned");
        // A write over its own last write: the store may still show any version before.
        if let Some(last) = map.remove(&at)
            && last.version == over
        {
            write.over = last.over;
        }
        write.over.push(over);
        map.insert(at, write);
    }

    /// The watch showed `o`: once it is a version no write of the bridge's went over (the
    /// write itself, or a later one), the store is right about it from now on.
    pub(in crate::bridge) fn seen(&self, o: &K) {
        let meta = o.meta();
        let at = super::key(meta);
        let mut map = self.map.lock().expect("not poisoned");
        if map
            .get(&at)
            .is_some_and(|w| !w.over.contains(&meta.resource_version))
        {
            map.remove(&at);
        }
    }

    /// The watch told of `key`, which `store` now holds as it says: a write of it held here
    /// is let go once the store shows a version no write went over, or no object (deleted).
    /// Only a held write's object is decoded.
    pub(in crate::bridge) fn heard(&self, key: &Key, store: &super::store::Store<K>)
    where
        K: serde::de::DeserializeOwned,
    {
        if !self.map.lock().expect("not poisoned").contains_key(key) {
            return;
        }
        match store.get(&key.0, &key.1) {
            Some(o) => self.seen(&o),
            None => self.forget(&key.0, &key.1),
        }
    }

    /// How many objects are held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.lock().expect("not poisoned").len()
    }

    /// The bridge deleted the version `deleted` and created `written` in its place: the store
    /// may still show either the old one or none.
    pub(in crate::bridge) fn recreated(&self, deleted: Option<String>, written: K) {
        if let Some((at, mut write)) = self.packed(written) {
            write.over = vec![deleted, None];
            self.map.lock().expect("not poisoned").insert(at, write);
        }
    }

    /// `ns/name` was deleted: the store is right about it from now on.
    pub(in crate::bridge) fn forget(&self, ns: &str, name: &str) {
        let at: Key = (ns.into(), name.into());
        self.map.lock().expect("not poisoned").remove(&at);
    }
}

#[cfg(test)]
mod tests;
