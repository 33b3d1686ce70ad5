//! Kubernetes objects to model values: the shapes of ServiceImport and EndpointSlice we read (from
//! a file's YAML or from what the Kubernetes client parsed, each read once into its shape) and
//! their validation. Shared by every source; one unusable object is reported and skipped, never
//! fatal. What a source keeps of them is in [`super::store`].

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use serde::Deserialize;
use serde_yaml_ng::Value;

use super::Selection;
use super::linkerd::{self, LinkerdService, Member};
use super::policy::{Policy, refusal};
use crate::model::{Endpoint, Port, Protocol, ServiceKey, ServiceType, Slice};

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
    /// One of Linkerd's Services (`--source linkerd`).
    Linkerd(Member),
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

impl Object {
    /// The object's kind and `namespace/name`, as log lines name it.
    pub fn identity(&self) -> (&'static str, String) {
        match self {
            Object::Import(i) => ("ServiceImport", i.key.to_string()),
            Object::Slice(s) => (
                "EndpointSlice",
                format!("{}/{}", s.service.namespace, s.slice.name),
            ),
            Object::Linkerd(m) => ("Service", format!("{}/{}", m.service.namespace, m.object)),
        }
    }

    /// The addresses the object gave that are not served.
    pub fn refused(&self) -> &[Refused] {
        match self {
            Object::Import(i) => &i.refused,
            Object::Slice(s) => &s.refused,
            Object::Linkerd(m) => &m.refused,
        }
    }
}

// ---- the shapes we read: unknown fields are skipped, absent and null lists are empty ----

/// The metadata conversion reads.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Meta {
    pub(super) name: Option<String>,
    pub(super) namespace: Option<String>,
    pub(super) labels: Option<BTreeMap<String, String>>,
    pub(super) annotations: Option<BTreeMap<String, String>>,
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
    pub(super) fn object(&self) -> String {
        format!(
            "{}/{}",
            self.namespace.as_deref().unwrap_or(""),
            self.name.as_deref().unwrap_or("?")
        )
    }
}

/// A ServiceImport (`multicluster.x-k8s.io`, v1alpha1 or v1beta1) as we read it.
#[derive(Debug, Deserialize)]
pub struct ServiceImport {
    #[serde(default)]
    metadata: Meta,
    spec: Option<ImportSpec>,
}

#[derive(Debug, Deserialize)]
struct ImportSpec {
    #[serde(rename = "type")]
    type_: Option<String>,
    ips: Option<Vec<String>>,
    ports: Option<Vec<RawPort>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RawPort {
    name: Option<String>,
    protocol: Option<String>,
    port: Option<i64>,
}

/// An EndpointSlice (`discovery.k8s.io/v1`) as we read it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSlice {
    #[serde(default)]
    metadata: Meta,
    address_type: Option<String>,
    endpoints: Option<Vec<RawEndpoint>>,
    ports: Option<Vec<RawPort>>,
}

