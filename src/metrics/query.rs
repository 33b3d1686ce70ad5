//! Per-query metrics with CoreDNS's names, labels and buckets (plugin/metrics in CoreDNS
//! v1.15.0): counted by each serving worker into its own [`QueryCounters`] with relaxed atomic adds,
//! and summed over the workers only when `/metrics` is scraped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::proto::{MetricFamily, MetricType};

use super::family::{Family, Shape};
use crate::wire::{rcode_name, type_name};

/// Query types with their own `type` label value, as CoreDNS's `monitorType` (in its order);
/// the rest are `other`, so label values stay bounded.
const TYPES: [u16; 19] = [
    1, 28, 5, 48, 43, 15, 50, 47, 2, 12, 46, 6, 33, 16, 65, 64, 251, 252, 255,
];

/// Response codes this server sends, each its own slot; anything else would be `RCODE<n>` as in
/// CoreDNS.
const RCODES: [u16; 7] = [0, 1, 2, 3, 4, 5, 16];

/// CoreDNS's `plugin.TimeBuckets`: 0.25 ms doubling 16 times, to 8.192 s.
const TIME_BUCKETS: usize = 16;
const TIME_BASE_NS: u64 = 250_000;
/// CoreDNS's request and response size buckets, in bytes.
const SIZE_BUCKETS: [u64; 14] = [
    0, 100, 200, 300, 400, 511, 1023, 2047, 4095, 8291, 16_000, 32_000, 48_000, 64_000,
];

const N_TYPES: usize = TYPES.len() + 1;
const N_RCODES: usize = RCODES.len() + 1;
const N_TIME: usize = TIME_BUCKETS + 1;
const N_SIZE: usize = SIZE_BUCKETS.len() + 1;

fn type_index(qtype: u16) -> usize {
    TYPES
        .iter()
        .position(|t| *t == qtype)
        .unwrap_or(TYPES.len())
}

fn rcode_index(rcode: u16) -> usize {
    RCODES
        .iter()
        .position(|r| *r == rcode)
        .unwrap_or(RCODES.len())
}

/// The `type` label of query type `qtype`: its mnemonic, or `other`.
pub fn type_label(qtype: u16) -> &'static str {
    TYPES
        .get(type_index(qtype))
        .and_then(|t| type_name(*t))
        .unwrap_or("other")
}

/// The `rcode` label of response code `rcode`: its mnemonic, or `RCODE<n>`.
pub fn rcode_label(rcode: u16) -> String {
    rcode_name(rcode).map_or_else(|| format!("RCODE{rcode}"), str::to_string)
}

/// Index of the duration bucket (non-cumulative) that `ns` falls in; `TIME_BUCKETS` is +Inf.
fn time_bucket(ns: u64) -> usize {
    // Bucket k holds ns <= 250 µs · 2^k, i.e. ceil(ns / 250 µs) <= 2^k.
    let q = ns.div_ceil(TIME_BASE_NS);
    let k = if q <= 1 {
        0
    } else {
        (64 - (q - 1).leading_zeros()) as usize
    };
    k.min(TIME_BUCKETS)
}

fn size_bucket(bytes: u64) -> usize {
    SIZE_BUCKETS
        .iter()
        .position(|&b| bytes <= b)
        .unwrap_or(SIZE_BUCKETS.len())
}

