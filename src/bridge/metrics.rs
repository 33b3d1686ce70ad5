//! The bridge's metrics and readiness, served on its admin address: `/metrics`, `/health`, and
//! `/ready`, which says what the bridge still waits for (a CRD the API server does not serve,
//! the first full list).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use hyper::Method;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Registry,
    TextEncoder,
};

use super::model::Condition;
use super::runtime::Key;
use super::runtime::runner::Timing;

/// `clusterset_dns_bridge_export_condition`: written straight as text at each scrape (one
/// line a condition), not built as a family of the `prometheus` crate, whose series are each
/// their own objects (docs/performance.md has what those held).
const CONDITION: &str = "clusterset_dns_bridge_export_condition";
const CONDITION_HELP: &str = "1 for each condition the bridge wrote on a ServiceExport, at its status (an export that is not ready: condition=\"Ready\", status!=\"True\").";

/// Each export's conditions, as (type, status).
type Shown = HashMap<Key, Vec<[&'static str; 2]>>;

pub struct BridgeMetrics {
    registry: Registry,
    reconciles: IntCounterVec,
    queued: HistogramVec,
    worked: HistogramVec,
    managed: IntGaugeVec,
    /// Each export's conditions (type, status), written at each scrape as [`CONDITION`]'s
    /// series.
    conditions: Mutex<Shown>,
    leader: IntGauge,
    not_taken_over: IntGaugeVec,
    unusable: IntGauge,
    refused: IntGauge,
    left_out: IntGaugeVec,
    linked: IntGaugeVec,
    own_id: IntGauge,
    /// Why each half is not ready yet, if it is not.
    waiting: Mutex<BTreeMap<&'static str, String>>,
}

impl Default for BridgeMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl BridgeMetrics {
    pub fn new() -> Self {
        use crate::metrics::{counter, gauge, gauge_vec, registered};
        let r = Registry::new();
        // From a millisecond (a judgement with nothing to write) to ten seconds (a key behind
        // a whole resync, or an API server that is slow to answer).
        let histogram = |name: &str, help: &str| {
            let buckets = vec![
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ];
            let opts = HistogramOpts::new(name, help).buckets(buckets);
            registered(
                &r,
                HistogramVec::new(opts, &["half"]).expect("valid metric"),
            )
        };
        let m = BridgeMetrics {
            registry: r.clone(),
            reconciles: counter(
                &r,
                "clusterset_dns_bridge_reconciles_total",
                "Exports (or imports) brought up to date, by half and result (success, error: retried).",
                &["half", "result"],
            ),
            queued: histogram(
                "clusterset_dns_bridge_queue_duration_seconds",
                "How long a key (an export, or an import's service) waited from a watch event, or a resync, saying it may need work to its reconcile starting, by half (client-go's workqueue_queue_duration_seconds).",
            ),
            worked: histogram(
                "clusterset_dns_bridge_reconcile_duration_seconds",
                "How long bringing one key up to date took, judging and writing, by half (client-go's workqueue_work_duration_seconds).",
            ),
            managed: gauge_vec(
                &r,
                "clusterset_dns_bridge_managed",
                "Objects the bridge manages: ServiceExports it reads, Services that carry a label it applied, ServiceImports and EndpointSlices it wrote.",
                &["kind"],
            ),
            conditions: Mutex::default(),
            leader: gauge(
                &r,
                "clusterset_dns_bridge_leader",
                "1 while this replica holds the bridge's Lease and writes; the others wait with their watches warm.",
            ),
            not_taken_over: gauge_vec(
                &r,
                "clusterset_dns_bridge_not_taken_over",
                "Objects the import half would write but someone else created (another MCS implementation, a person): left as they are.",
                &["kind"],
            ),
            unusable: gauge(
                &r,
                "clusterset_dns_bridge_unusable_objects",
                "Services written by Linkerd's service mirror that the import half cannot use (each named in an Event and the log).",
            ),
            refused: gauge(
                &r,
                "clusterset_dns_bridge_refused_endpoints",
                "Endpoints of exporting clusters left out of the import half's EndpointSlices because their address is refused (loopback, link-local, metadata, multicast, --deny-cidr, outside --allow-cidr; each import's in an Event and the log).",
            ),
            left_out: gauge_vec(
                &r,
                "clusterset_dns_bridge_left_out_objects",
                "Objects a linked cluster's last full list had beyond --max-objects-per-link, by Link (its namespace and name): left out of the bridge's stores (its exports are then read in part; listed again within 30 s of a change that may alter this).",
                &["namespace", "link"],
            ),
            linked: gauge_vec(
                &r,
                "clusterset_dns_bridge_linked_clusters",
                "Linked clusters by whether their exports are read through their Link's credentials (read) or not (unread: judged from Linkerd's objects here, why in the log and the exports' Conflict messages).",
                &["state"],
            ),
            own_id: gauge(
                &r,
                "clusterset_dns_bridge_cluster_id_known",
                "1 when this cluster has an id (its ClusterProperty cluster.clusterset.k8s.io, or --cluster-id); 0 leaves its own exports out of its own imports.",
            ),
            waiting: Mutex::new(BTreeMap::from([(
                "bridge",
                "starting: the Kubernetes API has not answered yet".into(),
            )])),
        };
        for half in ["export", "import"] {
            for result in ["success", "error"] {
                m.reconciles.with_label_values(&[half, result]);
            }
            m.queued.with_label_values(&[half]);
            m.worked.with_label_values(&[half]);
        }
        for kind in ["ServiceExport", "Service", "ServiceImport", "EndpointSlice"] {
            m.managed.with_label_values(&[kind]);
        }
        for kind in ["ServiceImport", "EndpointSlice"] {
            m.not_taken_over.with_label_values(&[kind]);
        }
        for state in ["read", "unread"] {
            m.linked.with_label_values(&[state]);
        }
        m
    }

    /// The linked clusters whose exports are read and not, and whether this one has an id.
    pub fn clusters(&self, read: usize, unread: usize, own_id: bool) {
        for (state, n) in [("read", read), ("unread", unread)] {
            self.linked.with_label_values(&[state]).set(n as i64);
        }
        self.own_id.set(i64::from(own_id));
    }

    /// How many objects Link `link`'s cluster's last list had beyond the limit (None: the Link
    /// is gone, and its series with it).
    pub fn left_out(&self, link: &Key, n: Option<usize>) {
        let link = [link.0.as_str(), link.1.as_str()];
        match n {
            Some(n) => self.left_out.with_label_values(&link).set(n as i64),
            None => {
                // Absent already when nothing was listed: nothing to take away.
                let _ = self.left_out.remove_label_values(&link);
            }
        }
    }

    pub fn leading(&self, on: bool) {
        self.leader.set(i64::from(on));
    }

    /// One run of one of `half`'s keys: its result and how long it waited and took.
    pub fn reconciled(&self, half: &str, ok: bool, timing: Timing) {
        let result = if ok { "success" } else { "error" };
        self.reconciles.with_label_values(&[half, result]).inc();
        if let Some(waited) = timing.waited {
            self.queued
                .with_label_values(&[half])
                .observe(waited.as_secs_f64());
        }
        self.worked
            .with_label_values(&[half])
            .observe(timing.worked.as_secs_f64());
    }

    /// The import half's objects: ServiceImports and EndpointSlices it wrote, those it left to
    /// whoever created them, Linkerd's Services it could not use, and the endpoints it refused.
    pub fn imports(&self, mine: [usize; 2], foreign: [usize; 2], unusable: usize, refused: usize) {
        for (i, kind) in ["ServiceImport", "EndpointSlice"].into_iter().enumerate() {
            self.managed.with_label_values(&[kind]).set(mine[i] as i64);
            self.not_taken_over
                .with_label_values(&[kind])
                .set(foreign[i] as i64);
        }
        self.unusable.set(unusable as i64);
        self.refused.set(refused as i64);
    }

    pub fn managed(&self, exports: usize, labelled: usize) {
        for (kind, n) in [("ServiceExport", exports), ("Service", labelled)] {
            self.managed.with_label_values(&[kind]).set(n as i64);
        }
    }

    /// The conditions of export `key` are now `conditions` (none: the export is gone).
    pub fn conditions(&self, key: &Key, conditions: &[Condition]) {
        let mut shown = self.conditions.lock().expect("not poisoned");
        if conditions.is_empty() {
            shown.remove(key);
            return;
        }
        let series = conditions
            .iter()
            .map(|c| [c.kind, c.status.word()])
            .collect();
        shown.insert(key.clone(), series);
    }

    /// The [`CONDITION`] family in Prometheus' text format, its series sorted; nothing when
    /// no export has conditions (as the `prometheus` crate leaves out an empty family).
    fn write_conditions(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        let shown = self.conditions.lock().expect("not poisoned");
        if shown.is_empty() {
            return;
        }
        let mut keys: Vec<&Key> = shown.keys().collect();
        keys.sort_unstable();
        let help = CONDITION_HELP.replace('\\', "\\\\");
        let _ = writeln!(out, "# HELP {CONDITION} {help}\n# TYPE {CONDITION} gauge");
        for key in keys {
            let (ns, name) = (label_value(&key.0), label_value(&key.1));
            for [kind, status] in &shown[key] {
                let _ = writeln!(
                    out,
                    "{CONDITION}{{namespace=\"{ns}\",serviceexport=\"{name}\",condition=\"{kind}\",status=\"{status}\"}} 1"
                );
            }
        }
    }

    /// Half `half` waits for `why` (None: it is ready). The bridge is ready when no half
    /// waits.
    pub fn waiting(&self, half: &'static str, why: Option<String>) {
        let mut waiting = self.waiting.lock().expect("not poisoned");
        waiting.remove("bridge");
        match why {
            Some(why) => waiting.insert(half, why),
            None => waiting.remove(half),
        };
    }

    /// The admin server's answer to `method` `path`.
    pub fn route(
        &self,
        method: &Method,
        path: &str,
    ) -> hyper::Response<http_body_util::Full<hyper::body::Bytes>> {
        let ready = || {
            let waiting = self.waiting.lock().expect("not poisoned");
            let why: Vec<String> = (waiting.iter())
                .map(|(half, why)| match *half {
                    "bridge" => why.clone(),
                    half => format!("{half} half: {why}"),
                })
                .collect();
            (!why.is_empty())
                .then(|| why.join("; "))
                .map_or(Ok(()), Err)
        };
        let metrics = || {
            let mut buf = Vec::new();
            TextEncoder::new()
                .encode(&self.registry.gather(), &mut buf)
                .expect("text encoding cannot fail");
            self.write_conditions(&mut buf);
            buf
        };
        crate::admin::answer(method, path, metrics, ready)
    }
}

/// `v` as a label value of the text format: backslash, double quote and line feed escaped.
fn label_value(v: &str) -> std::borrow::Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return v.into();
    }
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
        .into()
}

#[cfg(test)]
mod tests;
