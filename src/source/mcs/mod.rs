//! The Multi-Cluster Services API's kinds (`--source mcs`): ServiceImport
//! (`multicluster.x-k8s.io`, v1alpha1 or v1beta1) and EndpointSlice (`discovery.k8s.io/v1`,
//! labelled `multicluster.kubernetes.io/service-name`), each read once into its shape and
//! validated. One unusable object is reported and skipped, never fatal. [`join`] is their part
//! of a source's store: the imports joined with their slices.

pub mod join;

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Deserialize;

use super::object::{Kind, Meta, RawPort, Read, Refused, Resource, addresses, invalid, ports};
use super::policy::{Policy, refusal};
use crate::model::{Endpoint, Locality, ObjectKind, Port, ServiceKey, ServiceType, Skip, Slice};
use crate::wire::{cluster_id, is_label, label};

pub const LABEL_SERVICE_NAME: &str = "multicluster.kubernetes.io/service-name";
pub const LABEL_SOURCE_CLUSTER: &str = "multicluster.kubernetes.io/source-cluster";
pub const MCS_GROUP: &str = "multicluster.x-k8s.io";

/// ServiceImports, at the version the API server serves (v1beta1 preferred) or the one named.
#[derive(Debug, Clone, Default)]
pub struct Imports {
    /// `--serviceimport-version`.
    pub version: Option<String>,
}

/// EndpointSlices that carry the MCS service label.
#[derive(Debug, Clone, Copy, Default)]
pub struct Slices;

/// A validated ServiceImport.
#[derive(Debug, Clone, PartialEq)]
pub struct Import {
    pub key: ServiceKey,
    pub kind: ServiceType,
    pub ips: Vec<IpAddr>,
    pub ports: Vec<Port>,
    /// From `spec.internalTrafficPolicy` and `spec.trafficDistribution`.
    pub locality: Locality,
    /// `status.endpointSliceObjects: Absent`.
    pub slices_absent: bool,
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
    /// Submariner Lighthouse's slice of a headless service under Globalnet (see
    /// [`lighthouse_global`]): its addresses are the pods' global ones.
    pub global: bool,
}

