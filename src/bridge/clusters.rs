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
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Key;
use super::import::{ClusterExport, Exports};
use super::runtime::store::{self, Store};
use crate::source::linkerd::LABEL_MIRRORED;
use crate::source::linkerd::carried::{ANNOTATION, Carried};

/// The selectors of exported Services, in every cluster: what Linkerd's service mirror reads
/// with a Link's default selectors (`federatedServiceSelector`, and `selector` with
/// `remoteDiscoverySelector`), less Linkerd's own mirrors, which copy the exported Service's
/// labels.
pub fn selectors() -> [String; 2] {
    [
        format!("{LABEL_FEDERATED}=member,!{LABEL_MIRRORED}"),
        format!("{LABEL_EXPORTED_BY_LINKERD} in (true,remote-discovery),!{LABEL_MIRRORED}"),
    ]
}

const LABEL_FEDERATED: &str = "mirror.linkerd.io/federated";
const LABEL_EXPORTED_BY_LINKERD: &str = "mirror.linkerd.io/exported";

/// One cluster's exported Services: a store per selector of [`selectors`].
#[derive(Clone)]
struct Exported([Store<Service>; 2]);

impl Exported {
    fn get(&self, key: &Key) -> Option<Arc<Service>> {
        self.0.iter().find_map(|s| s.get(&key.0, &key.1))
    }

    /// Every exported Service's key (one labelled both ways is in both stores).
    fn keys(&self) -> impl Iterator<Item = Key> {
        self.0.iter().flat_map(Store::keys)
    }
}

/// What a cluster's watches of exported Services said.
enum Seen {
    /// This service's export changed.
    Key(Key),
    /// Both watches have listed (again).
    Listed,
}

/// What feeds one cluster's stores of exported Services (one per selector of [`selectors`]):
/// one watch after another, when a Link's credentials are replaced.
type Feeds = [Arc<Mutex<store::Writer<Service>>>; 2];

/// The watches of one cluster's exported Services into `feeds`: each event as the key it
/// changes, and [`Seen::Listed`] once both have listed.
fn watch_exported(
    client: kube::Client,
    feeds: &Feeds,
) -> impl futures::Stream<Item = Result<Seen, watcher::Error>> + use<> {
    let [a, b] = feeds.clone();
    let [sa, sb] = selectors();
    let one = move |w: Arc<Mutex<store::Writer<Service>>>, selector: String, index: usize| {
        let api: Api<Service> = Api::all(client.clone());
        super::runtime::watched(api, watcher::Config::default().labels(&selector))
            .filter_map(move |ev| {
                if let Ok(ev) = &ev {
                    w.lock().expect("not poisoned").apply(ev);
                }
                futures::future::ready(match ev {
                    Ok(watcher::Event::InitDone) => Some(Ok(Err(index))),
                    Ok(ev) => super::runtime::object_of(ev)
                        .and_then(|s| key_of(&s))
                        .map(|k| Ok(Ok(k))),
                    Err(e) => Some(Err(e)),
                })
            })
            .boxed()
    };
    let mut listed = [false; 2];
    futures::stream::select(one(a, sa, 0), one(b, sb, 1)).filter_map(move |ev| {
        futures::future::ready(match ev {
            Ok(Err(index)) => {
                listed[index] = true;
                (listed == [true; 2]).then_some(Ok(Seen::Listed))
            }
            Ok(Ok(key)) => Some(Ok(Seen::Key(key))),
            Err(e) => Some(Err(e)),
        })
    })
}

/// The stores of one cluster's exported Services; this cluster's (`own`) share their texts
/// with the halves' stores of its Services.
fn writers(own: bool) -> (Feeds, Exported) {
    let writer = || {
        let w = store::Writer::new(store::unmarked, &store::SERVICE);
        if own { w.shared() } else { w }
    };
    let (a, b) = (writer(), writer());
    let readers = Exported([a.reader(), b.reader()]);
    ([a, b].map(|w| Arc::new(Mutex::new(w))), readers)
}

/// How long a Link whose credentials cannot be used waits before they are read again.
const CREDENTIALS_RETRY: Duration = Duration::from_secs(10);

/// What changed, for the halves to bring up to date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// The exports of these services.
    Keys(Vec<Key>),
    /// A cluster came, went, or was listed: every service.
    All,
}

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
    exports: Option<Exported>,
    stop: CancellationToken,
}

