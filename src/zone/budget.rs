//! The zone's budget (`--max-endpoints-per-service`, `--max-zone-names`): beyond it, new data
//! is refused and what is served stays as it is, so one exporting cluster's bug (or an attacker)
//! cannot grow the server until it is killed for memory. The builder asks it before it takes a
//! service, and tells it what it took and let go.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use tracing::{info, warn};

use crate::metrics::Metrics;
pub use crate::model::Limit;
use crate::model::packed::{ImportHead, Packed, PackedImport};
use crate::model::{Service, ServiceKey};

/// The limits.
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

    /// The budget by default: docs/operations.md ("Bounded growth") says how it was chosen, and
    /// how deploy/base's memory request and limit follow from it.
    pub const DEFAULT: Limits = Limits {
        endpoints_per_service: 5_000,
        zone_names: 200_000,
    };

    /// The number `limit` names.
    pub fn of(&self, limit: Limit) -> usize {
        match limit {
            Limit::EndpointsPerService => self.endpoints_per_service,
            Limit::ZoneNames => self.zone_names,
        }
    }
}

/// A service refused for room, kept (packed, a few bytes an endpoint, as the source keeps it)
/// to be taken when room frees, without the source sending it again.
pub struct Waiting {
    /// The names it needs.
    pub names: usize,
    pub import: PackedImport,
    pub slices: Vec<Packed>,
}

impl Waiting {
    pub fn new(service: &Service, names: usize) -> Self {
        Waiting {
            names,
            import: PackedImport::new(ImportHead::of(service), &service.ips, &service.ports),
            slices: service.slices.iter().map(Packed::new).collect(),
        }
    }
}

/// What the served services hold against the limits, and the services refused.
pub struct Budget {
    limits: Limits,
    metrics: Arc<Metrics>,
    /// Names the served services own; with the namespaces' names (which the builder counts),
    /// what [`Limits::zone_names`] bounds.
    names: usize,
    /// How many served services have each endpoint count, for the largest.
    sizes: BTreeMap<usize, usize>,
    /// Services refused for too many endpoints: taken again when the source sends them smaller.
    too_big: HashSet<ServiceKey>,
    /// Services refused for room, in the order room is given to them.
    waiting: BTreeMap<ServiceKey, Waiting>,
}

impl Budget {
    pub fn new(limits: Limits, metrics: Arc<Metrics>) -> Self {
        for limit in Limit::ALL {
            metrics.limit(*limit, limits.of(*limit));
        }
        Budget {
            limits,
            metrics,
            names: 0,
            sizes: BTreeMap::new(),
            too_big: HashSet::new(),
            waiting: BTreeMap::new(),
        }
    }

    /// Names in the zone: the services' and `namespace_names`.
    pub fn zone_names(&self, namespace_names: usize) -> usize {
        self.names + namespace_names
    }

    /// Whether a service with `endpoints` ready endpoints is over the limit.
    pub fn too_many_endpoints(&self, endpoints: usize) -> bool {
        endpoints > self.limits.endpoints_per_service
    }

    /// Whether a service that owns `owned` names now may own `names` instead, with the zone's
    /// namespaces owning `namespace_names`.
    pub fn fits(&self, owned: usize, names: usize, namespace_names: usize) -> bool {
        self.zone_names(namespace_names) - owned + names <= self.limits.zone_names
    }

    /// Refuses `service` for too many (`endpoints`) endpoints: logged and counted once, until
    /// it is released. `served`: it keeps its last accepted answers.
    pub fn refuse_endpoints(&mut self, service: &Service, served: bool, endpoints: usize) {
        self.waiting.remove(&service.key);
        if !self.too_big.insert(service.key.clone()) {
            return;
        }
        let limit = Limit::EndpointsPerService;
        let max = self.limits.endpoints_per_service;
        warn!(
            service = %service.key, limit = limit.label(), endpoints, max,
            "refused: {} has {endpoints} ready endpoints, more than --max-endpoints-per-service {max}; it {} until it has fewer",
            service.key, outcome(served)
        );
        self.metrics.refused_update(limit);
    }

    /// Refuses `service` for room: it waits, as `waiting`, and is logged and counted once.
    pub fn refuse_room(
        &mut self,
        service: &Service,
        served: bool,
        waiting: Waiting,
        namespace_names: usize,
    ) {
        self.too_big.remove(&service.key);
        let need = waiting.names;
        if self.waiting.insert(service.key.clone(), waiting).is_some() {
            return;
        }
        let limit = Limit::ZoneNames;
        let (now, max) = (self.zone_names(namespace_names), self.limits.zone_names);
        warn!(
            service = %service.key, limit = limit.label(), names = need, zone_names = now, max,
            "refused: {} needs {need} names and the zone holds {now} of --max-zone-names {max}; it {} until there is room",
            service.key, outcome(served)
        );
        self.metrics.refused_update(limit);
    }

