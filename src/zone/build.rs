//! The one writer of the zone: applies source updates service by service, rendering every name a
//! service owns into precompiled answers and swapping them into the zone. A change to one service
//! re-renders that service only.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::budget::{Budget, Waiting};
pub use super::budget::{Limit, Limits};
use super::schema::{render_apex, render_service};
use super::{Entry, Zone};
use crate::metrics::Metrics;
use crate::model::packed;
use crate::model::{Service, ServiceKey, ServiceType, Skip, Update};
use crate::wire::child;

pub struct Builder {
    zone: Arc<Zone>,
    metrics: Arc<Metrics>,
    services: HashMap<ServiceKey, Served>,
    /// ServiceImports per namespace: `<ns>.svc.<zone>` exists while this is above zero.
    namespaces: HashMap<String, usize>,
    /// Ready endpoints over all services, kept as services change (never recounted).
    endpoints: usize,
    budget: Budget,
    /// The server's own cluster id, as the last full set said.
    own_cluster: Option<String>,
    /// Services reported as answerable from no slice at all (`Absent`, none), until that ends.
    no_slices: HashSet<ServiceKey>,
}

fn endpoint_count(service: &Service) -> usize {
    service.slices.iter().map(|s| s.endpoints.len()).sum()
}

/// What the builder remembers of a service: enough to tell whether an update changes it and to
/// remove its names, not a copy of it or of its answers (the zone holds those).
struct Served {
    /// Hash of the whole `Service` value; equal hashes are taken as "unchanged".
    fingerprint: u64,
    endpoints: usize,
    names: Names,
}

/// A service's names, each kept as the bytes it does not share with the end of the name before
/// it: all of a service's names end in the service's own name, so a per-pod name costs its few
/// bytes of `<host>.<cluster>` labels and two bytes of lengths, not a 40-odd-byte copy.
struct Names {
    count: usize,
    /// Per name: how many bytes it shares with the end of the one before, how many it does
    /// not, and those.
    coded: Box<[u8]>,
}

impl Names {
    fn new<'a>(names: impl Iterator<Item = &'a [u8]>) -> Self {
        let (mut coded, mut count, mut before): (Vec<u8>, usize, &[u8]) = (Vec::new(), 0, &[]);
        for name in names {
            let shared = name
                .iter()
                .rev()
                .zip(before.iter().rev())
                .take_while(|(a, b)| a == b)
                .count();
            let own = &name[..name.len() - shared];
            // Wire names are at most 255 octets.
            coded.extend([shared as u8, own.len() as u8]);
            coded.extend_from_slice(own);
            (before, count) = (name, count + 1);
        }
        Names {
            count,
            coded: coded.into_boxed_slice(),
        }
    }

    fn len(&self) -> usize {
        self.count
    }

    /// Calls `f` with each name, in the order given to [`Names::new`].
    fn for_each(&self, mut f: impl FnMut(&[u8])) {
        let (mut name, mut next) = (Vec::with_capacity(255), Vec::with_capacity(255));
        let mut at = 0;
        while at < self.coded.len() {
            let (shared, own) = (self.coded[at] as usize, self.coded[at + 1] as usize);
            next.clear();
            next.extend_from_slice(&self.coded[at + 2..at + 2 + own]);
            next.extend_from_slice(&name[name.len() - shared..]);
            std::mem::swap(&mut name, &mut next);
            f(&name);
            at += 2 + own;
        }
    }
}

/// A service's answers depend on it and on the own cluster id.
fn fingerprint(service: &Service, own: Option<&str>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    service.hash(&mut h);
    own.hash(&mut h);
    h.finish()
}

