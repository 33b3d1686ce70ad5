//! The one writer of the zone: applies source updates service by service, rendering every name a
//! service owns into precompiled answers and swapping them into the zone. A change to one service
//! re-renders that service only.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::render::BodyWriter;
use super::{Answer, Entry, Zone};
use crate::metrics::Metrics;
use crate::model::packed::{self, Packed, PackedImport};
use crate::model::{Port, Service, ServiceKey, ServiceType, Skip, Update};
use crate::wire::{TYPE_A, TYPE_AAAA, TYPE_NS, TYPE_SRV, TYPE_TXT, child};

/// The MCS DNS schema version we implement (KEP-1645 specification 1.0.0).
pub const SCHEMA_VERSION: &str = "1.0.0";
const VERSION_TTL: u32 = 28800;

/// The zone's budget (`--max-endpoints-per-service`, `--max-zone-names`): beyond it, new data
/// is refused and what is served stays as it is, so one exporting cluster's bug (or an
/// attacker) cannot grow the server until it is killed for memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A service whose slices hold more ready endpoints is not taken: a new one is not served,
    /// a served one keeps its last accepted answers.
    pub endpoints_per_service: usize,
    /// Names the services may own in all served zones together (with `<ns>.svc` names); a
    /// service that would take the zone beyond it waits, and is served once there is room.
    pub zone_names: usize,
}

impl Limits {
    /// No budget at all (benchmarks and tests of other things).
    pub const NONE: Limits = Limits {
        endpoints_per_service: usize::MAX,
        zone_names: usize::MAX,
    };
}

/// Which budget a refused service ran into; the word is the metrics' `limit` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    EndpointsPerService,
    ZoneNames,
}

impl Limit {
    pub fn label(self) -> &'static str {
        match self {
            Limit::EndpointsPerService => "endpoints_per_service",
            Limit::ZoneNames => "zone_names",
        }
    }
}

/// A service refused for room, kept (packed, a few bytes an endpoint, as the source keeps it)
/// to be taken when room frees, without the source sending it again.
struct Waiting {
    names: usize,
    import: PackedImport,
    slices: Vec<Packed>,
}

pub struct Builder {
    zone: Arc<Zone>,
    metrics: Arc<Metrics>,
    services: HashMap<ServiceKey, Served>,
    /// ServiceImports per namespace: `<ns>.svc.<zone>` exists while this is above zero.
    namespaces: HashMap<String, usize>,
    /// Ready endpoints over all services, kept as services change (never recounted).
    endpoints: usize,
    limits: Limits,
    /// Names the services own (their entries); with the namespaces' names, what
    /// [`Limits::zone_names`] bounds.
    names: usize,
    /// How many served services have each endpoint count, for the largest.
    sizes: BTreeMap<usize, usize>,
    /// Services refused for too many endpoints: taken again when the source sends them smaller.
    too_big: HashSet<ServiceKey>,
    /// Services refused for room, in the order room is given to them.
    waiting: BTreeMap<ServiceKey, Waiting>,
}

fn endpoint_count(service: &Service) -> usize {
    service.slices.iter().map(|s| s.endpoints.len()).sum()
}

