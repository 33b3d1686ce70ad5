//! The export half's runtime: watches ServiceExports and Services, and brings each export to
//! what [`export::judge`] says: Linkerd's label on its Service (server-side applied under the
//! bridge's field manager, taken back when the export goes) and the export's conditions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use kube::runtime::events::{EventType, Recorder};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::clusters::{Changed, Clusters};
use super::export::{self, Condition, Exported, Label, Mode, Peer, Port, Seen, Verdict};
use super::metrics::BridgeMetrics;
use super::{CARRIED, CONCURRENT, FIELD_MANAGER, Key, RETRY, lease, said, sleep_until, touched};
use crate::source::linkerd::carried::Carried;
use crate::source::linkerd::shape::{Shape, classify};
use crate::source::linkerd::{
    ANNOTATION_FQ_NAME, ANNOTATION_REMOTE, LABEL_GATEWAY, LABEL_MIRRORED,
};

/// The ServiceExport CRD: mcs-api v0.5.2 stores v1beta1 and still serves v1alpha1.
const SERVICE_EXPORT: super::Crd = super::Crd {
    group: "multicluster.x-k8s.io",
    versions: &["v1beta1", "v1alpha1"],
    kind: "ServiceExport",
    plural: "serviceexports",
    install: "install the CRDs of sigs.k8s.io/mcs-api v0.5.2 (kubectl apply -f deploy/crds/multicluster.x-k8s.io_serviceexports.yaml)",
};

/// Runs the export half until shutdown, once the ServiceExport CRD is served.
pub(super) async fn run(
    shared: super::Shared,
    settings: Settings,
    identity: String,
    became_leader: Arc<tokio::sync::Notify>,
) {
    let Some(resource) = shared.wait_for("export", &SERVICE_EXPORT).await else {
        return;
    };
    shared.metrics.waiting(
        "export",
        Some("the first full list of ServiceExports and Services has not come yet".into()),
    );
    info!(version = %resource.version, default_mode = %settings.default_mode, "linkerd-bridge: export half starting");
    let recorder = super::recorder(&shared.client, &identity);
    let changes = shared.clusters.subscribe();
    let (exporter, writers) = Exporter::new(
        shared.client,
        resource,
        settings,
        shared.metrics,
        shared.leading,
        recorder,
        shared.clusters,
    );
    exporter
        .run(writers, changes, became_leader, shared.shutdown)
        .await;
}

/// What the export half is run with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The mode of a ServiceExport without the mode annotation.
    pub default_mode: Mode,
    /// Every export is brought to its verdict this often, changed or not.
    pub resync: std::time::Duration,
}

pub(super) struct Exporter {
    client: kube::Client,
    resource: ApiResource,
    config: Settings,
    exports: Store<DynamicObject>,
    services: Store<Service>,
    metrics: Arc<BridgeMetrics>,
    leading: lease::Leading,
    /// Writes the Events that say what the conditions turned to.
    recorder: Recorder,
    /// The exports of this cluster and the linked ones.
    clusters: Clusters,
    /// What the bridge last applied on each Service (its resourceVersion before, and the
    /// label and carried text): a store that has not seen the write yet is not written again.
    applied: std::sync::Mutex<BTreeMap<Key, (Option<String>, String)>>,
}

impl Exporter {
    pub(super) fn new(
        client: kube::Client,
        resource: ApiResource,
        config: Settings,
        metrics: Arc<BridgeMetrics>,
        leading: lease::Leading,
        recorder: Recorder,
        clusters: Clusters,
    ) -> (Self, Writers) {
        let exports_w = reflector::store::Writer::new(resource.clone());
        let services_w = reflector::store::Writer::default();
        let this = Exporter {
            exports: exports_w.as_reader(),
            services: services_w.as_reader(),
            client,
            resource,
            config,
            metrics,
            leading,
            recorder,
            clusters,
            applied: Default::default(),
        };
        (this, (exports_w, services_w))
    }
}

/// The writers of [`Exporter`]'s stores, fed by its watches.
pub(super) type Writers = (
    reflector::store::Writer<DynamicObject>,
    reflector::store::Writer<Service>,
);