/// A ServiceImport as we read it.
#[derive(Debug, Deserialize)]
pub struct ServiceImport {
    #[serde(default)]
    metadata: Meta,
    spec: Option<ImportSpec>,
    status: Option<ImportStatus>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ImportSpec {
    #[serde(rename = "type")]
    type_: Option<String>,
    ips: Option<Vec<String>>,
    ports: Option<Vec<RawPort>>,
    internal_traffic_policy: Option<String>,
    traffic_distribution: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ImportStatus {
    endpoint_slice_objects: Option<String>,
}

/// What the import's traffic fields ask of answers built from endpoints: `Local` wins over a
/// Prefer* distribution; other values (and `Cluster`) ask nothing.
fn locality(spec: &ImportSpec) -> Locality {
    match (
        spec.internal_traffic_policy.as_deref(),
        spec.traffic_distribution.as_deref(),
    ) {
        (Some("Local"), _) => Locality::OwnOnly,
        (_, Some("PreferClose" | "PreferSameZone" | "PreferSameNode")) => Locality::PreferOwn,
        _ => Locality::Any,
    }
}

/// An EndpointSlice as we read it.
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

/// Labels of Submariner Lighthouse's own ServiceImports (see `Imports::convert`).
const LIGHTHOUSE_SOURCE_NAMESPACE: &str = "lighthouse.submariner.io/sourceNamespace";
const LIGHTHOUSE_SOURCE_NAME: &str = "lighthouse.submariner.io/sourceName";

impl Kind for Imports {
    type Shape = ServiceImport;
    type Output = Import;
    type Part = join::Joined;
    const KIND: ObjectKind = ObjectKind::ServiceImport;
    const RESOURCE: Resource = Resource {
        group: MCS_GROUP,
        versions: &["v1beta1", "v1alpha1"],
        plural: "serviceimports",
        required: true,
        namespaced: true,
    };

    fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    fn set_meta(shape: &mut ServiceImport, meta: Meta) {
        shape.metadata = meta;
    }

    fn object_name(i: &Import) -> String {
        i.key.to_string()
    }

    fn refused(i: &Import) -> &[Refused] {
        &i.refused
    }

    fn pack(i: Import) -> join::Stored {
        join::Stored::import(i)
    }

    fn convert(&self, mut raw: ServiceImport, policy: &Policy) -> Read<Import> {
        const KIND: ObjectKind = ObjectKind::ServiceImport;
        let object = raw.metadata.object();
        // Lighthouse's records of one cluster's export, never the cluster set's import: from 0.15
        // labelled (per cluster) or annotated (the broker's aggregate) with the service's name;
        // before 0.15 `<svc>-<ns>-<cluster>` in its own namespace, labelled with its source
        // (submariner-io/lighthouse pkg/agent/controller/agent.go@437a4c2, @17efac8).
        let copy_marker = |m: &Option<BTreeMap<String, String>>| {
            m.as_ref().is_some_and(|m| {
                [
                    LABEL_SERVICE_NAME,
                    LIGHTHOUSE_SOURCE_NAMESPACE,
                    LIGHTHOUSE_SOURCE_NAME,
                ]
                .iter()
                .any(|k| m.contains_key(*k))
            })
        };
        let (name, namespace) = match raw.metadata.identity(KIND) {
            Ok(id) => id,
            Err(e) => return Read::Invalid(e),
        };
        if copy_marker(&raw.metadata.labels) || copy_marker(&raw.metadata.annotations) {
            return Read::Ignored(format!(
                "{KIND} {object}: carries {LABEL_SERVICE_NAME} or a lighthouse.submariner.io source, a record Submariner's Lighthouse keeps for itself, not a service"
            ));
        }
        for (field, value) in [("metadata.name", &name), ("metadata.namespace", &namespace)] {
            if !is_label(value) {
                return invalid(
                    KIND,
                    &object,
                    Skip::BadName,
                    format!("{field} {value:?} is not a lower-case DNS label"),
                );
            }
        }
        let Some(spec) = raw.spec else {
            return invalid(KIND, &object, Skip::Malformed, "spec is missing".into());
        };
        let kind = match spec.type_.as_deref() {
            Some("Headless") => ServiceType::Headless,
            _ => ServiceType::ClusterSetIp,
        };
        let locality = locality(&spec);
        let slices_absent = raw
            .status
            .and_then(|s| s.endpoint_slice_objects)
            .is_some_and(|v| v == "Absent");
        let (ips, refused) = match addresses(spec.ips.unwrap_or_default(), "spec.ips", policy) {
            Ok(read) => read,
            Err(why) => return invalid(KIND, &object, Skip::BadIp, why),
        };
        let ports = match ports(spec.ports.unwrap_or_default(), "spec.ports", true) {
            Ok(ports) => ports,
            Err((reason, why)) => return invalid(KIND, &object, reason, why),
        };
        Read::Object(Import {
            key: ServiceKey { namespace, name },
            kind,
            ips,
            ports,
            locality,
            slices_absent,
            refused,
        })
    }
}

impl Kind for Slices {
    type Shape = EndpointSlice;
    type Output = SliceObject;
    type Part = join::Joined;
    const KIND: ObjectKind = ObjectKind::EndpointSlice;
    const RESOURCE: Resource = Resource {
        group: "discovery.k8s.io",
        versions: &["v1"],
        plural: "endpointslices",
        required: true,
        namespaced: true,
    };

    fn selector(&self) -> Option<&'static str> {
        Some(LABEL_SERVICE_NAME)
    }

    /// A slice holds up to 1,000 endpoints, and a page is held parsed (as JSON values) while it
    /// is read: kube-rs's 500 a page can be hundreds of MB.
    fn page_size(&self) -> Option<u32> {
        Some(50)
    }

    fn set_meta(shape: &mut EndpointSlice, meta: Meta) {
        shape.metadata = meta;
    }

    fn object_name(s: &SliceObject) -> String {
        format!("{}/{}", s.service.namespace, s.slice.name)
    }

    fn refused(s: &SliceObject) -> &[Refused] {
        &s.refused
    }

    fn pack(s: SliceObject) -> join::Stored {
        let global = s.slice.cluster.clone().filter(|_| s.global);
        join::Stored::Slice(
            s.service,
            crate::model::packed::Packed::new(&s.slice),
            global,
        )
    }

    fn convert(&self, raw: EndpointSlice, policy: &Policy) -> Read<SliceObject> {
        slice_object(ObjectKind::EndpointSlice, raw, policy)
    }
}

/// This cluster's own EndpointSlices of its headless Services (`kubernetes.io/service-name`,
/// selected by `service.kubernetes.io/headless`, which the endpointslice controller puts on a
/// headless Service's slices): the addresses a client in this cluster can reach where
/// Submariner Lighthouse's MCS slices of this cluster hold global ones (see
/// [`lighthouse_global`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalSlices;

impl Kind for LocalSlices {
    type Shape = EndpointSlice;
    type Output = SliceObject;
    type Part = join::Joined;
    const KIND: ObjectKind = ObjectKind::LocalEndpointSlice;
    const RESOURCE: Resource = Slices::RESOURCE;
    /// Only Lighthouse's Globalnet slices of this cluster need them: watched once there is one.
    const ON_DEMAND: bool = true;

