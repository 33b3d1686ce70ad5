//! The import half's judge: from the Services Linkerd's service mirror writes in this cluster
//! and the Links present, the ServiceImports (and their EndpointSlices) the cluster should
//! have. Pure: the runtime ([`controller`]) reads the objects and writes what this says.
//!
//! Shapes, from linkerd/linkerd2 `version-2.20` (`multicluster/service-mirror/cluster_watcher.go`,
//! `cluster_watcher_headless.go`, `federated_service_watcher.go`; the same as `--source linkerd`
//! reads, see [`crate::source::linkerd`]). Objects are told apart by labels and annotations,
//! and the exported service's name comes from them, never from a cut name:
//! - federated `<svc>-federated`: `mirror.linkerd.io/mirrored-service: "true"` without
//!   `mirror.linkerd.io/cluster-name`; members in `multicluster.linkerd.io/remote-discovery:
//!   <svc>@<cluster>[,…]` and `multicluster.linkerd.io/local-discovery: <svc>`;
//! - mirror `<svc>-<link>`: `cluster-name: <cluster>`, `remote-svc-fq-name:
//!   <svc>.<ns>.svc.<domain>`; `clusterIP: None` for a headless mirror (gateway mode with
//!   headless mirroring), whose hosts are endpoint mirrors labelled
//!   `mirror.linkerd.io/headless-mirror-svc-name: <svc>-<link>` with `remote-svc-fq-name:
//!   <host>.<svc>.<ns>.svc.<domain>` and a ClusterIP each.
//!
//! Per exported service: with a federated Service, `ClusterSetIP` at its ClusterIPs, clusters
//! from its members and slices of the members' pods (those exported without a gateway, as their
//! own EndpointSlices say them, read by [`crate::bridge::clusters`]); else headless, `Headless`
//! with slices per cluster (and family) of its hosts: the pods of an export without a gateway
//! and of this cluster's own, a gateway-mode export's headless mirrors; else `ClusterSetIP`
//! without `ips` and one slice per cluster holding its mirror's ClusterIP. Every address passes
//! the policy (`--deny-cidr`, `--allow-cidr`) first. A cluster counts only while a Link to it
//! exists (Linkerd leaves mirrors behind when a Link is deleted).

mod controller;
mod index;
mod judge;
mod object;
mod read;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde_json::Value;

use crate::bridge::model::{Endpoint, Family, Port};
use crate::wire::cluster_id;
pub use controller::Config;
pub(super) use controller::run;
pub use judge::{Judged, judge};
pub(super) use object::exported_metadata;

/// How clusters are named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Naming {
    /// `--linkerd-cluster-id`: the cluster id for a Link's target cluster name, where they
    /// differ.
    pub cluster_ids: BTreeMap<String, String>,
    /// `--cluster-id`: this cluster's id, for a federated Service's local member.
    pub own: Option<String>,
}

impl Naming {
    fn id(&self, link: &str) -> Option<String> {
        cluster_id(self.cluster_ids.get(link).map_or(link, String::as_str))
    }
}

/// One EndpointSlice of an import: one cluster's addresses of one family (the `part`-th
/// slice of them, from 0, where they are on several sets of ports or too many for one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceSpec {
    pub cluster: String,
    pub family: Family,
    pub part: usize,
    /// Sorted.
    pub endpoints: Vec<Endpoint>,
    pub ports: Vec<Port>,
}

/// The ServiceImport one exported service should have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    pub namespace: String,
    pub name: String,
    pub headless: bool,
    pub ips: Vec<IpAddr>,
    pub families: Vec<Family>,
    pub ports: Vec<Port>,
    /// What the export half carried (see [`super::model::CARRIED`]): the fields of the exported
    /// Service that Linkerd does not copy, by their ServiceImport names.
    pub carried: BTreeMap<String, Value>,
    /// The exported labels and annotations (`spec.exportedLabels` / `exportedAnnotations` of
    /// the oldest export, carried by its export half), those Kubernetes accepts.
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub clusters: BTreeSet<String>,
    pub slices: Vec<SliceSpec>,
    /// How kube-proxy routes the import's `ips`, for clients outside the mesh. None: only
    /// meshed clients reach them (`--route-outside-mesh=false`, or no address).
    pub route: Option<Route>,
}

/// How kube-proxy routes a federated import's `ips` to the exporting clusters' pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Linkerd's federated Service, whose ClusterIPs the `ips` are. It has no selector and
    /// Linkerd writes no endpoints for it (its destination service resolves it by its
    /// members), so each slice has a twin naming it, as the MCS API's controller names an
    /// import's derived Service on its slices; a client outside the mesh then reaches the pods
    /// on the ports it has.
    pub service: String,
    /// The import's ports (by number and protocol) that Service lacks: Linkerd writes its
    /// ports from one member, the local one where there is one, so a port only another
    /// cluster exports, or a port name an older export has with another number, is not on
    /// it. A Service of the bridge's own ([`crate::bridge::model::ports_service_name`])
    /// carries them at the same addresses (`externalIPs`), with a twin of each slice naming
    /// it; none where this is empty.
    pub beside: Vec<Port>,
    /// The federated Service's ClusterIPs (the import's `ips`).
    pub ips: Vec<IpAddr>,
}
