//! Prometheus metrics. DNS request metrics use CoreDNS's names and labels so existing CoreDNS
//! dashboards work; zone and source metrics carry the `clusterset_dns_` prefix.

mod family;
pub mod query;

pub use family::{Family, ScrapeCollector, Shape};

use std::sync::{Arc, Mutex};

use prometheus::core::Collector;
use prometheus::proto::{MetricFamily, MetricType};
use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

/// Panics of any thread, counted by the panic hook `main` installs (`coredns_panics_total`).
pub static PANICS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub use query::{Answered, QueryCounters, rcode_label, type_label};

use crate::model::{Limit, ObjectKind, Refusal, Skip, WatchEvent};

/// Version, git revision and compiler of this build, for `coredns_build_info`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const REVISION: &str = env!("CLUSTERSET_DNS_REVISION");
pub const RUSTC: &str = env!("CLUSTERSET_DNS_RUSTC");

pub struct Metrics {
    registry: Registry,
    /// Served zones: each worker's counters have a slot for each, then one for `dropped`.
    zones: usize,
    services: IntGauge,
    endpoints: IntGauge,
    names: IntGauge,
    serial: IntGauge,
    changed: IntGauge,
    skipped: IntCounterVec,
    refused_addresses: IntCounterVec,
    reloads: IntCounterVec,
    source_objects: IntGaugeVec,
    source_events: IntCounterVec,
    source_errors: IntCounterVec,
    source_restarts: IntCounterVec,
    source_last_event: IntGauge,
    source_last_sync: IntGauge,
    programming: Histogram,
    limit: IntGaugeVec,
    limit_used: IntGaugeVec,
    refused_updates: IntCounterVec,
    refused_services: IntGaugeVec,
    cluster_info: IntGaugeVec,
    tcp_connections: IntGauge,
    tcp_evicted: prometheus::IntCounter,
    tcp_waits: prometheus::IntCounter,
    tcp_waited: prometheus::Counter,
    /// Every serving worker's query counters, summed at scrape time (by [`query::collect`]).
    workers: Arc<Mutex<Vec<Arc<QueryCounters>>>>,
}

const PANICS_SHAPE: Shape = Shape {
    name: "coredns_panics_total",
    help: "A metrics that counts the number of panics.",
    kind: MetricType::COUNTER,
    labels: &[],
};

/// [`PANICS`] now.
fn panics() -> Vec<MetricFamily> {
    let mut f = Family::new(&PANICS_SHAPE);
    f.counter(&[], PANICS.load(std::sync::atomic::Ordering::Relaxed));
    vec![f.done()]
}

/// A counter of `labels`, registered in `registry` (the bridge's metrics use these too).
pub(crate) fn counter(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("metric registered once");
    c
}

pub(crate) fn gauge_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("metric registered once");
    g
}

/// Registers `metric` (a counter or gauge without labels) and hands it back.
pub(crate) fn registered<M: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: M,
) -> M {
    registry
        .register(Box::new(metric.clone()))
        .expect("metric registered once");
    metric
}

pub(crate) fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    registered(registry, IntGauge::new(name, help).expect("valid metric"))
}

