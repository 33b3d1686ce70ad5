//! Which objects of one kind name each service: kept from a watch's events, so that the work
//! on one service reads its own objects instead of every object of the kind.

use std::collections::{HashMap, HashSet};

use super::Key;

/// The objects of one kind that name each service, by object name (a superset: an entry is
/// checked against the store when used).
#[derive(Default)]
pub(in crate::bridge) struct Index {
    pub(in crate::bridge) by_key: HashMap<Key, HashSet<String>>,
    of: HashMap<(String, String), Vec<Key>>,
}

impl Index {
    pub(in crate::bridge) fn set(&mut self, ns: &str, name: &str, keys: Vec<Key>) {
        let at = (ns.to_string(), name.to_string());
        self.remove(&at);
        for k in &keys {
            self.by_key
                .entry(k.clone())
                .or_default()
                .insert(name.to_string());
        }
        self.of.insert(at, keys);
    }

    pub(in crate::bridge) fn remove(&mut self, at: &(String, String)) {
        for k in self.of.remove(at).unwrap_or_default() {
            if let Some(names) = self.by_key.get_mut(&k) {
                names.remove(&at.1);
                if names.is_empty() {
                    self.by_key.remove(&k);
                }
            }
        }
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
        gone.iter().for_each(|at| self.remove(at));
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
        i.set("shop", "api-west", vec![key("shop", "web")]);
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
}
