//! The state of the watched objects, fed one watch event at a time and tested without an API
//! server: what each stream listed, the store of packed objects, and which services each event
//! changed. A relist (410 Gone, reconnect) is buffered until it is complete and then applied as a
//! diff, so unchanged names never go missing.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use tracing::{debug, info, warn};

use crate::metrics::Metrics;
use crate::model::{ObjectKind, ServiceKey, ServiceSet, Update, WatchEvent};
use crate::source::object::{ObjectId, report_refused};
use crate::source::policy::Policy;
use crate::source::store::Store;
use crate::source::{AnyKind, Classified, Object};

/// One watch stream: a kind in one namespace (or all).
#[derive(Clone)]
pub struct Scope {
    pub kind: Arc<dyn AnyKind>,
    pub namespace: Option<String>,
}

struct StreamState {
    scope: Scope,
    /// Objects of a list in progress (between `Init` and `InitDone`), already packed.
    buffer: Option<Vec<(ObjectId, Option<Object>)>>,
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
    logged: HashMap<(ObjectKind, ObjectId), String>,
    policy: Policy,
    /// The kinds the streams watch, each once, for the gauges.
    kinds: Vec<ObjectKind>,
    /// The own cluster id the zone was last sent.
    sent_own: Option<String>,
    metrics: Arc<Metrics>,
}

fn object_id(o: &DynamicObject) -> Option<ObjectId> {
    let name = o.metadata.name.clone()?;
    Some((o.metadata.namespace.clone().unwrap_or_default(), name))
}

impl WatchState {
    /// Watches `scopes`, keeping the objects of their kinds (see [`WatchState::with_kinds`]).
    pub fn new(scopes: Vec<Scope>, policy: Policy, metrics: Arc<Metrics>) -> Self {
        let mut readers: Vec<Arc<dyn AnyKind>> = Vec::new();
        for s in &scopes {
            if !readers.iter().any(|k| k.kind() == s.kind.kind()) {
                readers.push(s.kind.clone());
            }
        }
        let mut kinds: Vec<ObjectKind> = scopes.iter().map(|s| s.kind.kind()).collect();
        kinds.sort();
        kinds.dedup();
        let streams = scopes
            .into_iter()
            .map(|scope| StreamState {
                scope,
                buffer: None,
                listed: false,
            })
            .collect();
        WatchState {
            store: Store::new(&readers, None),
            streams,
            synced: false,
            logged: HashMap::new(),
            policy,
            kinds,
            sent_own: None,
            metrics,
        }
    }

    /// Adds a stream (a kind whose API came to be served); returns its index for
    /// [`WatchState::changes`].
    pub fn add_stream(&mut self, scope: Scope) -> usize {
        let kind = scope.kind.kind();
        if !self.kinds.contains(&kind) {
            self.kinds.push(kind);
        }
        self.streams.push(StreamState {
            scope,
            buffer: None,
            listed: false,
        });
        self.streams.len() - 1
    }

    /// The kind stream `stream` watches.
    pub fn kind(&self, stream: usize) -> ObjectKind {
        self.streams[stream].scope.kind.kind()
    }

    /// Keeps the objects of every one of `kinds` (the selection's, in precedence order, those
    /// whose API is not served yet too), with the own cluster `cluster_id` when `--cluster-id`
    /// gives it. Before the first event.
    pub fn with_kinds(mut self, kinds: &[Arc<dyn AnyKind>], cluster_id: Option<String>) -> Self {
        self.store = Store::new(kinds, cluster_id);
        self
    }

    /// Every service, with the own cluster id, which is remembered as sent.
    fn full_set(&mut self) -> Change {
        self.sent_own = self.store.own_cluster().map(str::to_string);
        Change::Reset(self.store.snapshot())
    }

    pub fn synced(&self) -> bool {
        self.synced
    }

