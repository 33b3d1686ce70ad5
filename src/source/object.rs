//! What every kind of object shares: the [`Kind`] trait each kind implements in a file of its
//! own, the [`Part`] of a source's store that keeps a kind's objects, what a read gives
//! ([`Read`]), why an object is skipped ([`ObjectError`]) or an address refused ([`Refused`]),
//! the metadata read ([`Meta`]) and the readers of the lists several kinds carry (addresses,
//! ports). It names no kind: the kinds build on it, and [`super::kinds`] lists them.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::policy::{Policy, refusal};
use crate::model::packed::PackedService;
use crate::model::{ObjectKind, Port, Protocol, Refusal, Service, ServiceKey, Skip};

/// One kind of object a source reads: where the API serves it, how it is watched, and how one
/// object of it is read into what the store keeps. The sources loop over the kinds the
/// selection names ([`super::kinds`]); nothing outside the kind's file matches on it.
pub trait Kind: Send + Sync + 'static {
    /// The shape read (unknown fields skipped, absent lists empty).
    type Shape: DeserializeOwned;
    /// What one usable object gives.
    type Output;
    /// The part of the store that keeps this kind's objects (kinds it joins with share it).
    type Part: Part + Default;

    /// The kind, as log lines and metric labels name it.
    const KIND: ObjectKind;
    /// Watched only once the store wants its objects ([`Part::wants`]), not from the start:
    /// a kind that costs every server and serves few.
    const ON_DEMAND: bool = false;
    /// Where the API serves it.
    const RESOURCE: Resource;

    /// The `kind` of a file's document of this kind (its own label, unless several kinds read
    /// one kind of object).
    fn file_kind() -> &'static str {
        Self::KIND.label()
    }

    /// The label selector the API server applies to the watch, if any.
    fn selector(&self) -> Option<&'static str> {
        None
    }

    /// Objects asked for in one list request; `None`: the client's default.
    fn page_size(&self) -> Option<u32> {
        None
    }

    /// The version to watch instead of discovering it (`--serviceimport-version`).
    fn version(&self) -> Option<&str> {
        None
    }

    /// Puts the metadata the Kubernetes client parsed apart into the shape.
    fn set_meta(shape: &mut Self::Shape, meta: Meta);

    /// Validates one object read into its shape.
    fn convert(&self, shape: Self::Shape, policy: &Policy) -> Read<Self::Output>;

    /// `namespace/name` of an object read (`/name` for a cluster-scoped one), as log lines name
    /// it.
    fn object_name(object: &Self::Output) -> String;

    /// The addresses the object gave that are not served.
    fn refused(_object: &Self::Output) -> &[Refused] {
        &[]
    }

    /// The object as its part of the store keeps it.
    fn pack(object: Self::Output) -> <Self::Part as Part>::Object;
}

/// `(namespace, name)` of an object (the namespace empty for a cluster-scoped one).
pub type ObjectId = (String, String);

/// One part of a source's store: what it keeps of the objects of its kinds, and the services
/// they give. The shape of kubert's `IndexNamespacedResource { apply, delete, reset }`: a part
/// per kind, or one part for kinds that join (ServiceImports and their EndpointSlices), and one
/// driver ([`super::store::Store`]) for all of them. The store holds the parts in precedence
/// order: a service that two parts give is answered from the first, and the other's objects
/// are reported as a conflict.
pub trait Part: Send + 'static {
    /// What the part keeps of one object: its kinds' [`Kind::pack`].
    type Object: Send + 'static;

    /// Adds or replaces an object; returns the services whose answers may have changed.
    fn apply(&mut self, object: Self::Object) -> Vec<ServiceKey>;

    /// Forgets object `id` of `kind`; returns the service it belonged to if it was known.
    fn delete(&mut self, kind: ObjectKind, id: &ObjectId) -> Option<ServiceKey>;

    /// Identities of the objects of `kind` it holds (in `namespace`, or all).
    fn ids(&self, kind: ObjectKind, namespace: Option<&str>) -> Vec<ObjectId>;

    /// How many objects of `kind` it holds.
    fn count(&self, kind: ObjectKind) -> usize;

    /// The service `key` as this part's objects give it, if they give one.
    fn service(&self, _key: &ServiceKey) -> Option<Service> {
        None
    }

    /// Whether its objects give `key` a service (what [`Part::service`] says, without
    /// building it where that is cheaper).
    fn gives(&self, key: &ServiceKey) -> bool {
        self.service(key).is_some()
    }

    /// Every service it may give (a superset of those it gives).
    fn keys(&self) -> Vec<ServiceKey> {
        Vec::new()
    }

    /// Every service it gives, packed (a few bytes an endpoint).
    fn packed(&self) -> Vec<PackedService> {
        Vec::new()
    }

    /// As [`Part::packed`], for a part that is done with: its objects move instead of being
    /// copied, so a full load never holds them twice.
    fn into_packed(self) -> Vec<PackedService>
    where
        Self: Sized,
    {
        self.packed()
    }

    /// The names of its objects that give `key`, as a conflict report names them.
    fn objects(&self, _key: &ServiceKey) -> Vec<String> {
        Vec::new()
    }

    /// The server's own cluster id, if its objects name it.
    fn own_cluster(&self) -> Option<&str> {
        None
    }

    /// The server's own cluster id is now `own`, for a part whose services depend on it (told
    /// before any service is asked for after it changed).
    fn set_own_cluster(&mut self, _own: Option<&str>) {}

    /// Whether objects of `kind`, one of its kinds watched on demand ([`Kind::ON_DEMAND`]),
    /// would change a service now.
    fn wants(&self, _kind: ObjectKind) -> bool {
        true
    }
}

