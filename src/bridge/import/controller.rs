//! The import half's controller: watches the Services Linkerd's service mirror writes, Links,
//! and the ServiceImports and MCS EndpointSlices in the cluster, and brings each service to what
//! [`super::judge`](fn@super::judge) says of it (with every cluster's exports of it, [`crate::bridge::clusters`]).
//! It writes only objects it created (ServiceImports labelled `app.kubernetes.io/managed-by`,
//! slices labelled `endpointslice.kubernetes.io/managed-by`, both [`MANAGER`]); one someone
//! else created is left as it is, said in the log and an Event, and counted.
//!
//! A service is judged alone: an index from each service to the Linkerd Services and slices
//! that name it keeps the work of one change to the objects of that service.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::index::{
    Index, Indexes, Said, Told, hosts_of, key_of_local_slice, key_of_slice, keys_of_service,
    problem_text,
};
use super::object::{covers, difference, owned_keys, same_spec};
use super::watch::{Seen, names_of, watch_of};
use super::{Host, Import, Naming, Problem};
use crate::bridge::clusters::Changed;
use crate::bridge::metrics::BridgeMetrics;
use crate::bridge::names::{FIELD_MANAGER, LABEL_MANAGER, LABEL_SLICE_MANAGER, MANAGER, is_ours};
use crate::bridge::runtime::events::{Recorder, Type as EventType};
use crate::bridge::runtime::index::Written;
use crate::bridge::runtime::runner::{self, Marks, Reconciler, Timing};
use crate::bridge::runtime::store::{self, Store};
use crate::bridge::runtime::{Key, api_error};
use crate::bridge::{LINK, SERVICE_IMPORT, Shared};
use crate::source::linkerd::SELECTOR;
use crate::source::mcs::LABEL_SERVICE_NAME;

/// What the import half is run with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How clusters are named in `status.clusters` and the slices' `source-cluster`.
    pub naming: Naming,
    /// Every import is brought up to date this often, changed or not.
    pub resync: Duration,
}

/// Runs the import half until shutdown, once the ServiceImport and Link CRDs are served: its
/// watches, and the runner that brings each service marked up to date while this replica leads.
pub(in crate::bridge) async fn run(shared: Shared, settings: Settings, identity: String) {
    let Some(si) = shared.wait_for("import", &SERVICE_IMPORT).await else {
        return;
    };
    let Some(link) = shared.wait_for("import", &LINK).await else {
        return;
    };
    shared.metrics.waiting("import", Some(NOT_LISTED.into()));
    info!(serviceimport = %si.version, link = %link.version, "linkerd-bridge: import half starting");
    let services_w = store::Writer::new(store::unmarked, &store::SERVICE).shared();
    let links_w = store::Writer::new(store::unmarked, &store::LINK);
    // The bridge's own ServiceImports and slices are marked: every key, and the gauges.
    let imports_w = store::Writer::new(
        |o: &DynamicObject| is_ours(o.metadata.labels.as_ref(), LABEL_MANAGER),
        &store::IMPORT,
    );
    let slices_w = store::Writer::new(
        |s: &EndpointSlice| is_ours(s.metadata.labels.as_ref(), LABEL_SLICE_MANAGER),
        &store::SLICE,
    );
    let writers = Writers {
        services: services_w,
        links: links_w,
        imports: imports_w,
        slices: slices_w,
        hosts: store::Writer::new(store::unmarked, &store::SLICE),
    };
    let importer = Importer {
        services: writers.services.reader(),
        links: writers.links.reader(),
        imports: writers.imports.reader(),
        slices: writers.slices.reader(),
        hosts: writers.hosts.reader(),
        client: shared.client.clone(),
        recorder: crate::bridge::recorder(&shared.client, &identity),
        si,
        link,
        settings,
        metrics: shared.metrics.clone(),
        clusters: shared.clusters.clone(),
        index: Mutex::default(),
        told: Mutex::default(),
        written_imports: Written::default(),
        written_slices: Written::default(),
    };
    let resync = importer.settings.resync;
    let shutdown = shared.shutdown.clone();
    shared
        .drive(&importer, resync, |marks, ready| {
            importer.watch(writers, marks, ready, shutdown)
        })
        .await;
}

