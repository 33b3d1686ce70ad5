//! The judge: one list of members per service (the exports read through the Links'
//! credentials and this cluster's own; Linkerd's objects for clusters that cannot be read), in
//! one export order, and the [`Import`] they give.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use serde_json::Value;

use super::read::{Read, read};
use super::{Import, Naming, Route, SliceSpec, exported_metadata};
use crate::bridge::model::{ClusterExport, Endpoint, Exports, Family, Port, Problem, Reason};
use crate::bridge::runtime::Key;
use crate::model::Refusal;
use crate::source::linkerd::carried::{COMPARED, Carried, export_order};
use crate::source::linkerd::shape::Shape;
use crate::source::policy::{Policy, refusal};
use crate::wire::cluster_id;

/// The most endpoints one EndpointSlice holds (the API's limit); more are split over several.
pub const SLICE_ENDPOINTS: usize = 1000;

/// What the judge found for one service: its import, if it has one, and the problems it
/// stepped over.
#[derive(Debug, Default)]
pub struct Judged {
    pub import: Option<Import>,
    pub problems: Vec<Problem>,
    /// How many endpoints' addresses the policy refused.
    pub refused: usize,
}

/// The import of service `key` that `services` (the Linkerd Services naming it, see
/// [`super::index::keys_of_service`]; any other is passed over) and every cluster's exports of
/// it give while Links to the clusters in `links` (their target cluster names) exist; an
/// address `policy` refuses is left out of its slices.
pub fn judge(
    key: &Key,
    services: &[Arc<Service>],
    links: &BTreeSet<String>,
    (naming, policy): (&Naming, &Policy),
    exports: &Exports,
) -> Judged {
    let (ns, name) = (key.0.as_str(), key.1.as_str());
    let mut j = Judging {
        ns,
        name,
        links,
        naming,
        policy,
        problems: Vec::new(),
        conflicts: Vec::new(),
        refused: BTreeMap::new(),
    };
    let mut reads = Vec::new();
    for s in services
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(ns))
    {
        let Some(object) = &s.metadata.name else {
            continue;
        };
        match read(ns, s) {
            Ok(r) => reads.extend(r),
            Err(message) => j.problem(object, message),
        }
    }
    // The service's own objects, and the headless mirrors' hosts by parent object name.
    let mut members: Vec<&Read> = Vec::new();
    let mut hosts: BTreeMap<&str, Vec<&Read>> = BTreeMap::new();
    for r in &reads {
        match &r.shape {
            Shape::Host { parent, .. } => hosts.entry(parent).or_default().push(r),
            shape if shape.service() == name => members.push(r),
            _ => {}
        }
    }
    let theirs = exports.by_service.get(key).map(Vec::as_slice);
    let import = if !members.is_empty() || theirs.is_some() {
        let read = (theirs.unwrap_or_default(), &exports.read, exports.own_read);
        import(&mut j, &members, &hosts, read)
    } else {
        None
    };
    let refused = j.refused.values().map(Vec::len).sum();
    for (cluster, refused) in std::mem::take(&mut j.refused) {
        let shown: Vec<String> = (refused.iter().take(10))
            .map(|(ip, why)| format!("{ip} ({why})"))
            .collect();
        let more = refused.len().saturating_sub(shown.len());
        let more = (more > 0).then(|| format!(" and {more} more"));
        let message = format!(
            "{} of cluster {cluster}'s endpoints of {ns}/{name} are left out of its EndpointSlices, their addresses refused: {}{}",
            refused.len(),
            shown.join(", "),
            more.unwrap_or_default(),
        );
        let p = Problem::new("ServiceImport", (ns, name), Reason::AddressRefused, message);
        j.problems.push(p);
    }
    j.problems.append(&mut j.conflicts);
    Judged {
        import,
        problems: j.problems,
        refused,
    }
}

