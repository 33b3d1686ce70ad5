//! The exports of every cluster this bridge can see, read the same way for each: this
//! cluster's own exported Services, and each linked cluster's, read through the credentials of
//! the Link to it (the Secret `spec.clusterCredentialsSecret` beside the Link, key
//! `kubeconfig`), as Linkerd's service mirror reads that cluster (linkerd2 `version-2.20`,
//! `multicluster/cmd/service-mirror/main.go` `loadCredentials`). Those credentials are the
//! remote cluster's `linkerd-service-mirror-remote-access-*` ServiceAccount, which may list and
//! watch Services there: nothing is asked of the remote cluster that Linkerd does not ask. They
//! are read again when the watch of that cluster fails, so a token rotated (and the old one
//! revoked) is taken up without a restart.
//!
//! Both halves judge from it, so every cluster of a fully linked set judges from the same
//! exports: the export half compares its export with every peer's (Conflict on each export
//! involved), and the import half writes the same ServiceImport spec everywhere, the exporting
//! clusters included. Linkerd's own objects (federated Services and mirrors) give the
//! addresses; its rule that a federated Service follows the local member is not relied on.
//!
//! An exported Service is one Linkerd's service mirror exports with a Link's default selectors
//! (`mirror.linkerd.io/federated=member`, `mirror.linkerd.io/exported=true|remote-discovery`)
//! that is not one of Linkerd's mirrors (Linkerd copies labels onto them): a cluster's exports
//! are what it exports, whatever Linkerd's objects elsewhere still say. What a watch saw stays known through a watch error or
//! a lost Secret, so a fault never takes an export out of an import; a Link deleted takes its
//! cluster's exports away.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::runtime::watcher;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

mod read;

use super::model::{EXPORTED, Exports, LINK};
use super::runtime::crd::{CRD_RECHECK, resource};
use super::runtime::feed::{Feed, merged};
use super::runtime::runner::Mark;
use super::runtime::store::{self, Codec, Heard};
use super::runtime::{Key, sleep_until};
use crate::source::about::{CLUSTER_ID, ClusterProperties};
use crate::source::object::Kind as _;
use read::{
    ExportedStores, Feeds, Learned, SliceStores, link_spec, remote_client, watch_exported, writers,
};
pub use read::{cluster_export, is_exported, selectors};

/// How long a Link whose credentials cannot be used waits before they are read again.
const CREDENTIALS_RETRY: Duration = Duration::from_secs(10);
/// The shortest time between two lists of a linked cluster made because its objects came
/// beyond `--max-objects-per-link`, or went while others were left out: a cluster that floods
/// the bridge costs it at most one list of its exports this often.
const RELIST_LEFT_OUT: Duration = Duration::from_secs(30);

/// Whether a Link's cluster's exports are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Not yet listed.
    Pending,
    /// Listed, and watched.
    Read,
    /// Why not (what was listed before stays known).
    Unread(String),
}

struct Linked {
    /// The Link's target cluster name.
    target: String,
    /// The Secret's namespace and name.
    secret: (String, String),
    reach: Reach,
    /// Whether its exports were listed once: the store then holds them all, if late.
    listed: bool,
    exports: ExportedStores,
    slices: SliceStores,
    stop: CancellationToken,
}

struct State {
    /// Where the links' reach and this cluster's id are counted.
    metrics: Arc<super::metrics::BridgeMetrics>,
    /// This cluster's id: `--cluster-id`, else the ClusterProperty's.
    own_id: Option<String>,
    /// Whether the id is known or was looked for once.
    own_id_read: bool,
    own: ExportedStores,
    own_slices: SliceStores,
    /// Whether this cluster's exported Services, and their slices (both watches), were listed.
    own_listed: [bool; 3],
    /// What packs the linked clusters' exported Services, and every cluster's slices of them.
    codecs: [Arc<Codec>; 2],
    /// The most objects of each of a linked cluster's watches kept (`--max-objects-per-link`).
    limit: usize,
    /// Whether the exports' pods are read (the import half runs: the export half needs none,
    /// and its role may not read EndpointSlices).
    pods: bool,
    /// By the Link's namespace and name.
    links: BTreeMap<Key, Linked>,
    links_listed: bool,
    subscribers: Vec<mpsc::UnboundedSender<Mark<Key>>>,
}

