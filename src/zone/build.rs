//! The one writer of the zone: applies source updates service by service, rendering every name a
//! service owns into precompiled answers and swapping them into the zone. A change to one service
//! re-renders that service only.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::render::{BodyWriter, TYPE_A, TYPE_AAAA, TYPE_NS, TYPE_SRV, TYPE_TXT, child};
use super::{Answer, Entry, Zone};
use crate::metrics::Metrics;
use crate::model::{Kind, Port, Service, ServiceKey, Update};

/// The MCS DNS schema version we implement (KEP-1645 specification 1.0.0).
pub const SCHEMA_VERSION: &str = "1.0.0";
const VERSION_TTL: u32 = 28800;

pub struct Builder {
    zone: Arc<Zone>,
    metrics: Arc<Metrics>,
    services: HashMap<ServiceKey, Owned>,
    /// ServiceImports per namespace: `<ns>.svc.<zone>` exists while this is above zero.
    namespaces: HashMap<String, usize>,
    /// Ready endpoints over all services, kept as services change (never recounted).
    endpoints: usize,
}

fn endpoint_count(service: &Service) -> usize {
    service.slices.iter().map(|s| s.endpoints.len()).sum()
}

/// What the builder remembers of a service: enough to tell whether an update changes it and to
/// remove its names, not a copy of it (the entries it rendered already hold the names).
struct Owned {
    /// Hash of the whole `Service` value; equal hashes are taken as "unchanged".
    fingerprint: u64,
    endpoints: usize,
    entries: Vec<Entry>,
}

fn fingerprint(service: &Service) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    service.hash(&mut h);
    h.finish()
}

impl Builder {
    /// Takes the (empty) zone and renders the names every zone has: apex, NS, `dns-version`.
    pub fn new(zone: Arc<Zone>, ns_addresses: &[IpAddr], metrics: Arc<Metrics>) -> Self {
        for apex in zone.apexes() {
            for entry in render_apex(apex, zone.ttl(), ns_addresses) {
                zone.insert(entry);
            }
        }
        zone.publish();
        Builder {
            zone,
            metrics,
            services: HashMap::new(),
            namespaces: HashMap::new(),
            endpoints: 0,
        }
    }

    /// Applies updates until every sender is gone; each carries when its source saw the change.
    pub async fn run(mut self, mut updates: mpsc::Receiver<(Instant, Update)>) {
        while let Some((seen, update)) = updates.recv().await {
            self.apply(update);
            self.metrics.programmed(seen.elapsed());
        }
        debug!("zone builder stopped: no sources left");
    }

    /// Applies one update; true when the zone changed.
    pub fn apply(&mut self, update: Update) -> bool {
        let changed = match update {
            Update::Reset(services) => {
                // Services are unpacked one at a time by the iterator, rendered, and dropped.
                let mut keep: HashSet<ServiceKey> = HashSet::with_capacity(services.len());
                // At least a name and its SRV names per service.
                self.zone.reserve(2 * services.len());
                let mut changed = false;
                for service in services {
                    keep.insert(service.key.clone());
                    changed |= self.upsert(service);
                }
                // Removed after the upserts: no moment in which a kept name is missing.
                let gone: Vec<ServiceKey> = self
                    .services
                    .keys()
                    .filter(|k| !keep.contains(*k))
                    .cloned()
                    .collect();
                for key in gone {
                    changed |= self.remove(&key);
                }
                self.zone.publish();
                release_free_memory();
                if self.zone.len() >= super::memory::MIN_NAMES {
                    let b = self.zone.prefer_huge_pages();
                    debug!(
                        regions = b.regions,
                        collapsed = b.collapsed,
                        "zone memory moved to huge pages"
                    );
                }
                if !self.zone.synced() {
                    info!(
                        services = self.services.len(),
                        names = self.zone.len(),
                        "zone synced"
                    );
                }
                self.zone.set_synced();
                changed
            }
            Update::Upsert(service) => self.upsert(service),
            Update::Remove(key) => self.remove(&key),
        };
        self.zone.publish();
        if changed {
            self.zone.bump();
        }
        self.metrics.zone_state(
            self.services.len(),
            self.endpoints,
            self.zone.len(),
            self.zone.serial(),
            self.zone.changed_at(),
        );
        changed
    }