#[derive(Default)]
struct State {
    /// Where the links' reach and this cluster's id are counted.
    metrics: Option<Arc<super::metrics::BridgeMetrics>>,
    /// This cluster's id: `--cluster-id`, else the ClusterProperty's.
    own_id: Option<String>,
    /// Whether the id is known or was looked for once.
    own_id_read: bool,
    own: Option<Exported>,
    own_listed: bool,
    /// By the Link's namespace and name.
    links: BTreeMap<Key, Linked>,
    links_listed: bool,
    subscribers: Vec<mpsc::UnboundedSender<Changed>>,
}

/// The exports of this cluster and of each linked one. Cheap to clone.
#[derive(Clone, Default)]
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
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Changed> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().subscribers.push(tx);
        rx
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("not poisoned")
    }

    fn tell(&self, c: Changed) {
        let mut s = self.lock();
        if c == Changed::All
            && let Some(m) = &s.metrics
        {
            let read = s.links.values().filter(|l| l.reach == Reach::Read).count();
            m.clusters(read, s.links.len() - read, s.own_id.is_some());
        }
        s.subscribers.retain(|sub| sub.send(c.clone()).is_ok());
    }

    /// Whether every cluster was listed or found unreadable once: before that a judgement
    /// would leave out exports that exist.
    pub fn settled(&self) -> bool {
        let s = self.lock();
        s.own_id_read
            && s.own_listed
            && s.links_listed
            && s.links.values().all(|l| l.reach != Reach::Pending)
    }

    /// This cluster's id, if it has one.
    pub fn own_id(&self) -> Option<String> {
        self.lock().own_id.clone()
    }

    /// This cluster's exported Service `key`, if it is one.
    pub fn own(&self, key: &Key) -> Option<Arc<Service>> {
        let s = self.lock();
        s.own.as_ref()?.get(key)
    }

    /// The linked clusters' exports of `key`, and which clusters were read.
    pub fn peers(&self, key: &Key) -> Peers {
        let s = self.lock();
        let mut out = Peers::default();
        for l in s.links.values() {
            if let Some(svc) = l.exports.as_ref().and_then(|e| e.get(key)) {
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
            own_read: s.own_listed,
            read: s
                .links
                .values()
                .filter(|l| l.listed)
                .map(|l| l.target.clone())
                .collect(),
            ..Exports::default()
        };
        let mut found = Vec::new();
        let own = s.own.as_ref().and_then(|e| e.get(key));
        let linked = s
            .links
            .values()
            .filter_map(|l| Some((Some(l.target.as_str()), l.exports.as_ref()?.get(key)?)));
        for (link, svc) in own.map(|svc| (None, svc)).into_iter().chain(linked) {
            match cluster_export(link, &svc) {
                Ok(e) => found.push(e),
                Err(why) => problems.push(why),
            }
        }
        if !found.is_empty() {
            out.by_service.insert(key.clone(), found);
        }
        out
    }

    /// Every service some cluster exports.
    pub fn keys(&self) -> Vec<Key> {
        let s = self.lock();
        let mut keys = BTreeSet::new();
        for e in s
            .own
            .iter()
            .chain(s.links.values().filter_map(|l| l.exports.as_ref()))
        {
            keys.extend(e.keys());
        }
        keys.into_iter().collect()
    }
}

/// One exported Service as the halves read it: what its bridge carried, or, for a Service
/// labelled for Linkerd by hand (or by a bridge before the carried annotation), what its spec
/// says, with no export time (it then sorts after every export that has one). A carried
/// annotation, or ClusterIPs, that cannot be read are an error that says why (the import half's
/// own reading of ClusterIPs, [`super::import::cluster_ips`]).
pub fn cluster_export(link: Option<&str>, svc: &Service) -> Result<ClusterExport, String> {
    let text = svc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION));
    let spec = svc.spec.clone().unwrap_or_default();
    let headless = spec.cluster_ip.as_deref() == Some("None");
    let (carried, bridge) = match text {
        Some(text) => (Carried::parse(text)?, true),
        None => (Carried::of_service(&spec), false),
    };
    let ips = super::import::cluster_ips(&spec)?;
    Ok(ClusterExport {
        link: link.map(str::to_string),
        ips,
        headless,
        hosts: Vec::new(),
        carried,
        bridge,
    })
}

