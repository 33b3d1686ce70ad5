//! The import half's judge: from the Services Linkerd's service mirror writes in this cluster
//! and the Links present, the ServiceImports (and their EndpointSlices) the cluster should
//! have. Pure: the runtime ([`super::importer`]) reads the objects and writes what this says.
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
//! cluster (and family) naming each host; else `ClusterSetIP` without `ips` and one slice per
//! cluster holding its mirror's ClusterIP. A cluster counts only while a Link to it exists
//! (Linkerd leaves mirrors behind when a Link is deleted).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

use super::CARRIED;
use crate::source::linkerd::carried::{Carried, export_order};
use crate::source::linkerd::shape as linkerd_shape;
use crate::source::mcs::{LABEL_SERVICE_NAME, LABEL_SOURCE_CLUSTER};
use crate::wire::cluster_id;

/// The value of `endpointslice.kubernetes.io/managed-by` on the bridge's EndpointSlices, and of
/// `app.kubernetes.io/managed-by` on its ServiceImports: what carries it is the bridge's to
/// change and delete; nothing else is.
pub const MANAGER: &str = "linkerd-bridge.clusterset-dns.io";
pub const LABEL_SLICE_MANAGER: &str = "endpointslice.kubernetes.io/managed-by";
pub const LABEL_MANAGER: &str = "app.kubernetes.io/managed-by";

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

/// One EndpointSlice of an import: one cluster's addresses of one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceSpec {
    pub cluster: String,
    pub family: Family,
    /// Hostname (headless) and address, sorted.
    pub endpoints: Vec<(Option<String>, IpAddr)>,
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
    /// What the export half carried (see [`super::CARRIED`]): the fields of the exported
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

/// What the judge found: the imports by namespace and name, and the problems it stepped over.
#[derive(Debug, Default)]
pub struct Judged {
    pub imports: BTreeMap<(String, String), Import>,
    pub problems: Vec<Problem>,
}

/// What one of Linkerd's Services is.
#[derive(Debug, Clone)]
enum Shape {
    Federated {
        remote: Vec<String>,
        local: bool,
        ips: Vec<IpAddr>,
        families: Vec<Family>,
    },
    Mirror {
        cluster: String,
        ips: Vec<IpAddr>,
    },
    HeadlessMirror {
        cluster: String,
    },
    Host {
        cluster: String,
        parent: String,
        hostname: String,
        ip: Option<IpAddr>,
    },
}

struct Read {
    /// The exported service's name (for a host, its headless mirror's object name).
    service: String,
    object: String,
    shape: Shape,
    ports: Vec<ImportPort>,
    carried: Option<Result<Carried, String>>,
}

/// The imports `services` (Linkerd's, and any other: those are passed over) give while Links
/// to the clusters in `links` (their target cluster names) exist.
pub fn judge(
    services: &[Arc<Service>],
    links: &BTreeSet<String>,
    naming: &Naming,
    exports: &Exports,
) -> Judged {
    let mut out = Judged::default();
    // By namespace: the Services read, and the headless mirrors' hosts by parent object name.
    let mut by_ns: BTreeMap<String, Vec<Read>> = BTreeMap::new();
    for s in services {
        let (Some(ns), Some(object)) = (&s.metadata.namespace, &s.metadata.name) else {
            continue;
        };
        match read(ns, s) {
            Ok(Some(r)) => by_ns.entry(ns.clone()).or_default().push(r),
            Ok(None) => {}
            Err(message) => out.problems.push(Problem {
                namespace: ns.clone(),
                object: object.clone(),
                reason: NOT_IMPORTED,
                message,
            }),
        }
    }
    for (ns, _) in exports.by_service.keys() {
        by_ns.entry(ns.clone()).or_default();
    }
    for (ns, reads) in by_ns {
        let mut by_service: BTreeMap<&str, Vec<&Read>> = BTreeMap::new();
        for ((_, name), _) in exports
            .by_service
            .range((ns.clone(), String::new())..)
            .take_while(|((n, _), _)| *n == ns)
        {
            by_service.entry(name).or_default();
        }
        let mut hosts: BTreeMap<&str, Vec<&Read>> = BTreeMap::new();
        for r in &reads {
            match r.shape {
                Shape::Host { ref parent, .. } => hosts.entry(parent).or_default().push(r),
                _ => by_service.entry(&r.service).or_default().push(r),
            }
        }
        for (name, members) in by_service {
            let mut problems = Vec::new();
            let theirs = exports
                .by_service
                .get(&(ns.clone(), name.to_string()))
                .map(Vec::as_slice)
                .unwrap_or_default();
            if let Some(i) = import(
                &ns,
                name,
                &members,
                &hosts,
                links,
                naming,
                (theirs, &exports.read, exports.own_read),
                &mut problems,
            ) {
                out.imports.insert((ns.clone(), name.to_string()), i);
            }
            out.problems.extend(problems);
        }
    }
    out
}

/// One cluster's part in a service's import, from its export as read through the Link's
/// credentials (or this cluster's own), or from what Linkerd's service mirror wrote here.
struct Member<'a> {
    /// The cluster id.
    cluster: String,
    /// The Link's target cluster name (None: this cluster), to match Linkerd's mirrors.
    link: Option<String>,
    /// The object Events about it go on here (a mirror or the federated Service), if any.
    object: Option<&'a str>,
    /// What it is called in messages.
    shown: String,
    headless: bool,
    ports: Vec<ImportPort>,
    carried: Option<Carried>,
    /// This cluster's addresses of the service: its mirror's ClusterIP, its headless
    /// mirror's hosts, or (this cluster's own export) its Service's ClusterIPs.
    endpoints: Vec<(Option<String>, IpAddr)>,
}

impl Member<'_> {
    fn created(&self) -> Option<&str> {
        self.carried.as_ref()?.export_created.as_deref()
    }
}