/// Where the API serves a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// The API group (`""` for core/v1).
    pub group: &'static str,
    /// The versions read, preferred first. More than one: the API server is asked which it
    /// serves (unless the kind names one).
    pub versions: &'static [&'static str],
    pub plural: &'static str,
    /// Whether a cluster without it cannot be served at all (its CRD missing stops the watch
    /// from starting); a kind that is not required is watched once it is served.
    pub required: bool,
    /// Namespaced (watched per `--namespace`) or cluster-scoped (watched once).
    pub namespaced: bool,
}

impl Resource {
    /// `group/version`, as `apiVersion` says it.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }
}

/// What reading one object gave.
#[derive(Debug)]
pub enum Read<T> {
    Object(T),
    /// Not something we serve (a Submariner internal copy, a slice without the MCS label, an
    /// excluded namespace); the string says what it was, for a debug log.
    Ignored(String),
    Invalid(ObjectError),
}

impl<T> Read<T> {
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Read<U> {
        match self {
            Read::Object(t) => Read::Object(f(t)),
            Read::Ignored(w) => Read::Ignored(w),
            Read::Invalid(e) => Read::Invalid(e),
        }
    }
}

/// Why an object was skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {object}: {message}")]
pub struct ObjectError {
    pub kind: ObjectKind,
    /// `namespace/name` as far as it could be read.
    pub object: String,
    pub reason: Skip,
    pub message: String,
}

impl ObjectError {
    pub fn new(kind: ObjectKind, object: &str, reason: Skip, message: String) -> Self {
        ObjectError {
            kind,
            object: object.to_string(),
            reason,
            message,
        }
    }
}

/// `Read::Invalid` of a new [`ObjectError`].
pub fn invalid<T>(kind: ObjectKind, object: &str, reason: Skip, message: String) -> Read<T> {
    Read::Invalid(ObjectError::new(kind, object, reason, message))
}

/// An address an object gave that is never answered (see [`super::policy`]): dropped alone,
/// the rest of the object is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Where in the object, e.g. `spec.ips[1]` or `endpoints[0].addresses[0]`.
    pub field: String,
    pub address: IpAddr,
    pub reason: Refusal,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} refused ({})",
            self.field, self.address, self.reason
        )
    }
}

/// Logs (warn) and counts each address that object `object` of `kind` gave and is not served.
pub fn report_refused(
    kind: ObjectKind,
    object: &str,
    refused: &[Refused],
    metrics: &crate::metrics::Metrics,
) {
    for r in refused {
        tracing::warn!(%kind, object, address = %r.address, reason = %r.reason, "refused address: {kind} {object} {r}; the object's other addresses are served");
        metrics.refused_address(kind, r.reason);
    }
}

/// The metadata conversion reads.
#[derive(Debug, Default, Deserialize)]
pub struct Meta {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub labels: Option<BTreeMap<String, String>>,
    pub annotations: Option<BTreeMap<String, String>>,
}

