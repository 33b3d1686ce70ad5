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
//! from its members and no slices; else with headless mirrors, `Headless` with one slice per
//! cluster (and family) naming each host (this cluster's own headless export: its ready
//! endpoints, from its Service's EndpointSlices); else `ClusterSetIP` without `ips` and one slice per
//! cluster holding its mirror's ClusterIP. A cluster counts only while a Link to it exists
//! (Linkerd leaves mirrors behind when a Link is deleted).

mod controller;
mod index;
mod judge;
mod object;
mod read;
#[cfg(test)]
mod tests;
mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use serde_json::{Value, json};

use crate::source::linkerd::carried::Carried;
use crate::wire::cluster_id;
pub use controller::Settings;
pub(super) use controller::run;
pub use judge::{Judged, judge};
pub(super) use object::exported_metadata;
pub use read::cluster_ips;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(ip: &IpAddr) -> Family {
        if ip.is_ipv4() { Family::V4 } else { Family::V6 }
    }

    /// The word of `ipFamilies` and of an EndpointSlice's `addressType`.
    pub fn word(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ImportPort {
    pub name: String,
    pub protocol: String,
    pub port: i32,
    pub app_protocol: Option<String>,
}

impl fmt::Display for ImportPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.name.is_empty() {
            write!(f, "{}:", self.name)?;
        }
        write!(f, "{}/{}", self.port, self.protocol)?;
        if let Some(a) = &self.app_protocol {
            write!(f, " ({a})")?;
        }
        Ok(())
    }
}

impl ImportPort {
    fn json(&self) -> Value {
        let mut p = json!({"port": self.port, "protocol": self.protocol});
        if !self.name.is_empty() {
            p["name"] = self.name.clone().into();
        }
        if let Some(a) = &self.app_protocol {
            p["appProtocol"] = a.clone().into();
        }
        p
    }
}

/// A host of a service: its hostname (headless, if it has one) and address.
pub type Host = (Option<String>, IpAddr);

/// One EndpointSlice of an import: one cluster's addresses of one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceSpec {
    pub cluster: String,
    pub family: Family,
    /// Hostname (headless) and address, sorted.
    pub endpoints: Vec<Host>,
    pub ports: Vec<ImportPort>,
}

/// The ServiceImport one exported service should have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    pub namespace: String,
    pub name: String,
    pub headless: bool,
    pub ips: Vec<IpAddr>,
    pub families: Vec<Family>,
    pub ports: Vec<ImportPort>,
    /// What the export half carried (see [`super::names::CARRIED`]): the fields of the exported
    /// Service that Linkerd does not copy, by their ServiceImport names.
    pub carried: BTreeMap<String, Value>,
    /// The exported labels and annotations (`spec.exportedLabels` / `exportedAnnotations` of
    /// the oldest export, carried by its export half), those Kubernetes accepts.
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub clusters: BTreeSet<String>,
    pub slices: Vec<SliceSpec>,
}

/// Something in Linkerd's objects the bridge could not use, to say in an Event on `object`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub namespace: String,
    pub object: String,
    /// The Event's reason: [`NOT_IMPORTED`] or [`CONFLICT`].
    pub reason: &'static str,
    pub message: String,
}

/// A Linkerd Service the import cannot use (or not all of).
pub const NOT_IMPORTED: &str = "NotImported";
/// Clusters export the service differently; the oldest export decides.
pub const CONFLICT: &str = "ExportConflict";

/// One cluster's export of a service, as the bridge reads it through the Link's credentials
/// (or in this cluster): the exported Service and what its export half carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterExport {
    /// The Link's target cluster name; None for this cluster's own export.
    pub link: Option<String>,
    /// The exported Service's ClusterIPs: this cluster's own export's addresses.
    pub ips: Vec<IpAddr>,
    pub headless: bool,
    /// This cluster's own headless export's hosts, from its EndpointSlices: each ready
    /// endpoint's hostname (if it has one) and addresses. Empty for every other export.
    pub hosts: Vec<Host>,
    pub carried: Carried,
    /// Whether a bridge carried it; else it is what the Service's spec says.
    pub bridge: bool,
}

/// The exports read: by namespace and name of the service, and whose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exports {
    pub by_service: BTreeMap<(String, String), Vec<ClusterExport>>,
    /// The Links (target cluster names) whose clusters' exports were listed: what Linkerd's
    /// objects say of those clusters adds no member (a cluster not in `by_service` does not
    /// export), they give only addresses.
    pub read: BTreeSet<String>,
    /// Whether this cluster's own exports were listed (then a federated Service's local
    /// member adds none either).
    pub own_read: bool,
}