    fn upsert(&mut self, service: Service) -> bool {
        let print = fingerprint(&service);
        if self
            .services
            .get(&service.key)
            .is_some_and(|o| o.fingerprint == print)
        {
            return false;
        }
        let mut rendered = Vec::new();
        let zone = self.zone.clone();
        for apex in zone.apexes() {
            rendered.extend(render_service(
                &service,
                apex,
                self.zone.ttl(),
                &mut |why| {
                    warn!(service = %service.key, "{why}; that name is not served");
                    self.metrics.skipped("ServiceImport", "name_too_long");
                },
            ));
        }
        let old = self.services.remove(&service.key);
        let old_entries: HashMap<&[u8], &Entry> = old
            .iter()
            .flat_map(|o| &o.entries)
            .map(|e| (e.name(), e))
            .collect();
        let new_names: HashSet<&[u8]> = rendered.iter().map(Entry::name).collect();
        for (name, _) in old_entries.iter().filter(|(n, _)| !new_names.contains(*n)) {
            self.zone.remove(name);
        }
        for entry in &rendered {
            if old_entries.get(entry.name()).is_none_or(|e| *e != entry) {
                self.zone.insert(entry.clone());
            }
        }
        match &old {
            Some(o) => self.endpoints -= o.endpoints,
            None => self.add_namespace(&service.key.namespace),
        }
        let endpoints = endpoint_count(&service);
        self.endpoints += endpoints;
        debug!(service = %service.key, names = rendered.len(), "service rendered");
        rendered.shrink_to_fit();
        self.services.insert(
            service.key,
            Owned {
                fingerprint: print,
                endpoints,
                entries: rendered,
            },
        );
        true
    }

    fn remove(&mut self, key: &ServiceKey) -> bool {
        let Some(old) = self.services.remove(key) else {
            return false;
        };
        for entry in &old.entries {
            self.zone.remove(entry.name());
        }
        self.endpoints -= old.endpoints;
        let ns = &key.namespace;
        let count = self
            .namespaces
            .get_mut(ns)
            .expect("namespace of a known service is counted");
        *count -= 1;
        if *count == 0 {
            self.namespaces.remove(ns);
            let zone = self.zone.clone();
            for apex in zone.apexes() {
                if let Some(name) = child(&format!("{ns}.svc"), apex) {
                    self.zone.remove(&name);
                }
            }
        }
        debug!(service = %key, "service removed");
        true
    }

    fn add_namespace(&mut self, ns: &str) {
        let count = self.namespaces.entry(ns.to_string()).or_insert(0);
        *count += 1;
        if *count == 1 {
            let zone = self.zone.clone();
            for apex in zone.apexes() {
                if let Some(name) = child(&format!("{ns}.svc"), apex) {
                    self.zone.insert(Entry::empty(&name));
                }
            }
        }
    }
}

/// Hands memory freed by a full load (the source's parse trees, the old renderings) back to the
/// system: glibc keeps it otherwise, and a reload would leave the process at its peak size.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap pages; it has no other effect.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The names every served zone has.
fn render_apex(apex: &[u8], ttl: u32, ns_addresses: &[IpAddr]) -> Vec<Entry> {
    let mut out = Vec::new();
    let ns_name = child("ns.dns", apex).expect("zone names are checked to leave room");
    let mut w = BodyWriter::new(apex);
    w.ns(apex, &ns_name, ttl);
    w.additional();
    for ip in ns_addresses {
        w.addr(&ns_name, *ip, ttl);
    }
    out.push(Entry::new(apex, true, &[(TYPE_NS, w.finish())]));

    let version = child("dns-version", apex).expect("zone names are checked to leave room");
    let mut w = BodyWriter::new(&version);
    w.txt(&version, SCHEMA_VERSION, VERSION_TTL);
    out.push(Entry::new(&version, false, &[(TYPE_TXT, w.finish())]));

    let answers: Vec<_> = [
        addresses(&ns_name, ns_addresses.iter(), false, ttl),
        addresses(&ns_name, ns_addresses.iter(), true, ttl),
    ]
    .into_iter()
    .flatten()
    .collect();
    out.push(Entry::new(&ns_name, false, &answers));
    for ent in ["svc", "dns"] {
        out.push(Entry::empty(
            &child(ent, apex).expect("zone names are checked to leave room"),
        ));
    }
    out
}

