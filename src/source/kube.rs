//! Kubernetes source: watches ServiceImports (`multicluster.x-k8s.io`, the version the API
//! server serves, v1beta1 preferred) and EndpointSlices labelled with
//! `multicluster.kubernetes.io/service-name`, and turns watch events into per-service updates.
//!
//! [`Core`] takes tagged watch events and is tested without an API server; [`run`] feeds it
//! from kube-rs watchers. A relist (410 Gone, reconnect) is buffered until it is complete and
//! then applied as a diff, so unchanged names never go missing.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::objects::{
    Classified, LABEL_SERVICE_NAME, MCS_GROUP, Object, ObjectId, PackedObject, Store, classify,
    report_refused,
};
use super::policy::Policy;
use crate::metrics::Metrics;
use crate::model::{ServiceKey, ServiceSet, Update};

#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Kubeconfig file; without it, `KUBECONFIG`, `~/.kube/config` or the in-cluster account.
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// Watch only these namespaces (empty: all).
    pub namespaces: Vec<String>,
    /// ServiceImport API version to use instead of discovering it.
    pub import_version: Option<String>,
    /// What imported data may say; its excluded namespaces are also left out server-side.
    pub policy: Policy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Import,
    Slice,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Import => "ServiceImport",
            Kind::Slice => "EndpointSlice",
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

/// What one event changed, as [`Core::changes`] reports it.
#[derive(Debug)]
pub enum Change {
    /// The first full list: every service, packed.
    Reset(ServiceSet),
    /// This service changed (or is gone).
    Service(ServiceKey),
}

/// The state of the watched objects, fed one event at a time.
pub struct Core {
    store: Store,
    streams: Vec<StreamState>,
    synced: bool,
    /// What was last logged for each unusable object (or its refused addresses), so each
    /// problem is logged once.
    logged: HashMap<(Kind, ObjectId), String>,
    policy: Policy,
    metrics: Arc<Metrics>,
}

fn object_id(v: &Value) -> Option<ObjectId> {
    let meta = v.get("metadata")?;
    let name = meta.get("name")?.as_str()?;
    let ns = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
    Some((ns.to_string(), name.to_string()))
}

impl Core {
    pub fn new(scopes: Vec<Scope>, policy: Policy, metrics: Arc<Metrics>) -> Self {
        let streams = scopes
            .into_iter()
            .map(|scope| StreamState {
                scope,
                buffer: None,
                listed: false,
            })
            .collect();
        Core {
            store: Store::default(),
            streams,
            synced: false,
            logged: HashMap::new(),
            policy,
            metrics,
        }
    }

    pub fn synced(&self) -> bool {
        self.synced
    }

    /// Applies one event of stream `stream`; returns the updates for the zone (none until every
    /// stream has listed once, then one full reset, then per-service updates).
    pub fn event(&mut self, stream: usize, event: Event<Value>) -> Vec<Update> {
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

    /// Applies one event; returns what changed, services not yet unpacked (see [`Core::event`]).
    pub fn changes(&mut self, stream: usize, event: Event<Value>) -> Vec<Change> {
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
                        "initial list of ServiceImports and EndpointSlices complete"
                    );
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
        affected.into_iter().map(Change::Service).collect()
    }

    fn gauges(&self) {
        self.metrics
            .source_objects(Kind::Import.label(), self.store.imports());
        self.metrics
            .source_objects(Kind::Slice.label(), self.store.slices());
    }

    fn forget(&mut self, kind: Kind, id: &ObjectId) -> Option<ServiceKey> {
        match kind {
            Kind::Import => self.store.remove_import(id),
            Kind::Slice => self.store.remove_slice(id),
        }
    }

