//! Prometheus metrics. DNS request metrics use CoreDNS's names and labels so existing CoreDNS
//! dashboards work; zone and source metrics carry the `clusterset_dns_` prefix.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use crate::dns::Outcome;
use crate::zone::render::{
    TYPE_A, TYPE_AAAA, TYPE_ANY, TYPE_AXFR, TYPE_IXFR, TYPE_NS, TYPE_SOA, TYPE_SRV, TYPE_TXT,
};

pub struct Metrics {
    registry: Registry,
    server: String,
    /// Text of each served zone, for the `zone` label.
    zones: Vec<String>,
    requests: IntCounterVec,
    responses: IntCounterVec,
    services: IntGauge,
    endpoints: IntGauge,
    names: IntGauge,
    serial: IntGauge,
    changed: IntGauge,
    skipped: IntCounterVec,
    reloads: IntCounterVec,
    source_objects: IntGaugeVec,
    source_events: IntCounterVec,
    source_errors: IntCounterVec,
    source_restarts: IntCounterVec,
    source_last_event: IntGauge,
    source_last_sync: IntGauge,
    programming: Histogram,
    workers: Mutex<Workers>,
}

/// Every worker's counters, and the sums already added to the Prometheus counters.
#[derive(Default)]
struct Workers {
    counters: Vec<Arc<QueryCounters>>,
    requests: Vec<u64>,
    responses: Vec<u64>,
}

/// Query types with their own label value; the rest count as `other`, so label values stay
/// bounded.
const TYPES: [(u16, &str); 12] = [
    (TYPE_A, "A"),
    (TYPE_AAAA, "AAAA"),
    (TYPE_NS, "NS"),
    (TYPE_SOA, "SOA"),
    (5, "CNAME"),
    (12, "PTR"),
    (15, "MX"),
    (TYPE_TXT, "TXT"),
    (TYPE_SRV, "SRV"),
    (TYPE_ANY, "ANY"),
    (TYPE_AXFR, "AXFR"),
    (TYPE_IXFR, "IXFR"),
];
const RCODES: [(u16, &str); 7] = [
    (0, "NOERROR"),
    (1, "FORMERR"),
    (2, "SERVFAIL"),
    (3, "NXDOMAIN"),
    (4, "NOTIMP"),
    (5, "REFUSED"),
    (16, "BADVERS"),
];
const N_TYPES: usize = TYPES.len() + 1;
const N_RCODES: usize = RCODES.len() + 1;

fn type_index(qtype: u16) -> usize {
    TYPES
        .iter()
        .position(|(t, _)| *t == qtype)
        .unwrap_or(TYPES.len())
}

fn rcode_index(rcode: u16) -> usize {
    RCODES
        .iter()
        .position(|(r, _)| *r == rcode)
        .unwrap_or(RCODES.len())
}

pub fn type_label(qtype: u16) -> &'static str {
    TYPES.get(type_index(qtype)).map_or("other", |(_, l)| l)
}

pub fn rcode_label(rcode: u16) -> &'static str {
    RCODES.get(rcode_index(rcode)).map_or("other", |(_, l)| l)
}

/// Query counters of one serving worker. Only that worker writes them (relaxed adds on memory
/// no other worker touches); [`Metrics::render`] sums all workers' at scrape time.
pub struct QueryCounters {
    zones: usize,
    /// By zone slot (served zones, then "outside"), proto, family, type.
    requests: Box<[AtomicU64]>,
    /// By zone slot, rcode.
    responses: Box<[AtomicU64]>,
}

