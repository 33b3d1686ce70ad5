//! How a cluster's exports are read, with nothing of [`super::Clusters`]' state: the selectors
//! of exported Services, their stores and watches, one exported Service as the halves read it,
//! and a Link's target and credentials.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use serde_json::Value;

use crate::bridge::model::{ClusterExport, EXPORTED};
use crate::bridge::runtime::Key;
use crate::bridge::runtime::store::{self, Codec, Heard, Store};
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

/// What feeds one cluster's stores of exported Services (one per selector of [`selectors`]):
/// one watch after another, when a Link's credentials are replaced.
pub(super) type Feeds = [Arc<Mutex<store::Writer<Service>>>; 2];

/// The watches of one linked cluster's exported Services into `feeds`: each service whose
/// export changed, and [`Heard::Listed`] once both have listed.
pub(super) fn watch_exported(
    client: kube::Client,
    feeds: &Feeds,
) -> impl futures::Stream<Item = Result<Heard, watcher::Error>> + use<> {
    let [a, b] = feeds.clone();
    let [sa, sb] = selectors();
    let one = move |w: Arc<Mutex<store::Writer<Service>>>, selector: String, index: usize| {
        let api: Api<Service> = Api::all(client.clone());
        crate::bridge::runtime::watched(api, watcher::Config::default().labels(&selector))
            .flat_map(move |ev| {
                let heard = match ev {
                    Ok(ev) => w.lock().expect("not poisoned").apply(&ev),
                    Err(e) => return futures::stream::iter(vec![Err(e)]),
                };
                futures::stream::iter(
                    heard
                        .into_iter()
                        .map(move |h| Ok((index, h)))
                        .collect::<Vec<_>>(),
                )
            })
            .boxed()
    };
    let mut listed = [false; 2];
    futures::stream::select(one(a, sa, 0), one(b, sb, 1)).filter_map(move |ev| {
        futures::future::ready(match ev {
            Ok((index, Heard::Listed)) => {
                listed[index] = true;
                (listed == [true; 2]).then_some(Ok(Heard::Listed))
            }
            Ok((_, key)) => Some(Ok(key)),
            Err(e) => Some(Err(e)),
        })
    })
}

/// The stores of one linked cluster's exported Services, packed by `codec` (one for every
/// linked cluster: their exported Services look alike).
pub(super) fn writers(codec: &Arc<Codec>) -> (Feeds, ExportedStores) {
    let writer = || store::Writer::new(store::unmarked, codec.clone());
    let (a, b) = (writer(), writer());
    let readers = ExportedStores::Linked([a.reader(), b.reader()]);
    ([a, b].map(|w| Arc::new(Mutex::new(w))), readers)
}

/// One exported Service as the halves read it: what its bridge carried, or, for a Service
/// labelled for Linkerd by hand (or by a bridge before the carried annotation), what its spec
/// says, with no export time (it then sorts after every export that has one). A carried
/// annotation, or ClusterIPs, that cannot be read are an error that says why (the import half's
/// own reading of ClusterIPs, [`crate::bridge::model::cluster_ips`]). This cluster's own
/// export's addresses are its ClusterIPs (a headless one's hosts are its slices', which the
/// import half reads); another's are Linkerd's objects' here.
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
    let ips = crate::bridge::model::cluster_ips(&spec)?;
    let (ns, name) = (
        svc.metadata.namespace.as_deref(),
        svc.metadata.name.as_deref(),
    );
    let (ns, name) = (ns.unwrap_or_default(), name.unwrap_or_default());
    let mut ports = carried.ports.clone();
    ports.sort();
    ports.dedup();
    Ok(ClusterExport {
        cluster: carried
            .cluster
            .as_deref()
            .or(link)
            .unwrap_or_default()
            .into(),
        link: link.map(str::to_string),
        object: None,
        shown: match link {
            None => format!("this cluster's export of {ns}/{name}"),
            Some(link) => format!("cluster {link}'s export of {ns}/{name}"),
        },
        headless,
        ports,
        carried: bridge.then_some(carried),
        endpoints: match (link, headless) {
            (None, false) => ips.into_iter().map(|ip| (None, ip)).collect(),
            _ => Vec::new(),
        },
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
    Some(((ns.clone(), name), target, (ns, secret)))
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
