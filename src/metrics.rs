//! Prometheus metrics. DNS request metrics use CoreDNS's names and labels so existing CoreDNS
//! dashboards work; zone and source metrics carry the `clusterset_dns_` prefix.

use prometheus::{Encoder, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

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
}

/// Query types outside this set are counted as `other`, so label values stay bounded.
pub fn type_label(qtype: u16) -> &'static str {
    match qtype {
        TYPE_A => "A",
        TYPE_AAAA => "AAAA",
        TYPE_NS => "NS",
        TYPE_SOA => "SOA",
        5 => "CNAME",
        12 => "PTR",
        15 => "MX",
        TYPE_TXT => "TXT",
        TYPE_SRV => "SRV",
        TYPE_ANY => "ANY",
        TYPE_AXFR => "AXFR",
        TYPE_IXFR => "IXFR",
        _ => "other",
    }
}

pub fn rcode_label(rcode: u16) -> &'static str {
    match rcode {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        16 => "BADVERS",
        _ => "other",
    }
}

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("metric registered once");
    c
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
            registry: r,
            server,
            zones,
        }
    }

    /// Counts one answered query.
    pub fn answered(&self, outcome: &Outcome, tcp: bool, v6: bool) {
        let zone = outcome.apex.map_or(".", |z| self.zones[z].as_str());
        self.request(zone, tcp, v6, outcome.qtype, outcome.rcode);
    }

    fn request(&self, zone: &str, tcp: bool, v6: bool, qtype: u16, rcode: u16) {
        let proto = if tcp { "tcp" } else { "udp" };
        let family = if v6 { "2" } else { "1" };
        self.requests
            .with_label_values(&[&self.server, zone, "", proto, family, type_label(qtype)])
            .inc();
        self.responses
            .with_label_values(&[&self.server, zone, "", rcode_label(rcode), ""])
            .inc();
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