/// An A (or, with `v6`, AAAA) answer for `owner` from the addresses of that family, if any.
fn addresses<'a>(
    owner: &[u8],
    ips: impl Iterator<Item = &'a IpAddr>,
    v6: bool,
    ttl: u32,
) -> Option<(u16, Answer)> {
    let mut w = BodyWriter::new(owner);
    for ip in ips.filter(|ip| ip.is_ipv6() == v6) {
        if !w.addr(owner, *ip, ttl) {
            break;
        }
    }
    let a = w.finish();
    (a.ancount > 0).then_some((if v6 { TYPE_AAAA } else { TYPE_A }, a))
}

/// `(port name, protocol label)` of a `_port._proto` name.
type SrvName<'a> = (&'a str, &'static str);

/// A name SRV records point at, with its addresses (for the additional section).
struct Target {
    name: Vec<u8>,
    addrs: Vec<IpAddr>,
    /// Ports of SRV records at this name itself, once per address that brought them (so the
    /// count is the N of the weight rule).
    own_ports: Vec<Port>,
}

/// SRV answer at `owner` for `entries` (target index, port), weights by CoreDNS's rule:
/// `floor(100 / N)`, at least 1, N counted before de-duplication.
fn srv(
    owner: &[u8],
    entries: &[(usize, &Port)],
    targets: &[Target],
    ttl: u32,
) -> Option<(u16, Answer)> {
    if entries.is_empty() {
        return None;
    }
    let weight = (100 / entries.len()).max(1) as u16;
    let mut w = BodyWriter::new(owner);
    let mut seen = HashSet::new();
    let mut used = Vec::new();
    for &(t, p) in entries {
        if seen.insert((t, p.port)) {
            if !w.srv(owner, weight, p.port, &targets[t].name, ttl) {
                break;
            }
            if !used.contains(&t) {
                used.push(t);
            }
        }
    }
    w.additional();
    'glue: for t in used {
        let target = &targets[t];
        for v6 in [false, true] {
            for ip in target.addrs.iter().filter(|ip| ip.is_ipv6() == v6) {
                if !w.addr(&target.name, *ip, ttl) {
                    break 'glue;
                }
            }
        }
    }
    Some((TYPE_SRV, w.finish()))
}

/// Host label of an endpoint without `hostname`: the address with `.`/`:` as `-` (a trailing `-`
/// gets a `0`), as KEP-1645 and CoreDNS derive it.
pub fn derived_hostname(ip: &IpAddr) -> String {
    let mut s: String = ip
        .to_string()
        .chars()
        .map(|c| if c == '.' || c == ':' { '-' } else { c })
        .collect();
    if s.ends_with('-') {
        s.push('0');
    }
    s
}

fn push_distinct(v: &mut Vec<IpAddr>, ip: IpAddr) {
    if !v.contains(&ip) {
        v.push(ip);
    }
}