/// What feeds the import half's stores, from its watches.
struct Writers {
    services: store::Writer<Service>,
    links: store::Writer<DynamicObject>,
    imports: store::Writer<DynamicObject>,
    slices: store::Writer<EndpointSlice>,
    hosts: store::Writer<EndpointSlice>,
}

const NOT_LISTED: &str =
    "the first full list of Services, Links, ServiceImports and EndpointSlices has not come yet";

/// The EndpointSlices of this cluster's headless exported Services, whose hosts are this
/// cluster's in their imports: the endpointslice controller copies a Service's labels onto its
/// slices and adds `service.kubernetes.io/headless` (k8s.io/endpointslice v0.37.2, utils.go
/// `setEndpointSliceLabels`). Linkerd's mirrors are left out (they carry none of Linkerd's
/// export labels, but one labelled by hand might).
const HOSTS_SELECTOR: &str = "service.kubernetes.io/headless,mirror.linkerd.io/exported in (true,remote-discovery),!mirror.linkerd.io/mirrored-service";

struct Importer {
    client: kube::Client,
    si: ApiResource,
    link: ApiResource,
    settings: Settings,
    services: Store<Service>,
    links: Store<DynamicObject>,
    imports: Store<DynamicObject>,
    slices: Store<EndpointSlice>,
    /// This cluster's slices of its headless exported Services ([`HOSTS_SELECTOR`]).
    hosts: Store<EndpointSlice>,
    metrics: Arc<BridgeMetrics>,
    recorder: Recorder,
    /// The exports of this cluster and the linked ones.
    clusters: crate::bridge::clusters::Clusters,
    /// Which Linkerd Services and EndpointSlices name each service.
    index: Mutex<Indexes>,
    /// What is said about each service now (see [`Told`]).
    told: Mutex<Told>,
    /// What the bridge wrote that the stores may not show yet.
    written_imports: Written<DynamicObject>,
    written_slices: Written<EndpointSlice>,
}

impl Reconciler for Importer {
    type Key = Key;
    type Error = kube::Error;

    /// Every service some object names: Linkerd's, the exports', the bridge's own.
    fn every_key(&self) -> Vec<Key> {
        let mut keys: BTreeSet<Key> = self.clusters.keys().into_iter().collect();
        let index = self.index.lock().expect("not poisoned");
        keys.extend(index.services.keys());
        keys.extend(index.slices.keys());
        keys.extend(index.hosts.keys());
        drop(index);
        keys.extend(self.imports.marked());
        keys.into_iter().collect()
    }

    async fn reconcile(&self, key: Key) -> Result<(), kube::Error> {
        let (want, mut said) = self.judge(&key);
        let mine = self.our_slices(&key);
        let result = self.reconcile(&key, want.as_ref(), &mine, &mut said).await;
        self.tell(&key, said).await;
        result
    }

    fn ran(
        &self,
        key: &Key,
        result: &Result<(), kube::Error>,
        wait: Option<Duration>,
        timing: Timing,
    ) {
        self.metrics.reconciled("import", result.is_ok(), timing);
        if let (Err(e), Some(wait)) = (result, wait) {
            warn!(namespace = %key.0, name = %key.1, error = %api_error(e), "import not brought up to date; trying again in {wait:?}");
        }
    }

    fn idle(&self) {
        self.count();
    }
}