impl Exporter {
    /// Watches and, while this replica leads, brings each export marked to its verdict.
    pub(super) async fn run(
        self,
        writers: Writers,
        mut changes: tokio::sync::mpsc::UnboundedReceiver<Changed>,
        became_leader: Arc<tokio::sync::Notify>,
        shutdown: CancellationToken,
    ) {
        let this = self;
        let (exports_w, services_w) = writers;
        let se_api: Api<DynamicObject> = Api::all_with(this.client.clone(), &this.resource);
        let svc_api: Api<Service> = Api::all(this.client.clone());
        let mut se_events = std::pin::pin!(
            reflector::reflector(exports_w, watcher(se_api, watcher::Config::default()))
                .default_backoff()
        );
        let mut svc_events = std::pin::pin!(
            reflector::reflector(services_w, watcher(svc_api, watcher::Config::default()))
                .default_backoff()
        );
        let (mut exports_listed, mut services_listed) = (false, false);
        let mut dirty: BTreeSet<Key> = BTreeSet::new();
        let mut retry: BTreeMap<Key, Instant> = BTreeMap::new();
        let mut resync = tokio::time::interval(this.config.resync);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next_retry = retry.values().min().copied();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                ev = se_events.next() => match ev {
                    Some(Ok(ev)) => {
                        if matches!(ev, watcher::Event::InitDone) {
                            exports_listed = true;
                            dirty.extend(this.every_key());
                        }
                        if let Some(o) = touched(ev)
                            && let (Some(ns), Some(name)) = (o.metadata.namespace, o.metadata.name)
                        {
                            dirty.insert((ns, name));
                        }
                    }
                    Some(Err(e)) => warn!(error = %e, "watching ServiceExports"),
                    None => return,
                },
                ev = svc_events.next() => match ev {
                    Some(Ok(ev)) => {
                        if matches!(ev, watcher::Event::InitDone) {
                            services_listed = true;
                            dirty.extend(this.every_key());
                        }
                        if let Some(s) = touched(ev) {
                            dirty.extend(keys_of_service(&s));
                        }
                    }
                    Some(Err(e)) => warn!(error = %e, "watching Services"),
                    None => return,
                },
                change = changes.recv() => match change {
                    // A peer's export of a service changed: the export of it here may
                    // conflict now, or no more.
                    Some(Changed::Keys(keys)) => dirty.extend(keys),
                    Some(Changed::All) => dirty.extend(this.every_key()),
                    None => return,
                },
                _ = resync.tick() => dirty.extend(this.every_key()),
                _ = became_leader.notified() => dirty.extend(this.every_key()),
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
            if !(exports_listed && services_listed) {
                continue;
            }
            if !this.clusters.settled() {
                this.metrics.waiting(
                    "export",
                    Some("the linked clusters' exports have not all been listed yet".into()),
                );
                continue;
            }
            this.metrics.waiting("export", None);
            // A replica that does not lead keeps its watches, and its marks, for when it does.
            if dirty.is_empty() || !this.leading.now() {
                continue;
            }
            let keys = std::mem::take(&mut dirty);
            for key in &keys {
                retry.remove(key);
            }
            // Exports are independent: several are brought up to date at once (each is a
            // round trip or two to the API server).
            let mut results = futures::stream::iter(keys)
                .map(|key| async {
                    let result = this.reconcile(&key).await;
                    (key, result)
                })
                .buffer_unordered(CONCURRENT);
            while let Some((key, result)) = results.next().await {
                this.metrics.reconciled("export", result.is_ok());
                if let Err(e) = result {
                    warn!(namespace = %key.0, name = %key.1, error = %said(&e), "export not brought up to date; trying again in {RETRY:?}");
                    retry.insert(key, Instant::now() + RETRY);
                }
            }
            let services = this.services.state();
            let labelled = services
                .iter()
                .filter(|s| !owned_labels(s).is_empty())
                .count();
            this.metrics.managed(this.exports.state().len(), labelled);
        }
    }

    /// Every export, and every Service the bridge has labelled (whose export may be gone).
    fn every_key(&self) -> Vec<Key> {
        let exports = self
            .exports
            .state()
            .into_iter()
            .filter_map(|o| Some((o.metadata.namespace.clone()?, o.metadata.name.clone()?)));
        let labelled = self
            .services
            .state()
            .into_iter()
            .filter(|s| !owned_labels(s).is_empty())
            .filter_map(|s| Some((s.metadata.namespace.clone()?, s.metadata.name.clone()?)));
        exports.chain(labelled).collect()
    }

    /// Brings the export `key` (and its Service's label) to its verdict.
    async fn reconcile(&self, key: &Key) -> Result<(), kube::Error> {
        let (ns, name) = (key.0.as_str(), key.1.as_str());
        let export = self
            .exports
            .get(&ObjectRef::new_with(name, self.resource.clone()).within(ns));
        let service = self.services.get(&ObjectRef::new(name).within(ns));
        let Some(export) = export else {
            self.metrics.conditions(key, &[]);
            // Its last write is forgotten with it, so the map holds only live exports.
            self.applied.lock().expect("not poisoned").remove(key);
            // No export: take back a label the bridge put on.
            if let Some(svc) = service
                && !owned_labels(&svc).is_empty()
            {
                self.label(ns, name, None).await?;
                info!(
                    namespace = ns,
                    name, "export gone: the bridge's label taken off the Service"
                );
            }
            return Ok(());
        };
        // What the Service carries for the import half, read once: compared with the peers'
        // and, when labelled, written as the annotation.
        let own_id = self.clusters.own_id();
        let fields = service
            .as_deref()
            .map(|svc| carried(svc, &export, own_id.clone()));
        let exported = service
            .as_deref()
            .zip(fields.as_ref())
            .map(|(svc, fields)| Exported {
                carried: fields.clone(),
                ..exported(svc)
            });
        let (peers, seen) = self.peers(key);
        let annotation = export
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(export::MODE_ANNOTATION))
            .map(String::as_str);
        let mut verdict = export::judge(
            ns,
            name,
            annotation,
            self.config.default_mode,
            exported.as_ref(),
            &peers,
            &seen,
        );
        if own_id.is_none() {
            verdict.no_cluster_id();
        }
        let owned = service.as_deref().map(owned_labels).unwrap_or_default();
        match verdict.label {
            Label::Set(mode) => {
                let (k, v) = mode.label();
                let svc = service
                    .as_deref()
                    .expect("a Service is labelled only when it exists");
                let has = svc.metadata.labels.as_ref().and_then(|l| l.get(k));
                let carry = fields.as_ref().expect("read with the Service").text();
                let carries = svc
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(CARRIED));
                let wanted = BTreeSet::from([k.to_string()]);
                let applying = format!("{k}={v} {carry}");
                let stale = self.written(key, svc, &applying);
                if (owned != wanted
                    || has.map(String::as_str) != Some(v)
                    || carries != Some(&carry))
                    && !stale
                {
                    match self.label(ns, name, Some((k, v, &carry))).await {
                        Ok(()) => {
                            self.applied.lock().expect("not poisoned").insert(
                                key.clone(),
                                (svc.metadata.resource_version.clone(), applying),
                            );
                            info!(namespace = ns, name, label = %format!("{k}={v}"), "Service labelled for Linkerd");
                        }
                        Err(kube::Error::Api(s)) if s.code == 409 => verdict.failed(&format!(
                            "the Service's label {k} is held by another field manager with another value, and the bridge does not override it ({}): remove that label, or choose the mode it gives with annotation {}",
                            s.message,
                            export::MODE_ANNOTATION
                        )),
                        Err(e) => return Err(e),
                    }
                }
            }
            Label::Remove if !owned.is_empty() => self.label(ns, name, None).await?,
            Label::Remove | Label::Keep => {}
        }
        self.write_status(&export, &verdict).await?;
        self.metrics.conditions(key, &verdict.conditions);
        Ok(())
    }

    /// Whether the bridge applied `what` on `svc` already and the store has not caught up with
    /// that write: `svc` is still the version it was written over. Writing it again would be a
    /// second write for one change.
    fn written(&self, key: &Key, svc: &Service, what: &str) -> bool {
        let applied = self.applied.lock().expect("not poisoned");
        applied.get(key).is_some_and(|(before, done)| {
            done == what && before.is_some() && *before == svc.metadata.resource_version
        })
    }

    /// The linked clusters' exports of `key` as peers, and which clusters were read; a linked
    /// cluster whose exports cannot be read is seen, where it can be, through the mirror
    /// Linkerd's service mirror wrote of its export here.
    fn peers(&self, key: &Key) -> (Vec<Peer>, Seen) {
        let found = self.clusters.peers(key);
        let mut peers = Vec::new();
        for (link, svc) in &found.exports {
            let link = link.clone();
            let via = format!("Service {}/{} in cluster {link}", key.0, key.1);
            match super::clusters::cluster_export(Some(&link), svc) {
                Ok(e) => peers.push(Peer {
                    cluster: e.carried.cluster.clone().unwrap_or(link),
                    via,
                    headless: e.headless,
                    ports: e
                        .carried
                        .ports
                        .iter()
                        .map(|p| Port {
                            name: p.name.clone(),
                            protocol: p.protocol.clone(),
                            port: p.port,
                        })
                        .collect(),
                    // A Service labelled for Linkerd by hand carries nothing to compare.
                    carried: e.bridge.then_some(e.carried),
                }),
                Err(why) => {
                    warn!(namespace = %key.0, name = %key.1, cluster = %link, "{via}: {why}");
                }
            }
        }
        let read: BTreeSet<&str> = found.read.iter().map(String::as_str).collect();
        for p in mirror_peers(&key.0, &key.1, &self.services.state()) {
            if !read.contains(p.via_link.as_str()) {
                peers.push(p.peer);
            }
        }
        let seen = Seen {
            read: found.read,
            unread: found.unread,
        };
        (peers, seen)
    }

    /// Applies the bridge's labels on Service `ns/name`: `label`, or none (taking back what it
    /// applied; a label someone else also set stays).
    async fn label(
        &self,
        ns: &str,
        name: &str,
        label: Option<(&str, &str, &str)>,
    ) -> Result<(), kube::Error> {
        let mut metadata = json!({"name": name, "namespace": ns});
        if let Some((k, v, carry)) = label {
            metadata["labels"] = json!({ k: v });
            metadata["annotations"] = json!({ CARRIED: carry });
        }
        let patch = json!({"apiVersion": "v1", "kind": "Service", "metadata": metadata});
        Api::<Service>::namespaced(self.client.clone(), ns)
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Apply(&patch),
            )
            .await
            .map(drop)
    }

    /// Writes the verdict's conditions on the export, when they differ from its own, and says
    /// in Events what changed ([`export::events`]).
    async fn write_status(
        &self,
        export: &DynamicObject,
        verdict: &Verdict,
    ) -> Result<(), kube::Error> {
        let generation = export.metadata.generation;
        let current = export
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let now = k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .map_or_else(|_| String::new(), |t| t.to_string());
        let (conditions, changed) = conditions(&verdict.conditions, &current, generation, &now);
        if !changed {
            debug!(name = ?export.metadata.name, "conditions unchanged");
            return Ok(());
        }
        let (ns, name) = (
            export.metadata.namespace.as_deref().unwrap_or_default(),
            export.metadata.name.as_deref().unwrap_or_default(),
        );
        let patch = json!({
            "apiVersion": self.resource.api_version,
            "kind": "ServiceExport",
            "metadata": {"name": name, "namespace": ns},
            "status": {"conditions": conditions},
        });
        Api::<DynamicObject>::namespaced_with(self.client.clone(), ns, &self.resource)
            .patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await?;
        // Written: what changed is said in Events too.
        let reference = kube::Resource::object_ref(export, &self.resource);
        for e in export::events(&verdict.conditions, &current) {
            let type_ = if e.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            super::event(
                &self.recorder,
                &reference,
                type_,
                &e.reason,
                &e.note,
                "Export",
            )
            .await;
        }
        Ok(())
    }
}

