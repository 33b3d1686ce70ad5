//! The bridge's shared words, on the floor above [`super::runtime`] and below everything that
//! reads or writes MCS and Linkerd objects: the names the bridge writes by (its field manager,
//! the labels that say an object is its own, the annotation it carries an export's spec in, its
//! EndpointSlices' names), the CRDs it uses, one cluster's export of a service
//! ([`ClusterExport`] around [`Carried`]) with its [`Port`]s and [`Endpoint`]s (its pods as
//! [`Pods`]), an address [`Family`], an export's [`Condition`], and a [`Problem`] to say.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

pub use super::runtime::FIELD_MANAGER;
use super::runtime::Key;
use super::runtime::crd::Crd;
pub use crate::source::linkerd::carried::{Carried, Port};

/// The value of `endpointslice.kubernetes.io/managed-by` on the bridge's EndpointSlices, and of
/// `app.kubernetes.io/managed-by` on its ServiceImports: what carries it is the bridge's to
/// change and delete; nothing else is. Also the controller its Events are reported by.
pub const MANAGER: &str = "linkerd-bridge.clusterset-dns.io";
pub const LABEL_SLICE_MANAGER: &str = "endpointslice.kubernetes.io/managed-by";
pub const LABEL_MANAGER: &str = "app.kubernetes.io/managed-by";
/// On the twin of an import's slice that kube-proxy routes by (`--route-outside-mesh`): the
/// ServiceImport it is of, since it carries no MCS label; its name is the MCS slice's with
/// [`ROUTE_SUFFIX`] (which no MCS slice's name ends with: theirs end in hex digits).
pub const LABEL_ROUTE_OF: &str = "linkerd-bridge.clusterset-dns.io/serviceimport";
pub const ROUTE_SUFFIX: &str = "-route";
/// The field manager of the bridge's Services ([`ports_service_name`]): another than the export
/// half's [`FIELD_MANAGER`], which takes the labels it holds off a Service no longer exported,
/// and would take these Services' off too.
pub const PORTS_FIELD_MANAGER: &str = "clusterset-dns-linkerd-bridge-ports";
/// The suffix of the twin of an import's slice that names the bridge's own Service for the
/// import's ports Linkerd's federated Service lacks ([`ports_service_name`]).
pub const PORTS_SUFFIX: &str = "-ports";

/// The name of the bridge's Service that carries, at the addresses of Linkerd's federated
/// Service `route`, the import's ports `route` lacks: `<route>-ports`, or where that is longer
/// than a Service name may be (63), `route` cut with a hash of it, so that it stays one name.
pub fn ports_service_name(route: &str) -> String {
    let name = format!("{route}{PORTS_SUFFIX}");
    if name.len() <= 63 {
        return name;
    }
    let h = fnv1a(route.bytes());
    let cut = route[..48].trim_end_matches('-');
    format!("{cut}-{h:08x}{PORTS_SUFFIX}")
}

/// The Service annotation in which the export half carries, through Linkerd's service mirror
/// (which copies every annotation onto its mirrors and federated Services), what the import
/// half needs and Linkerd does not copy: the export's creation time, the Service's
/// `sessionAffinity`, `sessionAffinityConfig`, `internalTrafficPolicy`, `trafficDistribution`,
/// `ipFamilies` and its ports with their `appProtocol`, as JSON
/// ([`crate::source::linkerd::carried::Carried`]).
pub const CARRIED: &str = crate::source::linkerd::ANNOTATION_CARRIED;

/// The marks of this cluster's Services in the one store of them all (what each reader
/// selects by): exported with Linkerd's labels (what `clusters::is_exported` says),
/// labelled by the bridge ([`owned_labels`]), written by Linkerd's service mirror
/// ([`crate::source::linkerd::SELECTOR`]).
pub const EXPORTED: u8 = 1;
pub const LABELLED: u8 = 2;
pub const LINKERDS: u8 = 4;
/// And the bridge's own ([`ports_service_name`]).
pub const ROUTES: u8 = 8;
/// The mark of the bridge's own ServiceImports and EndpointSlices in their stores.
pub const OURS: u8 = 1;