/// What one service's judgement has found to say: problems with the objects it reads
/// ([`Reason::NotImported`]), and conflicts between the exports ([`Reason::ExportConflict`]), said after.
struct Judging<'a> {
    ns: &'a str,
    name: &'a str,
    links: &'a BTreeSet<String>,
    naming: &'a Naming,
    policy: &'a Policy,
    problems: Vec<Problem>,
    conflicts: Vec<Problem>,
    /// The endpoints' addresses the policy refused, by cluster.
    refused: BTreeMap<String, Vec<(IpAddr, Refusal)>>,
}

impl Judging<'_> {
    fn problem(&mut self, object: &str, message: String) {
        let p = Problem::new("Service", (self.ns, object), Reason::NotImported, message);
        self.problems.push(p);
    }

    fn conflict(&mut self, object: &str, message: String) {
        let p = Problem::new(
            "Service",
            (self.ns, object),
            Reason::ExportConflict,
            message,
        );
        self.conflicts.push(p);
    }

    /// The cluster id of a member through Link `cluster`, if that Link exists.
    fn live(&mut self, cluster: &str, object: &str) -> Option<String> {
        if !self.links.contains(cluster) {
            return None;
        }
        let id = self.naming.id(cluster);
        if id.is_none() {
            self.problem(
                object,
                format!(
                    "cluster name {cluster:?} is not a cluster id (one or two DNS labels): give one with --linkerd-cluster-id {cluster}=ID"
                ),
            );
        }
        id
    }

    /// What `r` carried, if it could be read (else why, said).
    fn carried_of(&mut self, r: &Read) -> Option<Carried> {
        match &r.carried {
            Some(Ok(c)) => Some(c.clone()),
            Some(Err(e)) => {
                self.problem(&r.object, e.clone());
                None
            }
            None => None,
        }
    }
}

