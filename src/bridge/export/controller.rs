//! The export half's controller: watches ServiceExports and Services, and brings each export
//! to what [`super::judge`](fn@super::judge) says: Linkerd's label on its Service (server-side applied under
//! the bridge's field manager, taken back when the export goes) and the export's conditions.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use kube::runtime::watcher;
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use super::judge::{self as export, ClusterExport, Compared, Exported, Label, Verdict};
use super::judge::{conditions, owned_labels};
use super::read::{carried, exported, keys_of_service, linkerd_wrote, mirror_peers};
use crate::bridge::clusters::Clusters;
use crate::bridge::metrics::BridgeMetrics;
use crate::bridge::model::{
    CARRIED, FIELD_MANAGER, LABELLED, LINKERDS, MANAGER, Port, SERVICE_EXPORT,
};
use crate::bridge::runtime::events::{Recorder, Type as EventType};
use crate::bridge::runtime::feed::Feed;
use crate::bridge::runtime::index::{Index, Written};
use crate::bridge::runtime::runner::{Marks, Reconciler, Timing};
use crate::bridge::runtime::store::{self, Codec, Store};
use crate::bridge::runtime::{self, Key};
use crate::bridge::shared::Shared;

/// Runs the export half until shutdown, once the ServiceExport CRD is served: its watches, and
/// the runner that brings each export marked to its verdict while this replica leads.
pub(in crate::bridge) async fn run(shared: Shared, settings: Config, identity: String) {
    let Some(resource) = shared.wait_for("export", &SERVICE_EXPORT).await else {
        return;
    };
    shared.metrics.waiting("export", Some(NOT_LISTED.into()));
    info!(version = %resource.version, default_mode = %settings.default_mode.word(), "linkerd-bridge: export half starting");
    let exports = Feed::new(store::Writer::new(store::unmarked, Codec::exports()));
    let api = Api::all_with(shared.client.clone(), &resource);
    let what = "ServiceExports";
    let run = exports.clone().run(
        api,
        watcher::Config::default(),
        what,
        shared.shutdown.clone(),
    );
    tokio::spawn(run);
    let exporter = Exporter {
        exports: exports.store().clone(),
        // The Services the bridge labelled are marked: every key, and the gauge.
        services: shared.services.store().clone(),
        client: shared.client.clone(),
        // The controller the bridge's Events are reported by, this replica as its instance.
        recorder: Recorder::new(shared.client.clone(), MANAGER, &identity),
        resource,
        config: settings,
        metrics: shared.metrics.clone(),
        clusters: shared.clusters.clone(),
        written_services: Written::new(shared.services.store()),
        written_exports: Written::new(exports.store()),
        linkerds: Default::default(),
    };
    let heard = vec![exports.subscribe(), shared.services.subscribe()];
    let half = ("export", &exporter);
    let on_key = |feed, key, marked, marks: &Marks<Key>| exporter.heard(feed, key, marked, marks);
    let resync = exporter.config.resync;
    shared
        .drive(half, resync, (heard, NOT_LISTED), on_key)
        .await;
}

const NOT_LISTED: &str = "the first full list of ServiceExports and Services has not come yet";

/// What the export half is run with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The mode of a ServiceExport without the mode annotation.
    pub default_mode: export::Mode,
    /// Every export is brought to its verdict this often, changed or not.
    pub resync: Duration,
}

struct Exporter {
    client: kube::Client,
    resource: ApiResource,
    config: Config,
    exports: Store<DynamicObject>,
    services: Store<Service>,
    metrics: Arc<BridgeMetrics>,
    /// Writes the Events that say what the conditions turned to.
    recorder: Recorder,
    /// The exports of this cluster and the linked ones.
    clusters: Clusters,
    /// The Services the bridge labelled and the exports whose conditions it wrote, as written,
    /// while the stores may not show them yet: read instead, so that one change is written
    /// once.
    written_services: Written<Service>,
    written_exports: Written<DynamicObject>,
    /// Linkerd's Services (mirrors, federated) by the service each stands for: the peers one
    /// export is compared with are read from these, not from every Service.
    linkerds: std::sync::Mutex<Index>,
}

impl Reconciler for Exporter {
    type Key = Key;
    type Error = kube::Error;

    /// Every export, and every Service the bridge has labelled (whose export may be gone).
    fn every_key(&self) -> Vec<Key> {
        let mut keys = self.exports.keys();
        keys.extend(self.services.marked(LABELLED));
        keys
    }