/// The exports of this cluster and of each linked one. Cheap to clone.
#[derive(Clone)]
pub struct Clusters {
    state: Arc<Mutex<State>>,
}

/// What the export half compares with: each linked cluster's exports of one service, and the
/// clusters it read and could not read.
#[derive(Debug, Clone, Default)]
pub struct Peers {
    pub exports: Vec<(String, Arc<Service>)>,
    pub read: Vec<String>,
    pub unread: Vec<(String, String)>,
}

impl Clusters {
    /// A receiver of every change from now on.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Mark<Key>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().subscribers.push(tx);
        rx
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("not poisoned")
    }

    fn tell(&self, c: Mark<Key>) {
        let mut s = self.lock();
        if c == Mark::All {
            let read = s.links.values().filter(|l| l.reach == Reach::Read).count();
            (s.metrics).clusters(read, s.links.len() - read, s.own_id.is_some());
        }
        s.subscribers.retain(|sub| sub.send(c.clone()).is_ok());
    }

    /// Whether every cluster was listed or found unreadable once: before that a judgement
    /// would leave out exports that exist.
    pub fn settled(&self) -> bool {
        let s = self.lock();
        s.own_id_read
            && s.own_listed == [true; 3]
            && s.links_listed
            && s.links.values().all(|l| l.reach != Reach::Pending)
    }

    /// This cluster's id, if it has one.
    pub fn own_id(&self) -> Option<String> {
        self.lock().own_id.clone()
    }

    /// The linked clusters' exports of `key`, and which clusters were read.
    pub fn peers(&self, key: &Key) -> Peers {
        let s = self.lock();
        let mut out = Peers::default();
        for l in s.links.values() {
            if let Some(svc) = l.exports.get(key) {
                out.exports.push((l.target.clone(), svc));
            }
            match &l.reach {
                Reach::Read => out.read.push(l.target.clone()),
                Reach::Unread(why) => out.unread.push((l.target.clone(), why.clone())),
                Reach::Pending => out.unread.push((l.target.clone(), "not listed yet".into())),
            }
        }
        out.read.sort();
        out.unread.sort();
        out
    }

    /// Every cluster's exports of `key`, as the import half judges them; an exported Service
    /// whose carried annotation cannot be read is passed over, with why in `problems`.
    pub fn exports_of(&self, key: &Key, problems: &mut Vec<String>) -> Exports {
        let s = self.lock();
        let mut out = Exports {
            own_read: s.own_listed[0],
            read: s
                .links
                .values()
                .filter(|l| l.listed)
                .map(|l| l.target.clone())
                .collect(),
            ..Exports::default()
        };
        // The Services under the lock; their slices, decoding, after it (reconciles of every
        // import come here).
        let own = s.own.get(key).map(|svc| (None, svc, s.own_slices.clone()));
        let linked = s.links.values().filter_map(|l| {
            let svc = l.exports.get(key)?;
            Some((Some(l.target.clone()), svc, l.slices.clone()))
        });
        let exports: Vec<_> = own.into_iter().chain(linked).collect();
        drop(s);
        let mut found = Vec::new();
        for (link, svc, slices) in exports {
            match cluster_export(link.as_deref(), &svc) {
                Ok(mut e) => {
                    if e.flat || e.headless {
                        e.pods = slices.pods(key);
                    }
                    found.push(e);
                }
                Err(why) => problems.push(why),
            }
        }
        if !found.is_empty() {
            out.by_service.insert(key.clone(), found);
        }
        out
    }

    /// The target cluster names of the Links.
    pub fn links(&self) -> BTreeSet<String> {
        let s = self.lock();
        s.links.values().map(|l| l.target.clone()).collect()
    }

    /// Every service some cluster exports.
    pub fn keys(&self) -> Vec<Key> {
        let s = self.lock();
        let mut keys = BTreeSet::new();
        for e in [&s.own]
            .into_iter()
            .chain(s.links.values().map(|l| &l.exports))
        {
            keys.extend(e.keys());
        }
        keys.into_iter().collect()
    }
}

