//! The bridge's stores of the objects it watches, packed: each object is kept as the compact
//! JSON of what [`super::slim`] leaves of it, and decoded when a reconcile reads it. A decoded
//! k8s-openapi object is 0.8 KB before its strings, maps and vectors, and a `serde_json` tree
//! (the MCS kinds) spends a B-tree node of eleven slots on every map; the text of the same
//! object is a few hundred bytes. At 10,000 exports the stores hold about 100,000 objects, and
//! kube-runtime's reflector stores of decoded objects were most of 640 MB (docs/performance.md).
//!
//! What is read of every object at once (the keys, the bridge's own objects for its gauges and
//! relists) is kept beside the text, so that no walk decodes the store. A store is fed as
//! kube-runtime's reflector feeds its own: a relist (`Init` … `InitDone`) is gathered aside
//! and replaces the store when it is done, so a reader never sees half a list.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use kube::runtime::watcher;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Key;

/// One object: whether the writer's mark holds for it, and its JSON.
struct Entry {
    marked: bool,
    text: Box<str>,
}

/// The objects of one watch, by namespace and name. Cheap to clone; every clone reads the
/// same objects.
pub(crate) struct Store<K> {
    map: Arc<RwLock<HashMap<Key, Entry>>>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store {
            map: self.map.clone(),
            kind: PhantomData,
        }
    }
}

impl<K: kube::Resource + DeserializeOwned> Store<K> {
    /// The object `ns/name`, decoded.
    pub(crate) fn get(&self, ns: &str, name: &str) -> Option<Arc<K>> {
        let map = self.map.read().expect("not poisoned");
        let e = map.get(&(ns.to_string(), name.to_string()))?;
        Some(Arc::new(decode(&e.text)))
    }

    pub(crate) fn contains(&self, ns: &str, name: &str) -> bool {
        let map = self.map.read().expect("not poisoned");
        map.contains_key(&(ns.to_string(), name.to_string()))
    }

    /// The namespace and name of every object.
    pub(crate) fn keys(&self) -> Vec<Key> {
        self.map
            .read()
            .expect("not poisoned")
            .keys()
            .cloned()
            .collect()
    }

    /// The namespace and name of every object the writer's mark holds for.
    pub(crate) fn marked(&self) -> Vec<Key> {
        let map = self.map.read().expect("not poisoned");
        map.iter()
            .filter(|(_, e)| e.marked)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// How many objects the writer's mark holds for.
    pub(crate) fn count_marked(&self) -> usize {
        let map = self.map.read().expect("not poisoned");
        map.values().filter(|e| e.marked).count()
    }

    pub(crate) fn len(&self) -> usize {
        self.map.read().expect("not poisoned").len()
    }

    /// Every object, decoded: for a store of a few objects (the Links), never of the many.
    pub(crate) fn state(&self) -> Vec<Arc<K>> {
        let map = self.map.read().expect("not poisoned");
        map.values().map(|e| Arc::new(decode(&e.text))).collect()
    }
}

/// What a store's text is decoded with. The text was encoded from a `K` by [`Writer::apply`]:
/// every kind the bridge stores reads back what it wrote (the tests of this module hold each
/// one to it), so a failure is a bug in that pairing, not bad input.
fn decode<K: DeserializeOwned>(text: &str) -> K {
    serde_json::from_str(text).expect("a stored object decodes as the type it was encoded from")
}

/// Feeds a [`Store`] from a watch's events.
pub(crate) struct Writer<K> {
    store: Store<K>,
    /// What [`Store::marked`] selects, judged once as each object arrives.
    mark: fn(&K) -> bool,
    /// A relist under way: the objects listed so far.
    listing: Option<HashMap<Key, Entry>>,
}

impl<K: kube::Resource + Serialize> Writer<K> {
    pub(crate) fn new(mark: fn(&K) -> bool) -> Self {
        Writer {
            store: Store {
                map: Default::default(),
                kind: PhantomData,
            },
            mark,
            listing: None,
        }
    }

    pub(crate) fn reader(&self) -> Store<K> {
        self.store.clone()
    }

    /// Brings the store up to date with one event of its watch.
    pub(crate) fn apply(&mut self, ev: &watcher::Event<K>) {
        match ev {
            watcher::Event::Init => self.listing = Some(HashMap::new()),
            watcher::Event::InitApply(o) => {
                if let Some((key, entry)) = self.entry(o) {
                    self.listing.get_or_insert_default().insert(key, entry);
                }
            }
            watcher::Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                *self.store.map.write().expect("not poisoned") = listed;
            }
            watcher::Event::Apply(o) => {
                if let Some((key, entry)) = self.entry(o) {
                    self.store
                        .map
                        .write()
                        .expect("not poisoned")
                        .insert(key, entry);
                }
            }
            watcher::Event::Delete(o) => {
                let m = o.meta();
                let key = (
                    m.namespace.clone().unwrap_or_default(),
                    m.name.clone().unwrap_or_default(),
                );
                self.store.map.write().expect("not poisoned").remove(&key);
            }
        }
    }

