//! The state of the watched objects, fed one watch event at a time and tested without an API
//! server: what each stream listed, the store of packed objects, and which services each event
//! changed. A relist (410 Gone, reconnect) is buffered until it is complete and then applied as a
//! diff, so unchanged names never go missing.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use tracing::{debug, info, warn};

use crate::metrics::Metrics;
use crate::model::{ServiceKey, ServiceSet, Update};
use crate::source::linkerd::{self, LinkerdService, report_conflict};
use crate::source::object::{
    Classified, EndpointSlice, Object, ServiceImport, convert_import, convert_slice, excluded,
    report_refused,
};
use crate::source::policy::Policy;
use crate::source::store::{ObjectId, PackedObject, Store};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Import,
    Slice,
    /// Linkerd's federated and mirror Services.
    Service,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Import => "ServiceImport",
            Kind::Slice => "EndpointSlice",
            Kind::Service => linkerd::KIND,
        }
    }
}

/// One watch stream: a kind in one namespace (or all).
#[derive(Debug, Clone)]
pub struct Scope {
    pub kind: Kind,
    pub namespace: Option<String>,
}

struct StreamState {
    scope: Scope,
    /// Objects of a list in progress (between `Init` and `InitDone`), already slimmed.
    buffer: Option<Vec<(ObjectId, Option<PackedObject>)>>,
    /// A list has completed at least once.
    listed: bool,
}

/// What one event changed, as [`WatchState::changes`] reports it.
#[derive(Debug)]
pub enum Change {
    /// The first full list: every service, packed.
    Reset(ServiceSet),
    /// This service changed (or is gone).
    Service(ServiceKey),
}

/// The state of the watched objects, fed one event at a time.
pub struct WatchState {
    store: Store,
    streams: Vec<StreamState>,
    synced: bool,
    /// What was last logged for each unusable object (or its refused addresses), so each
    /// problem is logged once.
    logged: HashMap<(Kind, ObjectId), String>,
    policy: Policy,
    /// How Linkerd's Services are read (when a stream watches them).
    linkerd: linkerd::Config,
    /// Services that a ServiceImport and Linkerd's Services both give, as last reported.
    conflicts: HashSet<ServiceKey>,
    metrics: Arc<Metrics>,
}

fn object_id(o: &DynamicObject) -> Option<ObjectId> {
    let name = o.metadata.name.clone()?;
    Some((o.metadata.namespace.clone().unwrap_or_default(), name))
}

impl WatchState {
    pub fn new(scopes: Vec<Scope>, policy: Policy, metrics: Arc<Metrics>) -> Self {
        let streams = scopes
            .into_iter()
            .map(|scope| StreamState {
                scope,
                buffer: None,
                listed: false,
            })
            .collect();
        WatchState {
            store: Store::default(),
            streams,
            synced: false,
            logged: HashMap::new(),
            policy,
            linkerd: linkerd::Config::default(),
            conflicts: HashSet::new(),
            metrics,
        }
    }

    /// Reads Linkerd's Services with `config`.
    pub fn with_linkerd(mut self, config: linkerd::Config) -> Self {
        self.linkerd = config;
        self
    }

    pub fn synced(&self) -> bool {
        self.synced
    }

    /// Applies one event of stream `stream`; returns the updates for the zone (none until every
    /// stream has listed once, then one full reset, then per-service updates).
    pub fn event(&mut self, stream: usize, event: Event<DynamicObject>) -> Vec<Update> {
        let changes = self.changes(stream, event);
        changes.into_iter().map(|c| self.update(c)).collect()
    }

    /// The update for one change, with its service unpacked now: the watch loop unpacks each
    /// just before sending it, so a relist that touches every service never holds them all
    /// unpacked at once.
    pub fn update(&self, change: Change) -> Update {
        match change {
            Change::Reset(snapshot) => Update::Reset(snapshot),
            Change::Service(key) => match self.store.service(&key) {
                Some(s) => Update::Upsert(s),
                None => Update::Remove(key),
            },
        }
    }