    /// Whether objects of `kind`, watched on demand, would change a service now.
    pub fn wants(&self, kind: ObjectKind) -> bool {
        self.store.wants(kind)
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
        let kind = self.streams[stream].scope.kind.kind();
        let mut affected = BTreeSet::new();
        match event {
            Event::Init => {
                if self.streams[stream].listed {
                    self.metrics.source_restart(kind);
                    info!(%kind, "watch restarted: relisting");
                }
                self.streams[stream].buffer = Some(Vec::new());
                return Vec::new();
            }
            Event::InitApply(obj) => {
                self.metrics.source_event(kind, WatchEvent::List);
                // Packed now: a large list never sits in memory as JSON, nor as model values
                // (about 110 bytes an endpoint, held until the list is done).
                if let Some(read) = self.read(stream, obj) {
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
                for id in self.store.ids(kind, ns.as_deref()) {
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
                    let counts: Vec<String> = self
                        .kinds
                        .iter()
                        .map(|k| format!("{k}={}", self.store.count(*k)))
                        .collect();
                    info!(objects = %counts.join(" "), "initial list complete");
                    self.store.settle_all(&self.metrics);
                    return vec![self.full_set()];
                }
            }
            Event::Apply(obj) => {
                self.metrics.source_event(kind, WatchEvent::Apply);
                affected.extend(self.apply(stream, obj));
            }
            Event::Delete(obj) => {
                self.metrics.source_event(kind, WatchEvent::Delete);
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
        self.store.settle(&affected, &self.metrics);
        if self.store.own_cluster() != self.sent_own.as_deref() {
            // The id changes every service's answers: all of them, in one set.
            info!(
                cluster_id = self.store.own_cluster().unwrap_or("none"),
                "own cluster id changed (ClusterProperty {})",
                crate::source::about::CLUSTER_ID
            );
            return vec![self.full_set()];
        }
        affected.into_iter().map(Change::Service).collect()
    }

    fn gauges(&self) {
        for &kind in &self.kinds {
            self.metrics.source_objects(kind, self.store.count(kind));
        }
    }

    fn forget(&mut self, kind: ObjectKind, id: &ObjectId) -> Option<ServiceKey> {
        self.store.remove(kind, id)
    }

    /// Adds or replaces one object of stream `stream`; an object that became unusable is
    /// removed.
    fn apply(&mut self, stream: usize, obj: DynamicObject) -> Vec<ServiceKey> {
        let kind = self.streams[stream].scope.kind.kind();
        match self.read(stream, obj) {
            Some((id, parsed)) => self.commit(kind, &id, parsed),
            None => Vec::new(),
        }
    }

    /// Puts a read object into the store (`None`: unusable, so any older version goes).
    fn commit(
        &mut self,
        kind: ObjectKind,
        id: &ObjectId,
        parsed: Option<Object>,
    ) -> Vec<ServiceKey> {
        match parsed {
            Some(o) => self.store.insert(o),
            None => self.forget(kind, id).into_iter().collect(),
        }
    }

    /// Reads one object into the store's packed form (`None` when unusable: logged once and
    /// counted).
    fn read(&mut self, stream: usize, obj: DynamicObject) -> Option<(ObjectId, Option<Object>)> {
        let id = object_id(&obj)?;
        let reader = &self.streams[stream].scope.kind;
        let kind = reader.kind();
        // Read once into its shape, straight from what the client parsed.
        let classified = reader.read_api(obj, &self.policy);
        let parsed = match classified {
            Classified::Object(o) if o.refused().is_empty() => {
                self.logged.remove(&(kind, id.clone()));
                Some(o)
            }
            Classified::Object(o) => {
                if self.first_report(kind, &id, format!("{:?}", o.refused())) {
                    let (kind, object) = o.identity();
                    report_refused(kind, &object, o.refused(), &self.metrics);
                }
                Some(o)
            }
            Classified::Ignored(what) => {
                debug!("ignored: {what}");
                None
            }
            Classified::Invalid(e) => {
                if self.first_report(kind, &id, e.to_string()) {
                    warn!(reason = %e.reason, "skipped {e}");
                    self.metrics.skipped(e.kind, e.reason);
                }
                None
            }
        };
        Some((id, parsed))
    }

    /// Whether `problem` is new for this object (and so is to be logged and counted); it is
    /// remembered either way.
    fn first_report(&mut self, kind: ObjectKind, id: &ObjectId, problem: String) -> bool {
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
    use crate::source::linkerd;
    use crate::source::mcs::{Imports, LABEL_SERVICE_NAME, Slices};

    fn scope(kind: impl AnyKind + 'static) -> Scope {
        Scope {
            kind: Arc::new(kind),
            namespace: None,
        }
    }

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

    /// Watching ServiceImports (stream 0) and EndpointSlices (stream 1).
    fn mcs() -> WatchState {
        WatchState::new(
            vec![scope(Imports::default()), scope(Slices)],
            Policy::default(),
            metrics(),
        )
    }

    #[test]
    fn nothing_until_both_kinds_have_listed_then_one_reset() {
        let mut c = mcs();
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

    /// The value of one counter series in `metrics`' exposition.
    fn skipped(metrics: &Metrics, series: &str) -> u64 {
        metrics
            .render()
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0)
    }

    #[test]
    fn changes_become_per_service_updates() {
        let c_metrics = metrics();
        let mut c = WatchState::new(
            vec![scope(Imports::default()), scope(Slices)],
            Policy::default(),
            c_metrics.clone(),
        );
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
        // An object that becomes unusable stops counting, and is counted (and logged) once
        // however often it is sent so; once fixed, breaking it again is a new problem.
        let bad_ip = || {
            skipped(
                &c_metrics,
                "clusterset_dns_skipped_objects_total{kind=\"ServiceImport\",reason=\"bad_ip\"}",
            )
        };
        assert_eq!(
            keys(&c.event(0, Event::Apply(import("api", "10.0.0.2")))),
            ["upsert shop/api"]
        );
        assert_eq!(
            keys(&c.event(0, Event::Apply(import("api", "not-an-ip")))),
            ["remove shop/api"]
        );
        c.event(0, Event::Apply(import("api", "not-an-ip")));
        assert_eq!(bad_ip(), 1);
        assert_eq!(
            keys(&c.event(0, Event::Apply(import("api", "10.0.0.3")))),
            ["upsert shop/api"]
        );
        c.event(0, Event::Apply(import("api", "not-an-ip")));
        assert_eq!(bad_ip(), 2);
    }

    #[test]
    fn objects_in_excluded_namespaces_are_ignored_even_when_unreadable() {
        let policy = Policy {
            exclude_namespaces: vec!["shop".into()],
            ..Policy::default()
        };
        let m = metrics();
        let mut c = WatchState::new(vec![scope(Imports::default())], policy, m.clone());
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
        assert_eq!(
            skipped(
                &m,
                "clusterset_dns_skipped_objects_total{kind=\"ServiceImport\",reason=\"bad_ip\"}"
            ),
            0,
            "nothing reported as skipped"
        );
    }

    #[test]
    fn a_relist_replaces_the_state_as_one_diff() {
        let mut c = mcs();
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
        let scopes = vec![
            scope(Imports::default()),
            scope(linkerd::Services::default()),
        ];
        let mut c = WatchState::new(scopes, Policy::default(), m.clone());
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
        // What the zone is sent for web is the import's answer.
        let updates = c.event(0, Event::Apply(import("web", "10.0.0.9")));
        let [Update::Upsert(s)] = &updates[..] else {
            panic!("{:?}", keys(&updates))
        };
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
        // It is over: the import coming back is a new conflict, counted again.
        c.event(0, Event::Apply(import("web", "10.0.0.8")));
        assert_eq!(
            conflicts(),
            ["clusterset_dns_skipped_objects_total{kind=\"Service\",reason=\"conflict\"} 2"]
        );
        c.event(0, Event::Delete(import("web", "10.0.0.8")));
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
