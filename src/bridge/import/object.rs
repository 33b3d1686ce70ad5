//! The objects an [`Import`] is written as: the ServiceImport's metadata, spec and status, and
//! its EndpointSlices; which exported labels and annotations Kubernetes takes; and how what is
//! in the cluster is compared with what is wanted.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::Import;
use crate::bridge::model::Family;
use crate::bridge::model::Port;
use crate::bridge::model::{
    FIELD_MANAGER, LABEL_MANAGER, LABEL_ROUTE_OF, LABEL_SLICE_MANAGER, MANAGER, PORTS_SUFFIX,
    ROUTE_SUFFIX, ports_service_name, slice_name,
};
use crate::source::linkerd::carried::Carried;
use crate::source::mcs::{LABEL_KUBERNETES_SERVICE_NAME, LABEL_SERVICE_NAME, LABEL_SOURCE_CLUSTER};
use crate::wire::{is_label_value, label_key};

impl Import {
    /// The ServiceImport's labels and annotations: the bridge's own label and the exported
    /// ones (no `annotations` when there are none).
    pub fn metadata(&self) -> Value {
        let mut labels = json!({ LABEL_MANAGER: MANAGER });
        for (k, v) in &self.labels {
            labels[k] = v.clone().into();
        }
        let mut metadata = json!({ "labels": labels });
        if !self.annotations.is_empty() {
            metadata["annotations"] = json!(self.annotations);
        }
        metadata
    }

    /// The ServiceImport's spec.
    pub fn spec(&self) -> Value {
        let mut spec = json!({
            "type": if self.headless { "Headless" } else { "ClusterSetIP" },
            "ports": self.ports.iter().map(port_json).collect::<Vec<_>>(),
        });
        if !self.families.is_empty() {
            spec["ipFamilies"] = self.families.iter().map(|f| f.word()).collect();
        }
        if !self.ips.is_empty() {
            spec["ips"] = self.ips.iter().map(ToString::to_string).collect();
        }
        for (k, v) in &self.carried {
            spec[k] = v.clone();
        }
        spec
    }

    /// The ServiceImport's status: the clusters, and whether slices are published.
    pub fn status(&self) -> Value {
        json!({
            "clusters": self.clusters.iter().map(|c| json!({"cluster": c})).collect::<Vec<_>>(),
            "endpointSliceObjects": if self.slices.is_empty() { "Absent" } else { "Present" },
        })
    }

    /// The slices, by object name: the MCS ones, and where kube-proxy routes the import's
    /// address ([`Import::route`]) a twin of each for it, named and labelled for that Service
    /// alone. One slice cannot be both: a consumer of MCS slices that also reads Services'
    /// takes a slice naming a Service for that Service's (Envoy Gateway v1.9.1,
    /// `internal/gatewayapi/contexts.go` `SetEndpointSlicesForBackend`).
    pub fn slice_objects(&self) -> BTreeMap<String, Value> {
        self.slices
            .iter()
            .flat_map(|s| {
                let mut name = slice_name(&self.name, &s.cluster, s.family);
                if s.part > 0 {
                    name = format!("{name}-{}", s.part);
                }
                let endpoints: Vec<Value> = s
                    .endpoints
                    .iter()
                    .map(|e| {
                        let mut conditions = json!({});
                        for (k, v) in [
                            ("ready", e.ready),
                            ("serving", e.serving),
                            ("terminating", e.terminating),
                        ] {
                            if let Some(v) = v {
                                conditions[k] = v.into();
                            }
                        }
                        let mut o =
                            json!({"addresses": [e.ip.to_string()], "conditions": conditions});
                        if let Some(h) = &e.hostname {
                            o["hostname"] = h.clone().into();
                        }
                        o
                    })
                    .collect();
                let o = json!({
                    "apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSlice",
                    "metadata": {
                        "name": name,
                        "namespace": self.namespace,
                        "labels": {
                            LABEL_SERVICE_NAME: self.name,
                            LABEL_SOURCE_CLUSTER: s.cluster,
                            LABEL_SLICE_MANAGER: MANAGER,
                        },
                    },
                    "addressType": s.family.word(),
                    "endpoints": endpoints,
                    "ports": s.ports.iter().map(port_json).collect::<Vec<_>>(),
                });
                let twin = |service: &str, suffix: &str| {
                    let (mut t, twin) = (o.clone(), format!("{name}{suffix}"));
                    t["metadata"]["name"] = twin.clone().into();
                    t["metadata"]["labels"] = json!({
                        LABEL_KUBERNETES_SERVICE_NAME: service,
                        LABEL_ROUTE_OF: self.name,
                        LABEL_SOURCE_CLUSTER: s.cluster,
                        LABEL_SLICE_MANAGER: MANAGER,
                    });
                    (twin, t)
                };
                let route = self.route.as_ref();
                let federated = route.map(|r| twin(&r.service, ROUTE_SUFFIX));
                // Where the bridge's Service carries ports the federated Service lacks, a
                // twin naming it too, of a slice that has any of them.
                let beside = route
                    .filter(|r| (r.beside.iter()).any(|p| s.ports.iter().any(|q| q.name == p.name)))
                    .map(|r| twin(&ports_service_name(&r.service), PORTS_SUFFIX));
                [Some((name.clone(), o.clone())), federated, beside]
                    .into_iter()
                    .flatten()
            })
            .collect()
    }