/// The labels of `svc` that the bridge's field manager holds.
pub fn owned_labels(svc: &k8s_openapi::api::core::v1::Service) -> BTreeSet<String> {
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

/// Whether an object's `labels` say it is the bridge's: `label` ([`LABEL_MANAGER`] or
/// [`LABEL_SLICE_MANAGER`]) is [`MANAGER`].
pub fn is_ours(labels: Option<&std::collections::BTreeMap<String, String>>, label: &str) -> bool {
    labels.and_then(|l| l.get(label)).map(String::as_str) == Some(MANAGER)
}

/// The object name of the slice of `service`'s addresses of `family` from `cluster`:
/// readable, and unique in the namespace through a hash of all three (`a-b` of cluster `c` and
/// `a` of cluster `b-c` differ).
pub fn slice_name(service: &str, cluster: &str, family: Family) -> String {
    let h = fnv1a(
        (service.bytes().chain([0]))
            .chain(cluster.bytes().chain([0]))
            .chain(family.word().bytes()),
    );
    format!("{service}-{}-{h:08x}", cluster.replace('.', "-"))
}

/// The 32-bit FNV-1a hash of `bytes`: what keeps the names the bridge makes unique.
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u32 {
    bytes.into_iter().fold(0x811c_9dc5, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The ServiceExport and ServiceImport CRDs: mcs-api v0.5.2 stores v1beta1 and still serves
/// v1alpha1.
/// One of the MCS API's.
const fn mcs(kind: &'static str, plural: &'static str, install: &'static str) -> Crd {
    Crd {
        group: "multicluster.x-k8s.io",
        versions: &["v1beta1", "v1alpha1"],
        kind,
        plural,
        install,
    }
}

pub const SERVICE_EXPORT: Crd = mcs(
    "ServiceExport",
    "serviceexports",
    "install the CRDs of sigs.k8s.io/mcs-api v0.5.2 (kubectl apply -f deploy/crds/multicluster.x-k8s.io_serviceexports.yaml)",
);
pub const SERVICE_IMPORT: Crd = mcs(
    "ServiceImport",
    "serviceimports",
    "install the CRDs of sigs.k8s.io/mcs-api v0.5.2 (kubectl apply -f deploy/crds/multicluster.x-k8s.io_serviceimports.yaml)",
);

/// Linkerd's Link (linkerd2 `version-2.20` serves v1alpha3 and still v1alpha1, v1alpha2).
pub const LINK: Crd = Crd {
    group: "multicluster.linkerd.io",
    versions: &["v1alpha3", "v1alpha2", "v1alpha1"],
    kind: "Link",
    plural: "links",
    install: "install Linkerd's multicluster extension (linkerd multicluster install), which defines Links",
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(ip: &IpAddr) -> Family {
        if ip.is_ipv4() { Family::V4 } else { Family::V6 }
    }

    /// The family a word of `ipFamilies` names.
    pub fn from_word(word: &str) -> Option<Family> {
        match word {
            "IPv4" => Some(Family::V4),
            "IPv6" => Some(Family::V6),
            _ => None,
        }
    }

    /// The word of `ipFamilies` and of an EndpointSlice's `addressType`.
    pub fn word(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

/// The Service's ClusterIPs (none when headless or not yet given), one per family.
pub fn cluster_ips(spec: &k8s_openapi::api::core::v1::ServiceSpec) -> Result<Vec<IpAddr>, String> {
    let texts = match (&spec.cluster_ips, &spec.cluster_ip) {
        (Some(v), _) if !v.is_empty() => v.clone(),
        (_, Some(one)) => vec![one.clone()],
        _ => Vec::new(),
    };
    let mut out: Vec<IpAddr> = Vec::new();
    for t in texts.iter().filter(|t| !t.is_empty() && *t != "None") {
        let ip: IpAddr = t
            .parse()
            .map_err(|_| format!("ClusterIP {t:?} is not an IP address"))?;
        if out.iter().any(|o| Family::of(o) == Family::of(&ip)) {
            return Err(format!(
                "ClusterIPs {texts:?} hold more than one address of a family"
            ));
        }
        out.push(ip);
    }
    Ok(out)
}

/// One endpoint of a service as a slice holds it: its hostname (headless, if it has one),
/// address and conditions (unset as the API leaves them: `ready` unset counts as ready).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    pub hostname: Option<String>,
    pub ip: IpAddr,
    pub ready: Option<bool>,
    pub serving: Option<bool>,
    pub terminating: Option<bool>,
}

impl Endpoint {
    /// An address that is always ready: a Service's ClusterIP, a mirror's.
    pub fn ready(hostname: Option<String>, ip: IpAddr) -> Self {
        Endpoint {
            hostname,
            ip,
            ready: Some(true),
            serving: None,
            terminating: None,
        }
    }
}

/// What one of a cluster's own EndpointSlices of an exported service says: its endpoints and
/// their ports (the pods', which a Service's `targetPort` may make differ from its ports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pods {
    pub ports: Vec<Port>,
    pub endpoints: Vec<Endpoint>,
}

/// One cluster's export of a service, as the bridge sees it: read through the Link's
/// credentials (or in this cluster), or from what Linkerd's service mirror wrote here. Both
/// halves judge from it: the export half compares this cluster's export with the others', the
/// import half merges them into the import.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterExport {
    /// The cluster: its id (as its bridge carried it, or as the import half names the Link's
    /// target), else the Link's target name.
    pub cluster: String,
    /// The Link's target cluster name; None for this cluster's own export.
    pub link: Option<String>,
    /// The object here that stands for it (a mirror or the federated Service), which Events
    /// about it go on.
    pub object: Option<String>,
    /// What messages call it.
    pub shown: String,
    pub headless: bool,
    /// Its ports, sorted.
    pub ports: Vec<Port>,
    /// What its export half carried; None for a Service labelled for Linkerd by hand.
    pub carried: Option<Carried>,
    /// Its addresses here: this cluster's own export's ClusterIPs, a mirror's ClusterIP, a
    /// headless mirror's hosts.
    pub endpoints: Vec<Endpoint>,
    /// Whether Linkerd reaches its pods directly (a federated member, remote discovery): then
    /// [`Self::pods`] are addresses every cluster can reach; else only through a gateway.
    pub flat: bool,
    /// Its pods, as its cluster's EndpointSlices of the exported Service say.
    pub pods: Vec<Pods>,
}

impl ClusterExport {
    /// When the export was made, as its bridge carried it.
    pub fn created(&self) -> Option<&str> {
        self.carried.as_ref()?.export_created.as_deref()
    }
}

/// The exports read: by namespace and name of the service, and whose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exports {
    pub by_service: BTreeMap<Key, Vec<ClusterExport>>,
    /// The Links (target cluster names) whose clusters' exports were listed: what Linkerd's
    /// objects say of those clusters adds no member (a cluster not in `by_service` does not
    /// export), they give only addresses.
    pub read: BTreeSet<String>,
    /// Whether this cluster's own exports were listed (then a federated Service's local
    /// member adds none either).
    pub own_read: bool,
}

/// Something the import half could not use, or found wrong, to say once in the log and in an
/// Event on the object it is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Problem {
    /// The kind of the object: `Service` (one of Linkerd's, or this cluster's exported one),
    /// `ServiceImport` or `EndpointSlice`.
    pub kind: &'static str,
    pub namespace: String,
    pub object: String,
    pub reason: Reason,
    pub message: String,
}