impl Meta {
    /// Moves out what conversion reads; the rest (managedFields, the last applied
    /// configuration, …) is dropped with the rest of the object.
    fn from_object_meta(m: ObjectMeta) -> Self {
        Meta {
            name: m.name,
            namespace: m.namespace,
            labels: m.labels,
            annotations: m.annotations,
        }
    }

    /// `namespace/name` as far as it could be read, as log lines name an object.
    pub fn object(&self) -> String {
        format!(
            "{}/{}",
            self.namespace.as_deref().unwrap_or(""),
            self.name.as_deref().unwrap_or("?")
        )
    }

    /// `(name, namespace)`, both required of a namespaced object.
    pub fn identity(&mut self, kind: ObjectKind) -> Result<(String, String), ObjectError> {
        let object = self.object();
        match (self.name.take(), self.namespace.take()) {
            (Some(name), Some(namespace)) => Ok((name, namespace)),
            _ => Err(ObjectError::new(
                kind,
                &object,
                Skip::Malformed,
                "metadata.name and metadata.namespace are required".into(),
            )),
        }
    }
}

/// Reads an object the Kubernetes API gave into `K`'s shape: its body straight from the JSON the
/// client parsed (moved, not copied), its metadata moved over.
pub fn from_dynamic<K: Kind>(o: DynamicObject) -> Result<K::Shape, ObjectError> {
    let meta = Meta::from_object_meta(o.metadata);
    match serde_json::from_value::<K::Shape>(o.data) {
        Ok(mut t) => {
            K::set_meta(&mut t, meta);
            Ok(t)
        }
        Err(e) => Err(ObjectError::new(
            K::KIND,
            &meta.object(),
            Skip::Malformed,
            format!("cannot be read: {e}"),
        )),
    }
}

/// A port entry as we read it.
#[derive(Debug, Deserialize)]
pub struct RawPort {
    name: Option<String>,
    protocol: Option<String>,
    port: Option<i64>,
}

/// Reads the addresses `texts` of the list at `field`: the ones the policy refuses are set
/// apart; one that is not an address is the object's error (its message).
pub fn addresses(
    texts: Vec<String>,
    field: &str,
    policy: &Policy,
) -> Result<(Vec<IpAddr>, Vec<Refused>), String> {
    let (mut ips, mut refused) = (Vec::new(), Vec::new());
    for (i, text) in texts.iter().enumerate() {
        let Ok(address) = text.trim().parse::<IpAddr>() else {
            return Err(format!("{field}[{i}] {text:?} is not an IP address"));
        };
        match refusal(policy, address) {
            None => ips.push(address),
            Some(reason) => refused.push(Refused {
                field: format!("{field}[{i}]"),
                address,
                reason,
            }),
        }
    }
    Ok((ips, refused))
}

/// Reads the ports of the list at `field`; a bad one is the object's error (its reason and
/// message). `required`: every entry must have a number; otherwise an entry without one ("all
/// ports", as an EndpointSlice may say, which no SRV record can express) is dropped.
pub fn ports(raw: Vec<RawPort>, field: &str, required: bool) -> Result<Vec<Port>, (Skip, String)> {
    let mut ports = Vec::new();
    for (i, p) in raw.iter().enumerate() {
        match port(p, required) {
            Ok(Some(p)) => ports.push(p),
            Ok(None) => {}
            Err(why) => return Err((Skip::BadPort, format!("{field}[{i}]: {why}"))),
        }
    }
    Ok(ports)
}

/// Reads one port entry (see [`ports`]); the error is its message.
fn port(p: &RawPort, required: bool) -> Result<Option<Port>, String> {
    let number = match p.port {
        Some(n) if (1..=65535).contains(&n) => n as u16,
        Some(n) => return Err(format!("port {n} is out of range 1-65535")),
        None if required => return Err("port is missing".into()),
        None => return Ok(None),
    };
    let protocol = match p
        .protocol
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("TCP") => Protocol::Tcp,
        Some("UDP") => Protocol::Udp,
        Some("SCTP") => Protocol::Sctp,
        Some(other) => return Err(format!("protocol {other:?} is not TCP, UDP or SCTP")),
    };
    let name = match p.name.as_deref() {
        None | Some("") => None,
        Some(n) => {
            let n = n.to_ascii_lowercase();
            // `_name` must fit in one label.
            if n.len() > 62 || !n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(format!("name {n:?} cannot be an SRV label"));
            }
            Some(n)
        }
    };
    Ok(Some(Port {
        name,
        protocol,
        port: number,
    }))
}