    /// The bridge's Service that carries the import's ports Linkerd's federated Service lacks
    /// ([`super::Route::beside`]), by name: at the federated Service's addresses, as
    /// `externalIPs`, which kube-proxy routes from every pod and node as it routes a ClusterIP
    /// (its own ClusterIP is another, which nothing resolves to). No selector: its endpoints
    /// are the twins naming it. None where no port is lacking.
    pub fn ports_service(&self) -> Option<(String, Value)> {
        let route = self.route.as_ref().filter(|r| !r.beside.is_empty())?;
        let name = ports_service_name(&route.service);
        let families: BTreeSet<&str> = route.ips.iter().map(|ip| Family::of(ip).word()).collect();
        let mut spec = json!({
            "type": "ClusterIP",
            "externalIPs": route.ips.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "ports": route.beside.iter().map(port_json).collect::<Vec<_>>(),
        });
        // kube-proxy routes a Service's external IPs of the families it has a ClusterIP of.
        if families.len() > 1 {
            spec["ipFamilyPolicy"] = "RequireDualStack".into();
        }
        spec["ipFamilies"] = families.into_iter().collect();
        let o = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {LABEL_MANAGER: MANAGER, LABEL_ROUTE_OF: self.name},
            },
            "spec": spec,
        });
        Some((name, o))
    }
}

/// The exported labels and annotations in `carried` that Kubernetes accepts on an object; each
/// one left out is said through `problem`. A label may not take the bridge's own
/// [`LABEL_MANAGER`], which says whose the ServiceImport is.
pub(in crate::bridge) fn exported_metadata(
    carried: &Carried,
    mut problem: impl FnMut(String),
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    /// Kubernetes' limit on all of an object's annotations together.
    const ANNOTATIONS_MAX: usize = 256 * 1024;
    let mut labels = BTreeMap::new();
    for (k, v) in &carried.exported_labels {
        let wrong = if k == LABEL_MANAGER {
            Some("the key says whose the ServiceImport is, and only the bridge sets it".into())
        } else if let Err(e) = label_key(k) {
            Some(format!("the key {e}"))
        } else if !is_label_value(v) {
            Some("the value is not a label value (at most 63 of [A-Za-z0-9-_.], beginning and ending with a letter or digit)".into())
        } else {
            None
        };
        match wrong {
            Some(why) => problem(format!(
                "exported label {k}={v:?} is left out of the ServiceImport: {why}"
            )),
            None => {
                labels.insert(k.clone(), v.clone());
            }
        }
    }
    let mut annotations = BTreeMap::new();
    for (k, v) in &carried.exported_annotations {
        match label_key(k) {
            Err(e) => problem(format!(
                "exported annotation {k:?} is left out of the ServiceImport: the key {e}"
            )),
            Ok(()) => {
                annotations.insert(k.clone(), v.clone());
            }
        }
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > ANNOTATIONS_MAX {
        problem(format!(
            "the exported annotations are {size} bytes, more than the {ANNOTATIONS_MAX} Kubernetes takes: all are left out of the ServiceImport"
        ));
        annotations.clear();
    }
    (labels, annotations)
}

/// Whether `have` covers everything `want` says: each key of an object (others may be there
/// too), each element of a list in order.
pub(super) fn covers(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| h.get(k).is_some_and(|hv| covers(hv, v))),
        (Value::Array(h), Value::Array(w)) => {
            h.len() == w.len() && h.iter().zip(w).all(|(a, b)| covers(a, b))
        }
        (h, w) => h == w,
    }
}

