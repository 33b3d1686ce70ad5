//! The import half's runtime: watches the Services Linkerd's service mirror writes, Links, and
//! the ServiceImports and MCS EndpointSlices in the cluster, and brings each service to what
//! [`import::judge`] says. It writes only objects it created (ServiceImports labelled
//! `app.kubernetes.io/managed-by`, slices labelled `endpointslice.kubernetes.io/managed-by`,
//! both [`import::MANAGER`]); one someone else created is left as it is, said once in the log
//! and an Event, and counted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kube::runtime::events::{EventType, Recorder};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::time::Instant;
use tracing::{info, warn};

use super::import::{self, Import, Judged, LABEL_MANAGER, LABEL_SLICE_MANAGER, MANAGER, Naming};
use super::metrics::BridgeMetrics;
use super::{
    CONCURRENT, Crd, FIELD_MANAGER, Key, RETRY, Shared, lease, said, sleep_until, touched,
};
use crate::source::linkerd::{ANNOTATION_FQ_NAME, ANNOTATION_LOCAL, ANNOTATION_REMOTE, SELECTOR};
use crate::source::mcs::LABEL_SERVICE_NAME;

/// What the import half is run with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How clusters are named in `status.clusters` and the slices' `source-cluster`.
    pub naming: Naming,
    /// Every import is brought up to date this often, changed or not.
    pub resync: Duration,
}

const SERVICE_IMPORT: Crd = Crd {
    group: "multicluster.x-k8s.io",
    versions: &["v1beta1", "v1alpha1"],
    kind: "ServiceImport",
    plural: "serviceimports",
    install: "install the CRDs of sigs.k8s.io/mcs-api v0.5.2 (kubectl apply -f deploy/crds/multicluster.x-k8s.io_serviceimports.yaml)",
};

/// Runs the import half until shutdown, once the ServiceImport and Link CRDs are served.
pub(super) async fn run(
    shared: Shared,
    settings: Settings,
    identity: String,
    became_leader: Arc<tokio::sync::Notify>,
) {
    let Some(si) = shared.wait_for("import", &SERVICE_IMPORT).await else {
        return;
    };
    let Some(link) = shared.wait_for("import", &super::LINK).await else {
        return;
    };
    shared.metrics.waiting(
        "import",
        Some("the first full list of Services, Links, ServiceImports and EndpointSlices has not come yet".into()),
    );
    info!(serviceimport = %si.version, link = %link.version, "linkerd-bridge: import half starting");
    let recorder = super::recorder(&shared.client, &identity);
    let services_w = reflector::store::Writer::default();
    let links_w = reflector::store::Writer::new(link.clone());
    let imports_w = reflector::store::Writer::new(si.clone());
    let slices_w = reflector::store::Writer::default();
    let importer = Importer {
        services: services_w.as_reader(),
        links: links_w.as_reader(),
        imports: imports_w.as_reader(),
        slices: slices_w.as_reader(),
        client: shared.client.clone(),
        si,
        link,
        settings,
        metrics: shared.metrics.clone(),
        leading: shared.leading.clone(),
        recorder,
        said: Mutex::default(),
        clusters: shared.clusters.clone(),
    };
    importer
        .run(
            (services_w, links_w, imports_w, slices_w),
            became_leader,
            shared.shutdown,
        )
        .await;
}

struct Importer {
    client: kube::Client,
    si: ApiResource,
    link: ApiResource,
    settings: Settings,
    services: Store<Service>,
    links: Store<DynamicObject>,
    imports: Store<DynamicObject>,
    slices: Store<EndpointSlice>,
    metrics: Arc<BridgeMetrics>,
    leading: lease::Leading,
    recorder: Recorder,
    /// What was said once (an object not taken over, a Service that cannot be used).
    said: Mutex<BTreeSet<String>>,
    /// The exports of this cluster and the linked ones.
    clusters: super::clusters::Clusters,
}

type Writers = (
    reflector::store::Writer<Service>,
    reflector::store::Writer<DynamicObject>,
    reflector::store::Writer<DynamicObject>,
    reflector::store::Writer<EndpointSlice>,
);