/// The conditions to write: each of `wanted`, with the `lastTransitionTime` of the current
/// condition of its type when its status did not change (else `now`), and whether any differs
/// from `current` (a condition the bridge no longer sets counts too).
fn conditions(
    wanted: &[Condition],
    current: &[Value],
    generation: Option<i64>,
    now: &str,
) -> (Vec<Value>, bool) {
    let find = |kind: &str| current.iter().find(|c| c["type"] == kind);
    let mut changed = current.len() != wanted.len();
    let out = wanted
        .iter()
        .map(|w| {
            let old = find(w.kind);
            let same_status = old.is_some_and(|o| o["status"] == w.status.word());
            let time = match old {
                Some(o) if same_status => o["lastTransitionTime"].clone(),
                _ => Value::from(now),
            };
            let c = json!({
                "type": w.kind,
                "status": w.status.word(),
                "reason": w.reason,
                "message": w.message,
                "lastTransitionTime": time,
                "observedGeneration": generation,
            });
            if old != Some(&c) {
                changed = true;
            }
            c
        })
        .collect();
    (out, changed)
}

/// The labels of `svc` that the bridge's field manager holds.
fn owned_labels(svc: &Service) -> BTreeSet<String> {
    let entries = svc.metadata.managed_fields.iter().flatten();
    entries
        .filter(|m| m.manager.as_deref() == Some(FIELD_MANAGER) && m.subresource.is_none())
        .filter_map(|m| {
            m.fields_v1
                .as_ref()?
                .0
                .pointer("/f:metadata/f:labels")?
                .as_object()
                .cloned()
        })
        .flat_map(|labels| {
            labels
                .into_iter()
                .filter_map(|(k, _)| k.strip_prefix("f:").map(str::to_string))
        })
        .collect()
}

