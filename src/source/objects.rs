//! Kubernetes objects to model values: the slim shapes of ServiceImport and EndpointSlice we read,
//! their validation, and the store that joins imports with their slices into `model::Service`s.
//! Shared by every source; one unusable object is reported and skipped, never fatal.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use serde::Deserialize;
use serde_yaml_ng::Value;

use super::policy::{Policy, refusal};
use crate::model::packed::{self, Packed, PackedImport};
use crate::model::{Endpoint, Port, Protocol, Service, ServiceKey, ServiceSet, ServiceType, Slice};

pub const LABEL_SERVICE_NAME: &str = "multicluster.kubernetes.io/service-name";
pub const LABEL_SOURCE_CLUSTER: &str = "multicluster.kubernetes.io/source-cluster";
pub const MCS_GROUP: &str = "multicluster.x-k8s.io";

/// Why an object was skipped; `reason` is a short stable word for the metric label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {object}: {message}")]
pub struct ObjectError {
    pub kind: &'static str,
    /// `namespace/name` as far as it could be read.
    pub object: String,
    pub reason: &'static str,
    pub message: String,
}

/// An address an object gave that is never answered (see [`super::policy`]): dropped alone,
/// the rest of the object is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Where in the object, e.g. `spec.ips[1]` or `endpoints[0].addresses[0]`.
    pub field: String,
    pub address: IpAddr,
    /// The metric's `reason` label: `loopback`, `link_local`, `denied`, …
    pub reason: &'static str,
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
    kind: &str,
    object: &str,
    refused: &[Refused],
    metrics: &crate::metrics::Metrics,
) {
    for r in refused {
        tracing::warn!(kind, object, address = %r.address, reason = r.reason, "refused address: {kind} {object} {r}; the object's other addresses are served");
        metrics.refused_address(kind, r.reason);
    }
}

/// One object read from a source, already validated.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    Import(Import),
    Slice(SliceObject),
}

/// What the source did with one raw object.
#[derive(Debug)]
pub enum Classified {
    Object(Object),
    /// Not something we serve (another kind, a Submariner internal copy, a slice without the
    /// MCS label); the string says what it was, for a debug log.
    Ignored(String),
    Invalid(ObjectError),
}

/// A validated ServiceImport.
#[derive(Debug, Clone, PartialEq)]
pub struct Import {
    pub key: ServiceKey,
    pub kind: ServiceType,
    pub ips: Vec<IpAddr>,
    pub ports: Vec<Port>,
    /// Addresses left out of `ips`.
    pub refused: Vec<Refused>,
}

/// A validated EndpointSlice with the service it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceObject {
    pub service: ServiceKey,
    pub slice: Slice,
    /// Addresses left out of the endpoints (an endpoint left with none is left out too).
    pub refused: Vec<Refused>,
}

/// An object in the store's form (a few bytes an endpoint), as a relist holds what it has
/// listed until the list is complete.
#[derive(Debug, Clone)]
pub enum PackedObject {
    Import(ServiceKey, PackedImport),
    /// The service it belongs to, and the slice (which knows its own name).
    Slice(ServiceKey, Packed),
}

impl Object {
    /// The object in the store's form.
    pub fn pack(self) -> PackedObject {
        match self {
            Object::Import(i) => {
                PackedObject::Import(i.key, PackedImport::new(i.kind, &i.ips, &i.ports))
            }
            Object::Slice(s) => PackedObject::Slice(s.service, Packed::new(&s.slice)),
        }
    }

    /// The object's kind and `namespace/name`, as log lines name it.
    pub fn identity(&self) -> (&'static str, String) {
        match self {
            Object::Import(i) => ("ServiceImport", i.key.to_string()),
            Object::Slice(s) => (
                "EndpointSlice",
                format!("{}/{}", s.service.namespace, s.slice.name),
            ),
        }
    }

    /// The addresses the object gave that are not served.
    pub fn refused(&self) -> &[Refused] {
        match self {
            Object::Import(i) => &i.refused,
            Object::Slice(s) => &s.refused,
        }
    }
}

// ---- slim wire shapes: unknown fields are tolerated, absent and null lists are empty ----

#[derive(Deserialize, Default)]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct RawImport {
    #[serde(default)]
    metadata: Meta,
    spec: Option<RawImportSpec>,
}

