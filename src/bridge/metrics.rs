//! The bridge's metrics and readiness, served on its admin address: `/metrics`, `/health`, and
//! `/ready`, which says what the bridge still waits for (a CRD the API server does not serve,
//! the first full list).

use std::collections::HashMap;
use std::sync::Mutex;

use hyper::{Method, StatusCode};
use prometheus::{Encoder, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};

use super::Key;
use super::export::Condition;

pub struct BridgeMetrics {
    registry: Registry,
    reconciles: IntCounterVec,
    managed: IntGaugeVec,
    conditions: IntGaugeVec,
    leader: IntGauge,
    /// The condition series set for each export, to take away when they change.
    shown: Mutex<HashMap<Key, Vec<[String; 2]>>>,
    /// Why the bridge is not ready yet, if it is not.
    waiting: Mutex<Option<String>>,
}

impl Default for BridgeMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl BridgeMetrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let reconciles = IntCounterVec::new(
            Opts::new(
                "clusterset_dns_bridge_reconciles_total",
                "Exports (or imports) brought up to date, by half and result (success, error: retried).",
            ),
            &["half", "result"],
        )
        .expect("valid metric");
        let managed = IntGaugeVec::new(
            Opts::new(
                "clusterset_dns_bridge_managed",
                "Objects the bridge manages: ServiceExports it reads, Services that carry a label it applied.",
            ),
            &["kind"],
        )
        .expect("valid metric");
        let conditions = IntGaugeVec::new(
            Opts::new(
                "clusterset_dns_bridge_export_condition",
                "1 for each condition the bridge wrote on a ServiceExport, at its status (an export that is not ready: condition=\"Ready\", status!=\"True\").",
            ),
            &["namespace", "serviceexport", "condition", "status"],
        )
        .expect("valid metric");
        let leader = IntGauge::new(
            "clusterset_dns_bridge_leader",
            "1 while this replica holds the bridge's Lease and writes; the others wait with their watches warm.",
        )
        .expect("valid metric");
        for c in [
            Box::new(leader.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(reconciles.clone()),
            Box::new(managed.clone()),
            Box::new(conditions.clone()),
        ] {
            registry.register(c).expect("registered once");
        }
        for result in ["success", "error"] {
            reconciles.with_label_values(&["export", result]);
        }
        for kind in ["ServiceExport", "Service"] {
            managed.with_label_values(&[kind]);
        }
        BridgeMetrics {
            registry,
            reconciles,
            managed,
            conditions,
            leader,
            shown: Mutex::default(),
            waiting: Mutex::new(Some(
                "starting: the Kubernetes API has not answered yet".into(),
            )),
        }
    }

    pub fn leading(&self, on: bool) {
        self.leader.set(i64::from(on));
    }

    pub fn reconciled(&self, ok: bool) {
        let result = if ok { "success" } else { "error" };
        self.reconciles.with_label_values(&["export", result]).inc();
    }

    pub fn managed(&self, exports: usize, labelled: usize) {
        self.managed
            .with_label_values(&["ServiceExport"])
            .set(exports as i64);
        self.managed
            .with_label_values(&["Service"])
            .set(labelled as i64);
    }

    /// The conditions of export `key` are now `conditions` (none: the export is gone).
    pub fn conditions(&self, key: &Key, conditions: &[Condition]) {
        let mut shown = self.shown.lock().expect("not poisoned");
        for [kind, status] in shown.remove(key).unwrap_or_default() {
            let _ = self
                .conditions
                .remove_label_values(&[&key.0, &key.1, &kind, &status]);
        }
        if conditions.is_empty() {
            return;
        }
        let series: Vec<[String; 2]> = conditions
            .iter()
            .map(|c| [c.kind.to_string(), c.status.word().to_string()])
            .collect();
        for [kind, status] in &series {
            self.conditions
                .with_label_values(&[&key.0, &key.1, kind, status])
                .set(1);
        }
        shown.insert(key.clone(), series);
    }

    /// The bridge waits for `why` (None: it is ready).
    pub fn waiting(&self, why: Option<String>) {
        *self.waiting.lock().expect("not poisoned") = why;
    }

    /// The admin server's answer to `method` `path`.
    pub fn route(
        &self,
        method: &Method,
        path: &str,
    ) -> hyper::Response<http_body_util::Full<hyper::body::Bytes>> {
        use crate::admin::reply;
        const TEXT: &str = "text/plain; charset=utf-8";
        if method != Method::GET && method != Method::HEAD {
            return reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, "only GET and HEAD\n");
        }
        match path {
            "/metrics" => {
                let mut buf = Vec::new();
                TextEncoder::new()
                    .encode(&self.registry.gather(), &mut buf)
                    .expect("text encoding cannot fail");
                reply(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    buf,
                )
            }
            "/health" => reply(StatusCode::OK, TEXT, "ok\n"),
            "/ready" => match &*self.waiting.lock().expect("not poisoned") {
                None => reply(StatusCode::OK, TEXT, "ready\n"),
                Some(why) => reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    TEXT,
                    format!("not ready: {why}\n"),
                ),
            },
            _ => reply(
                StatusCode::NOT_FOUND,
                TEXT,
                "not found: try /metrics, /health or /ready\n",
            ),
        }
    }
}