/// Every name `service` owns in the zone at `apex`. `skip` hears about names that cannot exist
/// (too long for DNS).
pub fn render_service(
    service: &Service,
    apex: &[u8],
    ttl: u32,
    skip: &mut dyn FnMut(String),
) -> Vec<Entry> {
    let key = &service.key;
    let Some(sname) = child(&format!("{}.{}.svc", key.name, key.namespace), apex) else {
        skip(format!(
            "{}.{}.svc.{} is longer than 255 octets",
            key.name,
            key.namespace,
            super::render::name_text(apex)
        ));
        return Vec::new();
    };

    // Targets: index 0 is the service name itself, then one per endpoint name.
    let mut targets = vec![Target {
        name: sname.clone(),
        addrs: Vec::new(),
        own_ports: Vec::new(),
    }];
    let mut by_name: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut headless_entries: Vec<(usize, &Port)> = Vec::new();
    let mut endpoint_addrs = Vec::new();
    for slice in &service.slices {
        for ep in &slice.endpoints {
            for ip in &ep.addresses {
                push_distinct(&mut endpoint_addrs, *ip);
                let Some(cluster) = &slice.cluster else {
                    continue;
                };
                let host = ep.hostname.clone().unwrap_or_else(|| derived_hostname(ip));
                let Some(name) = child(&format!("{host}.{cluster}"), &sname) else {
                    skip(format!(
                        "endpoint name {host}.{cluster}.{} is longer than 255 octets",
                        super::render::name_text(&sname)
                    ));
                    continue;
                };
                let t = *by_name.entry(name.clone()).or_insert_with(|| {
                    targets.push(Target {
                        name,
                        addrs: Vec::new(),
                        own_ports: Vec::new(),
                    });
                    targets.len() - 1
                });
                push_distinct(&mut targets[t].addrs, *ip);
                targets[t].own_ports.extend(slice.ports.iter().cloned());
                headless_entries.extend(slice.ports.iter().map(|p| (t, p)));
            }
        }
    }

    let service_addrs = match service.kind {
        Kind::ClusterSetIp if !service.ips.is_empty() => {
            let mut v = Vec::new();
            for ip in &service.ips {
                push_distinct(&mut v, *ip);
            }
            v
        }
        // Headless, or ClusterSetIP without clusterset IPs (Submariner's default): the ready
        // endpoint addresses.
        _ => endpoint_addrs,
    };
    if service.kind == Kind::Headless && service_addrs.is_empty() {
        // No ready endpoints: the service has no names at all (NXDOMAIN), as in CoreDNS.
        return Vec::new();
    }
    targets[0].addrs = service_addrs;
    let entries: Vec<(usize, &Port)> = match service.kind {
        Kind::ClusterSetIp => targets[0]
            .addrs
            .iter()
            .flat_map(|_| service.ports.iter().map(|p| (0, p)))
            .collect(),
        Kind::Headless => headless_entries,
    };

    let mut out = Vec::new();
    let s = &targets[0];
    let answers: Vec<_> = [
        addresses(&sname, s.addrs.iter(), false, ttl),
        addresses(&sname, s.addrs.iter(), true, ttl),
        srv(&sname, &entries, &targets, ttl),
    ]
    .into_iter()
    .flatten()
    .collect();
    out.push(Entry::new(&sname, false, &answers));

    // `_<port>._<proto>.<svc>`: named ports only, matched by name and protocol.
    let mut groups: Vec<(SrvName, Vec<(usize, &Port)>)> = Vec::new();
    for &(t, p) in &entries {
        let Some(name) = p.name.as_deref() else {
            continue;
        };
        let k = (name, p.protocol.label());
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push((t, p)),
            None => groups.push((k, vec![(t, p)])),
        }
    }
    for ((port, proto), group) in groups {
        let Some(name) = child(&format!("_{port}._{proto}"), &sname) else {
            skip(format!(
                "_{port}._{proto}.{} is longer than 255 octets",
                super::render::name_text(&sname)
            ));
            continue;
        };
        let answers: Vec<_> = srv(&name, &group, &targets, ttl).into_iter().collect();
        out.push(Entry::new(&name, false, &answers));
    }

    // `<host>.<cluster>.<svc>`: the endpoint's own addresses and ports.
    for (t, target) in targets.iter().enumerate().skip(1) {
        let own: Vec<(usize, &Port)> = target.own_ports.iter().map(|p| (t, p)).collect();
        let answers: Vec<_> = [
            addresses(&target.name, target.addrs.iter(), false, ttl),
            addresses(&target.name, target.addrs.iter(), true, ttl),
            srv(&target.name, &own, &targets, ttl),
        ]
        .into_iter()
        .flatten()
        .collect();
        out.push(Entry::new(&target.name, false, &answers));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_hostnames() {
        let d = |s: &str| derived_hostname(&s.parse().unwrap());
        assert_eq!(d("10.1.2.3"), "10-1-2-3");
        assert_eq!(d("2001:db8::"), "2001-db8--0");
        assert_eq!(d("2001:db8::1"), "2001-db8--1");
    }
}