    fn entry(&self, o: &K) -> Option<(Key, Entry)> {
        let m = o.meta();
        let key = (m.namespace.clone().unwrap_or_default(), m.name.clone()?);
        // The kinds stored are plain data: they encode.
        let text = serde_json::to_string(o).ok()?.into_boxed_str();
        let marked = (self.mark)(o);
        Some((key, Entry { marked, text }))
    }
}

/// A mark that holds for nothing, for stores no walk selects from.
pub(crate) fn unmarked<K>(_: &K) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::DynamicObject;
    use serde_json::json;

    fn service(ns: &str, name: &str, rv: &str) -> Service {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": rv, "uid": "u-1",
                "creationTimestamp": "2026-12-05T10:00:00Z",
                "labels": {"mirror.linkerd.io/exported": "remote-discovery"},
                "annotations": {"linkerd-bridge.clusterset-dns.io/export": "{\"version\":1}"},
                "managedFields": [{"manager": "linkerd-bridge.clusterset-dns.io", "operation": "Apply",
                    "apiVersion": "v1", "time": "2026-12-05T10:00:01Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:mirror.linkerd.io/exported": {}}}}}]},
            "spec": {"type": "ClusterIP", "clusterIP": "198.19.0.1", "clusterIPs": ["198.19.0.1"],
                "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 30}},
                "internalTrafficPolicy": "Local", "trafficDistribution": "PreferClose",
                "ports": [{"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "http", "targetPort": "web"}]}
        }))
        .expect("a Service")
    }

    fn labelled(s: &Service) -> bool {
        s.metadata.labels.as_ref().is_some_and(|l| !l.is_empty())
    }

    #[test]
    fn each_kind_reads_back_what_was_stored() {
        let svc = service("a", "web", "1");
        let mut w = Writer::new(unmarked::<Service>);
        w.apply(&watcher::Event::Apply(svc.clone()));
        assert_eq!(*w.reader().get("a", "web").expect("stored"), svc);

        let slice: EndpointSlice = serde_json::from_value(json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-east", "namespace": "a", "resourceVersion": "7",
                "labels": {"multicluster.kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["198.19.0.9"], "hostname": "web-0", "conditions": {"ready": true}}],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "http"}]
        }))
        .expect("a slice");
        let mut w = Writer::new(unmarked::<EndpointSlice>);
        w.apply(&watcher::Event::Apply(slice.clone()));
        assert_eq!(*w.reader().get("a", "web-east").expect("stored"), slice);

        let import: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
            "metadata": {"name": "web", "namespace": "a", "resourceVersion": "9", "generation": 2},
            "spec": {"type": "ClusterSetIP", "ips": ["198.19.0.1"], "ports": [{"port": 80, "protocol": "TCP"}]},
            "status": {"clusters": [{"cluster": "east"}]}
        }))
        .expect("an import");
        let mut w = Writer::new(unmarked::<DynamicObject>);
        w.apply(&watcher::Event::Apply(import.clone()));
        let back = w.reader().get("a", "web").expect("stored");
        assert_eq!(
            serde_json::to_value(&*back).unwrap(),
            serde_json::to_value(&import).unwrap()
        );
    }

    #[test]
    fn a_relist_replaces_the_store_when_it_is_done_and_not_before() {
        let mut w = Writer::new(labelled);
        let store = w.reader();
        w.apply(&watcher::Event::Apply(service("a", "old", "1")));
        w.apply(&watcher::Event::Init);
        w.apply(&watcher::Event::InitApply(service("a", "new", "2")));
        // Half a list is not shown: the store is as it was.
        assert_eq!(store.keys(), vec![("a".to_string(), "old".to_string())]);
        w.apply(&watcher::Event::InitDone);
        assert_eq!(store.keys(), vec![("a".to_string(), "new".to_string())]);
        assert!(!store.contains("a", "old"));
        assert_eq!(store.marked(), vec![("a".to_string(), "new".to_string())]);
        assert_eq!(store.count_marked(), 1);
    }

    #[test]
    fn apply_replaces_and_delete_removes() {
        let mut w = Writer::new(labelled);
        let store = w.reader();
        w.apply(&watcher::Event::Apply(service("a", "web", "1")));
        let mut plain = service("a", "web", "2");
        plain.metadata.labels = None;
        w.apply(&watcher::Event::Apply(plain));
        let got = store.get("a", "web").expect("stored");
        assert_eq!(got.metadata.resource_version.as_deref(), Some("2"));
        assert_eq!(store.count_marked(), 0, "the mark is judged again");
        w.apply(&watcher::Event::Delete(service("a", "web", "3")));
        assert!(store.get("a", "web").is_none());
        assert_eq!(store.len(), 0);
    }
}