    /// Applies one event; returns what changed, services not yet unpacked (see [`WatchState::event`]).
    pub fn changes(&mut self, stream: usize, event: Event<DynamicObject>) -> Vec<Change> {
        let kind = self.streams[stream].scope.kind;
        let mut affected = BTreeSet::new();
        let kind_label = kind.label();
        match event {
            Event::Init => {
                if self.streams[stream].listed {
                    self.metrics.source_restart(kind_label);
                    info!(kind = kind_label, "watch restarted: relisting");
                }
                self.streams[stream].buffer = Some(Vec::new());
                return Vec::new();
            }
            Event::InitApply(obj) => {
                self.metrics.source_event(kind_label, "list");
                // Packed now: a large list never sits in memory as JSON, nor as model values
                // (about 110 bytes an endpoint, held until the list is done).
                if let Some(read) = self.read(kind, obj) {
                    self.streams[stream]
                        .buffer
                        .get_or_insert_with(Vec::new)
                        .push(read);
                }
                return Vec::new();
            }
            Event::InitDone => {
                let listed = self.streams[stream].buffer.take().unwrap_or_default();
                let ns = self.streams[stream].scope.namespace.clone();
                // Replace what this stream covers by what it listed, in one step.
                let before = match kind {
                    Kind::Import => self.store.import_ids(ns.as_deref()),
                    Kind::Slice => self.store.slice_ids(ns.as_deref()),
                    Kind::Service => self.store.linkerd_ids(ns.as_deref()),
                };
                for id in before {
                    affected.extend(self.forget(kind, &id));
                }
                for (id, parsed) in listed {
                    affected.extend(self.commit(kind, &id, parsed));
                }
                self.streams[stream].listed = true;
                self.metrics.source_synced();
                if !self.synced && self.streams.iter().all(|s| s.listed) {
                    self.synced = true;
                    self.gauges();
                    info!(
                        imports = self.store.imports(),
                        slices = self.store.slices(),
                        linkerd_services = self.store.linkerd_services(),
                        "initial list complete"
                    );
                    let mut all = self.store.linkerd_keys();
                    all.sort();
                    self.check_conflicts(all.iter());
                    return vec![Change::Reset(self.store.snapshot())];
                }
            }
            Event::Apply(obj) => {
                self.metrics.source_event(kind_label, "apply");
                affected.extend(self.apply(kind, obj));
            }
            Event::Delete(obj) => {
                self.metrics.source_event(kind_label, "delete");
                if let Some(id) = object_id(&obj) {
                    self.logged.remove(&(kind, id.clone()));
                    affected.extend(self.forget(kind, &id));
                }
            }
        }
        self.gauges();
        if !self.synced {
            return Vec::new();
        }
        self.check_conflicts(affected.iter());
        affected.into_iter().map(Change::Service).collect()
    }