/// Starts reading: this cluster's exports now, the Links' once the API server serves Linkerd's
/// Link (until then there are none, and it is looked for again every [`super::CRD_RECHECK`]);
/// runs until `shutdown`.
pub fn start(
    client: kube::Client,
    cluster_id: Option<String>,
    metrics: Arc<super::metrics::BridgeMetrics>,
    shutdown: CancellationToken,
) -> Clusters {
    let clusters = Clusters::default();
    clusters.lock().metrics = Some(metrics);
    match cluster_id {
        Some(id) => {
            let mut s = clusters.lock();
            s.own_id = Some(id);
            s.own_id_read = true;
        }
        None => {
            let (c, client, stop) = (clusters.clone(), client.clone(), shutdown.clone());
            tokio::spawn(async move { c.follow_cluster_id(client, stop).await });
        }
    }
    let c = clusters.clone();
    let (client2, stop) = (client.clone(), shutdown.clone());
    tokio::spawn(async move {
        let (w, readers) = writers(true);
        c.lock().own = Some(readers);
        let mut events = std::pin::pin!(watch_exported(client2, &w));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                ev = events.next() => match ev {
                    Some(Ok(Seen::Listed)) => {
                        c.lock().own_listed = true;
                        c.tell(Changed::All);
                    }
                    Some(Ok(Seen::Key(k))) => c.tell(Changed::Keys(vec![k])),
                    Some(Err(e)) => warn!(error = %e, "watching this cluster's exported Services"),
                    None => return,
                }
            }
        }
    });
    let c = clusters.clone();
    tokio::spawn(async move {
        let link = loop {
            match super::resource(&client, &super::LINK).await {
                Ok(link) => break link,
                Err(_) => {
                    // No Links: nothing linked to read (yet).
                    if !c.lock().links_listed {
                        c.lock().links_listed = true;
                        c.tell(Changed::All);
                    }
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(super::CRD_RECHECK) => {}
                    }
                }
            }
        };
        c.follow_links(client, link, shutdown).await;
    });
    clusters
}

fn key_of(svc: &Service) -> Option<Key> {
    Some((svc.metadata.namespace.clone()?, svc.metadata.name.clone()?))
}

/// A Link's target cluster name and its credentials Secret (namespace, name).
fn link_spec(l: &DynamicObject) -> Option<(Key, String, (String, String))> {
    let (ns, name) = (l.metadata.namespace.clone()?, l.metadata.name.clone()?);
    let target = l
        .data
        .pointer("/spec/targetClusterName")
        .and_then(Value::as_str)
        .map_or_else(|| name.clone(), str::to_string);
    let secret = l
        .data
        .pointer("/spec/clusterCredentialsSecret")
        .and_then(Value::as_str)
        .map_or_else(|| format!("cluster-credentials-{target}"), str::to_string);
    Some(((ns.clone(), name), target, (ns, secret)))
}