/// Starts reading: this cluster's exports now (from `services`, the feed of all its Services,
/// [`EXPORTED`] marking the exported ones, and their slices), the Links' once the API server
/// serves Linkerd's Link (until then there are none, and it is looked for again every
/// [`CRD_RECHECK`]); runs until `shutdown`.
pub(crate) fn start(
    client: kube::Client,
    (cluster_id, limit, pods): (Option<String>, usize, bool),
    metrics: Arc<super::metrics::BridgeMetrics>,
    services: &Feed<Service>,
    shutdown: CancellationToken,
) -> Clusters {
    let codecs = [Codec::services(), Codec::pods()];
    let slices = [0, 1].map(|_| Feed::new(store::Writer::new(store::unmarked, codecs[1].clone())));
    for (feed, selector) in slices.iter().zip(selectors()).filter(|_| pods) {
        let api: Api<EndpointSlice> = Api::all(client.clone());
        let config = watcher::Config::default().labels(&selector);
        let what = "this cluster's EndpointSlices of its exported Services";
        tokio::spawn(feed.clone().run(api, config, what, shutdown.clone()));
    }
    let clusters = Clusters {
        state: Arc::new(Mutex::new(State {
            metrics,
            own_id_read: cluster_id.is_some(),
            own_id: cluster_id.clone(),
            own: ExportedStores::Own(services.store().clone()),
            own_slices: SliceStores::new(slices.each_ref().map(|f| f.store().clone())),
            // Not read: nothing to wait for.
            own_listed: [false, !pods, !pods],
            codecs,
            limit,
            pods,
            links: BTreeMap::new(),
            links_listed: false,
            subscribers: Vec::new(),
        })),
    };
    if cluster_id.is_none() {
        let (c, client, stop) = (clusters.clone(), client.clone(), shutdown.clone());
        tokio::spawn(async move { c.follow_cluster_id(client, stop).await });
    }
    let (c, stop) = (clusters.clone(), shutdown.clone());
    // Not read, the slices' feeds are not heard.
    let heard = [
        services.subscribe(),
        slices[0].subscribe(),
        slices[1].subscribe(),
    ];
    let mut heard = Box::pin(merged(
        heard.into_iter().take(if pods { 3 } else { 1 }).collect(),
    ));
    tokio::spawn(async move {
        loop {
            let h = tokio::select! {
                _ = stop.cancelled() => return,
                h = heard.next() => h,
            };
            match h {
                Some((n, Heard::Listed)) => {
                    c.lock().own_listed[n] = true;
                    c.tell(Mark::All);
                }
                Some((0, Heard::Key { key, was, now })) if (was | now) & EXPORTED != 0 => {
                    c.tell(Mark::Keys(vec![key]));
                }
                Some((0, Heard::Key { .. })) => {}
                Some((_, Heard::Key { key, .. })) => {
                    let own = c.lock().own_slices.clone();
                    c.tell(Mark::Keys(own.heard(&key)));
                }
                None => return,
            }
        }
    });
    let c = clusters.clone();
    tokio::spawn(async move {
        let link = loop {
            match resource(&client, &LINK).await {
                Ok(link) => break link,
                Err(_) => {
                    // No Links: nothing linked to read (yet).
                    if !c.lock().links_listed {
                        c.lock().links_listed = true;
                        c.tell(Mark::All);
                    }
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(CRD_RECHECK) => {}
                    }
                }
            }
        };
        c.follow_links(client, link, shutdown).await;
    });
    clusters
}