fn carried_ports(c: &Carried) -> Vec<ImportPort> {
    let mut out: Vec<ImportPort> = c
        .ports
        .iter()
        .map(|p| ImportPort {
            name: p.name.clone(),
            protocol: p.protocol.clone(),
            port: p.port,
            app_protocol: p.app_protocol.clone(),
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[allow(clippy::too_many_arguments)]
fn import(
    ns: &str,
    name: &str,
    members: &[&Read],
    hosts: &BTreeMap<&str, Vec<&Read>>,
    links: &BTreeSet<String>,
    naming: &Naming,
    (exports, read, own_read): (&[ClusterExport], &BTreeSet<String>, bool),
    problems: &mut Vec<Problem>,
) -> Option<Import> {
    let mut problem = |object: &str, message: String| {
        problems.push(Problem {
            namespace: ns.into(),
            object: object.into(),
            reason: NOT_IMPORTED,
            message,
        });
    };
    let mut conflicts: Vec<Problem> = Vec::new();
    let mut conflict = |object: &str, message: String| {
        conflicts.push(Problem {
            namespace: ns.into(),
            object: object.into(),
            reason: CONFLICT,
            message,
        });
    };
    // The cluster id of a member through Link `cluster`, if that Link exists.
    let live = |cluster: &str, object: &str, problem: &mut dyn FnMut(&str, String)| {
        if !links.contains(cluster) {
            return None;
        }
        let id = naming.id(cluster);
        if id.is_none() {
            problem(
                object,
                format!(
                    "cluster name {cluster:?} is not a cluster id (one or two DNS labels): give one with --linkerd-cluster-id {cluster}=ID"
                ),
            );
        }
        id
    };
    let with_app = |ports: &[ImportPort], carried: Option<&Carried>| -> Vec<ImportPort> {
        let mut out: Vec<ImportPort> = ports
            .iter()
            .map(|p| {
                let app = carried
                    .into_iter()
                    .flat_map(|c| &c.ports)
                    .find(|c| c.port == p.port && c.protocol == p.protocol && c.name == p.name)
                    .and_then(|c| c.app_protocol.clone());
                ImportPort {
                    app_protocol: app.or_else(|| p.app_protocol.clone()),
                    ..p.clone()
                }
            })
            .collect();
        out.sort();
        out.dedup();
        out
    };
    let carried_of = |r: &Read, problem: &mut dyn FnMut(&str, String)| match &r.carried {
        Some(Ok(c)) => Some(c.clone()),
        Some(Err(e)) => {
            problem(&r.object, e.clone());
            None
        }
        None => None,
    };

    let mut all: Vec<Member> = Vec::new();
    // The exports read through the Links' credentials, and this cluster's own.
    for e in exports {
        let id = match &e.link {
            None => naming.own.clone().or_else(|| e.carried.cluster.clone()),
            Some(link) => {
                if !links.contains(link) {
                    continue;
                }
                e.carried
                    .cluster
                    .as_deref()
                    .and_then(cluster_id)
                    .or_else(|| naming.id(link))
            }
        };
        let shown = match &e.link {
            None => format!("this cluster's export of {ns}/{name}"),
            Some(link) => format!("cluster {link}'s export of {ns}/{name}"),
        };
        let Some(id) = id else {
            // This cluster without an id: its export half says so on the export (Ready
            // `NoClusterId`, an Event) and in a metric, once per export, not here again.
            if let Some(link) = &e.link {
                problem(
                    name,
                    format!(
                        "{shown} is left out: cluster name {link:?} is not a cluster id (one or two DNS labels): give one with --linkerd-cluster-id {link}=ID"
                    ),
                );
            }
            continue;
        };
        if all.iter().any(|m| m.cluster == id) {
            continue;
        }
        let mut endpoints = Vec::new();
        if e.link.is_none() && !e.headless {
            endpoints = e.ips.iter().map(|ip| (None, *ip)).collect();
        }
        all.push(Member {
            cluster: id,
            link: e.link.clone(),
            object: None,
            shown,
            headless: e.headless,
            ports: carried_ports(&e.carried),
            carried: e.bridge.then(|| e.carried.clone()),
            endpoints,
        });
    }
    // Linkerd's mirrors: the addresses of the exports above, and the exports of clusters whose
    // credentials this bridge cannot read (or labelled for Linkerd by hand).
    // A cluster whose exports were read is what they say: Linkerd's objects may lag (a member
    // that left, a mirror left behind) and add no member for it.
    let covered = |link: &str, all: &[Member]| {
        read.contains(link) || all.iter().any(|m| m.link.as_deref() == Some(link))
    };
    let mut federated: Option<(&Read, &Vec<IpAddr>, &Vec<Family>)> = None;
    // The federated Service first: where there is one, Linkerd's mirrors of clusters this
    // bridge cannot read add no member (the federated Service stands for the service).
    let members: Vec<&Read> = members
        .iter()
        .filter(|r| matches!(r.shape, Shape::Federated { .. }))
        .chain(
            members
                .iter()
                .filter(|r| !matches!(r.shape, Shape::Federated { .. })),
        )
        .copied()
        .collect();
    for r in members {
        match &r.shape {
            Shape::Federated {
                remote,
                local,
                ips,
                families,
            } => {
                // The first by object name, should two claim the service.
                if federated.is_some() {
                    continue;
                }
                federated = Some((r, ips, families));
                let carried = carried_of(r, &mut problem);
                for link in remote {
                    if covered(link, &all) {
                        continue;
                    }
                    if let Some(id) = live(link, &r.object, &mut problem)
                        && !all.iter().any(|m| m.cluster == id)
                    {
                        all.push(Member {
                            cluster: id,
                            link: Some(link.clone()),
                            object: Some(&r.object),
                            shown: r.object.clone(),
                            headless: false,
                            ports: with_app(&r.ports, carried.as_ref()),
                            carried: None,
                            endpoints: Vec::new(),
                        });
                    }
                }
                if *local && !own_read && !all.iter().any(|m| m.link.is_none()) {
                    match &naming.own {
                        Some(own) if !all.iter().any(|m| &m.cluster == own) => all.push(Member {
                            cluster: own.clone(),
                            link: None,
                            object: Some(&r.object),
                            shown: r.object.clone(),
                            headless: false,
                            ports: with_app(&r.ports, carried.as_ref()),
                            // Linkerd writes the federated Service from its local member.
                            carried,
                            endpoints: Vec::new(),
                        }),
                        Some(_) => {}
                        None => problem(
                            &r.object,
                            "a local member is not listed in status.clusters without a cluster id (the ClusterProperty cluster.clusterset.k8s.io, or --cluster-id)".into(),
                        ),
                    }
                }
            }
            Shape::Mirror { cluster, .. } | Shape::HeadlessMirror { cluster } => {
                let headless = matches!(r.shape, Shape::HeadlessMirror { .. });
                let mut endpoints = Vec::new();
                match &r.shape {
                    Shape::Mirror { ips, .. } => endpoints.extend(ips.iter().map(|ip| (None, *ip))),
                    _ => {
                        for h in hosts.get(r.object.as_str()).into_iter().flatten() {
                            if let Shape::Host {
                                cluster: hc,
                                hostname,
                                ip: Some(ip),
                                ..
                            } = &h.shape
                                && hc == cluster
                            {
                                endpoints.push((Some(hostname.clone()), *ip));
                            }
                        }
                    }
                }
                if let Some(m) = all
                    .iter_mut()
                    .find(|m| m.link.as_deref() == Some(cluster.as_str()))
                {
                    // The export read through the credentials: the mirror gives its addresses
                    // (when it is of the export's type) and the object for Events.
                    if m.headless == headless && m.endpoints.is_empty() {
                        m.endpoints = endpoints;
                        m.object = Some(&r.object);
                    }
                    continue;
                }
                if federated.is_some() || covered(cluster, &all) {
                    continue;
                }
                let carried = carried_of(r, &mut problem);
                let Some(id) = live(cluster, &r.object, &mut problem) else {
                    continue;
                };
                if all.iter().any(|m| m.cluster == id) {
                    continue;
                }
                all.push(Member {
                    cluster: id,
                    link: Some(cluster.clone()),
                    object: Some(&r.object),
                    shown: r.object.clone(),
                    headless,
                    ports: with_app(&r.ports, carried.as_ref()),
                    carried,
                    endpoints,
                });
            }
            Shape::Host { .. } => {}
        }
    }
    // Oldest export first, as the MCS API resolves conflicts (exports without a carried
    // creation time after, by cluster).
    all.sort_by(|a, b| {
        export_order(a.created(), &a.cluster).cmp(&export_order(b.created(), &b.cluster))
    });
    // A member that carried nothing (labelled by hand) takes the oldest carried ports'
    // `appProtocol`, which Linkerd's mirrors drop.
    let oldest_carried = all.iter().find_map(|m| m.carried.clone());
    for m in all.iter_mut().filter(|m| m.carried.is_none()) {
        m.ports = with_app(&m.ports, oldest_carried.as_ref());
    }
    let oldest = all.first()?;
    let is_headless = oldest.headless;
    // The carried fields: the oldest export's that carried any.
    let (carried, carried_by) = all
        .iter()
        .find_map(|m| Some((m.carried.clone()?, m.object.unwrap_or(name))))
        .unwrap_or_else(|| (Carried::default(), name));
    let (labels, annotations) = exported_metadata(&carried, |m| problem(carried_by, m));
    let mut spec_fields = BTreeMap::new();
    for field in [
        "sessionAffinity",
        "sessionAffinityConfig",
        "internalTrafficPolicy",
        "trafficDistribution",
    ] {
        if let Some(v) = carried.field(field) {
            spec_fields.insert(field.to_string(), v);
        }
    }
    let kind = |headless: bool| if headless { "headless" } else { "ClusterSetIP" };
    // Each cluster of the oldest's type, its ports added to the union by name (the older
    // export's port where a name clashes, KEP-1645 "Service Port"); each cluster's slices
    // have its own ports. A cluster exporting the other type is left out: its addresses
    // cannot be served as the oldest's type.
    let mut ports: Vec<(ImportPort, &str)> = Vec::new();
    let mut taken: Vec<(&Member, Vec<ImportPort>)> = Vec::new();
    let mut clusters = BTreeSet::new();
    let mut slices: BTreeMap<(String, Family), SliceSpec> = BTreeMap::new();
    for m in &all {
        if m.headless != is_headless {
            if let Some(object) = m.object {
                conflict(
                    object,
                    format!(
                        "cluster {} exports {name} as {} but the oldest export ({}) is {}: left out of the import, as the MCS API resolves a type conflict by the oldest export",
                        m.cluster,
                        kind(m.headless),
                        oldest.shown,
                        kind(is_headless)
                    ),
                );
            }
            continue;
        }
        clusters.insert(m.cluster.clone());
        for p in &m.ports {
            if !ports.iter().any(|(q, _)| q.name == p.name) {
                ports.push((p.clone(), &m.shown));
            }
        }
        taken.push((m, m.ports.clone()));
        for (hostname, ip) in &m.endpoints {
            slices
                .entry((m.cluster.clone(), Family::of(ip)))
                .or_insert_with(|| SliceSpec {
                    cluster: m.cluster.clone(),
                    family: Family::of(ip),
                    endpoints: Vec::new(),
                    ports: m.ports.clone(),
                })
                .endpoints
                .push((hostname.clone(), *ip));
        }
    }
    let mut union: Vec<ImportPort> = ports.iter().map(|(p, _)| p.clone()).collect();
    union.sort();
    // Where the exports differ, an Event on each Linkerd object here that stands for one (the
    // export halves say it on the ServiceExports).
    let bare = |ports: &[ImportPort]| -> Vec<(String, String, i32)> {
        ports
            .iter()
            .map(|p| (p.name.clone(), p.protocol.clone(), p.port))
            .collect()
    };
    let differ = taken.iter().any(|(_, own)| bare(own) != bare(&union));
    for (m, own) in taken.iter().filter(|_| differ) {
        let Some(object) = m.object else { continue };
        let list = |ports: &[ImportPort]| {
            ports
                .iter()
                .map(ImportPort::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut message = format!(
            "cluster {} exports {name} with ports [{}], and other clusters with others; the import has the union of the exports' ports [{}]",
            m.cluster,
            list(own),
            list(&union)
        );
        for p in own {
            if let Some((kept, from)) = ports
                .iter()
                .find(|(q, _)| q.name == p.name && (q.port, &q.protocol) != (p.port, &p.protocol))
            {
                message.push_str(&format!(
                    "; port name {:?} is {p} here but {kept} in the older export {from}, and the older one is kept, as the MCS API resolves a port conflict",
                    p.name
                ));
            }
        }
        conflict(object, message);
    }
    problems.extend(conflicts);
    if clusters.is_empty() {
        return None;
    }
    let mut i = Import {
        namespace: ns.into(),
        name: name.into(),
        headless: is_headless,
        ips: Vec::new(),
        families: Vec::new(),
        ports: union,
        carried: spec_fields,
        labels,
        annotations,
        clusters,
        slices: Vec::new(),
    };
    match federated {
        // A ClusterSetIP import with Linkerd's federated Service: its one address, no slices.
        Some((_, ips, families)) if !is_headless => {
            if ips.is_empty() {
                return None;
            }
            i.ips = ips.clone();
            i.families = families.clone();
        }
        _ => {
            i.slices = slices
                .into_values()
                .map(|mut s| {
                    s.endpoints.sort();
                    s.endpoints.dedup();
                    s
                })
                .collect();
            let families: BTreeSet<Family> = i.slices.iter().map(|s| s.family).collect();
            i.families = families.into_iter().collect();
        }
    }
    Some(i)
}

/// The exported labels and annotations in `carried` that Kubernetes accepts on an object; each
/// one left out is said through `problem`. A label may not take the bridge's own
/// [`LABEL_MANAGER`], which says whose the ServiceImport is.
fn exported_metadata(
    carried: &Carried,
    mut problem: impl FnMut(String),
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    /// Kubernetes' limit on all of an object's annotations together.
    const ANNOTATIONS_MAX: usize = 256 * 1024;
    let pairs = |key: &str| -> Vec<(String, String)> {
        let map = match key {
            "exportedLabels" => &carried.exported_labels,
            _ => &carried.exported_annotations,
        };
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    };
    let mut labels = BTreeMap::new();
    for (k, v) in pairs("exportedLabels") {
        let wrong = if k == LABEL_MANAGER {
            Some("the key says whose the ServiceImport is, and only the bridge sets it".into())
        } else if let Err(e) = qualified_name(&k) {
            Some(format!("the key {e}"))
        } else if !label_value(&v) {
            Some("the value is not a label value (at most 63 of [A-Za-z0-9-_.], beginning and ending with a letter or digit)".into())
        } else {
            None
        };
        match wrong {
            Some(why) => problem(format!(
                "exported label {k}={v:?} is left out of the ServiceImport: {why}"
            )),
            None => {
                labels.insert(k, v);
            }
        }
    }
    let mut annotations = BTreeMap::new();
    for (k, v) in pairs("exportedAnnotations") {
        match qualified_name(&k) {
            Err(e) => problem(format!(
                "exported annotation {k:?} is left out of the ServiceImport: the key {e}"
            )),
            Ok(()) => {
                annotations.insert(k, v);
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

/// Whether `key` is a label or annotation key Kubernetes accepts (`[prefix/]name`: a DNS
/// subdomain of at most 253 and a name as [`label_value`], not empty); if not, why.
fn qualified_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let subdomain = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                let b = l.as_bytes();
                !b.is_empty()
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                    && b[0] != b'-'
                    && b[b.len() - 1] != b'-'
            });
        if !subdomain {
            return Err(format!(
                "prefix {p:?} is not a lower-case DNS subdomain of at most 253 characters"
            ));
        }
    }
    if name.is_empty() || !label_value(name) {
        return Err(format!(
            "name {name:?} is not 1-63 of [A-Za-z0-9-_.], beginning and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// Whether `v` is a label value Kubernetes accepts: empty, or at most 63 of
/// `[A-Za-z0-9-_.]` beginning and ending with a letter or digit.
fn label_value(v: &str) -> bool {
    let b = v.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric())
}

/// What `svc` is, if it is one of Linkerd's multicluster Services; an error names what is
/// wrong with one that is.
fn read(ns: &str, svc: &Service) -> Result<Option<Read>, String> {
    let labels = svc.metadata.labels.clone().unwrap_or_default();
    let annotations = svc.metadata.annotations.clone().unwrap_or_default();
    // The reading `--source linkerd` makes too.
    let shape = match linkerd_shape::classify(ns, &labels, &annotations) {
        Ok(shape) => shape,
        Err(linkerd_shape::Unread::Passed(_)) => return Ok(None),
        Err(linkerd_shape::Unread::Invalid(_, why)) => return Err(why),
    };
    let object = svc.metadata.name.clone().unwrap_or_default();
    let spec = svc.spec.clone().unwrap_or_default();
    let headless = spec.cluster_ip.as_deref() == Some("None");
    let ips = cluster_ips(&spec)?;
    let ports = spec
        .ports
        .unwrap_or_default()
        .iter()
        .map(|p| ImportPort {
            name: p.name.clone().unwrap_or_default(),
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            port: p.port,
            app_protocol: p.app_protocol.clone(),
        })
        .collect();
    let carried = annotations.get(CARRIED).map(|text| {
        Carried::parse(text)
            .map_err(|e| format!("{e}; the import leaves out the fields it carries"))
    });
    let (service, shape) = match shape {
        linkerd_shape::Shape::Federated {
            service,
            remote,
            local,
        } => {
            let families = match spec.ip_families {
                Some(f) if !f.is_empty() => f
                    .iter()
                    .filter_map(|w| match w.as_str() {
                        "IPv4" => Some(Family::V4),
                        "IPv6" => Some(Family::V6),
                        _ => None,
                    })
                    .collect(),
                _ => ips.iter().map(Family::of).collect(),
            };
            let shape = Shape::Federated {
                remote,
                local,
                ips,
                families,
            };
            (service, shape)
        }
        linkerd_shape::Shape::Host {
            link,
            service,
            parent,
            hostname,
        } => {
            let shape = Shape::Host {
                cluster: link,
                parent,
                hostname,
                ip: ips.first().copied(),
            };
            (service, shape)
        }
        linkerd_shape::Shape::Mirror { link, service } if headless => {
            (service, Shape::HeadlessMirror { cluster: link })
        }
        linkerd_shape::Shape::Mirror { link, service } => {
            (service, Shape::Mirror { cluster: link, ips })
        }
    };
    Ok(Some(Read {
        service,
        object,
        shape,
        ports,
        carried,
    }))
}

/// The Service's ClusterIPs (none when headless or not yet given), one per family.
pub(super) fn cluster_ips(
    spec: &k8s_openapi::api::core::v1::ServiceSpec,
) -> Result<Vec<IpAddr>, String> {
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
            "ports": self.ports.iter().map(ImportPort::json).collect::<Vec<_>>(),
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

    /// The slices, by object name.
    pub fn slice_objects(&self) -> BTreeMap<String, Value> {
        self.slices
            .iter()
            .map(|s| {
                let name = slice_name(&self.name, &s.cluster, s.family);
                let endpoints: Vec<Value> = s
                    .endpoints
                    .iter()
                    .map(|(host, ip)| {
                        let mut e =
                            json!({"addresses": [ip.to_string()], "conditions": {"ready": true}});
                        if let Some(h) = host {
                            e["hostname"] = h.clone().into();
                        }
                        e
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
                    "ports": s.ports.iter().map(ImportPort::json).collect::<Vec<_>>(),
                });
                (name, o)
            })
            .collect()
    }
}

/// The object name of the slice of `service`'s addresses of `family` from `cluster`:
/// readable, and unique in the namespace through a hash of all three (`a-b` of cluster `c` and
/// `a` of cluster `b-c` differ).
pub fn slice_name(service: &str, cluster: &str, family: Family) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in service
        .bytes()
        .chain([0])
        .chain(cluster.bytes())
        .chain([0])
        .chain(family.word().bytes())
    {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{service}-{}-{h:08x}", cluster.replace('.', "-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The judge from Linkerd's objects alone: no linked cluster's exports read.
    fn judge(services: &[Arc<Service>], links: &BTreeSet<String>, naming: &Naming) -> Judged {
        super::judge(services, links, naming, &Exports::default())
    }

    fn svc(yaml: &str) -> Arc<Service> {
        Arc::new(serde_yaml_ng::from_str(yaml).unwrap())
    }

    fn mirror(svc_name: &str, link: &str, ip: &str) -> Arc<Service> {
        svc(&format!(
            "metadata: {{name: {svc_name}-{link}, namespace: shop, labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: {link}}}, annotations: {{mirror.linkerd.io/remote-svc-fq-name: {svc_name}.shop.svc.cluster.local}}}}\n\
             spec: {{clusterIP: '{ip}', clusterIPs: ['{ip}'], ports: [{{name: http, port: 80, protocol: TCP}}]}}"
        ))
    }

    fn links(l: &[&str]) -> BTreeSet<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    fn key(name: &str) -> (String, String) {
        ("shop".into(), name.into())
    }

    /// What a cluster's export half carries for `web` exported at `created` with `ports`
    /// (`name:port/PROTO`), labels `team=<team>`.
    fn carried(
        cluster: &str,
        created: &str,
        ports: &[&str],
        headless: bool,
        team: &str,
    ) -> Carried {
        Carried {
            version: 1,
            cluster: Some(cluster.into()),
            export_created: Some(created.into()),
            headless,
            ports: ports
                .iter()
                .map(|p| {
                    let (name, rest) = p.split_once(':').unwrap();
                    let (port, protocol) = rest.split_once('/').unwrap();
                    crate::source::linkerd::carried::CarriedPort {
                        name: name.into(),
                        port: port.parse().unwrap(),
                        protocol: protocol.into(),
                        app_protocol: None,
                    }
                })
                .collect(),
            exported_labels: BTreeMap::from([("team".into(), team.into())]),
            ..Carried::default()
        }
    }

    /// `web-federated` as Linkerd's service mirror writes it in a cluster with a local member
    /// and the remote member `web@<other>`: ports and annotations from the local member,
    /// "always treated as the oldest" (linkerd2 `version-2.20`, cluster_watcher.go
    /// `handleFederatedServiceJoin`).
    fn federated_here(other: &str, ip: &str, local: &Carried) -> Arc<Service> {
        let ports: Vec<String> = local
            .ports
            .iter()
            .map(|p| {
                format!(
                    "{{name: {}, port: {}, protocol: {}}}",
                    p.name, p.port, p.protocol
                )
            })
            .collect();
        svc(&format!(
            "metadata: {{name: web-federated, namespace: shop, labels: {{mirror.linkerd.io/mirrored-service: 'true'}}, annotations: {{multicluster.linkerd.io/remote-discovery: 'web@{other}', multicluster.linkerd.io/local-discovery: web, linkerd-bridge.clusterset-dns.io/export: '{}'}}}}\n\
             spec: {{clusterIP: {ip}, clusterIPs: [{ip}], ipFamilies: [IPv4], ports: [{}]}}",
            local.text(),
            ports.join(", ")
        ))
    }

    #[test]
    fn every_exporting_cluster_imports_the_same_spec() {
        // The conformance suite's port sets: east exports first with tcp/udp 42, west a second
        // later with tcp 42 and stcp 142/SCTP (and, in the second round, udp 43).
        for (west_ports, want_ports) in [
            (
                &["tcp:42/TCP", "stcp:142/SCTP"][..],
                "stcp:142/SCTP,tcp:42/TCP,udp:42/UDP",
            ),
            (&["tcp:42/TCP", "udp:43/UDP"][..], "tcp:42/TCP,udp:42/UDP"),
        ] {
            let east = carried(
                "east",
                "2026-12-04T10:00:00Z",
                &["tcp:42/TCP", "udp:42/UDP"],
                false,
                "a",
            );
            let west = carried("west", "2026-12-04T10:00:01Z", west_ports, false, "b");
            let in_cluster = |own: &Carried, other: &Carried, other_name: &str, ip: &str| {
                let by_service = BTreeMap::from([(
                    key("web"),
                    vec![
                        ClusterExport {
                            link: None,
                            ips: vec![ip.parse().unwrap()],
                            headless: false,
                            carried: own.clone(),
                            bridge: true,
                        },
                        ClusterExport {
                            link: Some(other_name.into()),
                            ips: vec!["198.18.7.7".parse().unwrap()],
                            headless: false,
                            carried: other.clone(),
                            bridge: true,
                        },
                    ],
                )]);
                let exports = Exports {
                    by_service,
                    read: BTreeSet::from([other_name.to_string()]),
                    own_read: true,
                };
                let naming = Naming {
                    own: own.cluster.clone(),
                    ..Naming::default()
                };
                let j = super::judge(
                    &[federated_here(other_name, ip, own)],
                    &links(&[other_name]),
                    &naming,
                    &exports,
                );
                j.imports[&key("web")].clone()
            };
            let (e, w) = (
                in_cluster(&east, &west, "west", "198.18.0.10"),
                in_cluster(&west, &east, "east", "198.18.0.20"),
            );
            let ports = |i: &Import| {
                i.ports
                    .iter()
                    .map(|p| format!("{}:{}/{}", p.name, p.port, p.protocol))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            assert_eq!(ports(&e), want_ports);
            let mut w_spec = w.spec();
            w_spec["ips"] = e.spec()["ips"].clone();
            assert_eq!(e.spec(), w_spec, "only the ClusterSetIP differs");
            assert_eq!(e.status(), w.status());
            assert_eq!(e.clusters, BTreeSet::from(["east".into(), "west".into()]));
            // The oldest export's labels, in both.
            assert_eq!(e.labels, w.labels);
            assert_eq!(e.labels["team"], "a");
        }
    }

    #[test]
    fn what_linkerd_still_says_of_a_cluster_that_was_read_adds_nothing() {
        // West withdrew its export; Linkerd's federated Service here still names it (its
        // service mirror lags). West's exports were read: it exports nothing, so the import is
        // this cluster's alone. Were west not read, the federated Service would stand for it.
        let own = carried("east", "2026-12-04T10:00:00Z", &["http:80/TCP"], false, "a");
        let fed = federated_here("west", "198.18.0.10", &own);
        let mut exports = Exports {
            by_service: BTreeMap::from([(
                key("web"),
                vec![ClusterExport {
                    link: None,
                    ips: vec!["198.18.0.5".parse().unwrap()],
                    headless: false,
                    carried: own,
                    bridge: true,
                }],
            )]),
            read: BTreeSet::from(["west".to_string()]),
            own_read: true,
        };
        let naming = Naming {
            own: Some("east".into()),
            ..Naming::default()
        };
        let clusters = |exports: &Exports| {
            super::judge(
                std::slice::from_ref(&fed),
                &links(&["west"]),
                &naming,
                exports,
            )
            .imports[&key("web")]
                .clusters
                .clone()
        };
        assert_eq!(clusters(&exports), BTreeSet::from(["east".into()]));
        exports.read.clear();
        assert_eq!(
            clusters(&exports),
            BTreeSet::from(["east".into(), "west".into()])
        );
    }

    #[test]
    fn an_exporting_cluster_imports_its_own_export_without_a_mirror() {
        // A remote-discovery export seen by nobody yet: this cluster's own import has its own
        // cluster, with the Service's ClusterIP as its slice.
        let own = carried("east", "2026-12-04T10:00:00Z", &["http:80/TCP"], false, "a");
        let exports = Exports {
            by_service: BTreeMap::from([(
                key("web"),
                vec![ClusterExport {
                    link: None,
                    ips: vec!["198.18.0.10".parse().unwrap()],
                    headless: false,
                    carried: own,
                    bridge: true,
                }],
            )]),
            read: BTreeSet::new(),
            own_read: true,
        };
        let with = |own: Option<&str>| {
            let naming = Naming {
                own: own.map(str::to_string),
                ..Naming::default()
            };
            super::judge(&[], &links(&[]), &naming, &exports)
        };
        let j = with(Some("east"));
        let i = &j.imports[&key("web")];
        assert_eq!(i.clusters, BTreeSet::from(["east".into()]));
        assert!(i.ips.is_empty());
        assert_eq!(i.slices.len(), 1);
        assert_eq!(
            i.slices[0].endpoints,
            vec![(None, "198.18.0.10".parse().unwrap())]
        );
        // Without an id of its own the carried one names it; without either it is left out
        // (the export half says why, on the export).
        let mut anonymous = exports.clone();
        anonymous.by_service.get_mut(&key("web")).unwrap()[0]
            .carried
            .cluster = None;
        let j = super::judge(&[], &links(&[]), &Naming::default(), &anonymous);
        assert!(j.imports.is_empty());
        assert!(j.problems.is_empty(), "{:?}", j.problems);
        let named = super::judge(&[], &links(&[]), &Naming::default(), &exports);
        assert_eq!(
            named.imports[&key("web")].clusters,
            BTreeSet::from(["east".into()]),
            "the id its export half carried"
        );
    }

    #[test]
    fn federated_gives_its_addresses_and_members() {
        let fed = svc(
            "metadata: {name: web-federated, namespace: shop, labels: {mirror.linkerd.io/mirrored-service: 'true'}, annotations: {multicluster.linkerd.io/remote-discovery: 'web@east,web@west', multicluster.linkerd.io/local-discovery: web, linkerd-bridge.clusterset-dns.io/export: '{\"sessionAffinity\":\"ClientIP\",\"ports\":[{\"name\":\"http\",\"port\":80,\"protocol\":\"TCP\",\"appProtocol\":\"http\"}]}'}}\n\
             spec: {clusterIP: 198.18.0.10, clusterIPs: [198.18.0.10], ipFamilies: [IPv4], ports: [{name: http, port: 80, protocol: TCP}]}",
        );
        let naming = Naming {
            cluster_ids: BTreeMap::from([("west".into(), "west.eu".into())]),
            own: Some("north".into()),
        };
        let j = judge(
            std::slice::from_ref(&fed),
            &links(&["east", "west"]),
            &naming,
        );
        let i = &j.imports[&key("web")];
        assert!(!i.headless && i.slices.is_empty());
        assert_eq!(i.ips, vec!["198.18.0.10".parse::<IpAddr>().unwrap()]);
        assert_eq!(i.families, vec![Family::V4]);
        assert_eq!(
            i.clusters,
            BTreeSet::from(["east".into(), "west.eu".into(), "north".into()])
        );
        assert_eq!(i.ports[0].app_protocol.as_deref(), Some("http"));
        assert_eq!(i.spec()["sessionAffinity"], "ClientIP");
        assert_eq!(i.status()["endpointSliceObjects"], "Absent");
        assert!(j.problems.is_empty(), "{:?}", j.problems);

        // A Link gone: its member does not count; the last one gone, no import.
        let j = judge(
            std::slice::from_ref(&fed),
            &links(&["west"]),
            &Naming::default(),
        );
        assert_eq!(
            j.imports[&key("web")].clusters,
            BTreeSet::from(["west".into()])
        );
        assert_eq!(j.problems.len(), 1, "the local member without --cluster-id");
        let gone = svc(
            "metadata: {name: web-federated, namespace: shop, labels: {mirror.linkerd.io/mirrored-service: 'true'}, annotations: {multicluster.linkerd.io/remote-discovery: ''}}\n\
             spec: {clusterIP: 198.18.0.10, ports: [{name: http, port: 80}]}",
        );
        assert!(
            judge(&[gone], &links(&["east"]), &naming)
                .imports
                .is_empty()
        );
        assert!(
            judge(&[fed], &links(&[]), &Naming::default())
                .imports
                .is_empty()
        );
    }

    #[test]
    fn mirrors_only_give_a_slice_per_cluster() {
        let j = judge(
            &[
                mirror("api", "east", "198.18.1.1"),
                mirror("api", "west", "fd00::5"),
                mirror("api", "south", "198.18.1.3"),
            ],
            &links(&["east", "west"]),
            &Naming::default(),
        );
        let i = &j.imports[&key("api")];
        assert!(i.ips.is_empty() && !i.headless);
        assert_eq!(i.families, vec![Family::V4, Family::V6]);
        assert_eq!(i.clusters, BTreeSet::from(["east".into(), "west".into()]));
        let objects = i.slice_objects();
        assert_eq!(objects.len(), 2);
        let east = &objects[&slice_name("api", "east", Family::V4)];
        assert_eq!(east["addressType"], "IPv4");
        assert_eq!(east["endpoints"][0]["addresses"][0], "198.18.1.1");
        assert_eq!(
            east["metadata"]["labels"]["multicluster.kubernetes.io/source-cluster"],
            "east"
        );
        assert_eq!(east["ports"][0]["name"], "http");
        assert_eq!(i.status()["endpointSliceObjects"], "Present");
    }

    #[test]
    fn headless_mirrors_name_each_host() {
        let parent = svc(
            "metadata: {name: db-east, namespace: shop, labels: {mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east}, annotations: {mirror.linkerd.io/remote-svc-fq-name: db.shop.svc.cluster.local}}\n\
             spec: {clusterIP: None, ports: [{name: pg, port: 5432}]}",
        );
        let host = |h: &str, ip: &str| {
            svc(&format!(
                "metadata: {{name: {h}-east, namespace: shop, labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east, mirror.linkerd.io/headless-mirror-svc-name: db-east}}, annotations: {{mirror.linkerd.io/remote-svc-fq-name: {h}.db.shop.svc.cluster.local}}}}\n\
                 spec: {{clusterIP: '{ip}', ports: [{{name: pg, port: 5432}}]}}"
            ))
        };
        let j = judge(
            &[
                parent,
                host("db-1", "198.18.2.2"),
                host("db-0", "198.18.2.1"),
            ],
            &links(&["east"]),
            &Naming::default(),
        );
        let i = &j.imports[&key("db")];
        assert!(i.headless && i.ips.is_empty());
        assert_eq!(
            i.slices[0].endpoints,
            vec![
                (Some("db-0".into()), "198.18.2.1".parse().unwrap()),
                (Some("db-1".into()), "198.18.2.2".parse().unwrap()),
            ]
        );
        assert_eq!(i.spec()["type"], "Headless");
    }

    #[test]
    fn the_oldest_export_decides_type_and_port_clashes() {
        // A mirror as Linkerd writes it for a cluster whose export the export half made at
        // `created` (None: labelled by hand), with one port and headless or not.
        let exported = |link: &str, created: Option<&str>, port: u16, headless: bool| {
            let carried = created.map_or(String::new(), |c| {
                format!(
                    ", linkerd-bridge.clusterset-dns.io/export: '{{\"exportCreated\":\"{c}\"}}'"
                )
            });
            let ip = if headless {
                "None".to_string()
            } else {
                format!("198.18.3.{port}")
            };
            svc(&format!(
                "metadata: {{name: web-{link}, namespace: shop, labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: {link}}}, annotations: {{mirror.linkerd.io/remote-svc-fq-name: web.shop.svc.cluster.local{carried}}}}}\n\
                 spec: {{clusterIP: '{ip}', ports: [{{name: http, port: {port}, protocol: TCP}}]}}"
            ))
        };
        let all = links(&["a", "b", "c"]);
        // `c` exported first: its port 82 is the import's, whatever the names' order; the
        // others stay, each slice with its own cluster's port, and each is said to conflict.
        let j = judge(
            &[
                exported("a", Some("2026-12-04T10:00:00Z"), 80, false),
                exported("b", None, 81, false),
                exported("c", Some("2026-12-01T10:00:00Z"), 82, false),
            ],
            &all,
            &Naming::default(),
        );
        let i = &j.imports[&key("web")];
        assert_eq!(i.ports.iter().map(|p| p.port).collect::<Vec<_>>(), [82]);
        assert_eq!(
            i.clusters,
            BTreeSet::from(["a".into(), "b".into(), "c".into()])
        );
        let slice_ports: Vec<(String, i32)> = i
            .slices
            .iter()
            .map(|s| (s.cluster.clone(), s.ports[0].port))
            .collect();
        assert_eq!(
            slice_ports,
            [("a".into(), 80), ("b".into(), 81), ("c".into(), 82)]
        );
        let conflicts: Vec<&str> = j
            .problems
            .iter()
            .filter(|p| p.reason == CONFLICT)
            .map(|p| p.object.as_str())
            .collect();
        assert_eq!(conflicts, ["web-c", "web-a", "web-b"], "{:?}", j.problems);
        assert!(
            j.problems[1].message.contains(
                "port name \"http\" is http:80/TCP here but http:82/TCP in the older export web-c"
            ),
            "{:?}",
            j.problems
        );

        // Other port names add up: the import has the union, and every export that differs
        // from it is said to conflict, the oldest too (KEP-1645: the union of the
        // constituent services' ports, and a conflict on each export).
        let with_ports = |link: &str, created: &str, ports: &str| {
            svc(&format!(
                "metadata: {{name: web-{link}, namespace: shop, labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: {link}}}, annotations: {{mirror.linkerd.io/remote-svc-fq-name: web.shop.svc.cluster.local, linkerd-bridge.clusterset-dns.io/export: '{{\"exportCreated\":\"{created}\"}}'}}}}\n\
                 spec: {{clusterIP: 198.18.3.9, ports: [{ports}]}}"
            ))
        };
        let j = judge(
            &[
                with_ports(
                    "a",
                    "2026-12-01T10:00:00Z",
                    "{name: tcp, port: 42, protocol: TCP}, {name: udp, port: 42, protocol: UDP}",
                ),
                with_ports(
                    "b",
                    "2026-12-02T10:00:00Z",
                    "{name: tcp, port: 42, protocol: TCP}, {name: stcp, port: 142, protocol: SCTP}",
                ),
                with_ports(
                    "c",
                    "2026-12-03T10:00:00Z",
                    "{name: udp, port: 43, protocol: UDP}",
                ),
            ],
            &all,
            &Naming::default(),
        );
        let i = &j.imports[&key("web")];
        assert_eq!(
            i.ports
                .iter()
                .map(ImportPort::to_string)
                .collect::<Vec<_>>(),
            ["stcp:142/SCTP", "tcp:42/TCP", "udp:42/UDP"]
        );
        assert_eq!(i.clusters.len(), 3);
        let said: Vec<(&str, &str)> = j
            .problems
            .iter()
            .map(|p| (p.object.as_str(), p.message.as_str()))
            .collect();
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(said[0].1.contains("cluster a exports web with ports [tcp:42/TCP, udp:42/UDP], and other clusters with others; the import has the union of the exports' ports [stcp:142/SCTP, tcp:42/TCP, udp:42/UDP]"), "{said:?}");
        assert!(!said[0].1.contains("port name"), "{said:?}");
        assert!(!said[1].1.contains("port name"), "{said:?}");
        assert!(
            said[2].1.contains(
                "port name \"udp\" is udp:43/UDP here but udp:42/UDP in the older export web-a"
            ),
            "{said:?}"
        );

        // The oldest is a ClusterSetIP export: a headless one of another cluster is left out,
        // and the other way round.
        let j = judge(
            &[
                exported("a", Some("2026-12-04T10:00:00Z"), 80, true),
                exported("c", Some("2026-12-01T10:00:00Z"), 80, false),
            ],
            &all,
            &Naming::default(),
        );
        let i = &j.imports[&key("web")];
        assert!(!i.headless);
        assert_eq!(i.clusters, BTreeSet::from(["c".into()]));
        assert!(
            j.problems[0]
                .message
                .contains("as headless but the oldest export (web-c) is ClusterSetIP"),
            "{:?}",
            j.problems
        );
        let j = judge(
            &[
                exported("a", Some("2026-11-04T10:00:00Z"), 80, true),
                exported("c", Some("2026-12-01T10:00:00Z"), 80, false),
            ],
            &all,
            &Naming::default(),
        );
        let i = &j.imports[&key("web")];
        assert!(i.headless);
        assert_eq!(i.clusters, BTreeSet::from(["a".into()]));
        assert_eq!(j.problems.len(), 1, "{:?}", j.problems);
    }

    #[test]
    fn exported_labels_and_annotations_that_kubernetes_takes_are_kept() {
        let carried: Carried = serde_json::from_value(json!({
            "exportedLabels": {
                "team": "shop",
                "example.com/tier": "gold_1.a",
                "": "x",
                "Example.com/x": "y",
                "a/b/c": "y",
                "ok": "not ok!",
                "long": "a".repeat(64),
                "app.kubernetes.io/managed-by": "someone",
                "empty": "",
            },
            "exportedAnnotations": {"dummy-annotation": "true", "note": "any text, even with spaces", "bad key": "x"},
        }))
        .unwrap();
        let mut said = Vec::new();
        let (labels, annotations) = exported_metadata(&carried, |m| said.push(m));
        assert_eq!(
            labels.keys().map(String::as_str).collect::<Vec<_>>(),
            ["empty", "example.com/tier", "team"]
        );
        assert_eq!(
            annotations.keys().map(String::as_str).collect::<Vec<_>>(),
            ["dummy-annotation", "note"]
        );
        assert_eq!(said.len(), 7, "{said:#?}");
        for part in [
            "exported label =\"x\" is left out of the ServiceImport: the key name \"\" is not",
            "exported label Example.com/x=\"y\" is left out of the ServiceImport: the key prefix \"Example.com\" is not a lower-case DNS subdomain",
            "exported label a/b/c=\"y\" is left out",
            "exported label ok=\"not ok!\" is left out of the ServiceImport: the value is not a label value",
            "exported label long=",
            "exported label app.kubernetes.io/managed-by=\"someone\" is left out of the ServiceImport: the key says whose the ServiceImport is",
            "exported annotation \"bad key\" is left out",
        ] {
            assert!(
                said.iter().any(|m| m.starts_with(part)),
                "{part} in {said:#?}"
            );
        }
        // Past Kubernetes' limit on an object's annotations, none are kept.
        let big: Carried = serde_json::from_value(json!({
            "exportedAnnotations": {"a": "x".repeat(200 * 1024), "b": "y".repeat(100 * 1024)},
        }))
        .unwrap();
        let mut said = Vec::new();
        let (_, annotations) = exported_metadata(&big, |m| said.push(m));
        assert!(annotations.is_empty());
        assert!(
            said[0].contains("more than the 262144 Kubernetes takes"),
            "{said:?}"
        );
    }

    #[test]
    fn the_import_has_the_oldest_exports_labels() {
        let exported = |link: &str, created: &str, team: &str| {
            svc(&format!(
                "metadata: {{name: web-{link}, namespace: shop, labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: {link}}}, annotations: {{mirror.linkerd.io/remote-svc-fq-name: web.shop.svc.cluster.local, linkerd-bridge.clusterset-dns.io/export: '{{\"exportCreated\":\"{created}\",\"exportedLabels\":{{\"team\":\"{team}\"}}}}'}}}}\n\
                 spec: {{clusterIP: 198.18.3.9, ports: [{{name: http, port: 80}}]}}"
            ))
        };
        let j = judge(
            &[
                exported("a", "2026-12-04T10:00:00Z", "cart"),
                exported("b", "2026-12-01T10:00:00Z", "shop"),
            ],
            &links(&["a", "b"]),
            &Naming::default(),
        );
        let i = &j.imports[&key("web")];
        assert_eq!(i.metadata()["labels"]["team"], "shop");
        assert_eq!(i.metadata()["labels"][LABEL_MANAGER], MANAGER);
        assert!(i.metadata().get("annotations").is_none());
    }

    #[test]
    fn bad_objects_are_named_and_passed_over() {
        let bad = svc(
            "metadata: {name: x-east, namespace: shop, labels: {mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east}, annotations: {mirror.linkerd.io/remote-svc-fq-name: x.other.svc.cluster.local}}\n\
             spec: {clusterIP: 198.18.1.9}",
        );
        let carried = svc(
            "metadata: {name: y-east, namespace: shop, labels: {mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east}, annotations: {mirror.linkerd.io/remote-svc-fq-name: y.shop.svc.cluster.local, linkerd-bridge.clusterset-dns.io/export: '{not json'}}\n\
             spec: {clusterIP: 198.18.1.8}",
        );
        let user =
            svc("metadata: {name: web-federated, namespace: shop}\nspec: {clusterIP: 198.18.1.7}");
        let j = judge(
            &[bad, carried, user, mirror("api", "east", "198.18.1.1")],
            &links(&["east"]),
            &Naming::default(),
        );
        assert_eq!(
            j.imports.keys().cloned().collect::<Vec<_>>(),
            vec![key("api"), key("y")]
        );
        assert_eq!(j.problems.len(), 2, "{:?}", j.problems);
        assert!(
            j.problems[0]
                .message
                .contains("not a service in namespace shop")
        );
        assert!(j.problems[1].message.contains("not what a bridge writes"));
    }

    #[test]
    fn slice_names_differ_where_dashes_would_make_them_equal() {
        assert_ne!(
            slice_name("a-b", "c", Family::V4),
            slice_name("a", "b-c", Family::V4)
        );
        assert_ne!(
            slice_name("a", "b", Family::V4),
            slice_name("a", "b", Family::V6)
        );
        assert!(slice_name("web", "east.eu", Family::V4).starts_with("web-east-eu-"));
    }
}
