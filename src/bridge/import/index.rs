//! What the import half keeps by service: which of Linkerd's Services and which
//! EndpointSlices name each one (so that a service is judged from its own objects), and what
//! is said about each one now.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt as _;

use crate::bridge::model::Problem;
use crate::bridge::runtime::Key;
pub(super) use crate::bridge::runtime::index::Index;
use crate::source::linkerd::shape::services_named;

#[derive(Default)]
pub(super) struct Indexes {
    pub(super) services: Index,
    pub(super) slices: Index,
    /// The bridge's own Services, which carry ports Linkerd's federated Service lacks.
    pub(super) routes: Index,
}

/// What the import half says, by service: the problems in the log and an Event, the objects
/// someone else holds. A problem is said when the first service comes to hold it, and again
/// only after no service held it for a while (it went, and came back); it is forgotten when no
/// service holds it, so what is kept is bounded by what is wrong now.
pub(super) struct Told<M = Problem> {
    pub(super) by_key: HashMap<Key, Said<M>>,
    /// How many services hold each problem.
    held: HashMap<M, usize>,
}

impl<M> Default for Told<M> {
    fn default() -> Self {
        Told {
            by_key: HashMap::new(),
            held: HashMap::new(),
        }
    }
}

/// What one service's last reconcile found to say, and count.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Said<M = Problem> {
    pub(super) messages: BTreeSet<M>,
    /// The objects that could not be used, by namespace and name.
    pub(super) unusable: BTreeSet<(String, String)>,
    /// Its ServiceImport and how many of its slices someone else holds.
    pub(super) foreign: (usize, usize),
    /// How many of its endpoints' addresses were refused.
    pub(super) refused: usize,
}

impl<M> Default for Said<M> {
    fn default() -> Self {
        Said {
            messages: BTreeSet::new(),
            unusable: BTreeSet::new(),
            foreign: (0, 0),
            refused: 0,
        }
    }
}

impl<M: Clone + Ord + std::hash::Hash> Told<M> {
    /// Records what `key` holds now; the problems no service held before, to be said.
    pub(super) fn hold(&mut self, key: &Key, now: Said<M>) -> Vec<M> {
        let before = self.by_key.remove(key).unwrap_or_default();
        for m in before.messages.difference(&now.messages) {
            if let Some(n) = self.held.get_mut(m) {
                *n -= 1;
                if *n == 0 {
                    self.held.remove(m);
                }
            }
        }
        let mut new = Vec::new();
        for m in now.messages.difference(&before.messages) {
            let n = self.held.entry(m.clone()).or_default();
            if *n == 0 {
                new.push(m.clone());
            }
            *n += 1;
        }
        if now != Said::default() {
            self.by_key.insert(key.clone(), now);
        }
        new
    }
}

/// The services a change of one of Linkerd's Services can change the import of: those it names
/// ([`services_named`]); one that names none is judged under its own name, so what is wrong
/// with it is said.
pub(super) fn keys_of_service(svc: &Service) -> Vec<Key> {
    let (Some(ns), Some(object)) = (&svc.metadata.namespace, &svc.metadata.name) else {
        return Vec::new();
    };
    let mut keys: Vec<Key> = services_named(ns, svc.annotations())
        .into_iter()
        .map(|n| (ns.into(), n.into()))
        .collect();
    if keys.is_empty() {
        keys.push((ns.into(), object.into()));
    }
    keys
}

#[cfg(test)]
mod tests;