/// Where `have` first fails to cover `want` (see [`covers`]), as a JSON pointer.
pub(super) fn difference(have: &Value, want: &Value) -> Option<String> {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w.iter().find_map(|(k, v)| match h.get(k) {
            None => Some(format!("/{k} (missing)")),
            Some(hv) => difference(hv, v).map(|d| format!("/{k}{d}")),
        }),
        (Value::Array(h), Value::Array(w)) if h.len() == w.len() => h
            .iter()
            .zip(w)
            .enumerate()
            .find_map(|(i, (a, b))| difference(a, b).map(|d| format!("/{i}{d}"))),
        (h, w) if h == w => None,
        (h, w) => Some(format!(" ({h} is now {w})")),
    }
}

/// The keys of `metadata.<what>` (labels or annotations) of `object` that the bridge's field
/// manager holds: those it wrote and nobody changed since.
pub(super) fn owned_keys(object: &Value, what: &str) -> Vec<String> {
    ours(object)
        .filter_map(|m| m["fieldsV1"]["f:metadata"][format!("f:{what}")].as_object())
        .flat_map(|fields| fields.keys())
        .filter_map(|k| k.strip_prefix("f:").map(str::to_string))
        .collect()
}

/// A spec that lost a field the bridge no longer wants (`ips` after the federated Service
/// went) differs too: the applied spec's keys are all the bridge's fields there.
pub(super) fn same_spec(have: &Value, want: &Value) -> bool {
    match (have.as_object(), want.as_object()) {
        (Some(h), Some(w)) => h.keys().all(|k| w.contains_key(k)),
        _ => false,
    }
}

/// The bridge's field manager's records of the object itself (not of its status).
fn ours(object: &Value) -> impl Iterator<Item = &Value> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["manager"] == FIELD_MANAGER && m["subresource"].is_null())
}

/// Whether a bridge wrote the object before ServiceImports were applied (created and replaced:
/// its field manager's record is an `Update`), so that what it holds must become applied.
fn written_before_apply(object: &Value) -> bool {
    ours(object).any(|m| m["operation"] == "Update")
}

/// [`written_before_apply`], read from the object as decoded (what a write answers), so that
/// only such an object is encoded for [`legacy_upgrade`].
pub(super) fn updated_by_a_bridge(meta: &ObjectMeta) -> bool {
    meta.managed_fields.iter().flatten().any(|m| {
        m.manager.as_deref() == Some(FIELD_MANAGER)
            && m.subresource.is_none()
            && m.operation.as_deref() == Some("Update")
    })
}

/// For an object a bridge wrote before ServiceImports were applied (read whole, with every
/// manager's record: as a write answers it): the JSON patch that makes the bridge's records one `Apply` record holding the same fields, as
/// `kubectl apply --server-side` upgrades a client-side-applied object (k8s.io/client-go
/// `util/csaupgrade`), at the version read. Then the next apply takes away what the bridge
/// wrote before and wants no more.
pub(super) fn legacy_upgrade(object: &Value) -> Option<Value> {
    if !written_before_apply(object) {
        return None;
    }
    let records = object["metadata"]["managedFields"].as_array()?;
    let mine = |m: &&Value| m["manager"] == FIELD_MANAGER && m["subresource"].is_null();
    let mut fields = json!({});
    let mut last = &Value::Null;
    for m in records.iter().filter(mine) {
        union(&mut fields, &m["fieldsV1"]);
        last = m;
    }
    let mut kept: Vec<Value> = records.iter().filter(|m| !mine(m)).cloned().collect();
    kept.push(json!({
        "manager": FIELD_MANAGER,
        "operation": "Apply",
        "apiVersion": last["apiVersion"],
        "time": last["time"],
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }));
    Some(json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": object["metadata"]["resourceVersion"]},
        {"op": "replace", "path": "/metadata/managedFields", "value": kept},
    ]))
}

/// Adds the fields `more` holds to `into` (both a field manager's `fieldsV1` set).
fn union(into: &mut Value, more: &Value) {
    let (Some(into), Some(more)) = (into.as_object_mut(), more.as_object()) else {
        return;
    };
    for (k, v) in more {
        union(into.entry(k.clone()).or_insert_with(|| json!({})), v);
    }
}

/// A port as a ServiceImport's and an EndpointSlice's `ports` hold it.
fn port_json(p: &Port) -> Value {
    let mut j = json!({"port": p.port, "protocol": p.protocol});
    if !p.name.is_empty() {
        j["name"] = p.name.clone().into();
    }
    if let Some(a) = &p.app_protocol {
        j["appProtocol"] = a.clone().into();
    }
    j
}

#[cfg(test)]
mod tests;
