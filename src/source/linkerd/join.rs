//! Linkerd's part of a source's store: its Services by the logical service they are members of,
//! kept as read (a few per service), and joined into that service on demand ([`service`]).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use super::carried::export_order;
use super::{KIND, Member, Role};
use crate::model::packed::{ImportHead, Packed, PackedImport, PackedService};
use crate::model::{Endpoint, Locality, ObjectKind, Port, Service, ServiceKey, ServiceType, Slice};
use crate::source::object::{ObjectId, Part};

/// Linkerd's Services, by the service they belong to, then by object name.
#[derive(Debug, Default)]
pub struct Members {
    members: HashMap<ServiceKey, BTreeMap<String, Role>>,
    /// The service each of Linkerd's Services is filed under.
    owner: HashMap<ObjectId, ServiceKey>,
}

impl Members {
    fn detach(&mut self, owner: &ServiceKey, name: &str) {
        if let Some(members) = self.members.get_mut(owner) {
            members.remove(name);
            if members.is_empty() {
                self.members.remove(owner);
            }
        }
    }
}

impl Part for Members {
    type Object = Member;

    fn apply(&mut self, m: Member) -> Vec<ServiceKey> {
        let id = (m.service.namespace.clone(), m.object.clone());
        let mut affected = Vec::with_capacity(2);
        if let Some(old) = self.owner.insert(id.clone(), m.service.clone()) {
            if old != m.service {
                self.detach(&old, &id.1);
                affected.push(old);
            }
        }
        self.members
            .entry(m.service.clone())
            .or_default()
            .insert(m.object, m.role);
        affected.push(m.service);
        affected
    }

    fn delete(&mut self, _: ObjectKind, id: &ObjectId) -> Option<ServiceKey> {
        let owner = self.owner.remove(id)?;
        self.detach(&owner, &id.1);
        Some(owner)
    }

    fn ids(&self, _: ObjectKind, namespace: Option<&str>) -> Vec<ObjectId> {
        self.owner
            .keys()
            .filter(|(ns, _)| namespace.is_none_or(|n| ns == n))
            .cloned()
            .collect()
    }

    fn count(&self, _: ObjectKind) -> usize {
        self.owner.len()
    }

    fn service(&self, key: &ServiceKey) -> Option<Service> {
        service(key, self.members.get(key)?)
    }

    fn keys(&self) -> Vec<ServiceKey> {
        self.members.keys().cloned().collect()
    }

    fn packed(&self) -> Vec<PackedService> {
        self.members
            .iter()
            .filter_map(|(k, members)| {
                let s = service(k, members)?;
                let slices = s.slices.iter().map(Packed::new).collect();
                Some((
                    k.clone(),
                    PackedImport::new(ImportHead::of(&s), &s.ips, &s.ports),
                    slices,
                ))
            })
            .collect()
    }

    fn objects(&self, key: &ServiceKey) -> Vec<String> {
        self.members
            .get(key)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// The service that Linkerd's objects give, from its members by object name: the federated
/// Service's address if there is one (the first by name, should two claim it); else the hosts
/// of its headless mirrors, as a headless import; else (with `--linkerd-mirrors`) every mirror's
/// ClusterIPs. With mirrors of both kinds, the oldest export's kind. `None` when the members give nothing to answer.
pub fn service(key: &ServiceKey, members: &BTreeMap<String, Role>) -> Option<Service> {
    if let Some((ips, fed_ports)) = members.values().find_map(|r| match r {
        Role::Federated { ips, ports } => Some((ips, ports)),
        _ => None,
    }) {
        return Some(Service {
            locality: Locality::Any,
            slices_absent: false,
            key: key.clone(),
            origin: KIND,
            kind: ServiceType::ClusterSetIp,
            ips: ips.clone(),
            ports: fed_ports.clone(),
            slices: Vec::new(),
        });
    }
    // Mirrors of both kinds (one cluster exports headless, another not): the oldest export's
    // kind, as the MCS API resolves a type conflict and the linkerd-bridge's import does.
    let oldest_headless = members
        .iter()
        .filter_map(|(name, r)| match r {
            Role::Headless { exported, .. } => {
                Some((export_order(exported.as_deref(), name), true))
            }
            Role::Mirror { exported, .. } => Some((export_order(exported.as_deref(), name), false)),
            _ => None,
        })
        .min()
        .is_some_and(|(_, headless)| headless);
    let mut exports = Vec::new();
    let parents: Vec<&str> = members
        .iter()
        .filter_map(|(name, r)| match r {
            Role::Headless {
                ports, exported, ..
            } => {
                exports.push((name.as_str(), exported.as_deref(), &ports[..]));
                Some(name.as_str())
            }
            _ => None,
        })
        .collect();
    let ports = union_by_name(exports);
    if oldest_headless {
        let slices = members
            .iter()
            .filter_map(|(name, r)| match r {
                Role::Host {
                    cluster,
                    parent,
                    hostname,
                    ips,
                    ports,
                } if parents.contains(&parent.as_str()) && !ips.is_empty() => Some(Slice {
                    name: name.clone(),
                    cluster: Some(cluster.clone()),
                    ports: ports.clone(),
                    endpoints: vec![Endpoint {
                        addresses: ips.clone(),
                        hostname: Some(hostname.clone()),
                    }],
                }),
                _ => None,
            })
            .collect();
        return Some(Service {
            locality: Locality::Any,
            slices_absent: false,
            key: key.clone(),
            origin: KIND,
            kind: ServiceType::Headless,
            ips: Vec::new(),
            ports,
            slices,
        });
    }
    let mut ips: Vec<IpAddr> = Vec::new();
    let mut exports = Vec::new();
    for (name, r) in members {
        if let Role::Mirror {
            ips: mine,
            ports: mine_ports,
            exported,
            ..
        } = r
        {
            ips.extend(
                mine.iter()
                    .filter(|ip| !ips.contains(ip))
                    .collect::<Vec<_>>(),
            );
            exports.push((name.as_str(), exported.as_deref(), &mine_ports[..]));
        }
    }
    let ports = union_by_name(exports);
    (!ips.is_empty()).then(|| Service {
        locality: Locality::Any,
        slices_absent: false,
        key: key.clone(),
        origin: KIND,
        kind: ServiceType::ClusterSetIp,
        ips,
        ports,
        slices: Vec::new(),
    })
}

/// The ports of a service's exports, each given as (object name, creation time the
/// linkerd-bridge carried, ports): their union by port name, in the order the MCS API resolves
/// conflicts by (the oldest export first; exports without a time after, by object name), so
/// the first export's port wins where two give one name different ports. The linkerd-bridge's
/// import half does the same, so both paths answer alike.
fn union_by_name(mut exports: Vec<(&str, Option<&str>, &[Port])>) -> Vec<Port> {
    exports.sort_by_key(|(object, exported, _)| export_order(*exported, object));
    let mut out: Vec<Port> = Vec::new();
    for p in exports.into_iter().flat_map(|(_, _, ports)| ports) {
        if !out.iter().any(|q| q.name == p.name) {
            out.push(p.clone());
        }
    }
    out
}
