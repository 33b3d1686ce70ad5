//! Plain values that sources produce and the zone builder consumes: a multicluster service as
//! DNS sees it. Kubernetes types stop at the source boundary; nothing here knows about them.

use std::net::IpAddr;

pub mod packed;
mod reason;

pub use self::reason::{Limit, ObjectKind, Refusal, Skip, WatchEvent};

use self::packed::PackedService;

/// `namespace/name` of a ServiceImport: the identity of a service in the cluster set.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceKey {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServiceType {
    /// Reached through the clusterset IPs in `spec.ips` (or, when there are none, through the
    /// per-cluster addresses in its EndpointSlices).
    ClusterSetIp,
    /// Reached through the endpoint addresses directly.
    Headless,
}

/// How the answers built from a service's endpoints treat the server's own cluster (KEP-1645's
/// `internalTrafficPolicy` and `trafficDistribution` on the ServiceImport). Without an own
/// cluster id every value answers alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Locality {
    /// Neither field: every cluster's endpoints, the own cluster's first.
    #[default]
    Any,
    /// `trafficDistribution` Prefer*: the own cluster's endpoints when it has any of the
    /// queried family; SRV keeps every target, the others at priority 1.
    PreferOwn,
    /// `internalTrafficPolicy: Local`: the own cluster's endpoints only (none: NODATA).
    OwnOnly,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// The `_proto` label of an SRV name, without the underscore.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Port {
    /// Lower-cased port name; `None` for an unnamed port (never matched by `_name._proto`).
    pub name: Option<String>,
    pub protocol: Protocol,
    pub port: u16,
}

/// One ready endpoint of an EndpointSlice (not-ready endpoints never reach the model).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    pub addresses: Vec<IpAddr>,
    /// `hostname` from the object, already checked to be a lower-case DNS label.
    pub hostname: Option<String>,
}

/// The part of one EndpointSlice that DNS needs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Slice {
    /// The slice's object name, to keep slices of one service in a stable order.
    pub name: String,
    /// `multicluster.kubernetes.io/source-cluster`, lower-cased: one or two DNS labels. Without
    /// it, the endpoints still count for the service's addresses but have no names of their own.
    pub cluster: Option<String>,
    pub ports: Vec<Port>,
    pub endpoints: Vec<Endpoint>,
}

/// A ServiceImport with the EndpointSlices that belong to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Service {
    pub key: ServiceKey,
    /// The kind of object the service's answers come from (a ServiceImport, or Linkerd's
    /// Services), as its skips are counted.
    pub origin: ObjectKind,
    pub kind: ServiceType,
    /// `spec.ips`, in object order.
    pub ips: Vec<IpAddr>,
    pub ports: Vec<Port>,
    /// Slices sorted by name.
    pub slices: Vec<Slice>,
    pub locality: Locality,
    /// `status.endpointSliceObjects: Absent`: the implementation publishes no slices for it.
    pub slices_absent: bool,
}

/// A complete set of services, for [`Update::Reset`]. A source that keeps its objects packed
/// hands them over packed, and the builder unpacks one service at a time as it renders them, so
/// a full load never holds every service unpacked at once (at 100,000 endpoints that transient
/// was larger than the source's whole store, and the holes it left stayed resident).
#[derive(Debug, Clone, Default)]
pub struct ServiceSet {
    plain: Vec<Service>,
    packed: Vec<PackedService>,
    /// The server's own cluster id, as the source knows it with these services (`--cluster-id`,
    /// else the ClusterProperty `cluster.clusterset.k8s.io`).
    own_cluster: Option<String>,
}

impl ServiceSet {
    pub fn packed(services: Vec<PackedService>) -> Self {
        ServiceSet {
            plain: Vec::new(),
            packed: services,
            own_cluster: None,
        }
    }

    /// The same set, with the server's own cluster id `id`.
    pub fn with_own_cluster(mut self, id: Option<String>) -> Self {
        self.own_cluster = id;
        self
    }

    pub fn own_cluster(&self) -> Option<&str> {
        self.own_cluster.as_deref()
    }

    pub fn len(&self) -> usize {
        self.plain.len() + self.packed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Vec<Service>> for ServiceSet {
    fn from(plain: Vec<Service>) -> Self {
        ServiceSet {
            plain,
            packed: Vec::new(),
            own_cluster: None,
        }
    }
}

impl IntoIterator for ServiceSet {
    type Item = Service;
    type IntoIter = Box<dyn Iterator<Item = Service> + Send>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(
            self.plain.into_iter().chain(
                self.packed
                    .into_iter()
                    .map(|(key, import, slices)| packed::service(key, &import, &slices)),
            ),
        )
    }
}

/// What a source tells the zone builder.
#[derive(Debug, Clone)]
pub enum Update {
    /// The complete set of services: anything not in it is removed. Marks the zone synced.
    Reset(ServiceSet),
    /// One service was added or changed.
    Upsert(Service),
    /// One service is gone.
    Remove(ServiceKey),
}
