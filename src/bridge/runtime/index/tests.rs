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
        !i.keys().any(|k| k == key("shop", "api")),
        "no empty entry kept"
    );
    assert_eq!(i.keys().collect::<Vec<_>>(), [key("shop", "web")]);
    i.set("shop", "api-west", Vec::new());
    assert!(i.spaces.is_empty(), "no empty namespace kept");
}

fn slice(name: &str, rv: &str) -> k8s_openapi::api::discovery::v1::EndpointSlice {
    let mut s = k8s_openapi::api::discovery::v1::EndpointSlice::default();
    s.metadata.namespace = Some("shop".into());
    s.metadata.name = Some(name.into());
    s.metadata.resource_version = Some(rv.into());
    s
}

/// A record of slice writes, packed as a store of slices packs them.
fn written() -> Written<k8s_openapi::api::discovery::v1::EndpointSlice> {
    use super::super::store::{Codec, Writer, unmarked};
    Written::new(&Writer::new(unmarked, Codec::slices()).reader())
}

#[test]
fn what_was_written_is_read_until_the_store_shows_another_version() {
    use std::sync::Arc;
    let w = written();
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

#[test]
fn a_slice_deleted_and_created_anew_is_read_while_the_store_shows_the_old_one_or_none() {
    use std::sync::Arc;
    let w = written();
    let rv = |o: Option<Arc<k8s_openapi::api::discovery::v1::EndpointSlice>>| {
        o.and_then(|o| o.metadata.resource_version.clone())
    };
    w.recreated(Some("5".into()), slice("a", "9"));
    let five = Some(Arc::new(slice("a", "5")));
    assert_eq!(rv(w.read("shop", "a", five)).as_deref(), Some("9"));
    assert_eq!(rv(w.read("shop", "a", None)).as_deref(), Some("9"));
    let nine = Some(Arc::new(slice("a", "9")));
    assert_eq!(rv(w.read("shop", "a", nine)).as_deref(), Some("9"));
    assert_eq!(
        rv(w.read("shop", "a", None)),
        None,
        "the store from then on"
    );
}

#[test]
fn a_held_write_is_let_go_when_the_watch_shows_the_store_past_it() {
    use super::super::store::{Codec, Writer, unmarked};
    use kube::runtime::watcher::Event;
    let mut store = Writer::new(unmarked, Codec::slices());
    let key = key("shop", "a");
    let w = Written::new(&store.reader());
    // Written over version 5, which the store still shows: held.
    store.apply(&Event::Apply(slice("a", "5")));
    w.wrote(Some("5".into()), slice("a", "7"));
    w.heard(&key, &store.reader());
    assert_eq!(w.len(), 1, "the store still shows the version written over");
    // The watch brings the written version: let go, without waiting for a read.
    store.apply(&Event::Apply(slice("a", "7")));
    w.heard(&key, &store.reader());
    assert_eq!(w.len(), 0);
    // Written, then deleted before the store showed it: let go too.
    w.wrote(Some("7".into()), slice("a", "8"));
    store.apply(&Event::Delete(slice("a", "9")));
    w.heard(&key, &store.reader());
    assert_eq!(w.len(), 0);
}

#[test]
fn a_write_is_held_as_the_store_keeps_the_object() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
    let w = written();
    // A write's answer, as the API server gives it: with its creation time and every
    // manager's record.
    let mut s = slice("a", "5");
    s.metadata.creation_timestamp = Some(Time(Default::default()));
    s.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("kube-controller-manager".into()),
        ..Default::default()
    }]);
    s.address_type = "IPv4".into();
    w.wrote(None, s);
    let held = w.read("shop", "a", None).expect("held");
    // What the halves read of it is there; what the store would not keep is not.
    assert_eq!(held.address_type, "IPv4");
    assert_eq!(held.metadata.resource_version.as_deref(), Some("5"));
    assert_eq!(held.metadata.creation_timestamp, None);
    assert_eq!(held.metadata.managed_fields, None);
}