impl Clusters {
    /// Reads this cluster's id from the ClusterProperty `cluster.clusterset.k8s.io` (KEP-2149)
    /// now and every [`CRD_RECHECK`], as the DNS server reads it; a change is said and
    /// judged again everywhere.
    async fn follow_cluster_id(self, client: kube::Client, shutdown: CancellationToken) {
        let r = &ClusterProperties::RESOURCE;
        let resource = crate::source::kube::api_resource(ClusterProperties::KIND, r, r.versions[0]);
        let api: Api<DynamicObject> = Api::all_with(client, &resource);
        let mut said = None;
        loop {
            let (id, why) = match api.get_opt(CLUSTER_ID).await {
                Ok(Some(o)) => {
                    let value = o.data.pointer("/spec/value").and_then(Value::as_str);
                    match value.and_then(crate::wire::cluster_id) {
                        Some(id) => (Some(id), None),
                        None => (
                            None,
                            Some(format!(
                                "ClusterProperty {CLUSTER_ID} has value {value:?}, not a cluster id (one or two DNS labels)"
                            )),
                        ),
                    }
                }
                Ok(None) => (None, None),
                Err(e) => (
                    self.own_id(),
                    Some(format!(
                        "ClusterProperty {CLUSTER_ID} cannot be read: {}",
                        super::runtime::api_error(&e)
                    )),
                ),
            };
            if why.is_some() && why != said {
                warn!("{}", why.as_deref().unwrap_or_default());
            }
            said = why;
            let first = !self.lock().own_id_read;
            if id != self.own_id() || first {
                if id.is_some() {
                    info!(cluster_id = ?id, "this cluster's id, from its ClusterProperty");
                }
                let mut s = self.lock();
                s.own_id = id;
                s.own_id_read = true;
                drop(s);
                self.tell(Mark::All);
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(CRD_RECHECK) => {}
            }
        }
    }