/// What the builder remembers of a service: enough to tell whether an update changes it and to
/// remove its names, not a copy of it (the entries it rendered already hold the names).
struct Served {
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
            limits: Limits::NONE,
            names: 0,
            sizes: BTreeMap::new(),
            too_big: HashSet::new(),
            waiting: BTreeMap::new(),
        }
    }

    /// Holds the zone to `limits` (none by default).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self.metrics
            .limits(limits.endpoints_per_service, limits.zone_names);
        self
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
                self.too_big.retain(|k| keep.contains(k));
                self.waiting.retain(|k, _| keep.contains(k));
                changed |= self.admit_held();
                self.zone.publish();
                release_free_memory();
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
            Update::Upsert(service) => self.upsert(service) | self.admit_held(),
            Update::Remove(key) => {
                self.release(&key);
                self.remove(&key) | self.admit_held()
            }
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
        self.metrics.limits_used(
            self.sizes.last_key_value().map_or(0, |(n, _)| *n),
            self.zone_names(),
            self.too_big.len(),
            self.waiting.len(),
        );
        changed
    }

    /// Logs and counts `service`'s refusal under `limit` (`need`: its endpoints, or the names it
    /// needs), once: not when it is already refused under that limit.
    fn refuse(&self, service: &Service, limit: Limit, need: usize) {
        let already = match limit {
            Limit::EndpointsPerService => self.too_big.contains(&service.key),
            Limit::ZoneNames => self.waiting.contains_key(&service.key),
        };
        if already {
            return;
        }
        let what = if self.services.contains_key(&service.key) {
            "keeps its last accepted answers"
        } else {
            "is not served"
        };
        match limit {
            Limit::EndpointsPerService => warn!(
                service = %service.key, limit = limit.label(), endpoints = need, max = self.limits.endpoints_per_service,
                "refused: {} has {need} ready endpoints, more than --max-endpoints-per-service {}; it {what} until it has fewer",
                service.key, self.limits.endpoints_per_service
            ),
            Limit::ZoneNames => warn!(
                service = %service.key, limit = limit.label(), names = need, zone_names = self.zone_names(), max = self.limits.zone_names,
                "refused: {} needs {need} names and the zone holds {} of --max-zone-names {}; it {what} until there is room",
                service.key, self.zone_names(), self.limits.zone_names
            ),
        }
        self.metrics.refused_update(limit.label());
    }

    /// Forgets a refused service (it is gone, was taken, or came back to what is served).
    fn release(&mut self, key: &ServiceKey) {
        let limit = if self.too_big.remove(key) {
            Limit::EndpointsPerService
        } else if self.waiting.remove(key).is_some() {
            Limit::ZoneNames
        } else {
            return;
        };
        info!(service = %key, limit = limit.label(), "no longer refused");
    }

    /// Takes waiting services, in key order, while the first of them fits; true when the zone
    /// changed. Stops at the first that does not fit, so a call costs nothing while the zone
    /// is full and the wait is first come (by name), first served.
    fn admit_held(&mut self) -> bool {
        let mut changed = false;
        while let Some((key, w)) = self.waiting.first_key_value() {
            if !self.fits(key, w.names) {
                break;
            }
            let (key, w) = self.waiting.pop_first().expect("looked at above");
            info!(service = %key, limit = Limit::ZoneNames.label(), "no longer refused: there is room");
            changed |= self.upsert(packed::service(key, &w.import, &w.slices));
        }
        changed
    }

    fn upsert(&mut self, service: Service) -> bool {
        let print = fingerprint(&service);
        if self
            .services
            .get(&service.key)
            .is_some_and(|o| o.fingerprint == print)
        {
            // Back to what is served: nothing is refused any more.
            self.release(&service.key);
            return false;
        }
        let endpoints = endpoint_count(&service);
        if endpoints > self.limits.endpoints_per_service {
            self.refuse(&service, Limit::EndpointsPerService, endpoints);
            self.waiting.remove(&service.key);
            self.too_big.insert(service.key);
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
                    warn!(service = %service.key, kind = %service.origin, "{why}; that name is not served");
                    self.metrics.skipped(service.origin, Skip::NameTooLong);
                },
            ));
        }
        let names = rendered.len() + self.new_namespace_names(&service.key);
        if !self.fits(&service.key, names) {
            let waiting = Waiting {
                names,
                import: PackedImport::new(
                    service.origin,
                    service.kind,
                    &service.ips,
                    &service.ports,
                ),
                slices: service.slices.iter().map(Packed::new).collect(),
            };
            self.refuse(&service, Limit::ZoneNames, names);
            self.too_big.remove(&service.key);
            self.waiting.insert(service.key, waiting);
            return false;
        }
        self.release(&service.key);
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
            Some(o) => {
                self.endpoints -= o.endpoints;
                self.names -= o.entries.len();
                self.forget_size(o.endpoints);
            }
            None => self.add_namespace(&service.key.namespace),
        }
        self.endpoints += endpoints;
        *self.sizes.entry(endpoints).or_insert(0) += 1;
        self.names += rendered.len();
        debug!(service = %service.key, names = rendered.len(), "service rendered");
        rendered.shrink_to_fit();
        self.services.insert(
            service.key,
            Served {
                fingerprint: print,
                endpoints,
                entries: rendered,
            },
        );
        true
    }

    /// What [`Limits::zone_names`] bounds: the services' names and their namespaces'.
    fn zone_names(&self) -> usize {
        self.names + self.namespaces.len() * self.zone.apexes().len()
    }

    /// Whether `key` may own `names` names (its namespace's new ones included) instead of
    /// those it owns now.
    fn fits(&self, key: &ServiceKey, names: usize) -> bool {
        let now = self.services.get(key).map_or(0, |o| o.entries.len());
        self.zone_names() - now + names <= self.limits.zone_names
    }

    /// The `<ns>.svc` names a first service in its namespace adds (one per served zone).
    fn new_namespace_names(&self, key: &ServiceKey) -> usize {
        if self.namespaces.contains_key(&key.namespace) {
            0
        } else {
            self.zone.apexes().len()
        }
    }

    fn forget_size(&mut self, endpoints: usize) {
        if let Some(n) = self.sizes.get_mut(&endpoints) {
            *n -= 1;
            if *n == 0 {
                self.sizes.remove(&endpoints);
            }
        }
    }

    fn remove(&mut self, key: &ServiceKey) -> bool {
        let Some(old) = self.services.remove(key) else {
            return false;
        };
        for entry in &old.entries {
            self.zone.remove(entry.name());
        }
        self.endpoints -= old.endpoints;
        self.names -= old.entries.len();
        self.forget_size(old.endpoints);
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
            crate::wire::name_text(apex)
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
                        crate::wire::name_text(&sname)
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
        ServiceType::ClusterSetIp if !service.ips.is_empty() => {
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
    if service.kind == ServiceType::Headless && service_addrs.is_empty() {
        // No ready endpoints: the service has no names at all (NXDOMAIN), as in CoreDNS.
        return Vec::new();
    }
    targets[0].addrs = service_addrs;
    let entries: Vec<(usize, &Port)> = match service.kind {
        ServiceType::ClusterSetIp => targets[0]
            .addrs
            .iter()
            .flat_map(|_| service.ports.iter().map(|p| (0, p)))
            .collect(),
        ServiceType::Headless => headless_entries,
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
                crate::wire::name_text(&sname)
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

    // Empty non-terminals: every name between the service's and one of its names below it
    // (`_<proto>.<svc>`, `<cluster>.<svc>`, and `eu.<svc>` of a two-label cluster id
    // `central.eu`) exists without records, so it answers NODATA, not NXDOMAIN, which says
    // that nothing exists below (RFC 8020) and stops qname-minimising resolvers there.
    let owned: HashSet<Vec<u8>> = out.iter().map(|e| e.name().to_vec()).collect();
    let mut empty: Vec<Vec<u8>> = Vec::new();
    for e in &out {
        let mut name = e.name();
        while name.len() > sname.len() {
            name = &name[1 + name[0] as usize..];
            if name.len() <= sname.len() || owned.contains(name) || empty.iter().any(|n| n == name)
            {
                continue;
            }
            empty.push(name.to_vec());
        }
    }
    out.extend(empty.iter().map(|n| Entry::empty(n)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, Slice};

    /// A headless service `name` in `shop` with `n` named endpoints in cluster `east`.
    fn headless(name: &str, n: usize, first: u8) -> Service {
        Service {
            origin: crate::model::ObjectKind::ServiceImport,
            key: ServiceKey {
                namespace: "shop".into(),
                name: name.into(),
            },
            kind: ServiceType::Headless,
            ips: vec![],
            ports: vec![],
            slices: vec![Slice {
                name: format!("{name}-east"),
                cluster: Some("east".into()),
                ports: vec![],
                endpoints: (0..n)
                    .map(|i| Endpoint {
                        addresses: vec![IpAddr::from([10, first, 0, i as u8])],
                        hostname: Some(format!("h{i}")),
                    })
                    .collect(),
            }],
        }
    }

    fn builder(limits: Limits) -> (Arc<Zone>, Arc<Metrics>, Builder) {
        let zone = Arc::new(Zone::new(
            vec![crate::wire::wire_name("clusterset.local").unwrap()],
            5,
        ));
        let metrics = Arc::new(Metrics::new(
            "dns://test".into(),
            vec!["clusterset.local.".into()],
        ));
        let b = Builder::new(zone.clone(), &[], metrics.clone()).with_limits(limits);
        (zone, metrics, b)
    }

    /// The A records of `name` in the zone's master-file text, sorted.
    fn a(zone: &Zone, name: &str) -> Vec<String> {
        let owner = format!("{name}.shop.svc.clusterset.local.");
        let mut v: Vec<String> = crate::dns::transfer::zone_text(zone)
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(owner.as_str()) && l.contains("\tA\t"))
            .map(|l| l.rsplit('\t').next().unwrap().to_string())
            .collect();
        v.sort();
        v
    }

    fn metric(metrics: &Metrics, series: &str) -> String {
        metrics
            .render()
            .lines()
            .find(|l| l.starts_with(series))
            .unwrap_or_else(|| panic!("no {series}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
    }

    #[test]
    fn a_service_over_the_endpoint_cap_is_refused_and_a_served_one_keeps_its_answers() {
        let (zone, metrics, mut b) = builder(Limits {
            endpoints_per_service: 3,
            zone_names: usize::MAX,
        });
        b.apply(Update::Reset(vec![headless("db", 2, 1)].into()));
        assert_eq!(a(&zone, "db"), ["10.1.0.0", "10.1.0.1"]);
        // Grows past the cap: the update is refused, the old answers stay.
        assert!(!b.apply(Update::Upsert(headless("db", 4, 2))));
        assert_eq!(a(&zone, "db"), ["10.1.0.0", "10.1.0.1"]);
        // A new service past the cap is not served at all.
        b.apply(Update::Upsert(headless("big", 9, 3)));
        assert!(a(&zone, "big").is_empty());
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_refused_updates_total{limit=\"endpoints_per_service\"}"
            ),
            "2"
        );
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_refused_services{limit=\"endpoints_per_service\"}"
            ),
            "2"
        );
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_limit_used{limit=\"endpoints_per_service\"}"
            ),
            "2"
        );
        // The same refusal again is not counted again.
        b.apply(Update::Upsert(headless("big", 8, 3)));
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_refused_updates_total{limit=\"endpoints_per_service\"}"
            ),
            "2"
        );
        // Back under the cap, both are taken.
        b.apply(Update::Upsert(headless("db", 3, 2)));
        b.apply(Update::Upsert(headless("big", 1, 3)));
        assert_eq!(a(&zone, "db"), ["10.2.0.0", "10.2.0.1", "10.2.0.2"]);
        assert_eq!(a(&zone, "big"), ["10.3.0.0"]);
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_refused_services{limit=\"endpoints_per_service\"}"
            ),
            "0"
        );
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_limit{limit=\"endpoints_per_service\"}"
            ),
            "3"
        );
    }

    #[test]
    fn beyond_the_name_cap_new_services_wait_and_are_served_once_there_is_room() {
        // A headless service with n hostnames owns 2 + n names (`<svc>`, `<h>.east.<svc>` and
        // the empty non-terminal `east.<svc>`); the namespace adds one.
        let (zone, metrics, mut b) = builder(Limits {
            endpoints_per_service: usize::MAX,
            zone_names: 11,
        });
        b.apply(Update::Reset(vec![headless("a", 3, 1)].into()));
        let used = metric(&metrics, "clusterset_dns_limit_used{limit=\"zone_names\"}");
        assert_eq!(a(&zone, "a").len(), 3);
        // Two more of the same size do not both fit: the first by name is served, then one waits.
        b.apply(Update::Upsert(headless("b", 3, 2)));
        b.apply(Update::Upsert(headless("c", 3, 3)));
        assert_eq!(a(&zone, "b").len(), 3);
        assert!(a(&zone, "c").is_empty());
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_refused_services{limit=\"zone_names\"}"
            ),
            "1"
        );
        // A served service that would grow beyond the cap keeps its answers.
        b.apply(Update::Upsert(headless("a", 5, 4)));
        assert_eq!(a(&zone, "a"), ["10.1.0.0", "10.1.0.1", "10.1.0.2"]);
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_refused_services{limit=\"zone_names\"}"
            ),
            "2"
        );
        // Room frees: the waiting services are taken in name order, as far as they fit.
        b.apply(Update::Remove(ServiceKey {
            namespace: "shop".into(),
            name: "b".into(),
        }));
        assert_eq!(a(&zone, "a").len(), 5, "a's held growth taken");
        assert!(
            a(&zone, "c").is_empty(),
            "c does not fit beside the grown a"
        );
        b.apply(Update::Upsert(headless("a", 1, 5)));
        assert_eq!(a(&zone, "c").len(), 3, "c taken once a shrank");
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_refused_services{limit=\"zone_names\"}"
            ),
            "0"
        );
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_refused_updates_total{limit=\"zone_names\"}"
            ),
            "2"
        );
        // The zone never held more than the cap; the count matches what is served.
        assert!(used.parse::<usize>().unwrap() <= 11);
        assert_eq!(
            metric(&metrics, "clusterset_dns_limit_used{limit=\"zone_names\"}"),
            "9"
        );
        // A full reset that no longer has a waiting service forgets it.
        b.apply(Update::Upsert(headless("d", 9, 6)));
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_refused_services{limit=\"zone_names\"}"
            ),
            "1"
        );
        b.apply(Update::Reset(
            vec![headless("a", 1, 5), headless("c", 3, 3)].into(),
        ));
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_refused_services{limit=\"zone_names\"}"
            ),
            "0"
        );
    }

    #[test]
    fn derived_hostnames() {
        let d = |s: &str| derived_hostname(&s.parse().unwrap());
        assert_eq!(d("10.1.2.3"), "10-1-2-3");
        assert_eq!(d("2001:db8::"), "2001-db8--0");
        assert_eq!(d("2001:db8::1"), "2001-db8--1");
    }
}
