//! The import half's controller: watches the Services Linkerd's service mirror writes, Links,
//! and the ServiceImports and MCS EndpointSlices in the cluster, and brings each service to what
//! [`super::judge`](fn@super::judge) says of it (with every cluster's exports of it, [`crate::bridge::clusters`]).
//! It writes only objects it created (ServiceImports and its Services labelled
//! `app.kubernetes.io/managed-by`, slices labelled `endpointslice.kubernetes.io/managed-by`, all
//! [`MANAGER`]); one someone else created is left as it is, said in the log and an Event, and
//! counted (a Service not).
//!
//! A service is judged alone: an index from each service to the Linkerd Services and slices
//! that name it keeps the work of one change to the objects of that service.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::runtime::watcher;
use tracing::{info, warn};

mod write;

use super::index::{Index, Indexes, Said, Told, keys_of_service};
use super::{Import, Naming};
use crate::bridge::metrics::BridgeMetrics;
use crate::bridge::model::{LABEL_MANAGER, LABEL_ROUTE_OF, LABEL_SLICE_MANAGER, is_ours};
use crate::bridge::model::{LINK, MANAGER, SERVICE_IMPORT};
use crate::bridge::model::{LINKERDS, OURS, Problem, ROUTES, Reason};
use crate::bridge::runtime::events::{Recorder, Type as EventType};
use crate::bridge::runtime::feed::Feed;
use crate::bridge::runtime::index::Written;
use crate::bridge::runtime::runner::{Marks, Reconciler, Timing};
use crate::bridge::runtime::store::{self, Codec, Store};
use crate::bridge::runtime::{self, Key};
use crate::bridge::shared::Shared;
use crate::source::linkerd::selected;
use crate::source::mcs::LABEL_SERVICE_NAME;

/// What the import half is run with.
#[derive(Debug, Clone)]
pub struct Config {
    /// How clusters are named in `status.clusters` and the slices' `source-cluster`.
    pub naming: Naming,
    /// Every import is brought up to date this often, changed or not.
    pub resync: Duration,
    /// What an endpoint's address must pass to be written into a slice (`--deny-cidr`,
    /// `--allow-cidr`).
    pub policy: crate::source::policy::Policy,
    /// `--route-outside-mesh`: each of an import's slices has a twin naming Linkerd's federated
    /// Service, for kube-proxy (see [`Import::route`]).
    pub route_outside_mesh: bool,
}

/// Runs the import half until shutdown, once the ServiceImport and Link CRDs are served: its
/// watches, and the runner that brings each service marked up to date while this replica leads.
pub(in crate::bridge) async fn run(shared: Shared, settings: Config, identity: String) {
    let Some(si) = shared.wait_for("import", &SERVICE_IMPORT).await else {
        return;
    };
    let Some(link) = shared.wait_for("import", &LINK).await else {
        return;
    };
    shared.metrics.waiting("import", Some(NOT_LISTED.into()));
    info!(serviceimport = %si.version, link = %link.version, "linkerd-bridge: import half starting");
    // The bridge's own ServiceImports and slices are marked: every key, and the gauges.
    let imports = Feed::new(store::Writer::new(
        |o: &DynamicObject| OURS * u8::from(is_ours(o.metadata.labels.as_ref(), LABEL_MANAGER)),
        Codec::imports(),
    ));
    let ours = |s: &EndpointSlice| {
        OURS * u8::from(is_ours(s.metadata.labels.as_ref(), LABEL_SLICE_MANAGER))
    };
    let slices = Feed::new(store::Writer::new(ours, Codec::slices()));
    let twins = Feed::new(store::Writer::new(ours, Codec::slices()));
    let (c, config, stop) = (&shared.client, watcher::Config::default, &shared.shutdown);
    let api = Api::all_with(c.clone(), &si);
    tokio::spawn(
        imports
            .clone()
            .run(api, config(), "ServiceImports", stop.clone()),
    );
    let (api, config_slices) = (Api::all(c.clone()), config().labels(LABEL_SERVICE_NAME));
    tokio::spawn(
        slices
            .clone()
            .run(api, config_slices, "EndpointSlices", stop.clone()),
    );
    let (api, config_twins) = (Api::all(c.clone()), config().labels(LABEL_ROUTE_OF));
    let what = "the EndpointSlices kube-proxy routes imports by";
    tokio::spawn(twins.clone().run(api, config_twins, what, stop.clone()));
    let importer = Importer {
        services: shared.services.store().clone(),
        imports: imports.store().clone(),
        slices: slices.store().clone(),
        twins: twins.store().clone(),
        client: shared.client.clone(),
        // The controller the bridge's Events are reported by, this replica as its instance.
        recorder: Recorder::new(shared.client.clone(), MANAGER, &identity),
        si,
        settings,
        metrics: shared.metrics.clone(),
        clusters: shared.clusters.clone(),
        index: Mutex::default(),
        told: Mutex::default(),
        written_imports: Written::new(imports.store()),
        // Twins too: they are kept as the MCS slices are.
        written_slices: Written::new(slices.store()),
    };
    let heard = vec![
        shared.services.subscribe(),
        imports.subscribe(),
        slices.subscribe(),
        twins.subscribe(),
    ];
    let half = ("import", &importer);
    let on_key = |feed, key, marked, marks: &Marks<Key>| importer.heard(feed, key, marked, marks);
    let resync = importer.settings.resync;
    shared
        .drive(half, resync, (heard, NOT_LISTED), on_key)
        .await;
}