/// What `svc` exported by `export` carries for other clusters (see [`Carried`]): the exporting
/// cluster's id `cluster`, the export's creation time (the MCS API resolves conflicts by the
/// oldest export), the Service's headlessness, `sessionAffinity`, `sessionAffinityConfig`,
/// `internalTrafficPolicy`, `trafficDistribution`, `ipFamilies` and ports with their
/// `appProtocol`, and the export's `exportedLabels` and `exportedAnnotations`.
fn carried(svc: &Service, export: &DynamicObject, cluster: Option<String>) -> Carried {
    let strings = |key: &str| -> BTreeMap<String, String> {
        // The CRD's schema makes these maps of strings; anything else is not carried.
        match export.data["spec"][key].as_object() {
            Some(map) if map.values().all(Value::is_string) => map
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect(),
            _ => BTreeMap::new(),
        }
    };
    Carried {
        cluster,
        export_created: export
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        exported_labels: strings("exportedLabels"),
        exported_annotations: strings("exportedAnnotations"),
        ..Carried::of_service(&svc.spec.clone().unwrap_or_default())
    }
}

/// What the export half reads of a Service (without what its export carries).
fn exported(svc: &Service) -> Exported {
    let spec = svc.spec.clone().unwrap_or_default();
    Exported {
        kind: spec.type_.unwrap_or_else(|| "ClusterIP".into()),
        headless: spec.cluster_ip.as_deref() == Some("None"),
        ports: ports(&spec.ports.unwrap_or_default()),
        carried: Carried::default(),
    }
}