impl Importer {
    /// Feeds the stores from the watches and the index, and marks what each change can affect;
    /// says when everything was listed once (the runner waits for it).
    async fn watch(
        &self,
        writers: Writers,
        marks: Marks<Key>,
        ready: watch::Sender<bool>,
        shutdown: CancellationToken,
    ) {
        let c = self.client.clone();
        let config = watcher::Config::default;
        let mut services = std::pin::pin!(watch_of(
            writers.services,
            Api::all(c.clone()),
            config().labels(SELECTOR)
        ));
        let mut links = std::pin::pin!(watch_of(
            writers.links,
            Api::all_with(c.clone(), &self.link),
            config()
        ));
        let mut imports = std::pin::pin!(watch_of(
            writers.imports,
            Api::all_with(c.clone(), &self.si),
            config()
        ));
        let mut slices = std::pin::pin!(watch_of(
            writers.slices,
            Api::all(c.clone()),
            config().labels(LABEL_SERVICE_NAME)
        ));
        let mut hosts = std::pin::pin!(watch_of(
            writers.hosts,
            Api::all(c.clone()),
            config().labels(HOSTS_SELECTOR)
        ));
        let mut changes = self.clusters.subscribe();
        let mut listed = [false; 5];
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                ev = services.next() => match ev {
                    Some(Ok(seen)) => {
                        let index: fn(&mut Indexes) -> &mut Index = |i| &mut i.services;
                        listed[0] |= self.indexed(seen, index, &self.services, keys_of_service, None, &marks);
                    }
                    Some(Err(e)) => warn!(error = %e, "import half: watching Linkerd's Services"),
                    None => return,
                },
                ev = links.next() => match ev {
                    // A Link added, changed or removed can change every import.
                    Some(Ok(Seen::Listed)) => {
                        listed[1] = true;
                        marks.all();
                    }
                    Some(Ok(_)) => marks.all(),
                    Some(Err(e)) => warn!(error = %e, "import half: watching Links"),
                    None => return,
                },
                ev = imports.next() => match ev {
                    Some(Ok(Seen::Applied(o))) => {
                        self.written_imports.seen(&o);
                        marks.keys([names_of(&o.metadata)]);
                    }
                    Some(Ok(Seen::Deleted(o))) => {
                        let (ns, name) = names_of(&o.metadata);
                        // Deleted: the store is right about it from now on.
                        self.written_imports.forget(&ns, &name);
                        marks.keys([(ns, name)]);
                    }
                    Some(Ok(Seen::Listed)) => {
                        listed[2] = true;
                        marks.all();
                    }
                    Some(Err(e)) => warn!(error = %e, "import half: watching ServiceImports"),
                    None => return,
                },
                ev = slices.next() => match ev {
                    Some(Ok(seen)) => {
                        let index: fn(&mut Indexes) -> &mut Index = |i| &mut i.slices;
                        let keys = |s: &EndpointSlice| key_of_slice(s).into_iter().collect();
                        listed[3] |= self.indexed(seen, index, &self.slices, keys, Some(&self.written_slices), &marks);
                    }
                    Some(Err(e)) => warn!(error = %e, "import half: watching EndpointSlices"),
                    None => return,
                },
                ev = hosts.next() => match ev {
                    Some(Ok(seen)) => {
                        let index: fn(&mut Indexes) -> &mut Index = |i| &mut i.hosts;
                        let keys = |s: &EndpointSlice| key_of_local_slice(s).into_iter().collect();
                        listed[4] |= self.indexed(seen, index, &self.hosts, keys, None, &marks);
                    }
                    Some(Err(e)) => warn!(error = %e, "import half: watching the EndpointSlices of this cluster's headless exports"),
                    None => return,
                },
                change = changes.recv() => match change {
                    Some(Changed::Keys(keys)) => marks.keys(keys),
                    Some(Changed::All) => marks.all(),
                    None => return,
                },
            }
            let why = if listed.contains(&false) {
                Some(NOT_LISTED)
            } else if !self.clusters.settled() {
                // Judged now, an import would leave out exports that exist.
                Some("the linked clusters' exports have not all been listed yet")
            } else {
                None
            };
            self.metrics.waiting("import", why.map(str::to_string));
            runner::set(&ready, why.is_none());
        }
    }

    /// Keeps `index` (one of [`Indexes`]) up to date with what a watch saw, and marks the
    /// services it names; whether it was the end of a full list.
    fn indexed<K>(
        &self,
        seen: Seen<K>,
        index: fn(&mut Indexes) -> &mut Index,
        store: &Store<K>,
        keys: impl Fn(&K) -> Vec<Key>,
        written: Option<&Written<K>>,
        marks: &Marks<Key>,
    ) -> bool
    where
        K: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned + Clone + 'static,
    {
        let mut indexes = self.index.lock().expect("not poisoned");
        match seen {
            Seen::Applied(o) => {
                if let Some(written) = written {
                    written.seen(&o);
                }
                let (ns, name) = names_of(o.meta());
                let k = keys(&o);
                let before = index(&mut indexes).set(&ns, &name, k.clone());
                marks.keys(k.into_iter().chain(before));
                false
            }
            Seen::Deleted(o) => {
                let (ns, name) = names_of(o.meta());
                if let Some(written) = written {
                    written.forget(&ns, &name);
                }
                let before = index(&mut indexes).remove(&(ns, name));
                marks.keys(keys(&o).into_iter().chain(before));
                false
            }
            Seen::Listed => {
                // A relist does not say what went meanwhile.
                index(&mut indexes).prune(|ns, name| store.contains(ns, name));
                marks.all();
                true
            }
        }
    }

    /// The import service `key` should have, from the Services and Links in the stores and
    /// every cluster's exports of it, and what there is to say about it.
    fn judge(&self, key: &Key) -> (Option<Import>, Said) {
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
        let names = self.index.lock().expect("not poisoned").services.names(key);
        let services: Vec<Arc<Service>> = names
            .iter()
            .filter_map(|n| self.services.get(&key.0, n))
            .filter(|s| keys_of_service(s).contains(key))
            .collect();
        let mut naming = self.settings.naming.clone();
        naming.own = self.clusters.own_id();
        let mut unreadable = Vec::new();
        let mut exports = self.clusters.exports_of(key, &mut unreadable);
        for e in exports.by_service.values_mut().flatten() {
            if e.link.is_none() && e.headless {
                e.hosts = self.own_hosts(key);
            }
        }
        let mut judged = super::judge(&services, &links, &naming, &exports);
        judged
            .problems
            .extend(unreadable.into_iter().map(|message| Problem {
                namespace: key.0.clone(),
                object: key.1.clone(),
                reason: super::NOT_IMPORTED,
                message,
            }));
        let mut said = Said::default();
        for p in &judged.problems {
            said.messages.insert(problem_text(p));
            said.unusable
                .insert((p.namespace.clone(), p.object.clone()));
        }
        (judged.imports.remove(key), said)
    }

    /// Records what `key`'s reconcile found; says what no service said before, in the log and
    /// an Event on the object it is about.
    async fn tell(&self, key: &Key, said: Said) {
        let new = self.told.lock().expect("not poisoned").hold(key, said);
        for text in new {
            let Some((what, message)) = text.split_once('\n') else {
                continue;
            };
            let mut parts = what.splitn(4, ' ');
            let (kind, reason, ns, object) = (
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
            warn!(namespace = %ns, object = %object, reason, "{message}");
            let reference = match kind {
                // On one of Linkerd's Services, or on this cluster's exported Service.
                "Service" => self
                    .services
                    .get(ns, object)
                    .or_else(|| self.clusters.own(&(ns.to_string(), object.to_string())))
                    .map(|svc| kube::Resource::object_ref(&*svc, &())),
                "ServiceImport" => self
                    .imports
                    .get(ns, object)
                    .map(|o| kube::Resource::object_ref(&*o, &self.si)),
                _ => self
                    .slices
                    .get(ns, object)
                    .map(|s| kube::Resource::object_ref(&*s, &())),
            };
            if let Some(reference) = reference {
                let warning = EventType::Warning;
                crate::bridge::event(
                    &self.recorder,
                    &reference,
                    warning,
                    reason,
                    message,
                    "Import",
                )
                .await;
            }
        }
    }

    /// The hosts of this cluster's headless Service `key`: each ready endpoint of its slices,
    /// with its hostname if it has one, sorted.
    fn own_hosts(&self, key: &Key) -> Vec<Host> {
        let slices = self.named(|i| &i.hosts, &self.hosts, key, key_of_local_slice);
        let mut hosts: Vec<Host> = slices.iter().flat_map(|s| hosts_of(s)).collect();
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// The EndpointSlices of service `key` the bridge created.
    fn our_slices(&self, key: &Key) -> Vec<Arc<EndpointSlice>> {
        let mut slices = self.named(|i| &i.slices, &self.slices, key, key_of_slice);
        slices.retain(|s| is_ours(s.metadata.labels.as_ref(), LABEL_SLICE_MANAGER));
        slices
    }

    /// The objects of `store` that `index` names for service `key` and that still name it
    /// (`key_of`: the index may be a step behind the store).
    fn named<K: kube::Resource + serde::de::DeserializeOwned>(
        &self,
        index: fn(&Indexes) -> &Index,
        store: &Store<K>,
        key: &Key,
        key_of: fn(&K) -> Option<Key>,
    ) -> Vec<Arc<K>> {
        let names = index(&self.index.lock().expect("not poisoned")).names(key);
        names
            .iter()
            .filter_map(|n| store.get(&key.0, n))
            .filter(|o| key_of(o).as_ref() == Some(key))
            .collect()
    }

    /// Brings service `key` to `want`: its ServiceImport and slices written, or taken away.
    async fn reconcile(
        &self,
        key: &Key,
        want: Option<&Import>,
        mine: &[Arc<EndpointSlice>],
        said: &mut Said,
    ) -> Result<(), kube::Error> {
        let (ns, name) = (key.0.as_str(), key.1.as_str());
        let in_store = self.imports.get(ns, name);
        let existing = self.written_imports.read(ns, name, in_store);
        let ours = existing
            .as_ref()
            .is_none_or(|o| is_ours(o.metadata.labels.as_ref(), LABEL_MANAGER));
        let si_api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &self.si);
        let slice_api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), ns);
        let Some(want) = want else {
            for s in mine {
                let slice = s.metadata.name.clone().unwrap_or_default();
                absent_is_done(slice_api.delete(&slice, &DeleteParams::default()).await)?;
                self.written_slices.forget(ns, &slice);
            }
            if let Some(o) = existing.filter(|_| ours) {
                absent_is_done(si_api.delete(name, &DeleteParams::default()).await)?;
                self.written_imports.forget(ns, name);
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
            self.not_taken_over(
                said,
                "ServiceImport",
                &kube::Resource::object_ref(&*o, &self.si),
            );
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
                    have = Some(serde_json::to_value(&o).unwrap_or_default());
                    self.written_imports.wrote(None, o);
                }
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    // Created since the store saw it: ours if it says so.
                    let o = si_api.get(name).await?;
                    if !is_ours(o.metadata.labels.as_ref(), LABEL_MANAGER) {
                        self.not_taken_over(
                            said,
                            "ServiceImport",
                            &kube::Resource::object_ref(&o, &self.si),
                        );
                        return Ok(());
                    }
                    have = Some(serde_json::to_value(o).unwrap_or_default());
                }
                Err(e) => return Err(e),
            }
        }
        let have = have.unwrap_or_default();
        // The version the next write goes over.
        let mut version = have["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_string);
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
        if !covers(&have, &object)
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
            let o = si_api.replace(name, &pp, &new).await?;
            let over = std::mem::replace(&mut version, o.metadata.resource_version.clone());
            self.written_imports.wrote(over, o);
            let changed = difference(&have, &object)
                .unwrap_or_else(|| "a field the bridge no longer sets".into());
            info!(namespace = ns, name, changed, "ServiceImport updated");
        }
        let status = want.status();
        if !covers(&have["status"], &status)
            || have["status"]["clusters"].as_array().map(Vec::len)
                != status["clusters"].as_array().map(Vec::len)
        {
            let patch = json!({
                "apiVersion": self.si.api_version,
                "kind": "ServiceImport",
                "metadata": {"name": name, "namespace": ns},
                "status": status,
            });
            let o = si_api
                .patch_status(name, &apply, &Patch::Apply(&patch))
                .await?;
            self.written_imports.wrote(version, o);
        }
        // The slices: each written unless someone else's has its name; the bridge's others
        // taken away.
        let wanted = want.slice_objects();
        for (slice, object) in &wanted {
            let in_store = self.slices.get(ns, slice);
            let have = self.written_slices.read(ns, slice, in_store);
            match have {
                Some(h) if !is_ours(h.metadata.labels.as_ref(), LABEL_SLICE_MANAGER) => {
                    self.not_taken_over(
                        said,
                        "EndpointSlice",
                        &kube::Resource::object_ref(&*h, &()),
                    );
                }
                Some(h) if covers(&serde_json::to_value(&*h).unwrap_or_default(), object) => {}
                Some(h) => {
                    let o = slice_api
                        .patch(slice, &apply, &Patch::Apply(object))
                        .await?;
                    self.written_slices
                        .wrote(h.metadata.resource_version.clone(), o);
                }
                None => {
                    let new: EndpointSlice =
                        serde_json::from_value(object.clone()).expect("a slice");
                    let pp = PostParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..PostParams::default()
                    };
                    match slice_api.create(&pp, &new).await {
                        Ok(o) => self.written_slices.wrote(None, o),
                        Err(kube::Error::Api(e)) if e.code == 409 => {
                            let h = slice_api.get(slice).await?;
                            if is_ours(h.metadata.labels.as_ref(), LABEL_SLICE_MANAGER) {
                                let o = slice_api
                                    .patch(slice, &apply, &Patch::Apply(object))
                                    .await?;
                                self.written_slices
                                    .wrote(h.metadata.resource_version.clone(), o);
                            } else {
                                self.not_taken_over(
                                    said,
                                    "EndpointSlice",
                                    &kube::Resource::object_ref(&h, &()),
                                );
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
                absent_is_done(slice_api.delete(&slice, &DeleteParams::default()).await)?;
                self.written_slices.forget(ns, &slice);
            }
        }
        Ok(())
    }

    /// Notes that `o` is someone else's and stays so: said once in the log and an Event on
    /// it, and counted.
    fn not_taken_over(&self, said: &mut Said, kind: &str, o: &ObjectReference) {
        let (ns, name) = (
            o.namespace.clone().unwrap_or_default(),
            o.name.clone().unwrap_or_default(),
        );
        let label = if kind == "EndpointSlice" {
            said.foreign.1 += 1;
            LABEL_SLICE_MANAGER
        } else {
            said.foreign.0 += 1;
            LABEL_MANAGER
        };
        let note = format!(
            "{kind} {ns}/{name} was not created by the linkerd-bridge (no label {label}={MANAGER}): it is left as it is, and the service's import from Linkerd is not written"
        );
        said.messages
            .insert(format!("{kind} NotTakenOver {ns} {name}\n{note}"));
    }

    /// The gauges: what the bridge wrote, what it left to others, what it could not use.
    fn count(&self) {
        let si_mine = self.imports.count_marked();
        let sl_mine = self.slices.count_marked();
        let told = self.told.lock().expect("not poisoned");
        let (si_foreign, sl_foreign) = told
            .by_key
            .values()
            .fold((0, 0), |(a, b), s| (a + s.foreign.0, b + s.foreign.1));
        let unusable: BTreeSet<&(String, String)> =
            told.by_key.values().flat_map(|s| &s.unusable).collect();
        self.metrics
            .imports([si_mine, sl_mine], [si_foreign, sl_foreign], unusable.len());
    }
}

/// A delete of something already gone is done.
fn absent_is_done<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