const NOT_LISTED: &str = "the first full list of Services, ServiceImports and EndpointSlices (MCS ones, and the twins kube-proxy routes by) has not come yet";

struct Importer {
    client: kube::Client,
    si: ApiResource,
    settings: Config,
    /// Every Service of this cluster; Linkerd's marked [`LINKERDS`].
    services: Store<Service>,
    imports: Store<DynamicObject>,
    /// The MCS EndpointSlices, and the twins of the bridge's that kube-proxy routes by
    /// ([`crate::bridge::model::LABEL_ROUTE_OF`]).
    slices: Store<EndpointSlice>,
    twins: Store<EndpointSlice>,
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
        keys.extend(index.routes.keys());
        drop(index);
        keys.extend(self.imports.marked(OURS));
        keys.into_iter().collect()
    }

    async fn reconcile(&self, key: Key) -> Result<(), kube::Error> {
        let (want, mut said) = self.judge(&key);
        let mine = (self.our_slices(&key), self.our_services(&key));
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
        crate::bridge::shared::ran(&self.metrics, "import", key, result, (wait, timing));
    }

    /// The gauges: what the bridge wrote, what it left to others, what it could not use.
    fn idle(&self) {
        let si_mine = self.imports.count_marked(OURS);
        let sl_mine = self.slices.count_marked(OURS) + self.twins.count_marked(OURS);
        let told = self.told.lock().expect("not poisoned");
        let (si_foreign, sl_foreign) = told
            .by_key
            .values()
            .fold((0, 0), |(a, b), s| (a + s.foreign.0, b + s.foreign.1));
        let refused = told.by_key.values().map(|s| s.refused).sum();
        let unusable: BTreeSet<&(String, String)> =
            told.by_key.values().flat_map(|s| &s.unusable).collect();
        self.metrics.imports(
            [si_mine, sl_mine],
            [si_foreign, sl_foreign],
            unusable.len(),
            refused,
        );
    }
}

impl Importer {
    /// Keeps the indexes up to date with a change of Service (`feed` 0), ServiceImport (1),
    /// MCS EndpointSlice (2) or twin (3) `key`, and marks what it can affect (`marked`: its
    /// marks before or now).
    fn heard(&self, feed: usize, key: Key, marked: u8, marks: &Marks<Key>) {
        match feed {
            // One of Linkerd's Services, now or before.
            0 if marked & LINKERDS != 0 => {
                let keys = |s: &Service| match selected(s.metadata.labels.as_ref()) {
                    true => keys_of_service(s),
                    false => Vec::new(),
                };
                self.indexed(key, &self.services, |i| &mut i.services, keys, None, marks);
            }
            // One of the bridge's own, now or before.
            0 if marked & ROUTES != 0 => {
                let keys =
                    |s: &Service| runtime::service_of(s, LABEL_ROUTE_OF).into_iter().collect();
                self.indexed(key, &self.services, |i| &mut i.routes, keys, None, marks);
            }
            0 => {}
            1 => {
                self.written_imports.heard(&key, &self.imports);
                marks.keys([key]);
            }
            _ => {
                let keys = |s: &EndpointSlice| key_of_slice(s).into_iter().collect();
                let written = Some(&self.written_slices);
                let store = if feed == 2 { &self.slices } else { &self.twins };
                self.indexed(key, store, |i| &mut i.slices, keys, written, marks);
            }
        }
    }