    // What is not its own is the MCS API's slices' (the same objects, selected otherwise).
    fn file_kind() -> &'static str {
        Slices::KIND.label()
    }

    fn selector(&self) -> Option<&'static str> {
        Some(LABEL_HEADLESS)
    }

    fn page_size(&self) -> Option<u32> {
        Slices.page_size()
    }

    fn set_meta(shape: &mut EndpointSlice, meta: Meta) {
        Slices::set_meta(shape, meta);
    }

    fn object_name(s: &SliceObject) -> String {
        Slices::object_name(s)
    }

    fn refused(s: &SliceObject) -> &[Refused] {
        Slices::refused(s)
    }

    fn pack(s: SliceObject) -> join::Stored {
        join::Stored::Local(s.service, crate::model::packed::Packed::new(&s.slice))
    }

    fn convert(&self, raw: EndpointSlice, policy: &Policy) -> Read<SliceObject> {
        slice_object(ObjectKind::LocalEndpointSlice, raw, policy)
    }
}

/// The label the endpointslice controller names a slice's Service by.
pub const LABEL_KUBERNETES_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// The label the endpointslice controller puts on a headless Service's slices.
const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
/// Submariner Lighthouse's marks on its MCS slices (`coredns/constants/constants.go`@9d3c39e).
const LIGHTHOUSE_IS_HEADLESS: &str = "lighthouse.submariner.io/is-headless";
const LIGHTHOUSE_GLOBALNET: &str = "lighthouse.submariner.io/globalnet-enabled";

/// Whether a slice is Lighthouse's of a headless service whose addresses may be Globalnet's
/// global ones, which the exporting cluster itself cannot route: labelled `is-headless: "true"`
/// and annotated `globalnet-enabled: "true"`, or without that annotation (written by 0.15,
/// before it existed). Lighthouse's own resolver answers such a slice of its own cluster from
/// that cluster's Kubernetes EndpointSlices of the service instead
/// (`coredns/resolver/endpoint_slice.go` `shouldRetrieveLocalEndpointSlicesFor`@9d3c39e);
/// clusterset-dns does the same (see [`join`]).
fn lighthouse_global(
    labels: &BTreeMap<String, String>,
    annotations: Option<&BTreeMap<String, String>>,
) -> bool {
    labels.get(LIGHTHOUSE_IS_HEADLESS).map(String::as_str) == Some("true")
        && annotations
            .and_then(|a| a.get(LIGHTHOUSE_GLOBALNET))
            .is_none_or(|v| v == "true")
}