    /// Reads every Link, and through each its cluster's exports (from [`Self::linked`]) until
    /// the Link goes; a relist tells of a Link gone while unwatched as gone.
    async fn follow_links(
        self,
        client: kube::Client,
        link: ApiResource,
        shutdown: CancellationToken,
    ) {
        let links = Feed::new(store::Writer::new(store::unmarked, Codec::links()));
        let mut heard = links.subscribe();
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &link);
        let config = watcher::Config::default();
        tokio::spawn(links.clone().run(api, config, "Links", shutdown.clone()));
        loop {
            let h = tokio::select! {
                _ = shutdown.cancelled() => break,
                h = heard.recv() => h,
            };
            match h {
                Some(Heard::Key { key, .. }) => {
                    match links
                        .store()
                        .get(&key.0, &key.1)
                        .as_deref()
                        .and_then(link_spec)
                    {
                        Some(spec) => self.linked(&client, spec, &shutdown),
                        None => {
                            self.unlinked(&key);
                            self.tell(Mark::All);
                        }
                    }
                }
                Some(Heard::Listed) => {
                    self.lock().links_listed = true;
                    self.tell(Mark::All);
                }
                None => break,
            }
        }
        for l in self.lock().links.values() {
            l.stop.cancel();
        }
    }

    /// Link `key` to `target` with credentials `secret`: read from now on (again, if its
    /// target or Secret changed).
    fn linked(
        &self,
        client: &kube::Client,
        (key, target, secret): (Key, String, (String, String)),
        shutdown: &CancellationToken,
    ) {
        {
            let s = self.lock();
            if let Some(l) = s.links.get(&key)
                && l.target == target
                && l.secret == secret
            {
                return;
            }
        }
        self.unlinked(&key);
        let stop = shutdown.child_token();
        let mut s = self.lock();
        // Its stores: empty until the credentials are read and its cluster listed.
        let (feeds, exports, slices) = writers(&s.codecs, s.limit);
        let linked = Linked {
            target: target.clone(),
            secret: secret.clone(),
            reach: Reach::Pending,
            listed: false,
            exports,
            slices: slices.clone(),
            stop: stop.clone(),
        };
        s.links.insert(key.clone(), linked);
        drop(s);
        info!(link = %format!("{}/{}", key.0, key.1), cluster = %target, "reading the exports of a linked cluster");
        let this = self.clone();
        let client = client.clone();
        let read = (secret, feeds, slices);
        tokio::spawn(async move { this.read_link(client, key, read, stop).await });
    }

    fn unlinked(&self, key: &Key) {
        let (gone, metrics) = {
            let mut s = self.lock();
            (s.links.remove(key), s.metrics.clone())
        };
        if let Some(l) = gone {
            l.stop.cancel();
            metrics.left_out(key, None);
            info!(link = %format!("{}/{}", key.0, key.1), cluster = %l.target, "Link gone: its cluster's exports are no longer read");
        }
    }

    fn reach(&self, key: &Key, reach: Reach) {
        let changed = match self.lock().links.get_mut(key) {
            Some(l) if l.reach != reach => {
                l.reach = reach;
                true
            }
            _ => false,
        };
        if changed {
            self.tell(Mark::All);
        }
    }

    /// Reads the Link's credentials and watches the exported Services of its cluster, until
    /// `stop`; credentials that cannot be used are read again every [`CREDENTIALS_RETRY`].
    /// They are read again when the watch fails, too: replaced ones (a token rotated,
    /// `linkerd multicluster link` run again) are used from then on, into the same stores, which
    /// keep what was listed until the new watch has listed. An old token may be revoked as soon
    /// as it is replaced: the watch then fails, and the new one is read.
    async fn read_link(
        self,
        client: kube::Client,
        key: Key,
        (secret, feeds, slices): ((String, String), Feeds, SliceStores),
        stop: CancellationToken,
    ) {
        let link = format!("{}/{}", key.0, key.1);
        let (limit, pods) = {
            let s = self.lock();
            (s.limit, s.pods)
        };
        // What the last lists left out (none yet), and whether that was said in the log.
        let (mut left_out, mut warned) = (None, false);
        let mut said: Option<String> = None;
        // Credentials read and not yet used: their client, and the kubeconfig it is made of.
        let mut next: Option<(kube::Client, String)> = None;
        loop {
            let (remote, used) = match next.take() {
                Some(read) => read,
                None => match remote_client(&client, &secret).await {
                    Ok(read) => read,
                    Err(why) => {
                        // Said once until it changes; it stays on in the exports' Conflict.
                        if said.as_ref() != Some(&why) {
                            warn!(link = %link, "{why}; reading it again every {CREDENTIALS_RETRY:?}");
                            said = Some(why.clone());
                        }
                        self.reach(&key, Reach::Unread(why));
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            _ = tokio::time::sleep(CREDENTIALS_RETRY) => continue,
                        }
                    }
                },
            };
            let listing = tokio::time::Instant::now();
            let mut events = std::pin::pin!(watch_exported(remote.clone(), &feeds, pods));
            loop {
                let (now, stale) = feeds.left_out();
                if left_out != Some(now) {
                    if now > 0 && !warned {
                        warn!(link = %link, "its cluster sends more exported Services or EndpointSlices than --max-objects-per-link ({limit}) of a watch: those beyond it are left out");
                        warned = true;
                    }
                    left_out = Some(now);
                    let metrics = self.lock().metrics.clone();
                    metrics.left_out(&key, Some(now));
                }
                // Objects came beyond the limit, or room was made under it: listed again, at
                // most once a RELIST_LEFT_OUT, to count what is left out and read what fits.
                let relist = stale.then_some(listing + RELIST_LEFT_OUT);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = sleep_until(relist), if relist.is_some() => {
                        info!(link = %link, "objects came beyond --max-objects-per-link, or went while others were left out: its cluster is listed again");
                        next = Some((remote, used));
                        break;
                    }
                    ev = events.next() => match ev {
                        Some(Ok(Learned::Listed)) => {
                            // A list again (after a watch error, new credentials, objects left
                            // out) tells what it changed key by key.
                            let first = (self.lock().links.get_mut(&key))
                                .is_some_and(|l| !std::mem::replace(&mut l.listed, true));
                            self.reach(&key, Reach::Read);
                            if first {
                                self.tell(Mark::All);
                            }
                        }
                        Some(Ok(Learned::Stale)) => {}
                        Some(Ok(Learned::Service(key))) => self.tell(Mark::Keys(vec![key])),
                        Some(Ok(Learned::Slice(key))) => self.tell(Mark::Keys(slices.heard(&key))),
                        Some(Err(e)) => {
                            let why = format!("watching its exported Services and their EndpointSlices: {e}");
                            warn!(link = %link, "{why}");
                            self.reach(&key, Reach::Unread(why));
                            let read = tokio::select! {
                                _ = stop.cancelled() => return,
                                read = remote_client(&client, &secret) => read,
                            };
                            if let Ok((remote, text)) = read
                                && text != used
                            {
                                info!(link = %link, "the Link's credentials were replaced: its cluster is read with the new ones");
                                next = Some((remote, text));
                                break;
                            }
                        }
                        None => return,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
