//! Which objects of one kind name each service: kept from a watch's events, so that the work
//! on one service reads its own objects instead of every object of the kind.

use std::collections::HashMap;

use super::Key;

/// The objects of one kind that name each service, by object name (a superset: an entry is
/// checked against the store when used).
#[derive(Default)]
pub(in crate::bridge) struct Index {
    /// A service's objects are one or two (its mirrors, a federated Service): a short list,
    /// not a set of its own (a hash table's smallest allocation is several times a name).
    pub(in crate::bridge) by_key: HashMap<Key, Vec<String>>,
    of: HashMap<(String, String), Vec<Key>>,
}

impl Index {
    /// `ns/name` names `keys` now; the keys it named before (a change of what it names changes
    /// those services too).
    pub(in crate::bridge) fn set(&mut self, ns: &str, name: &str, keys: Vec<Key>) -> Vec<Key> {
        let at = (ns.to_string(), name.to_string());
        let before = self.remove(&at);
        for k in &keys {
            let names = self.by_key.entry(k.clone()).or_default();
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
        self.of.insert(at, keys);
        before
    }

    /// `at` is gone; the keys it named.
    pub(in crate::bridge) fn remove(&mut self, at: &(String, String)) -> Vec<Key> {
        let keys = self.of.remove(at).unwrap_or_default();
        for k in &keys {
            if let Some(names) = self.by_key.get_mut(k) {
                names.retain(|n| *n != at.1);
                if names.is_empty() {
                    self.by_key.remove(k);
                }
            }
        }
        keys
    }

    pub(in crate::bridge) fn names(&self, key: &Key) -> Vec<String> {
        self.by_key
            .get(key)
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }

    /// Drops the objects `exists` says are gone (a relist does not say what went meanwhile).
    pub(in crate::bridge) fn prune(&mut self, exists: impl Fn(&str, &str) -> bool) {
        let gone: Vec<(String, String)> = self
            .of
            .keys()
            .filter(|(ns, name)| !exists(ns, name))
            .cloned()
            .collect();
        for at in &gone {
            self.remove(at);
        }
    }
}

/// What the bridge last wrote of each object of one kind, until the store shows a version it
/// did not write over: a store lags the bridge's own writes, and a key judged again
/// from the store before it caught up would write again what it just wrote (a second create
/// answered 409, then an apply that adds a managed-fields entry to every object).
pub(in crate::bridge) struct Written<K> {
    map: std::sync::Mutex<HashMap<(String, String), Write<K>>>,
}

/// The versions one write (or a run of them) went over, and what it wrote last.
type Write<K> = (Vec<Option<String>>, std::sync::Arc<K>);

impl<K> Default for Written<K> {
    fn default() -> Self {
        Written {
            map: Default::default(),
        }
    }
}

impl<K: kube::Resource> Written<K> {
    /// The object `ns/name` as the bridge knows it: what it wrote last, while the store (which
    /// holds `in_store`) still shows a version that write went over; else the store's.
    pub(in crate::bridge) fn read(
        &self,
        ns: &str,
        name: &str,
        in_store: Option<std::sync::Arc<K>>,
    ) -> Option<std::sync::Arc<K>> {
        let at = (ns.to_string(), name.to_string());
        let mut map = self.map.lock().expect("not poisoned");
        let Some((over, written)) = map.get(&at) else {
            return in_store;
        };
        let shown = in_store
            .as_ref()
            .and_then(|o| o.meta().resource_version.clone());
        if over.contains(&shown) {
            return Some(written.clone());
        }
        map.remove(&at);
        in_store
    }

    /// The bridge wrote `written` over the version `over` (None: it created it).
    pub(in crate::bridge) fn wrote(&self, over: Option<String>, written: K) {
        let meta = written.meta();
        let at = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        );
        let mut map = self.map.lock().expect("not poisoned");
        let mut versions = vec![over.clone()];
        // A write over its own last write: the store may still show any version before.
        if let Some((before, last)) = map.remove(&at)
            && last.meta().resource_version == over
        {
            versions = before;
            versions.push(over);
        }
        map.insert(at, (versions, std::sync::Arc::new(written)));
    }