    /// Forgets a refused service (it is gone, was taken, or came back to what is served).
    pub fn release(&mut self, key: &ServiceKey) {
        let limit = if self.too_big.remove(key) {
            Limit::EndpointsPerService
        } else if self.waiting.remove(key).is_some() {
            Limit::ZoneNames
        } else {
            return;
        };
        info!(service = %key, limit = limit.label(), "no longer refused");
    }

    /// The first waiting service (in key order) if it fits now, taken out of the wait; `owned`
    /// says how many names a service owns now. Looks at the first only, so a call costs
    /// nothing while the zone is full and the wait is first come (by name), first served.
    pub fn next_admitted(
        &mut self,
        owned: impl Fn(&ServiceKey) -> usize,
        namespace_names: usize,
    ) -> Option<(ServiceKey, Waiting)> {
        let (key, w) = self.waiting.first_key_value()?;
        if !self.fits(owned(key), w.names, namespace_names) {
            return None;
        }
        let (key, w) = self.waiting.pop_first().expect("looked at above");
        info!(service = %key, limit = Limit::ZoneNames.label(), "no longer refused: there is room");
        Some((key, w))
    }

    /// Keeps only the refusals of services in `keep` (after a full reset).
    pub fn retain(&mut self, keep: &HashSet<ServiceKey>) {
        self.too_big.retain(|k| keep.contains(k));
        self.waiting.retain(|k, _| keep.contains(k));
    }

    /// A service with `endpoints` endpoints and `names` names is now served.
    pub fn take(&mut self, endpoints: usize, names: usize) {
        *self.sizes.entry(endpoints).or_insert(0) += 1;
        self.names += names;
    }

    /// A served service with `endpoints` endpoints and `names` names is no longer.
    pub fn drop_served(&mut self, endpoints: usize, names: usize) {
        self.names -= names;
        if let Some(n) = self.sizes.get_mut(&endpoints) {
            *n -= 1;
            if *n == 0 {
                self.sizes.remove(&endpoints);
            }
        }
    }

    /// Reports what is used of each limit, and how many services each holds back.
    pub fn report(&self, namespace_names: usize) {
        let largest = self.sizes.last_key_value().map_or(0, |(n, _)| *n);
        let names = self.zone_names(namespace_names);
        for limit in Limit::ALL {
            let (used, held) = match limit {
                Limit::EndpointsPerService => (largest, self.too_big.len()),
                Limit::ZoneNames => (names, self.waiting.len()),
            };
            self.metrics.limit_used(*limit, used, held);
        }
    }
}

fn outcome(served: bool) -> &'static str {
    if served {
        "keeps its last accepted answers"
    } else {
        "is not served"
    }
}

/// The budget as the builder meets it: services refused, held and let in, and what the metrics
/// say of them.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Update;
    use crate::zone::build::tests::{a, builder, headless, metric};

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
        let (zone, metrics, mut inner) = builder(Limits {
            endpoints_per_service: usize::MAX,
            zone_names: 11,
        });
        // After every update: the zone never holds more than the cap, and the count the
        // budget reports is what the zone holds (less the 5 names every zone has).
        let mut b = |u: Update| {
            inner.apply(u);
            let used: usize = metric(&metrics, "clusterset_dns_limit_used{limit=\"zone_names\"}")
                .parse()
                .unwrap();
            assert_eq!(used, zone.len() - 5);
            assert!(used <= 11, "{used} names");
        };
        b(Update::Reset(vec![headless("a", 3, 1)].into()));
        assert_eq!(a(&zone, "a").len(), 3);
        // Two more of the same size do not both fit: the first by name is served, then one waits.
        b(Update::Upsert(headless("b", 3, 2)));
        b(Update::Upsert(headless("c", 3, 3)));
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
        b(Update::Upsert(headless("a", 5, 4)));
        assert_eq!(a(&zone, "a"), ["10.1.0.0", "10.1.0.1", "10.1.0.2"]);
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_refused_services{limit=\"zone_names\"}"
            ),
            "2"
        );
        // Room frees: the waiting services are taken in name order, as far as they fit.
        b(Update::Remove(ServiceKey {
            namespace: "shop".into(),
            name: "b".into(),
        }));
        assert_eq!(a(&zone, "a").len(), 5, "a's held growth taken");
        assert!(
            a(&zone, "c").is_empty(),
            "c does not fit beside the grown a"
        );
        b(Update::Upsert(headless("a", 1, 5)));
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
        assert_eq!(
            metric(&metrics, "clusterset_dns_limit_used{limit=\"zone_names\"}"),
            "9"
        );
        // A full reset that no longer has a waiting service forgets it.
        b(Update::Upsert(headless("d", 9, 6)));
        assert_eq!(
            metric(
                &metrics,
                "clusterset_dns_refused_services{limit=\"zone_names\"}"
            ),
            "1"
        );
        b(Update::Reset(
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
}
