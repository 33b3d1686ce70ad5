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
