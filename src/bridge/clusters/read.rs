//! How a cluster's exports are read, with nothing of [`super::Clusters`]' state: the selectors
//! of exported Services, their stores and watches, one exported Service as the halves read it,
//! and a Link's target and credentials.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt as _;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use serde_json::Value;

use crate::bridge::model::{ClusterExport, EXPORTED, Endpoint, Family, Pods, Port};
use crate::bridge::runtime::index::Index;
use crate::bridge::runtime::store::{self, Codec, Heard, Store};
use crate::bridge::runtime::{self, Key, Watched};
use crate::source::linkerd::LABEL_MIRRORED;
use crate::source::linkerd::carried::{ANNOTATION, Carried};
use crate::source::mcs::LABEL_KUBERNETES_SERVICE_NAME;

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

pub(super) const LABEL_FEDERATED: &str = "mirror.linkerd.io/federated";
pub(super) const LABEL_EXPORTED_BY_LINKERD: &str = "mirror.linkerd.io/exported";

/// Whether `svc` is one of [`selectors`]' exported Services: what marks this cluster's with
/// [`EXPORTED`] in the one store of its Services.
pub fn is_exported(svc: &Service) -> bool {
    let Some(labels) = &svc.metadata.labels else {
        return false;
    };
    let is = |k: &str, values: &[&str]| labels.get(k).is_some_and(|v| values.contains(&v.as_str()));
    !labels.contains_key(LABEL_MIRRORED)
        && (is(LABEL_FEDERATED, &["member"])
            || is(LABEL_EXPORTED_BY_LINKERD, &["true", "remote-discovery"]))
}

/// One cluster's exported Services: this cluster's, marked in the store of all its Services;
/// a linked cluster's, a store per selector of [`selectors`].
#[derive(Clone)]
pub(super) enum ExportedStores {
    Own(Store<Service>),
    Linked([Store<Service>; 2]),
}

impl ExportedStores {
    pub(super) fn get(&self, key: &Key) -> Option<Arc<Service>> {
        match self {
            ExportedStores::Own(s) => s.get_marked(key, EXPORTED),
            ExportedStores::Linked(s) => s.iter().find_map(|s| s.get(&key.0, &key.1)),
        }
    }

    /// Every exported Service's key (one labelled both ways is in both stores).
    pub(super) fn keys(&self) -> Vec<Key> {
        match self {
            ExportedStores::Own(s) => s.marked(EXPORTED),
            ExportedStores::Linked(s) => s.iter().flat_map(Store::keys).collect(),
        }
    }
}

/// One cluster's EndpointSlices of its exported Services, a store per selector of
/// [`selectors`] (the endpointslice controller copies a Service's labels onto its slices,
/// k8s.io/endpointslice v0.37.2 utils.go `setEndpointSliceLabels`, so they select those
/// slices too, and a cluster's slices of Services it does not export never reach the bridge),
/// and which slices are of each service.
#[derive(Clone)]
pub(super) struct SliceStores {
    stores: [Store<EndpointSlice>; 2],
    index: Arc<Mutex<Index>>,
}

impl SliceStores {
    pub(super) fn new(stores: [Store<EndpointSlice>; 2]) -> Self {
        SliceStores {
            stores,
            index: Arc::default(),
        }
    }

    fn get(&self, ns: &str, name: &str) -> Option<Arc<EndpointSlice>> {
        self.stores.iter().find_map(|s| s.get(ns, name))
    }

    /// Takes in a change of slice `key`: the services whose pods it changes (of now, and of
    /// before).
    pub(super) fn heard(&self, key: &Key) -> Vec<Key> {
        let named: Vec<Key> = self
            .get(&key.0, &key.1)
            .and_then(|s| service_of(&s))
            .into_iter()
            .collect();
        let mut index = self.index.lock().expect("not poisoned");
        let before = index.set(&key.0, &key.1, named.clone());
        named.into_iter().chain(before).collect()
    }

    /// The pods of service `key`, slice by slice.
    pub(super) fn pods(&self, key: &Key) -> Vec<Pods> {
        let names = self.index.lock().expect("not poisoned").names(key);
        let mut out: Vec<Pods> = (names.iter())
            .filter_map(|n| self.get(&key.0, n))
            .filter(|s| service_of(s).as_ref() == Some(key))
            .map(|s| pods(&s))
            .collect();
        out.sort_by(|a, b| (&a.ports, &a.endpoints).cmp(&(&b.ports, &b.endpoints)));
        out
    }
}