    /// Brings the export `key` (and its Service's label) to its verdict.
    async fn reconcile(&self, key: Key) -> Result<(), kube::Error> {
        let key = &key;
        let (ns, name) = (key.0.as_str(), key.1.as_str());
        let export = self
            .written_exports
            .read(ns, name, self.exports.get(ns, name));
        let service = self
            .written_services
            .read(ns, name, self.services.get(ns, name));
        let Some(export) = export else {
            self.metrics.conditions(key, &[]);
            self.written_exports.forget(ns, name);
            // No export: take back a label the bridge put on.
            if let Some(svc) = service
                && !owned_labels(&svc).is_empty()
            {
                self.label(&svc, None).await?;
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
        let annotation = export.annotations().get(export::MODE_ANNOTATION);
        let mut verdict = export::judge(
            ns,
            name,
            annotation.map(String::as_str),
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
                let has = svc.labels().get(k);
                let carry = fields.as_ref().expect("read with the Service").text();
                let carries = svc.annotations().get(CARRIED);
                let wanted = BTreeSet::from([k.to_string()]);
                if owned != wanted || has.map(String::as_str) != Some(v) || carries != Some(&carry)
                {
                    match self.label(svc, Some((k, v, &carry))).await {
                        Ok(()) => {
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
            Label::Remove if !owned.is_empty() => {
                let svc = service.as_deref().expect("labelled: it exists");
                self.label(svc, None).await?;
            }
            Label::Remove | Label::Keep => {}
        }
        self.write_status(&export, &verdict).await?;
        self.metrics.conditions(key, &verdict.conditions);
        Ok(())
    }

    fn ran(
        &self,
        key: &Key,
        result: &Result<(), kube::Error>,
        wait: Option<Duration>,
        timing: Timing,
    ) {
        crate::bridge::shared::ran(&self.metrics, "export", key, result, (wait, timing));
    }

    fn idle(&self) {
        let labelled = self.services.count_marked(LABELLED);
        self.metrics.managed(self.exports.len(), labelled);
    }
}

impl Exporter {
    /// Marks what a change of export (`feed` 0) or Service (1) `key` can affect, keeping the
    /// index of Linkerd's Services (`marked`: its marks before and now).
    fn heard(&self, feed: usize, key: Key, marked: u8, marks: &Marks<Key>) {
        if feed == 0 {
            self.written_exports.heard(&key, &self.exports);
            return marks.keys([key]);
        }
        self.written_services.heard(&key, &self.services);
        // One of Linkerd's Services: what it stands for now and stood for before changes too.
        if marked & LINKERDS != 0 {
            let mut linkerds = self.linkerds.lock().expect("not poisoned");
            let svc = self
                .services
                .get(&key.0, &key.1)
                .filter(|s| linkerd_wrote(s));
            marks.keys(match svc {
                Some(s) => {
                    let named = keys_of_service(&s);
                    let before = linkerds.set(&key.0, &key.1, named.clone());
                    named.into_iter().chain(before).collect()
                }
                None => linkerds.remove(&key),
            });
        }
        marks.keys([key]);
    }

    /// The linked clusters' exports of `key` as peers, and which clusters were read; a linked
    /// cluster whose exports cannot be read is seen, where it can be, through the mirror
    /// Linkerd's service mirror wrote of its export here.
    fn peers(&self, key: &Key) -> (Vec<ClusterExport>, Compared) {
        let found = self.clusters.peers(key);
        let mut peers = Vec::new();
        for (link, svc) in &found.exports {
            let link = link.clone();
            let via = format!("Service {}/{} in cluster {link}", key.0, key.1);
            match crate::bridge::clusters::cluster_export(Some(&link), svc) {
                // Compared as Linkerd's mirrors copy ports (without `appProtocol`).
                Ok(e) => peers.push(ClusterExport {
                    shown: via,
                    ports: e.ports.iter().map(Port::mirrored).collect(),
                    ..e
                }),
                Err(why) => {
                    warn!(namespace = %key.0, name = %key.1, cluster = %link, "{via}: {why}");
                }
            }
        }
        let read: BTreeSet<&str> = found.read.iter().map(String::as_str).collect();
        let names = self.linkerds.lock().expect("not poisoned").names(key);
        let linkerds: Vec<Arc<Service>> = names
            .iter()
            .filter_map(|n| self.services.get(&key.0, n))
            .collect();
        for peer in mirror_peers(&key.0, &key.1, &linkerds) {
            if !peer
                .link
                .as_ref()
                .is_some_and(|l| read.contains(l.as_str()))
            {
                peers.push(peer);
            }
        }
        let seen = Compared {
            read: found.read,
            unread: found.unread,
        };
        (peers, seen)
    }

    /// Applies the bridge's labels on Service `svc`: `label`, or none (taking back what it
    /// applied; a label someone else also set stays).
    async fn label(
        &self,
        svc: &Service,
        label: Option<(&str, &str, &str)>,
    ) -> Result<(), kube::Error> {
        let (ns, name) = &runtime::key(&svc.metadata);
        let mut metadata = json!({"name": name, "namespace": ns});
        if let Some((k, v, carry)) = label {
            metadata["labels"] = json!({ k: v });
            metadata["annotations"] = json!({ CARRIED: carry });
        }
        let patch = json!({"apiVersion": "v1", "kind": "Service", "metadata": metadata});
        let written = Api::<Service>::namespaced(self.client.clone(), ns)
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Apply(&patch),
            )
            .await?;
        let over = svc.metadata.resource_version.clone();
        self.written_services.wrote(over, written);
        Ok(())
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
        let (ns, name) = &runtime::key(&export.metadata);
        let patch = json!({
            "apiVersion": self.resource.api_version,
            "kind": "ServiceExport",
            "metadata": {"name": name, "namespace": ns},
            "status": {"conditions": conditions},
        });
        let written =
            Api::<DynamicObject>::namespaced_with(self.client.clone(), ns, &self.resource)
                .patch_status(
                    name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&patch),
                )
                .await?;
        let over = export.metadata.resource_version.clone();
        self.written_exports.wrote(over, written);
        // Written: what changed is said in Events too.
        let reference = kube::Resource::object_ref(export, &self.resource);
        for e in export::events(&verdict.conditions, &current) {
            let type_ = if e.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            crate::bridge::shared::event(
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