impl Clusters {
    /// Reads this cluster's id from the ClusterProperty `cluster.clusterset.k8s.io` (KEP-2149)
    /// now and every [`super::CRD_RECHECK`], as the DNS server reads it; a change is said and
    /// judged again everywhere.
    async fn follow_cluster_id(self, client: kube::Client, shutdown: CancellationToken) {
        let resource = ApiResource {
            group: "about.k8s.io".into(),
            version: "v1alpha1".into(),
            api_version: "about.k8s.io/v1alpha1".into(),
            kind: "ClusterProperty".into(),
            plural: "clusterproperties".into(),
        };
        let api: Api<DynamicObject> = Api::all_with(client, &resource);
        let mut said = None;
        loop {
            let (id, why) = match api.get_opt(crate::source::about::CLUSTER_ID).await {
                Ok(Some(o)) => {
                    let value = o.data.pointer("/spec/value").and_then(Value::as_str);
                    match value.and_then(crate::wire::cluster_id) {
                        Some(id) => (Some(id), None),
                        None => (
                            None,
                            Some(format!(
                                "ClusterProperty {} has value {value:?}, not a cluster id (one or two DNS labels)",
                                crate::source::about::CLUSTER_ID
                            )),
                        ),
                    }
                }
                Ok(None) => (None, None),
                Err(e) => (
                    self.own_id(),
                    Some(format!(
                        "ClusterProperty {} cannot be read: {}",
                        crate::source::about::CLUSTER_ID,
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
                self.tell(Changed::All);
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(super::CRD_RECHECK) => {}
            }
        }
    }

    async fn follow_links(
        self,
        client: kube::Client,
        link: ApiResource,
        shutdown: CancellationToken,
    ) {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &link);
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
        let mut listing: Option<BTreeSet<Key>> = None;
        loop {
            let ev = tokio::select! {
                _ = shutdown.cancelled() => break,
                ev = events.next() => ev,
            };
            match ev {
                Some(Ok(watcher::Event::Init)) => listing = Some(BTreeSet::new()),
                Some(Ok(watcher::Event::InitApply(l))) => {
                    if let Some(spec) = link_spec(&l) {
                        listing.get_or_insert_default().insert(spec.0.clone());
                        self.linked(&client, spec, &shutdown);
                    }
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    let seen = listing.take().unwrap_or_default();
                    let gone: Vec<Key> = {
                        let s = self.lock();
                        s.links
                            .keys()
                            .filter(|k| !seen.contains(k))
                            .cloned()
                            .collect()
                    };
                    gone.iter().for_each(|k| self.unlinked(k));
                    self.lock().links_listed = true;
                    self.tell(Changed::All);
                }
                Some(Ok(watcher::Event::Apply(l))) => {
                    if let Some(spec) = link_spec(&l) {
                        self.linked(&client, spec, &shutdown);
                    }
                }
                Some(Ok(watcher::Event::Delete(l))) => {
                    if let Some((key, ..)) = link_spec(&l) {
                        self.unlinked(&key);
                        self.tell(Changed::All);
                    }
                }
                Some(Err(e)) => warn!(error = %e, "watching Links"),
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
        self.lock().links.insert(
            key.clone(),
            Linked {
                target: target.clone(),
                secret: secret.clone(),
                reach: Reach::Pending,
                listed: false,
                exports: None,
                stop: stop.clone(),
            },
        );
        info!(link = %format!("{}/{}", key.0, key.1), cluster = %target, "reading the exports of a linked cluster");
        let this = self.clone();
        let client = client.clone();
        tokio::spawn(async move { this.read_link(client, key, secret, stop).await });
    }

    fn unlinked(&self, key: &Key) {
        if let Some(l) = self.lock().links.remove(key) {
            l.stop.cancel();
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
            self.tell(Changed::All);
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
        secret: (String, String),
        stop: CancellationToken,
    ) {
        let link = format!("{}/{}", key.0, key.1);
        let (feeds, readers) = writers(false);
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
            if let Some(l) = self.lock().links.get_mut(&key) {
                l.exports = Some(readers.clone());
            }
            let mut events = std::pin::pin!(watch_exported(remote, &feeds));
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    ev = events.next() => match ev {
                        Some(Ok(Seen::Listed)) => {
                            if let Some(l) = self.lock().links.get_mut(&key) {
                                l.listed = true;
                            }
                            self.reach(&key, Reach::Read);
                            self.tell(Changed::All);
                        }
                        Some(Ok(Seen::Key(k))) => self.tell(Changed::Keys(vec![k])),
                        Some(Err(e)) => {
                            let why = format!("watching its exported Services: {e}");
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

/// A client of the cluster whose credentials are in `secret` (key `kubeconfig`), and that
/// kubeconfig.
async fn remote_client(
    client: &kube::Client,
    (ns, name): &(String, String),
) -> Result<(kube::Client, String), String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = api.get(name).await.map_err(|e| {
        format!(
            "the Link's credentials Secret {ns}/{name} cannot be read: {}",
            super::runtime::api_error(&e)
        )
    })?;
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get("kubeconfig"))
        .ok_or_else(|| format!("Secret {ns}/{name} has no key kubeconfig"))?;
    let text = std::str::from_utf8(&bytes.0)
        .map_err(|_| format!("Secret {ns}/{name}'s kubeconfig is not UTF-8"))?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(text)
        .map_err(|e| format!("Secret {ns}/{name}'s kubeconfig cannot be read: {e}"))?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .map_err(|e| format!("Secret {ns}/{name}'s kubeconfig cannot be used: {e}"))?;
    let remote = kube::Client::try_from(config)
        .map_err(|e| format!("Secret {ns}/{name}'s kubeconfig gives no client: {e}"))?;
    Ok((remote, text.to_string()))
}