/// What the watches said: the keys a change marks, or that a first list is done.
enum Seen {
    Keys(Vec<Key>),
    All,
    Listed(usize),
}

/// The import half's watch of `api`: each event as what it marks (`keys` of the object), with
/// the index of the watch for its first full list.
fn seen<K>(
    w: reflector::store::Writer<K>,
    api: Api<K>,
    config: watcher::Config,
    index: usize,
    keys: fn(&K) -> Option<Vec<Key>>,
) -> impl futures::Stream<Item = Result<Seen, watcher::Error>>
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash,
{
    reflector::reflector(w, watcher(api, config))
        .default_backoff()
        .map(move |ev| {
            ev.map(|ev| {
                if matches!(ev, watcher::Event::InitDone) {
                    return Seen::Listed(index);
                }
                match touched(ev).map(|o| keys(&o)) {
                    Some(Some(k)) => Seen::Keys(k),
                    Some(None) => Seen::All,
                    None => Seen::Keys(Vec::new()),
                }
            })
        })
}

/// The services a change of one of Linkerd's Services can change the import of: the one its
/// annotations name (a federated Service may name several while it is wrong).
fn keys_of_service(svc: &Service) -> Option<Vec<Key>> {
    let ns = svc.metadata.namespace.clone()?;
    let a = svc.metadata.annotations.clone().unwrap_or_default();
    let get = |k: &str| a.get(k).map(String::as_str).unwrap_or_default();
    let mut names: Vec<&str> = Vec::new();
    let fq: Vec<&str> = get(ANNOTATION_FQ_NAME).split('.').collect();
    // A host's `<host>.<svc>.<ns>.svc.<domain>`, a mirror's `<svc>.<ns>.svc.<domain>`.
    names.extend(fq.iter().take(2));
    names.extend(
        get(ANNOTATION_REMOTE)
            .split(',')
            .filter_map(|m| m.trim().split_once('@'))
            .map(|(s, _)| s),
    );
    names.push(get(ANNOTATION_LOCAL).trim());
    Some(
        names
            .into_iter()
            .filter(|n| !n.is_empty())
            .map(|n| (ns.clone(), n.to_string()))
            .collect(),
    )
}

fn keys_of_import(o: &DynamicObject) -> Option<Vec<Key>> {
    Some(vec![(
        o.metadata.namespace.clone()?,
        o.metadata.name.clone()?,
    )])
}

fn keys_of_slice(s: &EndpointSlice) -> Option<Vec<Key>> {
    let svc = s.metadata.labels.as_ref()?.get(LABEL_SERVICE_NAME)?;
    Some(vec![(s.metadata.namespace.clone()?, svc.clone())])
}

/// A Link added, changed or removed can change every import.
fn keys_of_link(_: &DynamicObject) -> Option<Vec<Key>> {
    None
}

fn is_ours(labels: Option<&BTreeMap<String, String>>, label: &str) -> bool {
    labels.and_then(|l| l.get(label)).map(String::as_str) == Some(MANAGER)
}

/// Whether `have` holds everything `want` says: each key of an object (others may be there
/// too), each element of a list in order.
fn holds(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| h.get(k).is_some_and(|hv| holds(hv, v))),
        (Value::Array(h), Value::Array(w)) => {
            h.len() == w.len() && h.iter().zip(w).all(|(a, b)| holds(a, b))
        }
        (h, w) => h == w,
    }
}