/// The service a slice is of: the endpointslice controller's label.
fn service_of(s: &EndpointSlice) -> Option<Key> {
    runtime::service_of(s, LABEL_KUBERNETES_SERVICE_NAME)
}

/// What an MCS slice copies of one of a cluster's own slices: its IP endpoints (an address
/// that does not parse as its type's is left out: the API server validates them) and ports
/// (one without a number, "every port", is left out).
pub(super) fn pods(s: &EndpointSlice) -> Pods {
    let family = Family::from_word(&s.address_type);
    let endpoints = (s.endpoints.iter().filter(|_| family.is_some()))
        .flat_map(|e| {
            let c = e.conditions.clone().unwrap_or_default();
            e.addresses
                .iter()
                .filter_map(|a| a.parse().ok())
                .filter(|ip: &std::net::IpAddr| Some(Family::of(ip)) == family)
                .map(move |ip| Endpoint {
                    hostname: e.hostname.clone(),
                    ip,
                    ready: c.ready,
                    serving: c.serving,
                    terminating: c.terminating,
                })
        })
        .collect();
    let mut ports: Vec<Port> = (s.ports.iter().flatten())
        .filter_map(|p| {
            Some(Port {
                name: p.name.clone().unwrap_or_default(),
                port: p.port?,
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                app_protocol: p.app_protocol.clone(),
            })
        })
        .collect();
    ports.sort();
    Pods { ports, endpoints }
}

/// What feeds one linked cluster's stores (one per selector of [`selectors`]): one watch
/// after another, when a Link's credentials are replaced.
pub(super) struct Feeds {
    services: [Arc<Mutex<store::Writer<Service>>>; 2],
    slices: [Arc<Mutex<store::Writer<EndpointSlice>>>; 2],
}

impl Feeds {
    /// How many objects the stores' last lists left out, and whether that may be wrong since
    /// (see [`store::Writer::stale`]).
    pub(super) fn left_out(&self) -> (usize, bool) {
        fn n<K>(w: &Arc<Mutex<store::Writer<K>>>) -> (usize, bool) {
            let w = w.lock().expect("not poisoned");
            (w.left_out, w.stale)
        }
        let all = self.services.iter().map(n).chain(self.slices.iter().map(n));
        all.fold((0, false), |(a, s), (b, t)| (a + b, s || t))
    }
}

/// What one event of a linked cluster's watches changed: an exported Service, one of their
/// slices, or every watch listed.
pub(super) enum Learned {
    Service(Key),
    Slice(Key),
    Listed,
    /// An object came beyond `--max-objects-per-link`, or one went while others were left out:
    /// only a new list says what is left out now.
    Stale,
}

/// The watch of `K` selected by `selector` into `writer`: what each event changed, numbered
/// `n` (None: the writer's count of what it left out turned stale).
fn watch_into<K: Watched<DynamicType = ()> + serde::Serialize>(
    client: &kube::Client,
    writer: Arc<Mutex<store::Writer<K>>>,
    selector: &str,
    n: usize,
) -> futures::stream::BoxStream<'static, Result<(usize, Option<Heard>), watcher::Error>> {
    let api: Api<K> = Api::all(client.clone());
    crate::bridge::runtime::watched(api, watcher::Config::default().labels(selector))
        .flat_map(move |ev| {
            let mut w = writer.lock().expect("not poisoned");
            let was = w.stale;
            let heard = match ev {
                Ok(ev) => w.apply(&ev),
                Err(e) => return futures::stream::iter(vec![Err(e)]),
            };
            let stale = (w.stale && !was).then_some(Ok((n, None)));
            let heard = heard.into_iter().map(|h| Ok((n, Some(h))));
            futures::stream::iter(heard.chain(stale).collect::<Vec<_>>())
        })
        .boxed()
}

/// The watches of one linked cluster's exported Services and, if `pods`, their slices into
/// `feeds`: each object changed, and [`Learned::Listed`] once every watch has listed.
pub(super) fn watch_exported(
    client: kube::Client,
    feeds: &Feeds,
    pods: bool,
) -> impl futures::Stream<Item = Result<Learned, watcher::Error>> + use<> {
    let selectors = selectors();
    let services = (feeds.services.iter().zip(&selectors).enumerate())
        .map(|(n, (w, sel))| watch_into(&client, w.clone(), sel, n));
    let slices = (feeds.slices.iter().zip(&selectors).enumerate())
        .filter(|_| pods)
        .map(|(n, (w, sel))| watch_into(&client, w.clone(), sel, n + 2));
    let mut listed = [false, false, !pods, !pods];
    futures::stream::select_all(services.chain(slices)).filter_map(move |ev| {
        futures::future::ready(match ev {
            Ok((n, Some(Heard::Listed))) => {
                listed[n] = true;
                (listed == [true; 4]).then_some(Ok(Learned::Listed))
            }
            Ok((n, Some(Heard::Key { key, .. }))) if n < 2 => Some(Ok(Learned::Service(key))),
            Ok((_, Some(Heard::Key { key, .. }))) => Some(Ok(Learned::Slice(key))),
            Ok((_, None)) => Some(Ok(Learned::Stale)),
            Err(e) => Some(Err(e)),
        })
    })
}