    /// Keeps `index` (one of [`Indexes`]) up to date with the object `key` of `store` (gone,
    /// if it is not there), and marks the services it names and named.
    fn indexed<K>(
        &self,
        key: Key,
        store: &Store<K>,
        index: fn(&mut Indexes) -> &mut Index,
        keys: impl Fn(&K) -> Vec<Key>,
        written: Option<&Written<K>>,
        marks: &Marks<Key>,
    ) where
        K: kube::Resource + serde::Serialize + serde::de::DeserializeOwned,
    {
        let o = store.get(&key.0, &key.1);
        if let Some(written) = written {
            match &o {
                Some(o) => written.seen(o),
                None => written.forget(&key.0, &key.1),
            }
        }
        let named = o.map(|o| keys(&o)).unwrap_or_default();
        let before =
            index(&mut self.index.lock().expect("not poisoned")).set(&key.0, &key.1, named.clone());
        marks.keys(named.into_iter().chain(before));
    }

    /// The import service `key` should have, from the Services and Links in the stores and
    /// every cluster's exports of it, and what there is to say about it.
    fn judge(&self, key: &Key) -> (Option<Import>, Said) {
        let links = self.clusters.links();
        let names = self.index.lock().expect("not poisoned").services.names(key);
        let services: Vec<Arc<Service>> = names
            .iter()
            .filter_map(|n| self.services.get(&key.0, n))
            .filter(|s| keys_of_service(s).contains(key))
            .collect();
        let mut naming = self.settings.naming.clone();
        naming.own = self.clusters.own_id();
        let mut unreadable = Vec::new();
        let exports = self.clusters.exports_of(key, &mut unreadable);
        let policy = &self.settings.policy;
        let mut judged = super::judge(key, &services, &links, (&naming, policy), &exports);
        if !self.settings.route_outside_mesh
            && let Some(i) = &mut judged.import
        {
            i.route = None;
        }
        judged
            .problems
            .extend(unreadable.into_iter().map(|message| {
                Problem::new("Service", (&key.0, &key.1), Reason::NotImported, message)
            }));
        let mut said = Said {
            refused: judged.refused,
            ..Said::default()
        };
        for p in judged.problems {
            if p.reason != Reason::AddressRefused {
                said.unusable
                    .insert((p.namespace.clone(), p.object.clone()));
            }
            said.messages.insert(p);
        }
        (judged.import, said)
    }

    /// Records what `key`'s reconcile found; says what no service said before, in the log and
    /// an Event on the object it is about.
    async fn tell(&self, key: &Key, said: Said) {
        let new = self.told.lock().expect("not poisoned").hold(key, said);
        for p in new {
            let (ns, object, reason) = (p.namespace.as_str(), p.object.as_str(), p.reason.word());
            warn!(namespace = %ns, object = %object, reason, "{}", p.message);
            let reference = match p.kind {
                // On one of Linkerd's Services, or on this cluster's exported Service.
                "Service" => self
                    .services
                    .get(ns, object)
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
                crate::bridge::shared::event(
                    &self.recorder,
                    &reference,
                    warning,
                    reason,
                    &p.message,
                    "Import",
                )
                .await;
            }
        }
    }

    /// The EndpointSlices of service `key` the bridge created, twins included, that the index
    /// names and that still name it (the index may be a step behind the stores).
    fn our_slices(&self, key: &Key) -> Vec<Arc<EndpointSlice>> {
        let names = self.index.lock().expect("not poisoned").slices.names(key);
        let of = |store: &Store<EndpointSlice>| {
            let slices = names.iter().filter_map(|n| store.get(&key.0, n));
            slices.collect::<Vec<_>>()
        };
        let mut slices = of(&self.slices);
        slices.extend(of(&self.twins));
        slices.retain(|s| {
            key_of_slice(s).as_ref() == Some(key)
                && is_ours(s.metadata.labels.as_ref(), LABEL_SLICE_MANAGER)
        });
        slices
    }

    /// The bridge's own Services of service `key` ([`super::Import::ports_service`]) that the
    /// index names and that still name it.
    fn our_services(&self, key: &Key) -> Vec<Arc<Service>> {
        let names = self.index.lock().expect("not poisoned").routes.names(key);
        (names.iter())
            .filter_map(|n| self.services.get(&key.0, n))
            .filter(|s| {
                runtime::service_of(&**s, LABEL_ROUTE_OF).as_ref() == Some(key)
                    && is_ours(s.metadata.labels.as_ref(), LABEL_MANAGER)
            })
            .collect()
    }
}

/// The import a slice is of: the MCS label, or a twin's.
fn key_of_slice(s: &EndpointSlice) -> Option<Key> {
    runtime::service_of(s, LABEL_SERVICE_NAME).or_else(|| runtime::service_of(s, LABEL_ROUTE_OF))
}