impl QueryCounters {
    fn new(zones: usize) -> Self {
        let slots = zones + 1;
        QueryCounters {
            zones,
            requests: (0..slots * 4 * N_TYPES)
                .map(|_| AtomicU64::new(0))
                .collect(),
            responses: (0..slots * N_RCODES).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Counts one answered query.
    #[inline]
    pub fn count(&self, outcome: &Outcome, tcp: bool, v6: bool) {
        let slot = outcome.apex.unwrap_or(self.zones);
        let r = ((slot * 2 + tcp as usize) * 2 + v6 as usize) * N_TYPES + type_index(outcome.qtype);
        self.requests[r].fetch_add(1, Ordering::Relaxed);
        self.responses[slot * N_RCODES + rcode_index(outcome.rcode)]
            .fetch_add(1, Ordering::Relaxed);
    }
}

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("metric registered once");
    c
}

fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("metric registered once");
    g
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("metric registered once");
    g
}

impl Metrics {
    /// `server` is CoreDNS's `server` label, e.g. `dns://0.0.0.0:1053`; `zones` the served
    /// zones' texts, in the zone's apex order.
    pub fn new(server: String, zones: Vec<String>) -> Self {
        let r = Registry::new();
        Metrics {
            requests: counter(
                &r,
                "coredns_dns_requests_total",
                "Counter of DNS requests made per zone, protocol and family.",
                &["server", "zone", "view", "proto", "family", "type"],
            ),
            responses: counter(
                &r,
                "coredns_dns_responses_total",
                "Counter of response status codes.",
                &["server", "zone", "view", "rcode", "plugin"],
            ),
            services: gauge(&r, "clusterset_dns_services", "ServiceImports in the zone."),
            endpoints: gauge(
                &r,
                "clusterset_dns_endpoints",
                "Ready endpoints of those services.",
            ),
            names: gauge(
                &r,
                "clusterset_dns_names",
                "DNS names in the zone, over all served zones.",
            ),
            serial: gauge(&r, "clusterset_dns_zone_serial", "SOA serial of the zone."),
            changed: gauge(
                &r,
                "clusterset_dns_zone_last_change_timestamp_seconds",
                "When the zone last changed, in Unix seconds.",
            ),
            skipped: counter(
                &r,
                "clusterset_dns_skipped_objects_total",
                "Objects (or names of objects) that could not be used, by kind and reason.",
                &["kind", "reason"],
            ),
            reloads: counter(
                &r,
                "clusterset_dns_source_reloads_total",
                "Loads of the source file, by result.",
                &["result"],
            ),
            source_objects: gauge_vec(
                &r,
                "clusterset_dns_source_objects",
                "Objects the source holds, by kind.",
                &["kind"],
            ),
            source_events: counter(
                &r,
                "clusterset_dns_source_events_total",
                "Watch events received, by kind and type (list, apply, delete).",
                &["kind", "type"],
            ),
            source_errors: counter(
                &r,
                "clusterset_dns_source_errors_total",
                "Watch and discovery failures (each is retried with backoff), by kind.",
                &["kind"],
            ),
            source_restarts: counter(
                &r,
                "clusterset_dns_source_restarts_total",
                "Watches that had to relist (410 Gone, reconnects), by kind.",
                &["kind"],
            ),
            source_last_event: gauge(
                &r,
                "clusterset_dns_source_last_event_timestamp_seconds",
                "When the source last received an event, in Unix seconds.",
            ),
            source_last_sync: gauge(
                &r,
                "clusterset_dns_source_last_sync_timestamp_seconds",
                "When the source last completed a full list or load, in Unix seconds.",
            ),
            programming: {
                let opts = HistogramOpts::new(
                    "clusterset_dns_programming_duration_seconds",
                    "From an object change seen by the source to the zone answering it.",
                )
                .buckets(vec![
                    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                    1.0,
                ]);
                let h = Histogram::with_opts(opts).expect("valid metric");
                r.register(Box::new(h.clone()))
                    .expect("metric registered once");
                h
            },
            registry: r,
            server,
            zones,
            workers: Mutex::default(),
        }
    }

    /// Counters for one more serving worker.
    pub fn counters(&self) -> Arc<QueryCounters> {
        let c = Arc::new(QueryCounters::new(self.zones.len()));
        self.workers
            .lock()
            .expect("metrics lock")
            .counters
            .push(c.clone());
        c
    }