/// The stores of one linked cluster's exported Services and their slices, packed by `codecs`
/// (one of each for every linked cluster: their objects look alike), each of at most `limit`
/// objects.
pub(super) fn writers(
    codecs: &[Arc<Codec>; 2],
    limit: usize,
) -> (Feeds, ExportedStores, SliceStores) {
    let service = || store::Writer::new(store::unmarked, codecs[0].clone()).limited(limit);
    let slice = || store::Writer::new(store::unmarked, codecs[1].clone()).limited(limit);
    let (services, slices) = ([service(), service()], [slice(), slice()]);
    let readers = ExportedStores::Linked(services.each_ref().map(store::Writer::reader));
    let slice_readers = SliceStores::new(slices.each_ref().map(store::Writer::reader));
    let feeds = Feeds {
        services: services.map(|w| Arc::new(Mutex::new(w))),
        slices: slices.map(|w| Arc::new(Mutex::new(w))),
    };
    (feeds, readers, slice_readers)
}

/// One exported Service as the halves read it: what its bridge carried, or, for a Service
/// labelled for Linkerd by hand (or by a bridge before the carried annotation), what its spec
/// says, with no export time (it then sorts after every export that has one). A carried
/// annotation, or ClusterIPs, that cannot be read are an error that says why (the import half's
/// own reading of ClusterIPs, [`crate::bridge::model::cluster_ips`]). This cluster's own
/// export's addresses are its ClusterIPs; another's are Linkerd's objects' here; the pods of
/// either are its cluster's slices' ([`SliceStores::pods`], filled in by the caller).
pub fn cluster_export(link: Option<&str>, svc: &Service) -> Result<ClusterExport, String> {
    let text = svc.annotations().get(ANNOTATION);
    let spec = svc.spec.clone().unwrap_or_default();
    let headless = spec.cluster_ip.as_deref() == Some("None");
    let (carried, bridge) = match text {
        Some(text) => (Carried::parse(text)?, true),
        None => (Carried::of_service(&spec), false),
    };
    let ips = crate::bridge::model::cluster_ips(&spec)?;
    let (ns, name) = runtime::key(&svc.metadata);
    let mut ports = carried.ports.clone();
    ports.sort();
    ports.dedup();
    let label = |k: &str| svc.labels().get(k).map(String::as_str);
    let flat = label(LABEL_FEDERATED) == Some("member")
        || label(LABEL_EXPORTED_BY_LINKERD) == Some("remote-discovery");
    let cluster = carried.cluster.as_deref().or(link).unwrap_or_default();
    Ok(ClusterExport {
        cluster: cluster.into(),
        link: link.map(str::to_string),
        object: None,
        shown: match link {
            None => format!("this cluster's export of {ns}/{name}"),
            Some(link) => format!("cluster {link}'s export of {ns}/{name}"),
        },
        headless,
        ports,
        carried: bridge.then_some(carried),
        endpoints: (ips.into_iter())
            .filter(|_| link.is_none() && !headless)
            .map(|ip| Endpoint::ready(None, ip))
            .collect(),
        flat,
        pods: Vec::new(),
    })
}

/// A Link's target cluster name and its credentials Secret (namespace, name).
pub(super) fn link_spec(l: &DynamicObject) -> Option<(Key, String, (String, String))> {
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
    Some((((&ns).into(), name.into()), target, (ns, secret)))
}

/// A client of the cluster whose credentials are in `secret` (key `kubeconfig`), and that
/// kubeconfig.
pub(super) async fn remote_client(
    client: &kube::Client,
    (ns, name): &(String, String),
) -> Result<(kube::Client, String), String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = api.get(name).await.map_err(|e| {
        format!(
            "the Link's credentials Secret {ns}/{name} cannot be read: {}",
            crate::bridge::runtime::api_error(&e)
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