impl Builder {
    /// Takes the (empty) zone and renders the names every zone has: apex, NS, `dns-version`.
    pub fn new(zone: Arc<Zone>, ns_addresses: &[IpAddr], metrics: Arc<Metrics>) -> Self {
        for apex in zone.apexes() {
            for entry in render_apex(apex, zone.ttl(), ns_addresses) {
                zone.insert(&entry);
            }
        }
        zone.publish();
        Builder {
            zone,
            services: HashMap::new(),
            namespaces: HashMap::new(),
            endpoints: 0,
            budget: Budget::new(Limits::NONE, metrics.clone()),
            own_cluster: None,
            no_slices: HashSet::new(),
            metrics,
        }
    }

    /// Holds the zone to `limits` (none by default).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.budget = Budget::new(limits, self.metrics.clone());
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
                if services.own_cluster() != self.own_cluster.as_deref() {
                    // Every service is rendered anew: their fingerprints include the id.
                    info!(
                        cluster_id = services.own_cluster().unwrap_or("none"),
                        "own cluster id"
                    );
                    self.own_cluster = services.own_cluster().map(str::to_string);
                    self.metrics.own_cluster(self.own_cluster.as_deref());
                }
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
                self.budget.retain(&keep);
                self.no_slices.retain(|k| keep.contains(k));
                changed |= self.admit_held();
                self.zone.publish();
                crate::sys::release_free_memory();
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
                self.budget.release(&key);
                self.no_slices.remove(&key);
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
        self.budget.report(self.namespace_names());
        changed
    }

    /// Takes waiting services, in key order, while the first of them fits; true when the zone
    /// changed.
    fn admit_held(&mut self) -> bool {
        let mut changed = false;
        loop {
            let services = &self.services;
            let owned = |key: &ServiceKey| services.get(key).map_or(0, |o| o.names.len());
            let Some((key, w)) = self.budget.next_admitted(owned, self.namespace_names()) else {
                return changed;
            };
            changed |= self.upsert(packed::service(key, &w.import, &w.slices));
        }
    }

    fn upsert(&mut self, service: Service) -> bool {
        let print = fingerprint(&service, self.own_cluster.as_deref());
        if self
            .services
            .get(&service.key)
            .is_some_and(|o| o.fingerprint == print)
        {
            // Back to what is served: nothing is refused any more.
            self.budget.release(&service.key);
            return false;
        }
        self.report_no_slices(&service);
        let served = self.services.contains_key(&service.key);
        let endpoints = endpoint_count(&service);
        if self.budget.too_many_endpoints(endpoints) {
            self.budget.refuse_endpoints(&service, served, endpoints);
            return false;
        }
        let mut rendered = Vec::new();
        let zone = self.zone.clone();
        for apex in zone.apexes() {
            rendered.extend(render_service(
                &service,
                apex,
                self.zone.ttl(),
                self.own_cluster.as_deref(),
                &mut |why| {
                    warn!(service = %service.key, kind = %service.origin, "{why}; that name is not served");
                    self.metrics.skipped(service.origin, Skip::NameTooLong);
                },
            ));
        }
        let names = rendered.len() + self.new_namespace_names(&service.key);
        let owned = self.services.get(&service.key).map_or(0, |o| o.names.len());
        if !self.budget.fits(owned, names, self.namespace_names()) {
            let waiting = Waiting::new(&service, names);
            self.budget
                .refuse_room(&service, served, waiting, self.namespace_names());
            return false;
        }
        self.budget.release(&service.key);
        let old = self.services.remove(&service.key);
        if let Some(old) = &old {
            let new_names: HashSet<&[u8]> = rendered.iter().map(Entry::name).collect();
            old.names.for_each(|name| {
                if !new_names.contains(name) {
                    self.zone.remove(name);
                }
            });
        }
        // The zone skips the entries that are unchanged.
        for entry in &rendered {
            self.zone.insert(entry);
        }
        match &old {
            Some(o) => {
                self.endpoints -= o.endpoints;
                self.budget.drop_served(o.endpoints, o.names.len());
            }
            None => self.add_namespace(&service.key.namespace),
        }
        self.endpoints += endpoints;
        self.budget.take(endpoints, rendered.len());
        debug!(service = %service.key, names = rendered.len(), "service rendered");
        self.services.insert(
            service.key,
            Served {
                fingerprint: print,
                endpoints,
                names: Names::new(rendered.iter().map(Entry::name)),
            },
        );
        true
    }

    /// Logs (warn) and counts, once until it changes, a service that needs endpoints (headless,
    /// or ClusterSetIP without `ips`) whose implementation publishes no EndpointSlices for it
    /// (`status.endpointSliceObjects: Absent`) and that has none: it can never be answered, and
    /// would otherwise be a silent NXDOMAIN.
    fn report_no_slices(&mut self, service: &Service) {
        let needs_endpoints = service.kind == ServiceType::Headless || service.ips.is_empty();
        if service.slices_absent && needs_endpoints && service.slices.is_empty() {
            if self.no_slices.insert(service.key.clone()) {
                warn!(service = %service.key, reason = %Skip::NoEndpointSlices, "skipped {} {}: its status says endpointSliceObjects: Absent and it has no EndpointSlices, so no endpoint can answer it", service.origin, service.key);
                self.metrics.skipped(service.origin, Skip::NoEndpointSlices);
            }
        } else {
            self.no_slices.remove(&service.key);
        }
    }

    /// The `<ns>.svc` names the namespaces own (one per served zone each).
    fn namespace_names(&self) -> usize {
        self.namespaces.len() * self.zone.apexes().len()
    }

    /// The `<ns>.svc` names a first service in its namespace adds (one per served zone).
    fn new_namespace_names(&self, key: &ServiceKey) -> usize {
        if self.namespaces.contains_key(&key.namespace) {
            0
        } else {
            self.zone.apexes().len()
        }
    }

    fn remove(&mut self, key: &ServiceKey) -> bool {
        let Some(old) = self.services.remove(key) else {
            return false;
        };
        old.names.for_each(|name| self.zone.remove(name));
        self.endpoints -= old.endpoints;
        self.budget.drop_served(old.endpoints, old.names.len());
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
                    self.zone.insert(&Entry::empty(&name));
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::model::{Endpoint, Slice};

    /// A service's names come back exactly, in order, however much they share: nothing,
    /// a tail, the whole name, or a name that is the tail of the one before.
    #[test]
    fn names_come_back_as_given() {
        let apex = crate::wire::wire_name("clusterset.local").unwrap();
        let svc = child("web.shop.svc", &apex).unwrap();
        let mut given: Vec<Vec<u8>> = vec![svc.clone(), child("_http._tcp", &svc).unwrap()];
        given.extend((0..300).map(|i| child(&format!("pod-{i}.c{}", i % 3), &svc).unwrap()));
        given.push(svc.clone());
        given.push(crate::wire::wire_name("other.example").unwrap());
        given.push(child("a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z", &svc).unwrap());
        given.push(apex.clone());
        let names = Names::new(given.iter().map(Vec::as_slice));
        let mut back = Vec::new();
        names.for_each(|n| back.push(n.to_vec()));
        assert_eq!(back, given);
        assert_eq!(names.len(), given.len());
        let plain: usize = given.iter().map(Vec::len).sum();
        assert!(
            names.coded.len() * 3 < plain,
            "{} of {plain}",
            names.coded.len()
        );
    }

    /// A headless service `name` in `shop` with `n` named endpoints in cluster `east`.
    pub(in crate::zone) fn headless(name: &str, n: usize, first: u8) -> Service {
        Service {
            locality: crate::model::Locality::Any,
            slices_absent: false,
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

    pub(in crate::zone) fn builder(limits: Limits) -> (Arc<Zone>, Arc<Metrics>, Builder) {
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

    /// The addresses of service `name`'s A records, as the zone serves them now, sorted.
    pub(in crate::zone) fn a(zone: &Zone, name: &str) -> Vec<String> {
        let wire = crate::wire::wire_name(&format!("{name}.shop.svc.clusterset.local")).unwrap();
        let mut v: Vec<String> = zone.view().lookup(&wire, |l| match l {
            crate::zone::Lookup::Inside {
                entry: Some(entry), ..
            } => crate::zone::testing::records(&entry, crate::wire::TYPE_A),
            _ => Vec::new(),
        });
        for r in &mut v {
            *r = r.trim_start_matches("A ").to_string();
        }
        v.sort();
        v
    }

    pub(in crate::zone) fn metric(metrics: &Metrics, series: &str) -> String {
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

    /// What the zone keeps per name, by shape, at the capacity planner's workload (half
    /// ClusterSetIP, half headless, 10 named endpoints each): a per-pod name's entry stays under
    /// 80 bytes and a headless service's names under 32 bytes an endpoint, so the figures of
    /// docs/performance.md hold. `cargo test --lib entry_bytes -- --nocapture` prints the table.
    #[test]
    fn entry_bytes_per_name_stay_within_the_documented_budget() {
        use crate::model::{Locality, ObjectKind, Port, Protocol};
        let (zone, _, mut b) = builder(Limits::NONE);
        let port = Port {
            name: Some("http".into()),
            protocol: Protocol::Tcp,
            port: 80,
        };
        let services: Vec<Service> = (0..1000usize)
            .map(|i| Service {
                locality: Locality::Any,
                slices_absent: false,
                origin: ObjectKind::ServiceImport,
                key: ServiceKey {
                    namespace: "scale".into(),
                    name: format!("svc{}", 1000 + i),
                },
                kind: if i % 2 == 1 {
                    ServiceType::Headless
                } else {
                    ServiceType::ClusterSetIp
                },
                ips: if i % 2 == 1 {
                    vec![]
                } else {
                    vec![IpAddr::from([10, 100, (i / 256) as u8, i as u8])]
                },
                ports: vec![port.clone()],
                slices: vec![Slice {
                    name: format!("svc{i}-east"),
                    cluster: Some("east".into()),
                    ports: vec![port.clone()],
                    endpoints: (0..10u8)
                        .map(|k| Endpoint {
                            addresses: vec![IpAddr::from([10, 200 + k, (i / 256) as u8, i as u8])],
                            hostname: Some(format!("pod-{k}")),
                        })
                        .collect(),
                }],
            })
            .collect();
        b.apply(Update::Reset(services.into()));
        // Per shape: names and entry bytes.
        let mut by: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
        for e in zone.snapshot() {
            let text = crate::wire::name_text(e.name());
            let labels = text.trim_end_matches('.').split('.').count();
            let headless = text
                .split('.')
                .find_map(|l| l.strip_prefix("svc")?.parse::<usize>().ok())
                .is_some_and(|n| n % 2 == 1);
            let shape = match (labels, e.types().count()) {
                (7, 2) => "per-pod name <host>.<cluster>.<svc>",
                (5, 2) => "service name <svc>",
                (7, 1) => "port name _<port>._<proto>.<svc>",
                _ => "other (apex, namespaces, empty non-terminals)",
            };
            let kind = if labels < 5 || shape.starts_with("other") {
                ""
            } else if headless {
                ", headless"
            } else {
                ", ClusterSetIP"
            };
            let v = by.entry(format!("{shape}{kind}")).or_default();
            v.0 += 1;
            v.1 += e.bytes().len();
        }
        for (shape, (names, bytes)) in &by {
            eprintln!(
                "{shape}: {names} names, {bytes} bytes, {} each",
                bytes / names
            );
        }
        let each = |shape: &str| {
            let (names, bytes) = by[shape];
            bytes / names
        };
        assert!(each("per-pod name <host>.<cluster>.<svc>, headless") < 80);
        assert!(each("per-pod name <host>.<cluster>.<svc>, ClusterSetIP") < 80);
        assert!(each("service name <svc>, headless") < 32 * 10);
        assert!(each("port name _<port>._<proto>.<svc>, headless") < 32 * 10);
        assert_eq!(by["per-pod name <host>.<cluster>.<svc>, headless"].0, 5000);
    }
}