fn ports(ports: &[k8s_openapi::api::core::v1::ServicePort]) -> BTreeSet<Port> {
    ports
        .iter()
        .map(|p| Port {
            name: p.name.clone().unwrap_or_default(),
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            port: p.port,
        })
        .collect()
}

/// Whether `svc` is a Service Linkerd's service mirror wrote (not a gateway's mirror).
fn linkerd_wrote(svc: &Service) -> bool {
    let labels = svc.metadata.labels.as_ref();
    labels
        .and_then(|l| l.get(LABEL_MIRRORED))
        .map(String::as_str)
        == Some("true")
        && !labels.is_some_and(|l| l.contains_key(LABEL_GATEWAY))
}

/// A peer seen through a mirror, with the Link it came through.
struct MirrorPeer {
    via_link: String,
    peer: Peer,
}

/// The other clusters' exports of `ns/name` that Linkerd's service mirror shows here as mirrors
/// (`mirror.linkerd.io/cluster-name`, `remote-svc-fq-name` of `<name>.<ns>.svc.…`), for the
/// clusters whose exports cannot be read through their Links' credentials. A federated Service
/// shows no peer: Linkerd writes it from its local member, so it would compare the export with
/// itself.
fn mirror_peers(ns: &str, name: &str, services: &[Arc<Service>]) -> Vec<MirrorPeer> {
    let mut out = Vec::new();
    for s in services
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(ns))
    {
        let labels = s.metadata.labels.clone().unwrap_or_default();
        let annotations = s.metadata.annotations.clone().unwrap_or_default();
        // The reading the import half and `--source linkerd` make.
        let Ok(Shape::Mirror { link, service }) = classify(ns, &labels, &annotations) else {
            continue;
        };
        if service != name {
            continue;
        }
        let e = exported(s);
        // What the peer's export half carried (Linkerd copies every annotation onto the
        // mirror); none when the peer was labelled by hand.
        let carried = annotations
            .get(CARRIED)
            .and_then(|text| Carried::parse(text).ok());
        out.push(MirrorPeer {
            peer: Peer {
                cluster: carried
                    .as_ref()
                    .and_then(|c| c.cluster.clone())
                    .unwrap_or_else(|| link.clone()),
                via: format!("mirror {}", s.metadata.name.clone().unwrap_or_default()),
                headless: e.headless,
                ports: e.ports,
                carried,
            },
            via_link: link,
        });
    }
    out
}

/// The exports a change of `svc` can affect: its own, and the one each of Linkerd's mirrors or
/// federated Services stands for.
fn keys_of_service(svc: &Service) -> Vec<Key> {
    let (Some(ns), Some(name)) = (&svc.metadata.namespace, &svc.metadata.name) else {
        return Vec::new();
    };
    let mut keys = vec![(ns.clone(), name.clone())];
    if linkerd_wrote(svc) {
        let annotations = svc.metadata.annotations.as_ref();
        let get = |k: &str| {
            annotations
                .and_then(|a| a.get(k))
                .map(String::as_str)
                .unwrap_or_default()
        };
        if let Some((svc_name, _)) = get(ANNOTATION_FQ_NAME).split_once('.') {
            keys.push((ns.clone(), svc_name.to_string()));
        }
        for m in get(ANNOTATION_REMOTE).split(',') {
            if let Some((svc_name, _)) = m.trim().split_once('@') {
                keys.push((ns.clone(), svc_name.to_string()));
            }
        }
    }
    keys
}