#[derive(Debug, Deserialize)]
struct RawEndpoint {
    addresses: Option<Vec<String>>,
    conditions: Option<RawConditions>,
    hostname: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawConditions {
    ready: Option<bool>,
}

/// The shape `T` of an object the Kubernetes API gave: its body read straight from the JSON the
/// client parsed (moved, not copied), its metadata moved over.
pub(super) fn from_dynamic<T: serde::de::DeserializeOwned>(
    kind: &'static str,
    o: DynamicObject,
    set_meta: fn(&mut T, Meta),
) -> Result<T, ObjectError> {
    let meta = Meta::from_object_meta(o.metadata);
    match serde_json::from_value::<T>(o.data) {
        Ok(mut t) => {
            set_meta(&mut t, meta);
            Ok(t)
        }
        Err(e) => Err(malformed(
            kind,
            &meta.object(),
            format!("cannot be read: {e}"),
        )),
    }
}

impl ServiceImport {
    pub fn from_dynamic(o: DynamicObject) -> Result<Self, ObjectError> {
        from_dynamic("ServiceImport", o, |t: &mut Self, m| t.metadata = m)
    }
}

impl EndpointSlice {
    pub fn from_dynamic(o: DynamicObject) -> Result<Self, ObjectError> {
        from_dynamic("EndpointSlice", o, |t: &mut Self, m| t.metadata = m)
    }
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

/// Why an object in namespace `namespace` is not served, when the policy leaves it out. Each
/// source asks before reading the object into its shape (the file source in [`classify`], the
/// Kubernetes source for what its watches bring), so an unreadable object there is ignored too.
pub fn excluded(kind: &str, object: &str, namespace: &str, policy: &Policy) -> Option<Classified> {
    (!policy.serves_namespace(namespace)).then(|| {
        Classified::Ignored(format!(
            "{kind} {object}: namespace {namespace} is excluded (--exclude-namespace)"
        ))
    })
}

/// Classifies one object of a file (a YAML/JSON mapping) under `policy`: its kind and version
/// say which shape it is read into, once; `selection` says which kinds are read at all. `List`
/// objects are not handled here: see [`flatten`].
pub fn classify(v: Value, policy: &Policy, selection: &Selection) -> Classified {
    let api = str_field(&v, "apiVersion").unwrap_or("");
    let kind = str_field(&v, "kind").unwrap_or("");
    let object = object_name(&v);
    #[derive(PartialEq)]
    enum Shape {
        Import,
        Slice,
        Service,
    }
    let shape = match (kind, api) {
        ("ServiceImport", "multicluster.x-k8s.io/v1alpha1" | "multicluster.x-k8s.io/v1beta1")
            if selection.mcs =>
        {
            Shape::Import
        }
        // Slices also carry ServiceImports' endpoints; Linkerd's objects need none.
        ("EndpointSlice", "discovery.k8s.io/v1") if selection.mcs => Shape::Slice,
        ("Service", "v1") if selection.linkerd.is_some() => Shape::Service,
        _ => return Classified::Ignored(format!("{kind} {api} {object}")),
    };
    let namespace = v
        .get("metadata")
        .and_then(|m| str_field(m, "namespace"))
        .unwrap_or("");
    if let Some(ignored) = excluded(kind, &object, namespace, policy) {
        return ignored;
    }
    let read = |kind: &'static str, e: serde_yaml_ng::Error| {
        Classified::Invalid(malformed(kind, &object, format!("cannot be read: {e}")))
    };
    match shape {
        Shape::Import => match serde_yaml_ng::from_value(v) {
            Ok(o) => convert_import(o, policy),
            Err(e) => read("ServiceImport", e),
        },
        Shape::Slice => match serde_yaml_ng::from_value(v) {
            Ok(o) => convert_slice(o, policy),
            Err(e) => read("EndpointSlice", e),
        },
        Shape::Service => match serde_yaml_ng::from_value::<LinkerdService>(v) {
            Ok(o) => linkerd::convert(
                o,
                selection.linkerd.as_ref().unwrap_or(&Default::default()),
                policy,
            ),
            Err(e) => read(linkerd::KIND, e),
        },
    }
}

/// Expands `kind: List` (and `*List`) objects into their items, in order.
pub fn flatten(v: Value, out: &mut Vec<Value>) {
    let is_list = str_field(&v, "kind").is_some_and(|k| k.ends_with("List"));
    if is_list {
        if let Value::Mapping(mut m) = v {
            if let Some(Value::Sequence(items)) = m.remove("items") {
                for item in items {
                    flatten(item, out);
                }
            }
        }
    } else if !v.is_null() {
        out.push(v);
    }
}

pub(super) fn invalid(
    kind: &'static str,
    object: &str,
    reason: &'static str,
    message: String,
) -> Classified {
    Classified::Invalid(ObjectError {
        kind,
        object: object.to_string(),
        reason,
        message,
    })
}

pub(super) fn malformed(kind: &'static str, object: &str, message: String) -> ObjectError {
    ObjectError {
        kind,
        object: object.to_string(),
        reason: "malformed",
        message,
    }
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

/// Validates a ServiceImport.
pub fn convert_import(raw: ServiceImport, policy: &Policy) -> Classified {
    const KIND: &str = "ServiceImport";
    let object = raw.metadata.object();
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
    let (ips, refused) = match addresses(spec.ips.unwrap_or_default(), "spec.ips", policy) {
        Ok(read) => read,
        Err(why) => return invalid(KIND, &object, "bad_ip", why),
    };
    let ports = match ports(spec.ports.unwrap_or_default(), "spec.ports") {
        Ok(ports) => ports,
        Err((reason, why)) => return invalid(KIND, &object, reason, why),
    };
    Classified::Object(Object::Import(Import {
        key: ServiceKey { namespace, name },
        kind,
        ips,
        ports,
        refused,
    }))
}

/// Validates an EndpointSlice.
pub fn convert_slice(raw: EndpointSlice, policy: &Policy) -> Classified {
    const KIND: &str = "EndpointSlice";
    let object = raw.metadata.object();
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
            if !is_cluster_id(&c) {
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

/// Reads the addresses `texts` of the list at `field`: the ones the policy refuses are set
/// apart; one that is not an address is the object's error (its message).
pub(super) fn addresses(
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

/// Reads the required ports of the list at `field`; a bad one is the object's error (its
/// reason and message).
pub(super) fn ports(raw: Vec<RawPort>, field: &str) -> Result<Vec<Port>, (&'static str, String)> {
    let mut ports = Vec::new();
    for (i, p) in raw.iter().enumerate() {
        match port(p, true) {
            Ok(Some(p)) => ports.push(p),
            Ok(None) => {}
            Err((reason, why)) => return Err((reason, format!("{field}[{i}]: {why}"))),
        }
    }
    Ok(ports)
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

/// A cluster id as names carry it: one lower-case DNS label, or two (`name.context`, as
/// KEP-1645 allows).
pub fn is_cluster_id(s: &str) -> bool {
    (1..=2).contains(&s.split('.').count()) && s.split('.').all(is_label)
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Classifies one YAML object as the file source would, under the default policy.
    pub(crate) fn one(yaml: &str) -> Classified {
        classify(
            serde_yaml_ng::from_str::<Value>(yaml).unwrap(),
            &Policy::default(),
            &Selection::default(),
        )
    }

    #[test]
    fn objects_from_the_api_are_read_from_what_the_client_parsed() {
        let o: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u", "resourceVersion": "7",
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                         "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"type": "ClusterSetIP", "ips": ["10.0.0.1"], "ports": [{"port": 80}]},
            "status": {"clusters": [{"cluster": "east"}]}
        }))
        .unwrap();
        let c = convert_import(ServiceImport::from_dynamic(o).unwrap(), &Policy::default());
        let Classified::Object(Object::Import(i)) = c else {
            panic!("{c:?}")
        };
        assert_eq!(i.key.to_string(), "shop/web");
        assert_eq!(i.ips, ["10.0.0.1".parse::<IpAddr>().unwrap()]);
        assert_eq!(i.ports.len(), 1);
        // A body that does not have the shape (no schema stopped it) is this object's error.
        let o: DynamicObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "odd", "namespace": "shop"},
            "addressType": "IPv4", "endpoints": [{"addresses": "10.0.0.1"}]
        }))
        .unwrap();
        let e = EndpointSlice::from_dynamic(o).unwrap_err();
        assert_eq!(
            (e.kind, e.object.as_str(), e.reason),
            ("EndpointSlice", "shop/odd", "malformed")
        );
        assert!(e.message.starts_with("cannot be read: "), "{e}");
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
}
