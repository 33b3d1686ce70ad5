//! Kubernetes source: watches ServiceImports (`multicluster.x-k8s.io`, the version the API
//! server serves, v1beta1 preferred) and EndpointSlices labelled with
//! `multicluster.kubernetes.io/service-name` (`--source mcs`), and Services labelled
//! `mirror.linkerd.io/mirrored-service=true` (`--source linkerd`), and turns watch events into
//! per-service updates.
//!
//! [`WatchState`] takes tagged watch events and is tested without an API server; [`run`] feeds
//! it from kube-rs watchers; [`client`] makes the client and finds the version to watch.

mod client;
mod state;

pub use client::{
    ClientError, client, import_resource, import_version, service_resource, slice_resource,
};
pub use state::{Change, Kind, Scope, WatchState};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Selection;
use super::linkerd;
use super::object::LABEL_SERVICE_NAME;
use super::policy::Policy;
use crate::metrics::Metrics;
use crate::model::Update;

#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Kubeconfig file; without it, `KUBECONFIG`, `~/.kube/config` or the in-cluster account.
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// Watch only these namespaces (empty: all).
    pub namespaces: Vec<String>,
    /// ServiceImport API version to use instead of discovering it.
    pub import_version: Option<String>,
    /// What imported data may say; its excluded namespaces are also left out server-side.
    pub policy: Policy,
    /// Which objects are watched.
    pub selection: Selection,
}

/// Watches until shutdown, sending updates to the zone builder. Retries (with backoff) when the
/// API server cannot be reached, meanwhile the zone keeps its last answers.
pub async fn run(
    config: Config,
    client: kube::Client,
    updates: mpsc::Sender<(Instant, Update)>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let mut kinds = Vec::new();
    if config.selection.mcs {
        kinds.extend([Kind::Import, Kind::Slice]);
    }
    if config.selection.linkerd.is_some() {
        kinds.push(Kind::Service);
    }
    let labels: Vec<&str> = kinds.iter().map(|k| k.label()).collect();
    metrics.source_kinds(&labels);
    // Only the MCS API needs its CRDs: a Linkerd-only cluster may have none.
    let version = if config.selection.mcs {
        let mut delay = Duration::from_millis(500);
        loop {
            match import_version(&client, config.import_version.as_deref()).await {
                Ok(v) => break Some(v),
                Err(e) => {
                    warn!(retry_in = ?delay, "{e}");
                    metrics.source_error(Kind::Import.label());
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        }
    } else {
        None
    };
    // What each kind is watched as; the ServiceImport at the version found.
    let mut watched = Vec::new();
    if let Some(v) = &version {
        watched.push((Kind::Import, import_resource(v)));
        watched.push((Kind::Slice, slice_resource()));
    }
    if config.selection.linkerd.is_some() {
        watched.push((Kind::Service, service_resource()));
    }
    info!(version = version.as_deref().unwrap_or("-"), namespaces = ?config.namespaces, kinds = ?labels, "watching");
    let namespaces: Vec<Option<String>> = if config.namespaces.is_empty() {
        vec![None]
    } else {
        config.namespaces.iter().cloned().map(Some).collect()
    };
    let mut scopes = Vec::new();
    let mut streams = Vec::new();
    for ns in &namespaces {
        for (kind, resource) in &watched {
            let kind = *kind;
            let mut wc = watcher::Config::default();
            if ns.is_none() && !config.policy.exclude_namespaces.is_empty() {
                // The API server leaves them out: they are neither sent nor held here.
                wc = wc.fields(&excluded_namespaces_selector(&config.policy));
            }
            let wc = match kind {
                Kind::Import => wc,
                // A slice holds up to 1,000 endpoints, and a page is held parsed (as JSON
                // values) while it is read: kube-rs's 500 a page can be hundreds of MB.
                Kind::Slice => wc.labels(LABEL_SERVICE_NAME).page_size(SLICE_PAGE),
                // Only Linkerd's, chosen by the API server.
                Kind::Service => wc.labels(linkerd::SELECTOR),
            };
            let api: Api<DynamicObject> = match ns {
                Some(n) => Api::namespaced_with(client.clone(), n, resource),
                None => Api::all_with(client.clone(), resource),
            };
            let index = scopes.len();
            scopes.push(Scope {
                kind,
                namespace: ns.clone(),
            });
            streams.push(
                watcher::watcher(api, wc)
                    .default_backoff()
                    .map(move |e| (index, kind, e))
                    .boxed(),
            );
        }
    }
    let mut state = WatchState::new(scopes, config.policy.clone(), metrics.clone())
        .with_linkerd(config.selection.linkerd.clone().unwrap_or_default());
    let mut events = futures::stream::select_all(streams);
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return,
            n = events.next() => n,
        };
        let Some((index, kind, event)) = next else {
            warn!("all watches ended");
            return;
        };
        let seen = Instant::now();
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                warn!(kind = kind.label(), error = %e, "watch failed; retrying with backoff, still serving the last known zone");
                metrics.source_error(kind.label());
                continue;
            }
        };
        for change in state.changes(index, event) {
            let update = state.update(change);
            if updates.send((seen, update)).await.is_err() {
                return;
            }
        }
    }
}

/// EndpointSlices asked for in one list request.
const SLICE_PAGE: u32 = 50;

/// A field selector that leaves out the policy's excluded namespaces (every resource, custom
/// ones included, can be selected by `metadata.namespace`).
fn excluded_namespaces_selector(policy: &Policy) -> String {
    policy
        .exclude_namespaces
        .iter()
        .map(|ns| format!("metadata.namespace!={ns}"))
        .collect::<Vec<_>>()
        .join(",")
}