impl Importer {
    async fn run(
        self,
        writers: Writers,
        became_leader: Arc<tokio::sync::Notify>,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        let this = self;
        let (services_w, links_w, imports_w, slices_w) = writers;
        let c = this.client.clone();
        let mut events = futures::stream::select_all([
            seen(
                services_w,
                Api::all(c.clone()),
                watcher::Config::default().labels(SELECTOR),
                0,
                keys_of_service,
            )
            .boxed(),
            seen(
                links_w,
                Api::all_with(c.clone(), &this.link),
                watcher::Config::default(),
                1,
                keys_of_link,
            )
            .boxed(),
            seen(
                imports_w,
                Api::all_with(c.clone(), &this.si),
                watcher::Config::default(),
                2,
                keys_of_import,
            )
            .boxed(),
            seen(
                slices_w,
                Api::all(c.clone()),
                watcher::Config::default().labels(LABEL_SERVICE_NAME),
                3,
                keys_of_slice,
            )
            .boxed(),
        ]);
        let mut changes = this.clusters.subscribe();
        let mut listed = [false; 4];
        let mut dirty: BTreeSet<Key> = BTreeSet::new();
        let mut all = false;
        let mut retry: BTreeMap<Key, Instant> = BTreeMap::new();
        let mut resync = tokio::time::interval(this.settings.resync);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next_retry = retry.values().min().copied();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                ev = events.next() => match ev {
                    Some(Ok(Seen::Keys(k))) => dirty.extend(k),
                    Some(Ok(Seen::All)) => all = true,
                    Some(Ok(Seen::Listed(i))) => {
                        listed[i] = true;
                        all = true;
                    }
                    Some(Err(e)) => warn!(error = %e, "import half: watching"),
                    None => return,
                },
                change = changes.recv() => match change {
                    Some(super::clusters::Changed::Keys(keys)) => dirty.extend(keys),
                    Some(super::clusters::Changed::All) => all = true,
                    None => return,
                },
                _ = resync.tick() => all = true,
                _ = became_leader.notified() => all = true,
                _ = sleep_until(next_retry) => {
                    let now = Instant::now();
                    retry.retain(|k, at| {
                        let due = *at <= now;
                        if due {
                            dirty.insert(k.clone());
                        }
                        !due
                    });
                }
            }
            if listed.contains(&false) {
                continue;
            }
            if !this.clusters.settled() {
                // Judged now, an import would leave out exports that exist.
                this.metrics.waiting(
                    "import",
                    Some("the linked clusters' exports have not all been listed yet".into()),
                );
                continue;
            }
            this.metrics.waiting("import", None);
            if (dirty.is_empty() && !all) || !this.leading.now() {
                continue;
            }
            let judged = this.judge().await;
            if std::mem::take(&mut all) {
                dirty.extend(judged.imports.keys().cloned());
                dirty.extend(this.our_imports());
                dirty.extend(this.our_slices().into_keys());
            }
            let keys = std::mem::take(&mut dirty);
            for key in &keys {
                retry.remove(key);
            }
            let slices = this.our_slices();
            let mut results = futures::stream::iter(keys)
                .map(|key| {
                    let (judged, slices) = (&judged, &slices);
                    let this = &this;
                    async move {
                        let mine = slices.get(&key).map(Vec::as_slice).unwrap_or_default();
                        let result = this.reconcile(&key, judged.imports.get(&key), mine).await;
                        (key, result)
                    }
                })
                .buffer_unordered(CONCURRENT);
            while let Some((key, result)) = results.next().await {
                this.metrics.reconciled("import", result.is_ok());
                if let Err(e) = result {
                    warn!(namespace = %key.0, name = %key.1, error = %said(&e), "import not brought up to date; trying again in {RETRY:?}");
                    retry.insert(key, Instant::now() + RETRY);
                }
            }
            drop(results);
            this.count(&judged);
        }
    }

    /// What the Services and Links in the stores give; each problem said once.
    async fn judge(&self) -> Judged {
        let links: BTreeSet<String> = self
            .links
            .state()
            .iter()
            .filter_map(|l| {
                let target = l
                    .data
                    .pointer("/spec/targetClusterName")
                    .and_then(Value::as_str);
                target
                    .map(str::to_string)
                    .or_else(|| l.metadata.name.clone())
            })
            .collect();
        let services = self.services.state();
        let mut naming = self.settings.naming.clone();
        naming.own = self.clusters.own_id();
        let mut unreadable = Vec::new();
        let exports = self.clusters.exports(&mut unreadable);
        let mut judged = import::judge(&services, &links, &naming, &exports);
        for ((ns, name), message) in unreadable {
            judged.problems.push(import::Problem {
                namespace: ns,
                object: name,
                reason: import::NOT_IMPORTED,
                message,
            });
        }
        for p in &judged.problems {
            let what = format!("problem {}/{}: {}", p.namespace, p.object, p.message);
            if !self.first_time(&what) {
                continue;
            }
            warn!(namespace = %p.namespace, service = %p.object, reason = p.reason, "{}", p.message);
            // On one of Linkerd's Services, or on this cluster's exported Service.
            let svc = self
                .services
                .get(&ObjectRef::new(&p.object).within(&p.namespace))
                .or_else(|| self.clusters.own(&(p.namespace.clone(), p.object.clone())));
            if let Some(svc) = svc {
                let reference = kube::Resource::object_ref(&*svc, &());
                self.event(&reference, p.reason, &p.message).await;
            }
        }
        judged
    }

    /// Whether `what` is said for the first time (and from now on, said).
    fn first_time(&self, what: &str) -> bool {
        self.said
            .lock()
            .expect("not poisoned")
            .insert(what.to_string())
    }

    async fn event(&self, reference: &ObjectReference, reason: &str, note: &str) {
        let warning = EventType::Warning;
        super::event(&self.recorder, reference, warning, reason, note, "Import").await;
    }

    /// The ServiceImports the bridge created.
    fn our_imports(&self) -> Vec<Key> {
        self.imports
            .state()
            .iter()
            .filter(|o| is_ours(o.metadata.labels.as_ref(), LABEL_MANAGER))
            .filter_map(|o| Some((o.metadata.namespace.clone()?, o.metadata.name.clone()?)))
            .collect()
    }

    /// The EndpointSlices the bridge created, by the service they belong to.
    fn our_slices(&self) -> BTreeMap<Key, Vec<Arc<EndpointSlice>>> {
        let mut out: BTreeMap<Key, Vec<Arc<EndpointSlice>>> = BTreeMap::new();
        for s in self.slices.state() {
            if is_ours(s.metadata.labels.as_ref(), LABEL_SLICE_MANAGER)
                && let Some(k) = keys_of_slice(&s).and_then(|k| k.into_iter().next())
            {
                out.entry(k).or_default().push(s);
            }
        }
        out
    }

    /// Brings service `key` to `want`: its ServiceImport and slices written, or taken away.
    async fn reconcile(
        &self,
        key: &Key,
        want: Option<&Import>,
        mine: &[Arc<EndpointSlice>],
    ) -> Result<(), kube::Error> {
        let (ns, name) = (key.0.as_str(), key.1.as_str());
        let existing = self
            .imports
            .get(&ObjectRef::new_with(name, self.si.clone()).within(ns));
        let ours = existing
            .as_ref()
            .is_none_or(|o| is_ours(o.metadata.labels.as_ref(), LABEL_MANAGER));
        let si_api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &self.si);
        let slice_api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), ns);
        let Some(want) = want else {
            for s in mine {
                let slice = s.metadata.name.clone().unwrap_or_default();
                gone(slice_api.delete(&slice, &DeleteParams::default()).await)?;
            }
            if let Some(o) = existing.filter(|_| ours) {
                gone(si_api.delete(name, &DeleteParams::default()).await)?;
                info!(
                    namespace = ns,
                    name, "ServiceImport deleted: no cluster exports the service now"
                );
                drop(o);
            }
            return Ok(());
        };
        if !ours {
            let o = existing.expect("not ours: it exists");
            self.not_taken_over("ServiceImport", &kube::Resource::object_ref(&*o, &self.si))
                .await;
            return Ok(());
        }
        // The ServiceImport: created if it is not there (an existing one is someone else's),
        // then its spec, labels and annotations and its status written when they differ.
        let mut object = json!({
            "apiVersion": self.si.api_version,
            "kind": "ServiceImport",
            "metadata": want.metadata(),
            "spec": want.spec(),
        });
        object["metadata"]["name"] = name.into();
        object["metadata"]["namespace"] = ns.into();
        let mut have = existing.map(|o| serde_json::to_value(&*o).unwrap_or_default());
        if have.is_none() {
            let new: DynamicObject = serde_json::from_value(object.clone()).expect("an object");
            let pp = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PostParams::default()
            };
            match si_api.create(&pp, &new).await {
                Ok(o) => {
                    info!(namespace = ns, name, "ServiceImport created");
                    have = Some(serde_json::to_value(o).unwrap_or_default());
                }
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    // Created since the store saw it: ours if it says so.
                    let o = si_api.get(name).await?;
                    if !is_ours(o.metadata.labels.as_ref(), LABEL_MANAGER) {
                        self.not_taken_over(
                            "ServiceImport",
                            &kube::Resource::object_ref(&o, &self.si),
                        )
                        .await;
                        return Ok(());
                    }
                    have = Some(serde_json::to_value(o).unwrap_or_default());
                }
                Err(e) => return Err(e),
            }
        }
        let have = have.unwrap_or_default();
        let apply = PatchParams::apply(FIELD_MANAGER).force();
        // Labels and annotations the bridge wrote before (its field manager holds them) and
        // wants no more: exported no longer.
        let stale = |what: &str| -> Vec<String> {
            owned_keys(&have, what)
                .into_iter()
                .filter(|k| object["metadata"][what].get(k).is_none())
                .collect()
        };
        let (stale_labels, stale_annotations) = (stale("labels"), stale("annotations"));
        if !holds(&have, &object)
            || !same_spec(&have["spec"], &object["spec"])
            || !stale_labels.is_empty()
            || !stale_annotations.is_empty()
        {
            // Replaced whole, at the version read: a field the bridge no longer wants (`ips`
            // once the federated Service is gone) goes too, and a change made since the read
            // fails with a conflict and is tried again. Labels and annotations others put on
            // stay.
            let mut new = have.clone();
            new["spec"] = object["spec"].clone();
            for (what, stale) in [
                ("labels", &stale_labels),
                ("annotations", &stale_annotations),
            ] {
                if let Some(m) = new["metadata"][what].as_object_mut() {
                    stale.iter().for_each(|k| drop(m.remove(k)));
                }
                for (k, v) in object["metadata"][what].as_object().into_iter().flatten() {
                    new["metadata"][what][k] = v.clone();
                }
            }
            if let Some(m) = new["metadata"].as_object_mut() {
                m.remove("managedFields");
            }
            let new: DynamicObject = serde_json::from_value(new).expect("an object");
            let pp = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PostParams::default()
            };
            si_api.replace(name, &pp, &new).await?;
            let changed = difference(&have, &object)
                .unwrap_or_else(|| "a field the bridge no longer sets".into());
            info!(namespace = ns, name, changed, "ServiceImport updated");
        }
        let status = want.status();
        if !holds(&have["status"], &status)
            || have["status"]["clusters"].as_array().map(Vec::len)
                != status["clusters"].as_array().map(Vec::len)
        {
            let patch = json!({
                "apiVersion": self.si.api_version,
                "kind": "ServiceImport",
                "metadata": {"name": name, "namespace": ns},
                "status": status,
            });
            si_api
                .patch_status(name, &apply, &Patch::Apply(&patch))
                .await?;
        }
        // The slices: each written unless someone else's has its name; the bridge's others
        // taken away.
        let wanted = want.slice_objects();
        for (slice, object) in &wanted {
            let have = self.slices.get(&ObjectRef::new(slice).within(ns));
            match have {
                Some(h) if !is_ours(h.metadata.labels.as_ref(), LABEL_SLICE_MANAGER) => {
                    self.not_taken_over("EndpointSlice", &kube::Resource::object_ref(&*h, &()))
                        .await;
                }
                Some(h) if holds(&serde_json::to_value(&*h).unwrap_or_default(), object) => {}
                Some(_) => {
                    slice_api
                        .patch(slice, &apply, &Patch::Apply(object))
                        .await?;
                }
                None => {
                    let new: EndpointSlice =
                        serde_json::from_value(object.clone()).expect("a slice");
                    let pp = PostParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..PostParams::default()
                    };
                    match slice_api.create(&pp, &new).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 409 => {
                            let h = slice_api.get(slice).await?;
                            if is_ours(h.metadata.labels.as_ref(), LABEL_SLICE_MANAGER) {
                                slice_api
                                    .patch(slice, &apply, &Patch::Apply(object))
                                    .await?;
                            } else {
                                self.not_taken_over(
                                    "EndpointSlice",
                                    &kube::Resource::object_ref(&h, &()),
                                )
                                .await;
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        for s in mine {
            let slice = s.metadata.name.clone().unwrap_or_default();
            if !wanted.contains_key(&slice) {
                gone(slice_api.delete(&slice, &DeleteParams::default()).await)?;
            }
        }
        Ok(())
    }

    /// Says once, in the log and an Event on it, that `o` is someone else's and stays so.
    async fn not_taken_over(&self, kind: &str, o: &ObjectReference) {
        let (ns, name) = (
            o.namespace.clone().unwrap_or_default(),
            o.name.clone().unwrap_or_default(),
        );
        if !self.first_time(&format!("foreign {kind} {ns}/{name}")) {
            return;
        }
        let label = if kind == "EndpointSlice" {
            LABEL_SLICE_MANAGER
        } else {
            LABEL_MANAGER
        };
        let note = format!(
            "{kind} {ns}/{name} was not created by the linkerd-bridge (no label {label}={MANAGER}): it is left as it is, and the service's import from Linkerd is not written"
        );
        warn!("{note}");
        self.event(o, "NotTakenOver", &note).await;
    }

    /// The gauges: what the bridge wrote, what it left to others, what it could not use.
    fn count(&self, judged: &Judged) {
        let imports = self.imports.state();
        let slices = self.slices.state();
        let si_mine = imports
            .iter()
            .filter(|o| is_ours(o.metadata.labels.as_ref(), LABEL_MANAGER))
            .count();
        let sl_mine = slices
            .iter()
            .filter(|s| is_ours(s.metadata.labels.as_ref(), LABEL_SLICE_MANAGER))
            .count();
        let si_foreign = judged
            .imports
            .keys()
            .filter(|(ns, name)| {
                self.imports
                    .get(&ObjectRef::new_with(name, self.si.clone()).within(ns))
                    .is_some_and(|o| !is_ours(o.metadata.labels.as_ref(), LABEL_MANAGER))
            })
            .count();
        let sl_foreign = judged
            .imports
            .values()
            .flat_map(|i| {
                i.slice_objects()
                    .into_keys()
                    .map(move |n| (i.namespace.clone(), n))
            })
            .filter(|(ns, n)| {
                self.slices
                    .get(&ObjectRef::new(n).within(ns))
                    .is_some_and(|s| !is_ours(s.metadata.labels.as_ref(), LABEL_SLICE_MANAGER))
            })
            .count();
        let unusable: BTreeSet<(&str, &str)> = judged
            .problems
            .iter()
            .map(|p| (p.namespace.as_str(), p.object.as_str()))
            .collect();
        self.metrics
            .imports([si_mine, sl_mine], [si_foreign, sl_foreign], unusable.len());
    }
}

/// Where `have` first fails to hold `want` (see [`holds`]), as a JSON pointer.
fn difference(have: &Value, want: &Value) -> Option<String> {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w.iter().find_map(|(k, v)| match h.get(k) {
            None => Some(format!("/{k} (missing)")),
            Some(hv) => difference(hv, v).map(|d| format!("/{k}{d}")),
        }),
        (Value::Array(h), Value::Array(w)) if h.len() == w.len() => h
            .iter()
            .zip(w)
            .enumerate()
            .find_map(|(i, (a, b))| difference(a, b).map(|d| format!("/{i}{d}"))),
        (h, w) if h == w => None,
        (h, w) => Some(format!(" ({h} is now {w})")),
    }
}

/// The keys of `metadata.<what>` (labels or annotations) of `object` that the bridge's field
/// manager holds: those it wrote and nobody changed since.
fn owned_keys(object: &Value, what: &str) -> Vec<String> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["manager"] == FIELD_MANAGER && m["subresource"].is_null())
        .filter_map(|m| m["fieldsV1"]["f:metadata"][format!("f:{what}")].as_object())
        .flat_map(|fields| fields.keys())
        .filter_map(|k| k.strip_prefix("f:").map(str::to_string))
        .collect()
}

/// A spec that lost a field the bridge no longer wants (`ips` after the federated Service
/// went) differs too: the applied spec's keys are all the bridge's fields there.
fn same_spec(have: &Value, want: &Value) -> bool {
    match (have.as_object(), want.as_object()) {
        (Some(h), Some(w)) => h.keys().all(|k| w.contains_key(k)),
        _ => false,
    }
}

/// A delete of something already gone is done.
fn gone<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