fn zeros(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

/// Query counters of one serving worker (or of all TCP connections), by zone slot: the served
/// zones in order, then "dropped" (queries in no served zone, or unreadable).
pub struct QueryCounters {
    zones: usize,
    /// Written by several threads (the TCP tasks): read-modify-write adds. Otherwise one
    /// thread writes, and a plain load and store (no locked instruction) is enough.
    shared: bool,
    /// slot × proto × family × type.
    requests: Box<[AtomicU64]>,
    /// slot × rcode.
    responses: Box<[AtomicU64]>,
    /// slot.
    do_requests: Box<[AtomicU64]>,
    /// slot × bucket, then the sums in ns by slot.
    duration: Box<[AtomicU64]>,
    duration_ns: Box<[AtomicU64]>,
    /// slot × proto × bucket, then the sums by slot × proto.
    request_size: Box<[AtomicU64]>,
    request_bytes: Box<[AtomicU64]>,
    response_size: Box<[AtomicU64]>,
    response_bytes: Box<[AtomicU64]>,
}

/// One answered query, as the metrics see it.
#[derive(Debug, Clone, Copy)]
pub struct Answered {
    /// Index of the served zone the question is in; `None` counts under `dropped`.
    pub zone: Option<usize>,
    pub qtype: u16,
    /// Full (extended) response code.
    pub rcode: u16,
    pub dnssec_ok: bool,
    pub tcp: bool,
    pub v6: bool,
    pub request_len: usize,
    pub response_len: usize,
    pub took: Duration,
}

impl QueryCounters {
    pub(super) fn new(zones: usize, shared: bool) -> Self {
        let slots = zones + 1;
        QueryCounters {
            zones,
            shared,
            requests: zeros(slots * 4 * N_TYPES),
            responses: zeros(slots * N_RCODES),
            do_requests: zeros(slots),
            duration: zeros(slots * N_TIME),
            duration_ns: zeros(slots),
            request_size: zeros(slots * 2 * N_SIZE),
            request_bytes: zeros(slots * 2),
            response_size: zeros(slots * 2 * N_SIZE),
            response_bytes: zeros(slots * 2),
        }
    }

    #[inline]
    fn add(&self, c: &AtomicU64, n: u64) {
        if self.shared {
            c.fetch_add(n, Ordering::Relaxed);
        } else {
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        }
    }

    /// Counts one answered query.
    #[inline]
    pub fn count(&self, a: Answered) {
        let slot = a.zone.unwrap_or(self.zones);
        let proto = slot * 2 + a.tcp as usize;
        self.add(
            &self.requests[(proto * 2 + a.v6 as usize) * N_TYPES + type_index(a.qtype)],
            1,
        );
        self.add(&self.responses[slot * N_RCODES + rcode_index(a.rcode)], 1);
        if a.dnssec_ok {
            self.add(&self.do_requests[slot], 1);
        }
        let ns = a.took.as_nanos().min(u64::MAX as u128) as u64;
        self.add(&self.duration[slot * N_TIME + time_bucket(ns)], 1);
        self.add(&self.duration_ns[slot], ns);
        let (req, resp) = (a.request_len as u64, a.response_len as u64);
        self.add(&self.request_size[proto * N_SIZE + size_bucket(req)], 1);
        self.add(&self.request_bytes[proto], req);
        self.add(&self.response_size[proto * N_SIZE + size_bucket(resp)], 1);
        self.add(&self.response_bytes[proto], resp);
    }
}

/// Sums of every worker's counters at one moment.
struct Totals {
    requests: Vec<u64>,
    responses: Vec<u64>,
    do_requests: Vec<u64>,
    duration: Vec<u64>,
    duration_ns: Vec<u64>,
    request_size: Vec<u64>,
    request_bytes: Vec<u64>,
    response_size: Vec<u64>,
    response_bytes: Vec<u64>,
}

fn sum(workers: &[Arc<QueryCounters>], get: fn(&QueryCounters) -> &[AtomicU64]) -> Vec<u64> {
    let mut total = Vec::new();
    for w in workers {
        let c = get(w);
        total.resize(c.len(), 0);
        for (t, v) in total.iter_mut().zip(c) {
            *t += v.load(Ordering::Relaxed);
        }
    }
    total
}

const REQUESTS: Shape = Shape {
    name: "coredns_dns_requests_total",
    help: "Counter of DNS requests made per zone, protocol and family.",
    kind: MetricType::COUNTER,
    labels: &["server", "zone", "view", "proto", "family", "type"],
};
const RESPONSES: Shape = Shape {
    name: "coredns_dns_responses_total",
    help: "Counter of response status codes.",
    kind: MetricType::COUNTER,
    labels: &["server", "zone", "view", "rcode", "plugin"],
};
const DO_REQUESTS: Shape = Shape {
    name: "coredns_dns_do_requests_total",
    help: "Counter of DNS requests with DO bit set per zone.",
    kind: MetricType::COUNTER,
    labels: &["server", "zone", "view"],
};
const DURATION: Shape = Shape {
    name: "coredns_dns_request_duration_seconds",
    help: "Histogram of the time (in seconds) each request took per zone.",
    kind: MetricType::HISTOGRAM,
    labels: &["server", "zone", "view"],
};
const REQUEST_SIZE: Shape = Shape {
    name: "coredns_dns_request_size_bytes",
    help: "Size of the EDNS0 UDP buffer in bytes (64K for TCP) per zone and protocol.",
    kind: MetricType::HISTOGRAM,
    labels: &["server", "zone", "view", "proto"],
};
const RESPONSE_SIZE: Shape = Shape {
    name: "coredns_dns_response_size_bytes",
    help: "Size of the returned response in bytes.",
    kind: MetricType::HISTOGRAM,
    labels: &["server", "zone", "view", "proto"],
};

/// The families [`collect`] builds.
pub(super) const SHAPES: [&Shape; 6] = [
    &REQUESTS,
    &RESPONSES,
    &DO_REQUESTS,
    &DURATION,
    &REQUEST_SIZE,
    &RESPONSE_SIZE,
];

/// The per-query metrics of every serving worker, summed now. `server` and `zones` are label
/// values; series appear once they have counted something, as in CoreDNS.
pub(super) fn collect(
    workers: &Mutex<Vec<Arc<QueryCounters>>>,
    server: &str,
    zones: &[String],
) -> Vec<MetricFamily> {
    let workers = workers.lock().expect("metrics lock").clone();
    let t = Totals {
        requests: sum(&workers, |c| &c.requests),
        responses: sum(&workers, |c| &c.responses),
        do_requests: sum(&workers, |c| &c.do_requests),
        duration: sum(&workers, |c| &c.duration),
        duration_ns: sum(&workers, |c| &c.duration_ns),
        request_size: sum(&workers, |c| &c.request_size),
        request_bytes: sum(&workers, |c| &c.request_bytes),
        response_size: sum(&workers, |c| &c.response_size),
        response_bytes: sum(&workers, |c| &c.response_bytes),
    };
    let zone = |slot: usize| zones.get(slot).map_or("dropped", String::as_str);
    let proto = |p: usize| if p == 1 { "tcp" } else { "udp" };
    let mut out = Vec::new();

    let mut f = Family::new(&REQUESTS);
    for (i, &n) in t.requests.iter().enumerate().filter(|(_, n)| **n > 0) {
        let (ty, rest) = (i % N_TYPES, i / N_TYPES);
        let (v6, rest) = (rest % 2, rest / 2);
        let (p, slot) = (rest % 2, rest / 2);
        let family = if v6 == 1 { "2" } else { "1" };
        let ty = TYPES.get(ty).map_or("other", |t| type_label(*t));
        f.counter(&[server, zone(slot), "", proto(p), family, ty], n);
    }
    out.push(f.done());

    let mut f = Family::new(&RESPONSES);
    for (i, &n) in t.responses.iter().enumerate().filter(|(_, n)| **n > 0) {
        let rcode = RCODES
            .get(i % N_RCODES)
            .and_then(|r| rcode_name(*r))
            .unwrap_or("other");
        f.counter(&[server, zone(i / N_RCODES), "", rcode, ""], n);
    }
    out.push(f.done());

    let mut f = Family::new(&DO_REQUESTS);
    for (slot, &n) in t.do_requests.iter().enumerate().filter(|(_, n)| **n > 0) {
        f.counter(&[server, zone(slot), ""], n);
    }
    out.push(f.done());

    let mut f = Family::new(&DURATION);
    let bounds: Vec<f64> = (0..TIME_BUCKETS)
        .map(|k| (TIME_BASE_NS << k) as f64 / 1e9)
        .collect();
    for (slot, (counts, &ns)) in t.duration.chunks(N_TIME).zip(&t.duration_ns).enumerate() {
        if counts.iter().any(|&c| c > 0) {
            f.histogram(&[server, zone(slot), ""], &bounds, counts, ns as f64 / 1e9);
        }
    }
    out.push(f.done());

    let bounds: Vec<f64> = SIZE_BUCKETS.iter().map(|&b| b as f64).collect();
    for (shape, sizes, bytes) in [
        (&REQUEST_SIZE, &t.request_size, &t.request_bytes),
        (&RESPONSE_SIZE, &t.response_size, &t.response_bytes),
    ] {
        let mut f = Family::new(shape);
        for (sp, (counts, &sum)) in sizes.chunks(N_SIZE).zip(bytes).enumerate() {
            if counts.iter().any(|&c| c > 0) {
                let labels = [server, zone(sp / 2), "", proto(sp % 2)];
                f.histogram(&labels, &bounds, counts, sum as f64);
            }
        }
        out.push(f.done());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_buckets_match_coredns_bounds() {
        assert_eq!(time_bucket(0), 0);
        assert_eq!(time_bucket(250_000), 0);
        assert_eq!(time_bucket(250_001), 1);
        assert_eq!(time_bucket(500_000), 1);
        assert_eq!(time_bucket(500_001), 2);
        assert_eq!(time_bucket(8_192_000_000), 15);
        assert_eq!(time_bucket(8_192_000_001), 16);
        assert_eq!(time_bucket(u64::MAX), 16);
    }

    #[test]
    fn size_buckets_are_inclusive_upper_bounds() {
        assert_eq!(size_bucket(0), 0);
        assert_eq!(size_bucket(1), 1);
        assert_eq!(size_bucket(100), 1);
        assert_eq!(size_bucket(511), 5);
        assert_eq!(size_bucket(512), 6);
        assert_eq!(size_bucket(64_000), 13);
        assert_eq!(size_bucket(65_535), 14);
    }

    #[test]
    fn labels_stay_bounded() {
        assert_eq!(type_label(1), "A");
        assert_eq!(type_label(65), "HTTPS");
        assert_eq!(type_label(99), "other");
        assert_eq!(rcode_label(3), "NXDOMAIN");
        assert_eq!(rcode_label(9), "RCODE9");
    }
}