#[derive(Deserialize)]
struct RawImportSpec {
    #[serde(rename = "type")]
    type_: Option<String>,
    ips: Option<Vec<String>>,
    ports: Option<Vec<RawPort>>,
}

#[derive(Deserialize)]
struct RawPort {
    name: Option<String>,
    protocol: Option<String>,
    port: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSlice {
    #[serde(default)]
    metadata: Meta,
    address_type: Option<String>,
    endpoints: Option<Vec<RawEndpoint>>,
    ports: Option<Vec<RawPort>>,
}

#[derive(Deserialize)]
struct RawEndpoint {
    addresses: Option<Vec<String>>,
    conditions: Option<RawConditions>,
    hostname: Option<String>,
}

#[derive(Deserialize)]
struct RawConditions {
    ready: Option<bool>,
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn object_name(v: &Value) -> String {
    let meta = v.get("metadata");
    let ns = meta.and_then(|m| str_field(m, "namespace")).unwrap_or("");
    let name = meta.and_then(|m| str_field(m, "name")).unwrap_or("?");
    format!("{ns}/{name}")
}

/// Classify one raw object (a YAML/JSON mapping) under `policy`. `List` objects are not handled
/// here: see [`flatten`].
pub fn classify(v: &Value, policy: &Policy) -> Classified {
    let api = str_field(v, "apiVersion").unwrap_or("");
    let kind = str_field(v, "kind").unwrap_or("");
    let served = matches!(
        (kind, api),
        (
            "ServiceImport",
            "multicluster.x-k8s.io/v1alpha1" | "multicluster.x-k8s.io/v1beta1"
        ) | ("EndpointSlice", "discovery.k8s.io/v1")
    );
    if !served {
        return Classified::Ignored(format!("{kind} {api} {}", object_name(v)));
    }
    let namespace = v
        .get("metadata")
        .and_then(|m| str_field(m, "namespace"))
        .unwrap_or("");
    if !policy.serves_namespace(namespace) {
        return Classified::Ignored(format!(
            "{kind} {}: namespace {namespace} is excluded (--exclude-namespace)",
            object_name(v)
        ));
    }
    match kind {
        "ServiceImport" => import_from_value(v, policy),
        _ => slice_from_value(v, policy),
    }
}

/// Expands `kind: List` (and `*List`) objects into their items, in order.
pub fn flatten(v: Value, out: &mut Vec<Value>) {
    let is_list = str_field(&v, "kind").is_some_and(|k| k.ends_with("List"));
    if is_list {
        if let Some(Value::Sequence(items)) = v.get("items") {
            for item in items.clone() {
                flatten(item, out);
            }
        }
    } else if !v.is_null() {
        out.push(v);
    }
}

fn invalid(kind: &'static str, object: &str, reason: &'static str, message: String) -> Classified {
    Classified::Invalid(ObjectError {
        kind,
        object: object.to_string(),
        reason,
        message,
    })
}

fn malformed(kind: &'static str, object: &str, message: String) -> ObjectError {
    ObjectError {
        kind,
        object: object.to_string(),
        reason: "malformed",
        message,
    }
}

/// The object's slim shape, or why it cannot be read.
fn read_raw<T: serde::de::DeserializeOwned>(
    kind: &'static str,
    object: &str,
    v: &Value,
) -> Result<T, ObjectError> {
    serde_yaml_ng::from_value(v.clone())
        .map_err(|e| malformed(kind, object, format!("cannot be read: {e}")))
}

/// `(name, namespace)`, both required.
fn identity(
    kind: &'static str,
    object: &str,
    meta: (Option<String>, Option<String>),
) -> Result<(String, String), ObjectError> {
    match meta {
        (Some(name), Some(namespace)) => Ok((name, namespace)),
        _ => Err(malformed(
            kind,
            object,
            "metadata.name and metadata.namespace are required".into(),
        )),
    }
}

fn import_from_value(v: &Value, policy: &Policy) -> Classified {
    const KIND: &str = "ServiceImport";
    let object = object_name(v);
    let raw: RawImport = match read_raw(KIND, &object, v) {
        Ok(r) => r,
        Err(e) => return Classified::Invalid(e),
    };
    let (name, namespace) =
        match identity(KIND, &object, (raw.metadata.name, raw.metadata.namespace)) {
            Ok(id) => id,
            Err(e) => return Classified::Invalid(e),
        };
    let copy_marker = |m: &Option<BTreeMap<String, String>>| {
        m.as_ref()
            .is_some_and(|m| m.contains_key(LABEL_SERVICE_NAME))
    };
    if copy_marker(&raw.metadata.labels) || copy_marker(&raw.metadata.annotations) {
        return Classified::Ignored(format!(
            "{KIND} {object}: carries {LABEL_SERVICE_NAME}, an internal copy (Submariner), not a service"
        ));
    }
    if !is_label(&name) {
        return invalid(
            KIND,
            &object,
            "bad_name",
            format!("metadata.name {name:?} is not a lower-case DNS label"),
        );
    }
    if !is_label(&namespace) {
        return invalid(
            KIND,
            &object,
            "bad_name",
            format!("metadata.namespace {namespace:?} is not a lower-case DNS label"),
        );
    }
    let Some(spec) = raw.spec else {
        return invalid(KIND, &object, "malformed", "spec is missing".into());
    };
    let kind = match spec.type_.as_deref() {
        Some("Headless") => ServiceType::Headless,
        _ => ServiceType::ClusterSetIp,
    };
    let mut ips = Vec::new();
    let mut refused = Vec::new();
    for (i, ip) in spec.ips.unwrap_or_default().iter().enumerate() {
        match ip.trim().parse::<IpAddr>() {
            Ok(address) => match refusal(policy, address) {
                None => ips.push(address),
                Some(reason) => refused.push(Refused {
                    field: format!("spec.ips[{i}]"),
                    address,
                    reason,
                }),
            },
            Err(_) => {
                return invalid(
                    KIND,
                    &object,
                    "bad_ip",
                    format!("spec.ips[{i}] {ip:?} is not an IP address"),
                );
            }
        }
    }
    let mut ports = Vec::new();
    for (i, p) in spec.ports.unwrap_or_default().iter().enumerate() {
        match port(p, true) {
            Ok(Some(p)) => ports.push(p),
            Ok(None) => {}
            Err((reason, why)) => {
                return invalid(KIND, &object, reason, format!("spec.ports[{i}]: {why}"));
            }
        }
    }
    Classified::Object(Object::Import(Import {
        key: ServiceKey { namespace, name },
        kind,
        ips,
        ports,
        refused,
    }))
}

fn slice_from_value(v: &Value, policy: &Policy) -> Classified {
    const KIND: &str = "EndpointSlice";
    let object = object_name(v);
    let raw: RawSlice = match read_raw(KIND, &object, v) {
        Ok(r) => r,
        Err(e) => return Classified::Invalid(e),
    };
    let labels = raw.metadata.labels.unwrap_or_default();
    let Some(service) = labels.get(LABEL_SERVICE_NAME) else {
        return Classified::Ignored(format!("{KIND} {object}: no {LABEL_SERVICE_NAME} label"));
    };
    let (name, namespace) =
        match identity(KIND, &object, (raw.metadata.name, raw.metadata.namespace)) {
            Ok(id) => id,
            Err(e) => return Classified::Invalid(e),
        };
    if !is_label(service) {
        return invalid(
            KIND,
            &object,
            "bad_name",
            format!("label {LABEL_SERVICE_NAME}={service:?} is not a lower-case DNS label"),
        );
    }
    let cluster = match labels.get(LABEL_SOURCE_CLUSTER) {
        None => None,
        Some(c) => {
            let c = c.to_ascii_lowercase();
            let n = c.split('.').count();
            if !(1..=2).contains(&n) || !c.split('.').all(is_label) {
                return invalid(
                    KIND,
                    &object,
                    "bad_cluster",
                    format!("label {LABEL_SOURCE_CLUSTER}={c:?} is not one or two DNS labels"),
                );
            }
            Some(c)
        }
    };
    let v6 = match raw.address_type.as_deref() {
        Some("IPv4") => false,
        Some("IPv6") => true,
        other => {
            return invalid(
                KIND,
                &object,
                "bad_address_type",
                format!(
                    "addressType {:?} is not served (only IPv4 and IPv6)",
                    other.unwrap_or("")
                ),
            );
        }
    };
    let mut ports = Vec::new();
    for (i, p) in raw.ports.unwrap_or_default().iter().enumerate() {
        match port(p, false) {
            Ok(Some(p)) => ports.push(p),
            Ok(None) => {}
            Err((reason, why)) => {
                return invalid(KIND, &object, reason, format!("ports[{i}]: {why}"));
            }
        }
    }
    let mut endpoints = Vec::new();
    let mut refused = Vec::new();
    for (i, e) in raw.endpoints.unwrap_or_default().into_iter().enumerate() {
        if e.conditions.and_then(|c| c.ready) == Some(false) {
            continue;
        }
        let mut addresses = Vec::new();
        for (j, a) in e.addresses.unwrap_or_default().iter().enumerate() {
            match a.trim().parse::<IpAddr>() {
                Ok(ip) if ip.is_ipv6() == v6 => match refusal(policy, ip) {
                    None => addresses.push(ip),
                    Some(reason) => refused.push(Refused {
                        field: format!("endpoints[{i}].addresses[{j}]"),
                        address: ip,
                        reason,
                    }),
                },
                Ok(_) => {
                    return invalid(
                        KIND,
                        &object,
                        "bad_ip",
                        format!(
                            "endpoints[{i}].addresses[{j}] {a:?} does not match addressType {}",
                            if v6 { "IPv6" } else { "IPv4" }
                        ),
                    );
                }
                Err(_) => {
                    return invalid(
                        KIND,
                        &object,
                        "bad_ip",
                        format!("endpoints[{i}].addresses[{j}] {a:?} is not an IP address"),
                    );
                }
            }
        }
        let hostname = match e.hostname {
            None => None,
            Some(h) if h.is_empty() => None,
            Some(h) => {
                let h = h.to_ascii_lowercase();
                if !is_label(&h) {
                    return invalid(
                        KIND,
                        &object,
                        "bad_hostname",
                        format!("endpoints[{i}].hostname {h:?} is not a DNS label"),
                    );
                }
                Some(h)
            }
        };
        if !addresses.is_empty() {
            endpoints.push(Endpoint {
                addresses,
                hostname,
            });
        }
    }
    Classified::Object(Object::Slice(SliceObject {
        service: ServiceKey {
            namespace,
            name: service.clone(),
        },
        slice: Slice {
            name,
            cluster,
            ports,
            endpoints,
        },
        refused,
    }))
}

/// Reads one port entry. `Ok(None)` drops an EndpointSlice port without a number ("all ports",
/// which no SRV record can express).
fn port(p: &RawPort, required: bool) -> Result<Option<Port>, (&'static str, String)> {
    let number = match p.port {
        Some(n) if (1..=65535).contains(&n) => n as u16,
        Some(n) => return Err(("bad_port", format!("port {n} is out of range 1-65535"))),
        None if required => return Err(("bad_port", "port is missing".into())),
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
        Some(other) => {
            return Err((
                "bad_port",
                format!("protocol {other:?} is not TCP, UDP or SCTP"),
            ));
        }
    };
    let name = match p.name.as_deref() {
        None | Some("") => None,
        Some(n) => {
            let n = n.to_ascii_lowercase();
            // `_name` must fit in one label.
            if n.len() > 62 || !n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(("bad_port", format!("name {n:?} cannot be an SRV label")));
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

/// A lower-case RFC 1123 DNS label: 1-63 of `[a-z0-9-]`, not starting or ending with `-`.
pub fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// `(namespace, name)` of an object.
pub type ObjectId = (String, String);

/// The objects of one service: its ServiceImport (if seen yet) and its slices, packed.
#[derive(Debug, Default)]
struct Objects {
    import: Option<PackedImport>,
    /// Sorted by slice name.
    slices: Vec<Packed>,
}

/// The objects a source currently knows, joined into services on demand. Kept packed (a few
/// bytes an endpoint) because a source must hold every object it watches.
#[derive(Debug, Default)]
pub struct Store {
    services: HashMap<ServiceKey, Objects>,
    imports: usize,
    /// The service each slice is filed under, so a delete (or a relabel) finds it.
    slice_owner: HashMap<ObjectId, ServiceKey>,
}

impl Store {
    /// Adds or replaces an object; returns the services whose DNS data may have changed.
    pub fn insert(&mut self, object: Object) -> Vec<ServiceKey> {
        self.insert_packed(object.pack())
    }

    /// As [`Store::insert`], for an object already packed.
    pub fn insert_packed(&mut self, object: PackedObject) -> Vec<ServiceKey> {
        match object {
            PackedObject::Import(key, packed) => {
                let objects = self.services.entry(key.clone()).or_default();
                if objects.import.replace(packed).is_none() {
                    self.imports += 1;
                }
                vec![key]
            }
            PackedObject::Slice(service, packed) => {
                let name = packed.name().to_string();
                let mut affected = Vec::with_capacity(2);
                if let Some(old) = self
                    .slice_owner
                    .insert((service.namespace.clone(), name.clone()), service.clone())
                {
                    if old != service {
                        self.detach_slice(&old, &name);
                        affected.push(old);
                    }
                }
                let list = &mut self.services.entry(service.clone()).or_default().slices;
                match list.binary_search_by(|p| p.name().cmp(&name)) {
                    Ok(i) => list[i] = packed,
                    Err(i) => list.insert(i, packed),
                }
                affected.push(service);
                affected
            }
        }
    }

    /// Drops the service's record once it holds nothing.
    fn tidy(&mut self, key: &ServiceKey) {
        if self
            .services
            .get(key)
            .is_some_and(|o| o.import.is_none() && o.slices.is_empty())
        {
            self.services.remove(key);
        }
    }

    fn detach_slice(&mut self, owner: &ServiceKey, name: &str) {
        if let Some(o) = self.services.get_mut(owner) {
            if let Ok(i) = o.slices.binary_search_by(|p| p.name().cmp(name)) {
                o.slices.remove(i);
            }
            o.slices.shrink_to_fit();
        }
        self.tidy(owner);
    }

    /// Forgets a ServiceImport; returns its service if it was known.
    pub fn remove_import(&mut self, id: &ObjectId) -> Option<ServiceKey> {
        let key = ServiceKey {
            namespace: id.0.clone(),
            name: id.1.clone(),
        };
        self.services.get_mut(&key)?.import.take()?;
        self.imports -= 1;
        self.tidy(&key);
        Some(key)
    }

    /// Forgets an EndpointSlice; returns the service it belonged to if it was known.
    pub fn remove_slice(&mut self, id: &ObjectId) -> Option<ServiceKey> {
        let owner = self.slice_owner.remove(id)?;
        self.detach_slice(&owner, &id.1);
        Some(owner)
    }

    /// Identities of the ServiceImports (in `namespace`, or all).
    pub fn import_ids(&self, namespace: Option<&str>) -> Vec<ObjectId> {
        self.services
            .iter()
            .filter(|(k, o)| o.import.is_some() && namespace.is_none_or(|n| k.namespace == n))
            .map(|(k, _)| (k.namespace.clone(), k.name.clone()))
            .collect()
    }

    /// Identities of the EndpointSlices (in `namespace`, or all).
    pub fn slice_ids(&self, namespace: Option<&str>) -> Vec<ObjectId> {
        self.slice_owner
            .keys()
            .filter(|(ns, _)| namespace.is_none_or(|n| ns == n))
            .cloned()
            .collect()
    }

    pub fn imports(&self) -> usize {
        self.imports
    }

    pub fn slices(&self) -> usize {
        self.slice_owner.len()
    }

    /// The service as DNS sees it, if its ServiceImport is known.
    pub fn service(&self, key: &ServiceKey) -> Option<Service> {
        let objects = self.services.get(key)?;
        Some(packed::service(
            key.clone(),
            objects.import.as_ref()?,
            &objects.slices,
        ))
    }

    /// Every service, still packed (a few bytes an endpoint): the builder unpacks them one at
    /// a time, so a full load never holds them all unpacked.
    pub fn snapshot(&self) -> ServiceSet {
        let mut all: Vec<_> = self
            .services
            .iter()
            .filter_map(|(k, o)| Some((k.clone(), o.import.clone()?, o.slices.clone())))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        ServiceSet::packed(all)
    }

    /// As [`Store::snapshot`], for a store that is done with: its objects move into the
    /// snapshot instead of being copied, so a full load never holds them twice.
    pub fn into_snapshot(self) -> ServiceSet {
        let mut all: Vec<_> = self
            .services
            .into_iter()
            .filter_map(|(k, o)| Some((k, o.import?, o.slices)))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        ServiceSet::packed(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(yaml: &str) -> Classified {
        classify(
            &serde_yaml_ng::from_str::<Value>(yaml).unwrap(),
            &Policy::default(),
        )
    }

    #[test]
    fn import_with_unknown_fields_and_defaults() {
        let c = one(
            "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\n\
             spec: {type: ClusterSetIP, ips: [10.0.0.1, 'fd00::1'], ipFamilies: [IPv4], ports: [{port: 80}, {name: Http, protocol: udp, port: 81}]}\nstatus: {clusters: [{cluster: a}]}",
        );
        let Classified::Object(Object::Import(i)) = c else {
            panic!("{c:?}")
        };
        assert_eq!(i.kind, ServiceType::ClusterSetIp);
        assert_eq!(i.ips.len(), 2);
        assert_eq!(
            i.ports[0],
            Port {
                name: None,
                protocol: Protocol::Tcp,
                port: 80
            }
        );
        assert_eq!(
            i.ports[1],
            Port {
                name: Some("http".into()),
                protocol: Protocol::Udp,
                port: 81
            }
        );
    }

    #[test]
    fn unknown_type_is_clustersetip_and_submariner_copies_are_ignored() {
        let c = one(
            "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: a, namespace: b}\nspec: {type: Weird, ports: []}",
        );
        assert!(matches!(
            c,
            Classified::Object(Object::Import(Import {
                kind: ServiceType::ClusterSetIp,
                ..
            }))
        ));
        let c = one(
            "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: a-b-c, namespace: sub, labels: {multicluster.kubernetes.io/service-name: a}}\nspec: {type: Headless}",
        );
        assert!(matches!(c, Classified::Ignored(_)), "{c:?}");
        let c = one(
            "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: a, namespace: b, annotations: {multicluster.kubernetes.io/service-name: a}}\nspec: {type: Headless}",
        );
        assert!(matches!(c, Classified::Ignored(_)), "{c:?}");
    }

    #[test]
    fn bad_objects_name_the_object_and_the_field() {
        let cases = [
            (
                "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\nspec: {type: ClusterSetIP, ips: [10.0.0.300]}",
                "bad_ip",
                "spec.ips[0]",
            ),
            (
                "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: Web_1, namespace: shop}\nspec: {type: ClusterSetIP}",
                "bad_name",
                "metadata.name",
            ),
            (
                "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\nspec: {ports: [{port: 70000}]}",
                "bad_port",
                "spec.ports[0]",
            ),
            (
                "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\nspec: {ports: 7}",
                "malformed",
                "cannot be read",
            ),
            (
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web}}\naddressType: IPv4\nendpoints: [{addresses: ['fd00::1']}]",
                "bad_ip",
                "endpoints[0].addresses[0]",
            ),
            (
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web}}\naddressType: IPv4\nendpoints: [{addresses: [10.0.0.1], hostname: 'a.b'}]",
                "bad_hostname",
                "endpoints[0].hostname",
            ),
            (
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web, multicluster.kubernetes.io/source-cluster: a.b.c}}\naddressType: IPv4",
                "bad_cluster",
                "source-cluster",
            ),
            (
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web}}\naddressType: FQDN",
                "bad_address_type",
                "FQDN",
            ),
        ];
        for (yaml, reason, mention) in cases {
            let Classified::Invalid(e) = one(yaml) else {
                panic!("accepted: {yaml}")
            };
            assert_eq!(e.reason, reason, "{e}");
            assert!(e.to_string().contains(mention), "{e}");
            assert!(e.to_string().contains("shop/"), "{e}");
        }
    }

    #[test]
    fn refused_addresses_are_dropped_alone_and_excluded_namespaces_not_served() {
        let Classified::Object(Object::Import(i)) = one(
            "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\n\
             spec: {type: ClusterSetIP, ips: [169.254.169.254, 10.0.0.1, '::ffff:127.0.0.1'], ports: [{port: 80}]}",
        ) else {
            panic!()
        };
        assert_eq!(i.ips, ["10.0.0.1".parse::<IpAddr>().unwrap()]);
        let refused: Vec<String> = i.refused.iter().map(|r| r.to_string()).collect();
        assert_eq!(
            refused,
            [
                "spec.ips[0] 169.254.169.254 refused (link_local)",
                "spec.ips[2] ::ffff:127.0.0.1 refused (loopback)"
            ]
        );
        let Classified::Object(Object::Slice(s)) = one(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web}}\n\
             addressType: IPv4\nendpoints:\n- {addresses: [255.255.255.255], hostname: gone}\n- {addresses: [0.0.0.0, 10.1.0.2], hostname: kept}",
        ) else {
            panic!()
        };
        assert_eq!(
            s.slice.endpoints.len(),
            1,
            "an endpoint with no address left goes"
        );
        assert_eq!(s.slice.endpoints[0].hostname.as_deref(), Some("kept"));
        assert_eq!(
            s.slice.endpoints[0].addresses,
            ["10.1.0.2".parse::<IpAddr>().unwrap()]
        );
        let reasons: Vec<_> = s
            .refused
            .iter()
            .map(|r| (r.field.as_str(), r.reason))
            .collect();
        assert_eq!(
            reasons,
            [
                ("endpoints[0].addresses[0]", "broadcast"),
                ("endpoints[1].addresses[0]", "unspecified")
            ]
        );
        for kind in [
            "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: dns, namespace: kube-system}\nspec: {type: ClusterSetIP, ips: [10.0.0.1]}",
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: kube-public, labels: {multicluster.kubernetes.io/service-name: web}}\naddressType: IPv4",
        ] {
            let c = one(kind);
            assert!(
                matches!(&c, Classified::Ignored(w) if w.contains("excluded")),
                "{c:?}"
            );
        }
    }

    #[test]
    fn slices_skip_not_ready_and_keep_absent_ready() {
        let c = one(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web, multicluster.kubernetes.io/source-cluster: East.Prod}}\n\
             addressType: IPv4\nports: null\nendpoints:\n- {addresses: [10.0.0.1], conditions: {ready: false}}\n- {addresses: [10.0.0.2]}\n- {addresses: [10.0.0.3], conditions: {ready: true}, hostname: DB-0}",
        );
        let Classified::Object(Object::Slice(s)) = c else {
            panic!("{c:?}")
        };
        assert_eq!(s.slice.cluster.as_deref(), Some("east.prod"));
        assert!(s.slice.ports.is_empty());
        assert_eq!(s.slice.endpoints.len(), 2);
        assert_eq!(s.slice.endpoints[1].hostname.as_deref(), Some("db-0"));
    }

    #[test]
    fn store_joins_slices_to_imports() {
        let mut store = Store::default();
        for yaml in [
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: z, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web}}\naddressType: IPv4\nendpoints: [{addresses: [10.0.0.2]}]",
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: a, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web}}\naddressType: IPv4\nendpoints: [{addresses: [10.0.0.1]}]",
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: b, namespace: shop, labels: {multicluster.kubernetes.io/service-name: orphan}}\naddressType: IPv4",
            "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\nspec: {type: Headless}",
        ] {
            let Classified::Object(o) = one(yaml) else {
                panic!()
            };
            store.insert(o);
        }
        let services: Vec<Service> = store.snapshot().into_iter().collect();
        assert_eq!(services.len(), 1);
        let names: Vec<_> = services[0].slices.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "z"]);
        assert_eq!(store.slices(), 3);
        // A relabelled slice moves to its new service; a removed one is gone from its service.
        let web = ServiceKey {
            namespace: "shop".into(),
            name: "web".into(),
        };
        let orphan = ServiceKey {
            namespace: "shop".into(),
            name: "orphan".into(),
        };
        let Classified::Object(o) = one(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: z, namespace: shop, labels: {multicluster.kubernetes.io/service-name: orphan}}\naddressType: IPv4",
        ) else {
            panic!()
        };
        assert_eq!(store.insert(o), [web.clone(), orphan.clone()]);
        assert_eq!(store.service(&web).unwrap().slices.len(), 1);
        assert_eq!(
            store.remove_slice(&("shop".into(), "a".into())),
            Some(web.clone())
        );
        assert!(store.service(&web).unwrap().slices.is_empty());
        assert_eq!(store.remove_slice(&("shop".into(), "a".into())), None);
        assert_eq!(store.slice_ids(Some("shop")).len(), 2);
        assert_eq!(store.slice_ids(Some("other")).len(), 0);
        // A store that is done with hands over the same services, moved instead of copied.
        let copied: Vec<Service> = store.snapshot().into_iter().collect();
        let moved: Vec<Service> = store.into_snapshot().into_iter().collect();
        assert_eq!(moved, copied);
    }
}
