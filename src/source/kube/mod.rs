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

pub use client::{ClientError, DiscoveryError, api_resource, client, discover};
pub use state::{Change, Scope, WatchState};

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

use super::kinds;
use super::policy::Policy;
use crate::metrics::Metrics;
use crate::model::{ObjectKind, Update};

/// Which API server, and what of it is watched (the policy's excluded namespaces are also left
/// out server-side).
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Kubeconfig file; without it, `KUBECONFIG`, `~/.kube/config` or the in-cluster account.
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// Watch only these namespaces (empty: all).
    pub namespaces: Vec<String>,
    /// ServiceImport API version to use instead of discovering it.
    pub import_version: Option<String>,
}

/// Watches until shutdown, sending updates to the zone builder. Retries (with backoff) when the
/// API server cannot be reached, meanwhile the zone keeps its last answers.
pub async fn run(
    config: Config,
    source: super::Config,
    client: kube::Client,
    updates: mpsc::Sender<(Instant, Update)>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let kinds = kinds(&source.selection, config.import_version.as_deref());
    let labels: Vec<ObjectKind> = kinds.iter().map(|k| k.kind()).collect();
    metrics.source_kinds(&labels);
    // What each kind is watched as, at the version the API server serves. A kind whose API is
    // not served is retried (the server is not ready meanwhile).
    let mut watched = Vec::new();
    for kind in &kinds {
        let mut delay = Duration::from_millis(500);
        let resource = loop {
            match discover(&client, kind.as_ref()).await {
                Ok(r) => break r,
                Err(e) => {
                    warn!(retry_in = ?delay, "{e}");
                    metrics.source_error(kind.kind());
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        };
        watched.push((kind.clone(), resource));
    }
    for (kind, r) in &watched {
        info!(kind = %kind.kind(), group = %r.group, version = %r.version, namespaces = ?config.namespaces, "watching");
    }
    let namespaces: Vec<Option<String>> = if config.namespaces.is_empty() {
        vec![None]
    } else {
        config.namespaces.iter().cloned().map(Some).collect()
    };
    let mut scopes = Vec::new();
    let mut streams = Vec::new();
    for ns in &namespaces {
        for (kind, resource) in &watched {
            let mut wc = watcher::Config::default();
            if ns.is_none() && !source.policy.exclude_namespaces.is_empty() {
                // The API server leaves them out: they are neither sent nor held here.
                wc = wc.fields(&excluded_namespaces_selector(&source.policy));
            }
            if let Some(selector) = kind.selector() {
                wc = wc.labels(selector);
            }
            if let Some(page) = kind.page_size() {
                wc = wc.page_size(page);
            }
            let api: Api<DynamicObject> = match ns {
                Some(n) => Api::namespaced_with(client.clone(), n, resource),
                None => Api::all_with(client.clone(), resource),
            };
            let index = scopes.len();
            scopes.push(Scope {
                kind: kind.clone(),
                namespace: ns.clone(),
            });
            let label = kind.kind();
            streams.push(
                watcher::watcher(api, wc)
                    .default_backoff()
                    .map(move |e| (index, label, e))
                    .boxed(),
            );
        }
    }
    let mut state = WatchState::new(scopes, source.policy, metrics.clone());
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
                warn!(%kind, error = %e, "watch failed; retrying with backoff, still serving the last known zone");
                metrics.source_error(kind);
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