/// `ports` with the `appProtocol` `carried` gives each (Linkerd's objects drop it), sorted.
fn with_app(ports: &[Port], carried: Option<&Carried>) -> Vec<Port> {
    let mut out: Vec<Port> = ports
        .iter()
        .map(|p| {
            let app = carried
                .into_iter()
                .flat_map(|c| &c.ports)
                .find(|c| c.port == p.port && c.protocol == p.protocol && c.name == p.name)
                .and_then(|c| c.app_protocol.clone());
            Port {
                app_protocol: app.or_else(|| p.app_protocol.clone()),
                ..p.clone()
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The import one service's members give, from its exports (as read, with which Links' and
/// whether this cluster's were read) and Linkerd's objects.
fn import(
    j: &mut Judging,
    members: &[&Read],
    hosts: &BTreeMap<&str, Vec<&Read>>,
    (exports, read, own_read): (&[ClusterExport], &BTreeSet<String>, bool),
) -> Option<Import> {
    let mut all = from_exports(j, exports);
    let federated = from_linkerd(j, &mut all, members, hosts, read, own_read);
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
    merge(j, &all, federated)
}

/// The members the exports read give: through the Links' credentials, and this cluster's own,
/// each under its cluster id.
fn from_exports(j: &mut Judging, exports: &[ClusterExport]) -> Vec<ClusterExport> {
    let (name, naming) = (j.name, j.naming);
    let mut all: Vec<ClusterExport> = Vec::new();
    for e in exports {
        let carried_id = e.carried.as_ref().and_then(|c| c.cluster.clone());
        let id = match &e.link {
            None => naming.own.clone().or(carried_id),
            Some(link) => {
                if !j.links.contains(link) {
                    continue;
                }
                carried_id
                    .as_deref()
                    .and_then(cluster_id)
                    .or_else(|| naming.id(link))
            }
        };
        let Some(id) = id else {
            // This cluster without an id: its export half says so on the export (Ready
            // `NoClusterId`, an Event) and in a metric, once per export, not here again.
            if let Some(link) = &e.link {
                j.problem(
                    name,
                    format!(
                        "{} is left out: cluster name {link:?} is not a cluster id (one or two DNS labels): give one with --linkerd-cluster-id {link}=ID",
                        e.shown
                    ),
                );
            }
            continue;
        };
        if all.iter().any(|m| m.cluster == id) {
            continue;
        }
        all.push(ClusterExport {
            cluster: id,
            // Another cluster's addresses are those of Linkerd's objects here, which can be
            // reached from this cluster (through the mesh), not the exporting cluster's own.
            endpoints: match e.link {
                None => e.endpoints.clone(),
                Some(_) => Vec::new(),
            },
            ..e.clone()
        });
    }
    all
}

/// The members Linkerd's objects here give, added to `all`: the addresses of the exports read,
/// and the exports of clusters whose credentials this bridge cannot read (or labelled for
/// Linkerd by hand); and the federated Service, if there is one.
fn from_linkerd<'a>(
    j: &mut Judging,
    all: &mut Vec<ClusterExport>,
    members: &[&'a Read],
    hosts: &BTreeMap<&str, Vec<&Read>>,
    read: &BTreeSet<String>,
    own_read: bool,
) -> Option<&'a Read> {
    // A cluster whose exports were read is what they say: Linkerd's objects may lag (a member
    // that left, a mirror left behind) and add no member for it.
    let covered = |link: &str, all: &[ClusterExport]| {
        read.contains(link) || all.iter().any(|m| m.link.as_deref() == Some(link))
    };
    // A member is added unless its cluster has one already.
    let add = |all: &mut Vec<ClusterExport>, e: ClusterExport| {
        if !all.iter().any(|m| m.cluster == e.cluster) {
            all.push(e);
        }
    };
    let mut federated: Option<&Read> = None;
    // The federated Service first: where there is one, Linkerd's mirrors of clusters this
    // bridge cannot read add no member (the federated Service stands for the service).
    let is_federated = |r: &&&Read| matches!(r.shape, Shape::Federated { .. });
    let members: Vec<&Read> = (members.iter().filter(is_federated))
        .chain(members.iter().filter(|r| !is_federated(r)))
        .copied()
        .collect();
    for r in members {
        // The member of cluster `id` (through Link `link`; None: this cluster) that `r` gives.
        let member = |cluster: String, link: Option<&String>, ports| ClusterExport {
            cluster,
            link: link.cloned(),
            object: Some(r.object.clone()),
            shown: r.object.clone(),
            ports,
            ..ClusterExport::default()
        };
        match &r.shape {
            Shape::Federated { remote, local, .. } => {
                // The first by object name, should two claim the service.
                if federated.is_some() {
                    continue;
                }
                federated = Some(r);
                let carried = j.carried_of(r);
                let ports = with_app(&r.ports, carried.as_ref());
                for link in remote {
                    if !covered(link, all)
                        && let Some(id) = j.live(link, &r.object)
                    {
                        add(all, member(id, Some(link), ports.clone()));
                    }
                }
                if *local && !own_read && !all.iter().any(|m| m.link.is_none()) {
                    match &j.naming.own {
                        // Linkerd writes the federated Service from its local member.
                        Some(own) => add(all, ClusterExport {
                            carried,
                            ..member(own.clone(), None, ports)
                        }),
                        None => j.problem(
                            &r.object,
                            "a local member is not listed in status.clusters without a cluster id (the ClusterProperty cluster.clusterset.k8s.io, or --cluster-id)".into(),
                        ),
                    }
                }
            }
            Shape::Mirror { link: cluster, .. } => {
                let headless = r.headless;
                let endpoints: Vec<Endpoint> = if headless {
                    let hosts = hosts.get(r.object.as_str()).into_iter().flatten();
                    (hosts.filter_map(|h| match (&h.shape, h.ips.first()) {
                        (Shape::Host { link, hostname, .. }, Some(ip)) if link == cluster => {
                            Some(Endpoint::ready(Some(hostname.clone()), *ip))
                        }
                        _ => None,
                    }))
                    .collect()
                } else {
                    r.ips.iter().map(|ip| Endpoint::ready(None, *ip)).collect()
                };
                if let Some(m) = all
                    .iter_mut()
                    .find(|m| m.link.as_deref() == Some(cluster.as_str()))
                {
                    // The export read through the credentials: the mirror gives its addresses
                    // (when it is of the export's type) and the object for Events.
                    if m.headless == headless && m.endpoints.is_empty() {
                        m.endpoints = endpoints;
                        m.object = Some(r.object.clone());
                    }
                    continue;
                }
                if federated.is_some() || covered(cluster, all) {
                    continue;
                }
                let carried = j.carried_of(r);
                if let Some(id) = j.live(cluster, &r.object) {
                    let ports = with_app(&r.ports, carried.as_ref());
                    let m = member(id, Some(cluster), ports);
                    add(
                        all,
                        ClusterExport {
                            headless,
                            carried,
                            endpoints,
                            ..m
                        },
                    );
                }
            }
            Shape::Host { .. } => {}
        }
    }
    federated
}

/// The import the members give, oldest first: the oldest's type, the union of the ports by
/// name, the carried fields, labels and annotations of the oldest that carried any, and the
/// addresses: the federated Service's, and slices per cluster and family (see [`Slices`]).
fn merge(j: &mut Judging, all: &[ClusterExport], federated: Option<&Read>) -> Option<Import> {
    let (ns, name) = (j.ns, j.name);
    let oldest = all.first()?;
    let is_headless = oldest.headless;
    // The carried fields: the oldest export's that carried any.
    let (carried, carried_by) = all
        .iter()
        .find_map(|m| Some((m.carried.clone()?, m.object.as_deref().unwrap_or(name))))
        .unwrap_or_else(|| (Carried::default(), name));
    let (labels, annotations) = exported_metadata(&carried, |m| j.problem(carried_by, m));
    // The compared fields a ServiceImport's spec has (the first four; not ipFamilies, which it
    // has from the endpoints, nor the exported labels and annotations, its metadata's).
    let spec_fields: BTreeMap<String, Value> = (COMPARED[..4].iter())
        .filter_map(|(field, _)| Some((field.to_string(), carried.field(field)?)))
        .collect();
    let kind = |headless: bool| if headless { "headless" } else { "ClusterSetIP" };
    // Each cluster of the oldest's type, its ports added to the union by name (the older
    // export's port where a name clashes, KEP-1645 "Service Port"); each cluster's slices
    // have its own ports. A cluster exporting the other type is left out: its addresses
    // cannot be served as the oldest's type.
    let mut ports: Vec<(Port, &str)> = Vec::new();
    let mut taken: Vec<(&ClusterExport, Vec<Port>)> = Vec::new();
    let mut clusters = BTreeSet::new();
    let mut slices = Slices::default();
    let federated_ip = federated.is_some() && !is_headless;
    for m in all {
        if m.headless != is_headless {
            if let Some(object) = &m.object {
                j.conflict(
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
        // Its pods where every cluster reaches them: a federated import's members, a headless
        // export of this cluster or one without a gateway. Else the addresses Linkerd's objects
        // give here, but for a federated import, whose address stands for them.
        let by_pods = if federated_ip {
            m.flat
        } else {
            is_headless && (m.link.is_none() || m.flat)
        };
        if by_pods {
            // In a ClusterSetIP import, a port name whose port an older export has otherwise is
            // the older one's (the import's): this cluster's pods are left out of it, so that
            // nothing routes the import's port to them (a headless import's hosts stay: its
            // names do not depend on ports).
            let conflicting: Vec<&str> = (m.ports.iter())
                .filter(|_| federated_ip)
                .filter(|p| {
                    ports.iter().any(|(q, _)| {
                        q.name == p.name && (q.port, &q.protocol) != (p.port, &p.protocol)
                    })
                })
                .map(|p| p.name.as_str())
                .collect();
            for p in &m.pods {
                let kept: Vec<Port> = (p.ports.iter())
                    .filter(|q| !conflicting.contains(&q.name.as_str()))
                    .cloned()
                    .collect();
                if !kept.is_empty() {
                    slices.add(j, &m.cluster, &kept, &p.endpoints);
                }
            }
        } else if !federated_ip {
            slices.add(j, &m.cluster, &m.ports, &m.endpoints);
        }
    }
    let mut union: Vec<Port> = ports.iter().map(|(p, _)| p.clone()).collect();
    union.sort();
    port_conflicts(j, &taken, &ports, &union);
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
        slices: slices.specs(),
        route: None,
    };
    match federated {
        // A ClusterSetIP import with Linkerd's federated Service: its one address.
        Some(f) if !is_headless => {
            if f.ips.is_empty() {
                return None;
            }
            i.ips = f.ips.clone();
            i.families = f.families.clone();
            let lacks = |p: &&Port| {
                !(f.ports.iter()).any(|q| (q.port, &q.protocol) == (p.port, &p.protocol))
            };
            i.route = Some(Route {
                service: f.object.clone(),
                beside: i.ports.iter().filter(lacks).cloned().collect(),
                ips: f.ips.clone(),
            });
        }
        _ => {
            let families: BTreeSet<Family> = i.slices.iter().map(|s| s.family).collect();
            i.families = families.into_iter().collect();
        }
    }
    if i.families.is_empty() && is_headless {
        // No endpoint yet: the families the oldest export carried.
        let words = carried.ip_families.iter().flatten();
        i.families = (words.filter_map(|w| Family::from_word(w)))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
    }
    Some(i)
}

/// An import's slices as they are gathered: the endpoints of each cluster, family and set of
/// ports (a cluster's pods may listen on other ports than another's, or than its Service's).
#[derive(Default)]
struct Slices(BTreeMap<(String, Family, Vec<Port>), Vec<Endpoint>>);

impl Slices {
    /// `endpoints` of `cluster` on `ports`, but those whose address the policy refuses.
    fn add(&mut self, j: &mut Judging, cluster: &str, ports: &[Port], endpoints: &[Endpoint]) {
        for e in endpoints {
            if let Some(why) = refusal(j.policy, e.ip) {
                j.refused
                    .entry(cluster.into())
                    .or_default()
                    .push((e.ip, why));
                continue;
            }
            let at = (cluster.to_string(), Family::of(&e.ip), ports.to_vec());
            self.0.entry(at).or_default().push(e.clone());
        }
    }

    /// The slices: per cluster and family, one per set of ports and [`SLICE_ENDPOINTS`]
    /// endpoints, numbered.
    fn specs(self) -> Vec<SliceSpec> {
        let mut out: Vec<SliceSpec> = Vec::new();
        for ((cluster, family, ports), mut endpoints) in self.0 {
            endpoints.sort();
            endpoints.dedup();
            for chunk in endpoints.chunks(SLICE_ENDPOINTS) {
                let part = (out.iter().rev())
                    .take_while(|s| s.cluster == cluster && s.family == family)
                    .count();
                out.push(SliceSpec {
                    cluster: cluster.clone(),
                    family,
                    part,
                    endpoints: chunk.to_vec(),
                    ports: ports.clone(),
                });
            }
        }
        out
    }
}

/// Where the clusters' ports differ from the `union` (`ports`: each name's port, and whose),
/// a conflict on each Linkerd object here that stands for one (the export halves say it on
/// the ServiceExports).
fn port_conflicts(
    j: &mut Judging,
    taken: &[(&ClusterExport, Vec<Port>)],
    ports: &[(Port, &str)],
    union: &[Port],
) {
    let name = j.name;
    let bare = |ports: &[Port]| ports.iter().map(Port::mirrored).collect::<Vec<_>>();
    let differ = taken.iter().any(|(_, own)| bare(own) != bare(union));
    for (m, own) in taken.iter().filter(|_| differ) {
        let Some(object) = &m.object else { continue };
        let list = |ports: &[Port]| {
            ports
                .iter()
                .map(Port::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut message = format!(
            "cluster {} exports {name} with ports [{}], and other clusters with others; the import has the union of the exports' ports [{}]",
            m.cluster,
            list(own),
            list(union)
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
        j.conflict(object, message);
    }
}