impl Problem {
    /// About `kind` `ns`/`object`.
    pub fn new(
        kind: &'static str,
        (ns, object): (&str, &str),
        reason: Reason,
        message: String,
    ) -> Self {
        let (namespace, object) = (ns.into(), object.into());
        Problem {
            kind,
            namespace,
            object,
            reason,
            message,
        }
    }
}

/// Why a [`Problem`] is said: its Event's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// One of Linkerd's Services the import cannot use (or not all of).
    NotImported,
    /// Clusters export the service differently; the oldest export decides.
    ExportConflict,
    /// An object of the import's name that the bridge did not create: it is left as it is.
    NotTakenOver,
    /// An endpoint's address that no slice may hold (see [`crate::source::policy`]).
    AddressRefused,
    /// The bridge's Service that would route an import's ports for clients outside the mesh
    /// was refused by the API server.
    NotRouted,
}

impl Reason {
    pub fn word(self) -> &'static str {
        match self {
            Reason::NotImported => "NotImported",
            Reason::ExportConflict => "ExportConflict",
            Reason::NotTakenOver => "NotTakenOver",
            Reason::AddressRefused => "AddressRefused",
            Reason::NotRouted => "NotRouted",
        }
    }
}

/// A condition's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
}

/// One condition of the ServiceExport, without its times (the writer keeps those right).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub kind: &'static str,
    pub status: Status,
    pub reason: String,
    pub message: String,
}

impl Condition {
    pub fn new(kind: &'static str, status: Status, reason: &str, message: String) -> Self {
        Condition {
            kind,
            status,
            reason: reason.into(),
            message,
        }
    }
}

#[cfg(test)]
mod tests;