    /// Adds or replaces one object; an object that became unusable is removed.
    fn apply(&mut self, kind: Kind, obj: Value) -> Vec<ServiceKey> {
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
    fn read(&mut self, kind: Kind, mut obj: Value) -> Option<(ObjectId, Option<PackedObject>)> {
        // List items may come without their type; the stream says what they are.
        if let Some(map) = obj.as_object_mut() {
            let api_version = match kind {
                Kind::Import => map
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .filter(|v| v.starts_with(MCS_GROUP))
                    .unwrap_or("multicluster.x-k8s.io/v1beta1")
                    .to_string(),
                Kind::Slice => "discovery.k8s.io/v1".to_string(),
            };
            map.insert("apiVersion".into(), Value::String(api_version));
            map.insert("kind".into(), Value::String(kind.label().into()));
        }
        let id = object_id(&obj)?;
        let yaml = match serde_yaml_ng::to_value(&obj) {
            Ok(v) => v,
            Err(e) => {
                warn!(kind = kind.label(), object = %format!("{}/{}", id.0, id.1), "cannot be read: {e}");
                return Some((id, None));
            }
        };
        drop(obj);
        let parsed = match classify(&yaml, &self.policy) {
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

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot read kubeconfig {path}: {error}")]
    Kubeconfig {
        path: String,
        error: kube::config::KubeconfigError,
    },
    #[error(
        "no Kubernetes configuration found (no --kubeconfig, KUBECONFIG, ~/.kube/config or in-cluster service account): {0}"
    )]
    Infer(kube::config::InferConfigError),
    #[error("cannot use the kubeconfig: {0}")]
    Config(kube::config::KubeconfigError),
    #[error("cannot create the Kubernetes client: {0}")]
    Client(kube::Error),
}

/// A client from `--kubeconfig`/`--context`, or inferred (KUBECONFIG, ~/.kube/config, in-cluster).
pub async fn client(config: &Config) -> Result<kube::Client, ClientError> {
    let options = kube::config::KubeConfigOptions {
        context: config.context.clone(),
        ..Default::default()
    };
    let cfg = match (&config.kubeconfig, &config.context) {
        (Some(path), _) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|error| {
                ClientError::Kubeconfig {
                    path: path.display().to_string(),
                    error,
                }
            })?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(ClientError::Config)?
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(ClientError::Config)?,
        (None, None) => kube::Config::infer().await.map_err(ClientError::Infer)?,
    };
    kube::Client::try_from(cfg).map_err(ClientError::Client)
}

/// The ServiceImport version to watch: the override, else v1beta1 if served, else v1alpha1.
pub async fn import_version(client: &kube::Client, wanted: Option<&str>) -> Result<String, String> {
    if let Some(v) = wanted {
        return Ok(v.to_string());
    }
    let group = kube::discovery::group(client, MCS_GROUP)
        .await
        .map_err(|e| {
            format!("API group {MCS_GROUP} not found (are the MCS CRDs installed?): {e}")
        })?;
    let served: Vec<&str> = group.versions().collect();
    ["v1beta1", "v1alpha1"]
        .into_iter()
        .find(|v| served.contains(v))
        .map(str::to_string)
        .ok_or_else(|| {
            format!("API group {MCS_GROUP} serves {served:?}, neither v1beta1 nor v1alpha1")
        })
}

/// The ServiceImport resource at `version`.
pub fn import_resource(version: &str) -> ApiResource {
    ApiResource {
        group: MCS_GROUP.into(),
        version: version.into(),
        api_version: format!("{MCS_GROUP}/{version}"),
        kind: "ServiceImport".into(),
        plural: "serviceimports".into(),
    }
}

/// The EndpointSlice resource (discovery.k8s.io/v1).
pub fn slice_resource() -> ApiResource {
    ApiResource {
        group: "discovery.k8s.io".into(),
        version: "v1".into(),
        api_version: "discovery.k8s.io/v1".into(),
        kind: "EndpointSlice".into(),
        plural: "endpointslices".into(),
    }
}