    /// The watch showed `o`: once it is a version no write of the bridge's went over (the
    /// write itself, or a later one), the store is right about it from now on.
    pub(in crate::bridge) fn seen(&self, o: &K) {
        let meta = o.meta();
        let at = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        );
        let mut map = self.map.lock().expect("not poisoned");
        if map
            .get(&at)
            .is_some_and(|(over, _)| !over.contains(&meta.resource_version))
        {
            map.remove(&at);
        }
    }

    /// How many objects are held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.lock().expect("not poisoned").len()
    }

    /// `ns/name` was deleted: the store is right about it from now on.
    pub(in crate::bridge) fn forget(&self, ns: &str, name: &str) {
        let at = (ns.to_string(), name.to_string());
        self.map.lock().expect("not poisoned").remove(&at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, name: &str) -> Key {
        (ns.into(), name.into())
    }

    fn names(i: &Index, k: &Key) -> Vec<String> {
        let mut n = i.names(k);
        n.sort();
        n
    }

    #[test]
    fn an_object_renamed_to_another_service_leaves_the_first() {
        let mut i = Index::default();
        i.set("shop", "api-federated", vec![key("shop", "api")]);
        i.set("shop", "api-west", vec![key("shop", "api")]);
        assert_eq!(
            names(&i, &key("shop", "api")),
            ["api-federated", "api-west"]
        );
        let before = i.set("shop", "api-west", vec![key("shop", "web")]);
        assert_eq!(
            before,
            [key("shop", "api")],
            "what it named before, to mark too"
        );
        assert_eq!(names(&i, &key("shop", "api")), ["api-federated"]);
        assert_eq!(names(&i, &key("shop", "web")), ["api-west"]);
        i.remove(&("shop".into(), "api-federated".into()));
        assert!(i.names(&key("shop", "api")).is_empty());
        assert!(
            !i.by_key.contains_key(&key("shop", "api")),
            "no empty entry kept"
        );
        i.prune(|_, name| name != "api-west");
        assert!(i.by_key.is_empty() && i.of.is_empty());
    }

    fn slice(name: &str, rv: &str) -> k8s_openapi::api::discovery::v1::EndpointSlice {
        let mut s = k8s_openapi::api::discovery::v1::EndpointSlice::default();
        s.metadata.namespace = Some("shop".into());
        s.metadata.name = Some(name.into());
        s.metadata.resource_version = Some(rv.into());
        s
    }

    #[test]
    fn what_was_written_is_read_until_the_store_shows_another_version() {
        use std::sync::Arc;
        let w = Written::default();
        let rv = |o: Option<Arc<k8s_openapi::api::discovery::v1::EndpointSlice>>| {
            o.and_then(|o| o.metadata.resource_version.clone())
        };
        // Created: while the store has none, the created one is read.
        w.wrote(None, slice("a", "5"));
        assert_eq!(rv(w.read("shop", "a", None)).as_deref(), Some("5"));
        // Written again over it: the store may show none or 5 meanwhile.
        w.wrote(Some("5".into()), slice("a", "7"));
        assert_eq!(rv(w.read("shop", "a", None)).as_deref(), Some("7"));
        let five = Some(Arc::new(slice("a", "5")));
        assert_eq!(rv(w.read("shop", "a", five)).as_deref(), Some("7"));
        // The store caught up (or someone else wrote): the store from now on.
        let seven = Some(Arc::new(slice("a", "7")));
        assert_eq!(rv(w.read("shop", "a", seven)).as_deref(), Some("7"));
        assert_eq!(
            rv(w.read("shop", "a", None)),
            None,
            "forgotten once caught up"
        );
        // The watch shows the write: nothing is held for it any more.
        w.wrote(None, slice("c", "11"));
        w.seen(&slice("c", "11"));
        assert_eq!(w.len(), 0);
        // Deleted after the bridge created it: the store is believed.
        w.wrote(None, slice("b", "9"));
        w.forget("shop", "b");
        assert_eq!(rv(w.read("shop", "b", None)), None);
    }
}