    /// Reports each of `keys` that has just come to be given by both a ServiceImport and
    /// Linkerd's Services (once, until it is no longer).
    fn check_conflicts<'a>(&mut self, keys: impl Iterator<Item = &'a ServiceKey>) {
        for key in keys {
            match self.store.conflict(key) {
                Some(objects) => {
                    if self.conflicts.insert(key.clone()) {
                        report_conflict(key, &objects, &self.metrics);
                    }
                }
                None => {
                    if self.conflicts.remove(key) {
                        info!(service = %key, "the ServiceImport and Linkerd's Services no longer both give this service");
                    }
                }
            }
        }
    }

    fn gauges(&self) {
        let kinds = self.streams.iter().map(|s| s.scope.kind);
        for kind in kinds.collect::<HashSet<_>>() {
            let n = match kind {
                Kind::Import => self.store.imports(),
                Kind::Slice => self.store.slices(),
                Kind::Service => self.store.linkerd_services(),
            };
            self.metrics.source_objects(kind.label(), n);
        }
    }

    fn forget(&mut self, kind: Kind, id: &ObjectId) -> Option<ServiceKey> {
        match kind {
            Kind::Import => self.store.remove_import(id),
            Kind::Slice => self.store.remove_slice(id),
            Kind::Service => self.store.remove_linkerd(id),
        }
    }

    /// Adds or replaces one object; an object that became unusable is removed.
    fn apply(&mut self, kind: Kind, obj: DynamicObject) -> Vec<ServiceKey> {
        match self.read(kind, obj) {
            Some((id, parsed)) => self.commit(kind, &id, parsed),
            None => Vec::new(),
        }
    }

    /// Puts a read object into the store (`None`: unusable, so any older version goes).
    fn commit(
        &mut self,
        kind: Kind,
        id: &ObjectId,
        parsed: Option<PackedObject>,
    ) -> Vec<ServiceKey> {
        match parsed {
            Some(o) => self.store.insert_packed(o),
            None => self.forget(kind, id).into_iter().collect(),
        }
    }

    /// Reads one object into the store's packed form (`None` when unusable: logged once and
    /// counted).
    fn read(&mut self, kind: Kind, obj: DynamicObject) -> Option<(ObjectId, Option<PackedObject>)> {
        let id = object_id(&obj)?;
        let object = format!("{}/{}", id.0, id.1);
        // Read once into its shape, straight from what the client parsed.
        let classified = match excluded(kind.label(), &object, &id.0, &self.policy) {
            Some(ignored) => ignored,
            None => match kind {
                Kind::Import => {
                    ServiceImport::from_dynamic(obj).map(|o| convert_import(o, &self.policy))
                }
                Kind::Slice => {
                    EndpointSlice::from_dynamic(obj).map(|o| convert_slice(o, &self.policy))
                }
                Kind::Service => LinkerdService::from_dynamic(obj)
                    .map(|o| linkerd::convert(o, &self.linkerd, &self.policy)),
            }
            .unwrap_or_else(Classified::Invalid),
        };
        let parsed = match classified {
            Classified::Object(o) if o.refused().is_empty() => {
                self.logged.remove(&(kind, id.clone()));
                Some(o)
            }
            Classified::Object(o) => {
                if self.first_report(kind, &id, format!("{:?}", o.refused())) {
                    let (kind_label, object) = o.identity();
                    report_refused(kind_label, &object, o.refused(), &self.metrics);
                }
                Some(o)
            }
            Classified::Ignored(what) => {
                debug!("ignored: {what}");
                None
            }
            Classified::Invalid(e) => {
                if self.first_report(kind, &id, e.to_string()) {
                    warn!(reason = e.reason, "skipped {e}");
                    self.metrics.skipped(e.kind, e.reason);
                }
                None
            }
        };
        Some((id, parsed.map(Object::pack)))
    }

    /// Whether `problem` is new for this object (and so is to be logged and counted); it is
    /// remembered either way.
    fn first_report(&mut self, kind: Kind, id: &ObjectId, problem: String) -> bool {
        let key = (kind, id.clone());
        if self.logged.get(&key) == Some(&problem) {
            return false;
        }
        self.logged.insert(key, problem);
        true
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::source::object::LABEL_SERVICE_NAME;

    fn metrics() -> Arc<Metrics> {
        Arc::new(Metrics::new(
            "dns://test".into(),
            vec!["clusterset.local.".into()],
        ))
    }

    fn object(v: serde_json::Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    fn import(name: &str, ip: &str) -> DynamicObject {
        object(
            json!({"metadata": {"name": name, "namespace": "shop"}, "spec": {"type": "ClusterSetIP", "ips": [ip], "ports": [{"port": 80}]}}),
        )
    }

    fn slice(name: &str, service: &str, ip: &str) -> DynamicObject {
        object(
            json!({"metadata": {"name": name, "namespace": "shop", "labels": {LABEL_SERVICE_NAME: service, "multicluster.kubernetes.io/source-cluster": "east"}},
               "addressType": "IPv4", "endpoints": [{"addresses": [ip]}]}),
        )
    }

    fn keys(updates: &[Update]) -> Vec<String> {
        updates
            .iter()
            .map(|u| match u {
                Update::Reset(s) => format!("reset {}", s.len()),
                Update::Upsert(s) => format!("upsert {}", s.key),
                Update::Remove(k) => format!("remove {k}"),
            })
            .collect()
    }

    fn core() -> WatchState {
        WatchState::new(
            vec![
                Scope {
                    kind: Kind::Import,
                    namespace: None,
                },
                Scope {
                    kind: Kind::Slice,
                    namespace: None,
                },
            ],
            Policy::default(),
            metrics(),
        )
    }

    #[test]
    fn nothing_until_both_kinds_have_listed_then_one_reset() {
        let mut c = core();
        assert!(c.event(0, Event::Init).is_empty());
        assert!(
            c.event(0, Event::InitApply(import("web", "10.0.0.1")))
                .is_empty()
        );
        assert!(c.event(0, Event::InitDone).is_empty());
        assert!(!c.synced());
        assert!(c.event(1, Event::Init).is_empty());
        assert!(
            c.event(1, Event::InitApply(slice("web-east", "web", "10.1.0.1")))
                .is_empty()
        );
        let u = c.event(1, Event::InitDone);
        assert_eq!(keys(&u), ["reset 1"]);
        let Update::Reset(s) = u[0].clone() else {
            panic!()
        };
        let s: Vec<_> = s.into_iter().collect();
        assert_eq!(s[0].slices.len(), 1);
        assert!(c.synced());
    }

    #[test]
    fn changes_become_per_service_updates() {
        let mut c = core();
        for (s, e) in [
            (0, Event::Init),
            (0, Event::InitDone),
            (1, Event::Init),
            (1, Event::InitDone),
        ] {
            c.event(s, e);
        }
        assert_eq!(
            keys(&c.event(0, Event::Apply(import("web", "10.0.0.1")))),
            ["upsert shop/web"]
        );
        assert_eq!(
            keys(&c.event(1, Event::Apply(slice("web-east", "web", "10.1.0.1")))),
            ["upsert shop/web"]
        );
        // A slice relabelled to another service updates both (here: one without an import yet).
        assert_eq!(
            keys(&c.event(1, Event::Apply(slice("web-east", "api", "10.1.0.1")))),
            ["remove shop/api", "upsert shop/web"]
        );
        assert_eq!(
            keys(&c.event(0, Event::Delete(import("web", "10.0.0.1")))),
            ["remove shop/web"]
        );
        // An object that becomes unusable stops counting, and is logged once.
        assert_eq!(
            keys(&c.event(0, Event::Apply(import("api", "10.0.0.2")))),
            ["upsert shop/api"]
        );
        assert_eq!(
            keys(&c.event(0, Event::Apply(import("api", "not-an-ip")))),
            ["remove shop/api"]
        );
        assert_eq!(c.logged.len(), 1);
        assert_eq!(
            keys(&c.event(0, Event::Apply(import("api", "10.0.0.3")))),
            ["upsert shop/api"]
        );
        assert!(c.logged.is_empty());
    }

    #[test]
    fn objects_in_excluded_namespaces_are_ignored_even_when_unreadable() {
        let policy = Policy {
            exclude_namespaces: vec!["shop".into()],
            ..Policy::default()
        };
        let scope = Scope {
            kind: Kind::Import,
            namespace: None,
        };
        let mut c = WatchState::new(vec![scope], policy, metrics());
        c.event(0, Event::Init);
        assert_eq!(keys(&c.event(0, Event::InitDone)), ["reset 0"]);
        assert!(
            c.event(0, Event::Apply(import("web", "10.0.0.1")))
                .is_empty()
        );
        assert!(
            c.event(0, Event::Apply(import("bad", "not-an-ip")))
                .is_empty()
        );
        assert!(c.logged.is_empty(), "nothing reported as skipped");
    }

    #[test]
    fn a_relist_replaces_the_state_as_one_diff() {
        let mut c = core();
        c.event(0, Event::Init);
        for n in ["a", "b", "c"] {
            c.event(0, Event::InitApply(import(n, "10.0.0.1")));
        }
        c.event(0, Event::InitDone);
        c.event(1, Event::Init);
        c.event(1, Event::InitDone);
        // The watch restarts (e.g. 410 Gone): b changed, c was deleted meanwhile, d is new.
        assert!(c.event(0, Event::Init).is_empty());
        for (n, ip) in [("a", "10.0.0.1"), ("b", "10.0.0.9"), ("d", "10.0.0.4")] {
            assert!(
                c.event(0, Event::InitApply(import(n, ip))).is_empty(),
                "nothing is applied mid-list"
            );
        }
        let u = c.event(0, Event::InitDone);
        // Every service the relist touched is re-sent (the builder skips the unchanged `a`); `c`
        // is removed; nothing is removed and re-added.
        assert_eq!(
            keys(&u),
            [
                "upsert shop/a",
                "upsert shop/b",
                "remove shop/c",
                "upsert shop/d"
            ]
        );
    }

    fn federated(name: &str, svc: &str, ip: &str) -> DynamicObject {
        object(json!({"metadata": {"name": name, "namespace": "shop",
                "labels": {"mirror.linkerd.io/mirrored-service": "true"},
                "annotations": {"multicluster.linkerd.io/remote-discovery": format!("{svc}@east")}},
            "spec": {"clusterIP": ip, "ports": [{"port": 80}]}}))
    }

    #[test]
    fn linkerd_services_relist_and_lose_to_an_import_once() {
        let m = metrics();
        let scopes = [Kind::Import, Kind::Service]
            .map(|kind| Scope {
                kind,
                namespace: None,
            })
            .to_vec();
        let mut c = WatchState::new(scopes, Policy::default(), m.clone())
            .with_linkerd(linkerd::Config::default());
        c.event(0, Event::Init);
        c.event(0, Event::InitDone);
        c.event(1, Event::Init);
        c.event(
            1,
            Event::InitApply(federated("web-federated", "web", "10.0.0.1")),
        );
        assert_eq!(keys(&c.event(1, Event::InitDone)), ["reset 1"]);
        // The import wins; reported once however often either object changes.
        let conflicts = || {
            m.render().lines().filter(|l| l.starts_with("clusterset_dns_skipped_objects_total{kind=\"Service\",reason=\"conflict\"} ")).map(str::to_string).collect::<Vec<_>>()
        };
        c.event(0, Event::Apply(import("web", "10.0.0.9")));
        let s = c
            .store
            .service(&ServiceKey {
                namespace: "shop".into(),
                name: "web".into(),
            })
            .unwrap();
        assert_eq!(s.ips, ["10.0.0.9".parse::<std::net::IpAddr>().unwrap()]);
        c.event(
            1,
            Event::Apply(federated("web-federated", "web", "10.0.0.2")),
        );
        c.event(0, Event::Apply(import("web", "10.0.0.8")));
        assert_eq!(
            conflicts(),
            ["clusterset_dns_skipped_objects_total{kind=\"Service\",reason=\"conflict\"} 1"]
        );
        // The import goes: the federated Service is served again.
        assert_eq!(
            keys(&c.event(0, Event::Delete(import("web", "10.0.0.8")))),
            ["upsert shop/web"]
        );
        assert!(c.conflicts.is_empty());
        // A relist in which the federated Service changed its members and another vanished.
        c.event(
            1,
            Event::Apply(federated("api-federated", "api", "10.0.0.3")),
        );
        c.event(1, Event::Init);
        c.event(
            1,
            Event::InitApply(federated("web-federated", "www", "10.0.0.2")),
        );
        assert_eq!(
            keys(&c.event(1, Event::InitDone)),
            ["remove shop/api", "remove shop/web", "upsert shop/www"]
        );
    }
}