/// Watches until shutdown, sending updates to the zone builder. Retries (with backoff) when the
/// API server cannot be reached, meanwhile the zone keeps its last answers.
pub async fn run(
    config: Config,
    client: kube::Client,
    updates: mpsc::Sender<(Instant, Update)>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    metrics.source_kinds(&[Kind::Import.label(), Kind::Slice.label()]);
    let mut delay = Duration::from_millis(500);
    let version = loop {
        match import_version(&client, config.import_version.as_deref()).await {
            Ok(v) => break v,
            Err(e) => {
                warn!(retry_in = ?delay, "{e}");
                metrics.source_error(Kind::Import.label());
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    };
    info!(version = %version, namespaces = ?config.namespaces, "watching ServiceImports and EndpointSlices");
    let namespaces: Vec<Option<String>> = if config.namespaces.is_empty() {
        vec![None]
    } else {
        config.namespaces.iter().cloned().map(Some).collect()
    };
    let mut scopes = Vec::new();
    let mut streams = Vec::new();
    for ns in &namespaces {
        for kind in [Kind::Import, Kind::Slice] {
            let mut wc = watcher::Config::default();
            if ns.is_none() && !config.policy.exclude_namespaces.is_empty() {
                // The API server leaves them out: they are neither sent nor held here.
                wc = wc.fields(&excluded_namespaces_selector(&config.policy));
            }
            let (resource, wc) = match kind {
                Kind::Import => (import_resource(&version), wc),
                // A slice holds up to 1,000 endpoints, and a page is held parsed (as JSON
                // values) while it is read: kube-rs's 500 a page can be hundreds of MB.
                Kind::Slice => (
                    slice_resource(),
                    wc.labels(LABEL_SERVICE_NAME).page_size(SLICE_PAGE),
                ),
            };
            let api: Api<DynamicObject> = match ns {
                Some(n) => Api::namespaced_with(client.clone(), n, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let index = scopes.len();
            scopes.push(Scope {
                kind,
                namespace: ns.clone(),
            });
            streams.push(
                watcher::watcher(api, wc)
                    .default_backoff()
                    .map(move |e| (index, kind, e))
                    .boxed(),
            );
        }
    }
    let mut core = Core::new(scopes, config.policy.clone(), metrics.clone());
    let mut events = futures::stream::select_all(streams);
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return,
            n = events.next() => n,
        };
        let Some((index, kind, event)) = next else {
            warn!("all watches ended");
            return;
        };
        let seen = Instant::now();
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                warn!(kind = kind.label(), error = %e, "watch failed; retrying with backoff, still serving the last known zone");
                metrics.source_error(kind.label());
                continue;
            }
        };
        let event = match event {
            Event::Apply(o) => Event::Apply(to_json(o)),
            Event::Delete(o) => Event::Delete(to_json(o)),
            Event::InitApply(o) => Event::InitApply(to_json(o)),
            Event::Init => Event::Init,
            Event::InitDone => Event::InitDone,
        };
        for change in core.changes(index, event) {
            let update = core.update(change);
            if updates.send((seen, update)).await.is_err() {
                return;
            }
        }
    }
}

/// EndpointSlices asked for in one list request.
const SLICE_PAGE: u32 = 50;

/// A field selector that leaves out the policy's excluded namespaces (every resource, custom
/// ones included, can be selected by `metadata.namespace`).
fn excluded_namespaces_selector(policy: &Policy) -> String {
    policy
        .exclude_namespaces
        .iter()
        .map(|ns| format!("metadata.namespace!={ns}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The object as JSON with only the metadata the conversion reads (name, namespace, labels,
/// annotations): managedFields and the rest are the largest part of most objects.
fn to_json(o: DynamicObject) -> Value {
    let mut meta = serde_json::Map::new();
    for (k, v) in [
        ("name", o.metadata.name),
        ("namespace", o.metadata.namespace),
    ] {
        if let Some(v) = v {
            meta.insert(k.into(), Value::String(v));
        }
    }
    for (k, m) in [
        ("labels", o.metadata.labels),
        ("annotations", o.metadata.annotations),
    ] {
        if let Some(m) = m {
            let m = m
                .into_iter()
                .filter(|(k, _)| k != "kubectl.kubernetes.io/last-applied-configuration")
                .map(|(k, v)| (k, Value::String(v)))
                .collect();
            meta.insert(k.into(), Value::Object(m));
        }
    }
    // The rest of the object is moved, not copied.
    let mut v = o.data;
    if let Some(map) = v.as_object_mut() {
        map.insert("metadata".into(), Value::Object(meta));
        if let Some(t) = o.types {
            map.insert("apiVersion".into(), Value::String(t.api_version));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn metrics() -> Arc<Metrics> {
        Arc::new(Metrics::new(
            "dns://test".into(),
            vec!["clusterset.local.".into()],
        ))
    }

    fn import(name: &str, ip: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "shop"}, "spec": {"type": "ClusterSetIP", "ips": [ip], "ports": [{"port": 80}]}})
    }

    fn slice(name: &str, service: &str, ip: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "shop", "labels": {LABEL_SERVICE_NAME: service, "multicluster.kubernetes.io/source-cluster": "east"}},
               "addressType": "IPv4", "endpoints": [{"addresses": [ip]}]})
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

    fn core() -> Core {
        Core::new(
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
}

#[cfg(test)]
mod to_json_tests {
    use super::*;

    #[test]
    fn keeps_what_conversion_reads_and_drops_the_rest_of_the_metadata() {
        let o: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u", "labels": {"a": "b"},
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "c": "d"},
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"type": "ClusterSetIP", "ips": ["10.0.0.1"]}
        }))
        .unwrap();
        let v = to_json(o);
        assert_eq!(
            v,
            serde_json::json!({
                "apiVersion": "multicluster.x-k8s.io/v1alpha1",
                "metadata": {"name": "web", "namespace": "shop", "labels": {"a": "b"}, "annotations": {"c": "d"}},
                "spec": {"type": "ClusterSetIP", "ips": ["10.0.0.1"]}
            })
        );
    }
}