impl Metrics {
    /// `server` is CoreDNS's `server` label, e.g. `dns://0.0.0.0:1053`; `zones` the served
    /// zones' texts, in the zone's apex order.
    pub fn new(server: String, zones: Vec<String>) -> Self {
        let r = Registry::new();
        gauge_vec(
            &r,
            "coredns_build_info",
            "A metric with a constant '1' value labeled by version, revision, and goversion from which CoreDNS was built.",
            &["version", "revision", "goversion"],
        )
        .with_label_values(&[VERSION, REVISION, RUSTC])
        .set(1);
        // process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds, …: what
        // every Prometheus client exports, and the CoreDNS dashboards' CPU and memory panels read.
        r.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))
        .expect("process metrics registered once");
        let m = Metrics {
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
            refused_addresses: counter(
                &r,
                "clusterset_dns_refused_addresses_total",
                "Addresses in imported objects that are never answered (loopback, link_local, metadata, denied, not_allowed, ...), by kind and reason.",
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
            limit: gauge_vec(
                &r,
                "clusterset_dns_limit",
                "The zone's budget: --max-endpoints-per-service (endpoints_per_service) and --max-zone-names (zone_names).",
                &["limit"],
            ),
            limit_used: gauge_vec(
                &r,
                "clusterset_dns_limit_used",
                "What the zone uses of each budget: the most ready endpoints of a served service, and the names the services own.",
                &["limit"],
            ),
            refused_updates: counter(
                &r,
                "clusterset_dns_refused_updates_total",
                "Services refused by the zone's budget (logged once each), by limit; served ones keep their last accepted answers.",
                &["limit"],
            ),
            refused_services: gauge_vec(
                &r,
                "clusterset_dns_refused_services",
                "Services the zone's budget holds back now, by limit.",
                &["limit"],
            ),
            cluster_info: gauge_vec(
                &r,
                "clusterset_dns_cluster_info",
                "The server's own cluster id (--cluster-id, else the ClusterProperty cluster.clusterset.k8s.io): 1 while one is known.",
                &["cluster_id"],
            ),
            tcp_connections: gauge(
                &r,
                "clusterset_dns_tcp_connections",
                "DNS-over-TCP connections open now.",
            ),
            tcp_evicted: registered(
                &r,
                prometheus::IntCounter::new(
                    "clusterset_dns_tcp_connections_evicted_total",
                    "TCP connections closed at the connection cap to make room for a new one (the longest-idle goes).",
                )
                .expect("valid metric"),
            ),
            tcp_waits: registered(
                &r,
                prometheus::IntCounter::new(
                    "clusterset_dns_tcp_coalesce_waits_total",
                    "Times a TCP worker waited after answering, so that the queries arriving meanwhile are answered in one wake-up (--tcp-coalesce).",
                )
                .expect("valid metric"),
            ),
            tcp_waited: registered(
                &r,
                prometheus::Counter::new(
                    "clusterset_dns_tcp_coalesce_wait_seconds_total",
                    "Time TCP workers asked to wait in those waits; over the waits, the mean wait (a query arriving during one waits for its rest).",
                )
                .expect("valid metric"),
            ),
            registry: r,
            zones: zones.len(),
            workers: Arc::default(),
        };
        let workers = m.workers.clone();
        m.register(Box::new(ScrapeCollector::new(&query::SHAPES, move || {
            query::collect(&workers, &server, &zones)
        })));
        m.register(Box::new(ScrapeCollector::new(&[&PANICS_SHAPE], panics)));
        // Every label set known in advance starts at 0 (Prometheus's advice): a counter that
        // first appears at 1 shows no increase, so an alert on increase() would miss the first
        // object skipped, and a dashboard would show no data instead of none skipped.
        for kind in ObjectKind::ALL {
            m.skipped
                .with_label_values(&[kind.label(), Skip::Malformed.label()]);
            for reason in Refusal::ALL {
                m.refused_addresses
                    .with_label_values(&[kind.label(), reason.label()]);
            }
        }
        for origin in [ObjectKind::ServiceImport, ObjectKind::Service] {
            m.skipped
                .with_label_values(&[origin.label(), Skip::NameTooLong.label()]);
        }
        m
    }

    /// The Kubernetes source watches `kinds`: their error and restart counters start at 0.
    pub fn source_kinds(&self, kinds: &[ObjectKind]) {
        for kind in kinds {
            self.source_errors.with_label_values(&[kind.label()]);
            self.source_restarts.with_label_values(&[kind.label()]);
        }
    }

    /// Adds metrics that `collector` reports at every scrape (the XDP sockets').
    pub fn register(&self, collector: Box<dyn Collector>) {
        self.registry
            .register(collector)
            .expect("a collector's metrics registered once");
    }

    /// Counters for one more serving worker, written by one thread only.
    pub fn counters(&self) -> Arc<QueryCounters> {
        self.new_counters(false)
    }

    /// Counters that several threads write (the TCP connections).
    pub fn shared_counters(&self) -> Arc<QueryCounters> {
        self.new_counters(true)
    }

    fn new_counters(&self, shared: bool) -> Arc<QueryCounters> {
        let c = Arc::new(QueryCounters::new(self.zones, shared));
        self.workers.lock().expect("metrics lock").push(c.clone());
        c
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

    /// The configured budget of `limit` (`usize::MAX`, none, shows as the largest gauge value).
    pub fn limit(&self, limit: Limit, n: usize) {
        self.limit
            .with_label_values(&[limit.label()])
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// What the zone uses of `limit`, and how many services it holds back.
    pub fn limit_used(&self, limit: Limit, used: usize, held: usize) {
        self.limit_used
            .with_label_values(&[limit.label()])
            .set(used as i64);
        self.refused_services
            .with_label_values(&[limit.label()])
            .set(held as i64);
    }

    pub fn refused_update(&self, limit: Limit) {
        self.refused_updates
            .with_label_values(&[limit.label()])
            .inc();
    }

    pub fn skipped(&self, kind: ObjectKind, reason: Skip) {
        self.skipped
            .with_label_values(&[kind.label(), reason.label()])
            .inc();
    }

    pub fn refused_address(&self, kind: ObjectKind, reason: Refusal) {
        self.refused_addresses
            .with_label_values(&[kind.label(), reason.label()])
            .inc();
    }

    pub fn source_objects(&self, kind: ObjectKind, n: usize) {
        self.source_objects
            .with_label_values(&[kind.label()])
            .set(n as i64);
    }

    pub fn source_event(&self, kind: ObjectKind, event: WatchEvent) {
        self.source_events
            .with_label_values(&[kind.label(), event.label()])
            .inc();
        self.source_last_event.set(crate::clock::unix_now() as i64);
    }

    pub fn source_error(&self, kind: ObjectKind) {
        self.source_errors.with_label_values(&[kind.label()]).inc();
    }

    pub fn source_restart(&self, kind: ObjectKind) {
        self.source_restarts
            .with_label_values(&[kind.label()])
            .inc();
    }

    pub fn source_synced(&self) {
        self.source_last_sync.set(crate::clock::unix_now() as i64);
    }

    /// The server's own cluster id, `clusterset_dns_cluster_info{cluster_id}` 1 while known.
    pub fn own_cluster(&self, id: Option<&str>) {
        self.cluster_info.reset();
        if let Some(id) = id {
            self.cluster_info.with_label_values(&[id]).set(1);
        }
    }

    pub fn tcp_open(&self, delta: i64) {
        self.tcp_connections.add(delta);
    }

    pub fn tcp_evicted(&self) {
        self.tcp_evicted.inc();
    }

    /// A TCP worker waited `d` before parking (`--tcp-coalesce`).
    pub fn tcp_waited(&self, d: std::time::Duration) {
        self.tcp_waits.inc();
        self.tcp_waited.inc_by(d.as_secs_f64());
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
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding cannot fail");
        String::from_utf8(buf).expect("text exposition is UTF-8")
    }
}