/// One EndpointSlice read as `kind`: an MCS slice (its service and cluster from the MCS
/// labels), or one of this cluster's own of a headless Service (its service from
/// `kubernetes.io/service-name`, no cluster).
fn slice_object(kind: ObjectKind, mut raw: EndpointSlice, policy: &Policy) -> Read<SliceObject> {
    let object = raw.metadata.object();
    let labels = raw.metadata.labels.take().unwrap_or_default();
    let (service_label, cluster_label) = match kind {
        ObjectKind::EndpointSlice => (LABEL_SERVICE_NAME, Some(LABEL_SOURCE_CLUSTER)),
        _ => (LABEL_KUBERNETES_SERVICE_NAME, None),
    };
    let Some(service) = labels.get(service_label) else {
        return Read::Ignored(format!("{kind} {object}: no {service_label} label"));
    };
    if cluster_label.is_none() && !labels.contains_key(LABEL_HEADLESS) {
        return Read::Ignored(format!(
            "{kind} {object}: no {LABEL_HEADLESS} label (not a headless Service's)"
        ));
    }
    let global = lighthouse_global(&labels, raw.metadata.annotations.as_ref());
    let (name, namespace) = match raw.metadata.identity(kind) {
        Ok(id) => id,
        Err(e) => return Read::Invalid(e),
    };
    if !is_label(service) {
        return invalid(
            kind,
            &object,
            Skip::BadName,
            format!("label {service_label}={service:?} is not a lower-case DNS label"),
        );
    }
    let cluster = match cluster_label.and_then(|l| labels.get(l)) {
        None => None,
        Some(given) => {
            let Some(c) = cluster_id(given) else {
                let c = given.to_ascii_lowercase();
                return invalid(
                    kind,
                    &object,
                    Skip::BadCluster,
                    format!("label {LABEL_SOURCE_CLUSTER}={c:?} is not one or two DNS labels"),
                );
            };
            Some(c)
        }
    };
    let v6 = match raw.address_type.as_deref() {
        Some("IPv4") => false,
        Some("IPv6") => true,
        other => {
            return invalid(
                kind,
                &object,
                Skip::BadAddressType,
                format!(
                    "addressType {:?} is not served (only IPv4 and IPv6)",
                    other.unwrap_or("")
                ),
            );
        }
    };
    let ports = match ports(raw.ports.unwrap_or_default(), "ports", false) {
        Ok(ports) => ports,
        Err((reason, why)) => return invalid(kind, &object, reason, why),
    };
    let mut endpoints = Vec::new();
    let mut refused = Vec::new();
    for (i, e) in raw.endpoints.unwrap_or_default().into_iter().enumerate() {
        if e.conditions.and_then(|c| c.ready) == Some(false) {
            continue;
        }
        let mut addresses = Vec::new();
        for (j, a) in e.addresses.unwrap_or_default().iter().enumerate() {
            let why = match a.trim().parse::<IpAddr>() {
                Ok(ip) if ip.is_ipv6() == v6 => {
                    match refusal(policy, ip) {
                        None => addresses.push(ip),
                        Some(reason) => refused.push(Refused {
                            field: format!("endpoints[{i}].addresses[{j}]"),
                            address: ip,
                            reason,
                        }),
                    }
                    continue;
                }
                Ok(_) => format!(
                    "does not match addressType {}",
                    if v6 { "IPv6" } else { "IPv4" }
                ),
                Err(_) => "is not an IP address".to_string(),
            };
            return invalid(
                kind,
                &object,
                Skip::BadIp,
                format!("endpoints[{i}].addresses[{j}] {a:?} {why}"),
            );
        }
        let hostname = match e.hostname {
            None => None,
            Some(h) if h.is_empty() => None,
            Some(given) => {
                let Some(h) = label(&given) else {
                    let h = given.to_ascii_lowercase();
                    return invalid(
                        kind,
                        &object,
                        Skip::BadHostname,
                        format!("endpoints[{i}].hostname {h:?} is not a DNS label"),
                    );
                };
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
    Read::Object(SliceObject {
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
        global,
    })
}

#[cfg(test)]
mod tests;