    /// Adds what the workers counted since the last scrape to the Prometheus counters.
    fn collect_workers(&self) {
        let mut w = self.workers.lock().expect("metrics lock");
        let zones = self.zones.len();
        let sum = |get: &dyn Fn(&QueryCounters) -> &[AtomicU64], len: usize| -> Vec<u64> {
            let mut total = vec![0u64; len];
            for c in &w.counters {
                for (t, v) in total.iter_mut().zip(get(c)) {
                    *t += v.load(Ordering::Relaxed);
                }
            }
            total
        };
        let requests = sum(&|c| &c.requests, (zones + 1) * 4 * N_TYPES);
        let responses = sum(&|c| &c.responses, (zones + 1) * N_RCODES);
        w.requests.resize(requests.len(), 0);
        w.responses.resize(responses.len(), 0);
        let zone = |slot: usize| self.zones.get(slot).map_or(".", String::as_str);
        for (i, (&now, before)) in requests.iter().zip(w.requests.iter_mut()).enumerate() {
            if now > *before {
                let (t, rest) = (i % N_TYPES, i / N_TYPES);
                let (v6, rest) = (rest % 2 == 1, rest / 2);
                let (tcp, slot) = (rest % 2 == 1, rest / 2);
                let qtype = TYPES.get(t).map_or("other", |(_, l)| l);
                let labels = [
                    self.server.as_str(),
                    zone(slot),
                    "",
                    if tcp { "tcp" } else { "udp" },
                    if v6 { "2" } else { "1" },
                    qtype,
                ];
                self.requests
                    .with_label_values(&labels)
                    .inc_by(now - *before);
                *before = now;
            }
        }
        for (i, (&now, before)) in responses.iter().zip(w.responses.iter_mut()).enumerate() {
            if now > *before {
                let rcode = RCODES.get(i % N_RCODES).map_or("other", |(_, l)| l);
                self.responses
                    .with_label_values(&[self.server.as_str(), zone(i / N_RCODES), "", rcode, ""])
                    .inc_by(now - *before);
                *before = now;
            }
        }
    }

    pub fn zone_state(
        &self,
        services: usize,
        endpoints: usize,
        names: usize,
        serial: u32,
        changed_at: u64,
    ) {
        self.services.set(services as i64);
        self.endpoints.set(endpoints as i64);
        self.names.set(names as i64);
        self.serial.set(serial as i64);
        self.changed.set(changed_at as i64);
    }

    pub fn skipped(&self, kind: &str, reason: &str) {
        self.skipped.with_label_values(&[kind, reason]).inc();
    }

    pub fn source_objects(&self, kind: &str, n: usize) {
        self.source_objects.with_label_values(&[kind]).set(n as i64);
    }

    pub fn source_event(&self, kind: &str, kind_of_event: &str) {
        self.source_events
            .with_label_values(&[kind, kind_of_event])
            .inc();
        self.source_last_event.set(crate::zone::now_secs() as i64);
    }

    pub fn source_error(&self, kind: &str) {
        self.source_errors.with_label_values(&[kind]).inc();
    }

    pub fn source_restart(&self, kind: &str) {
        self.source_restarts.with_label_values(&[kind]).inc();
    }

    pub fn source_synced(&self) {
        self.source_last_sync.set(crate::zone::now_secs() as i64);
    }

    /// Records the time from an object change being seen to the zone answering it.
    pub fn programmed(&self, took: std::time::Duration) {
        self.programming.observe(took.as_secs_f64());
    }

    pub fn reload(&self, ok: bool) {
        self.reloads
            .with_label_values(&[if ok { "success" } else { "failure" }])
            .inc();
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        self.collect_workers();
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding cannot fail");
        String::from_utf8(buf).expect("text exposition is UTF-8")
    }
}
