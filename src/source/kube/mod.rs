//! Kubernetes source: watches each kind [`super::kinds`] lists for the selection (at the first
//! of its versions the API server serves, with its label selector), per `--namespace` or
//! cluster-wide, and turns watch events into per-service updates.
//!
//! [`WatchState`] takes tagged watch events and is tested without an API server; [`run`] feeds
//! it from kube-rs watchers; [`client`](mod@client) makes the client and finds the version to watch.

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
use tracing::{debug, info, warn};

use super::policy::Policy;
use super::{AnyKind, kinds};
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
    // What each kind is watched as, at the version the API server serves. A required kind
    // whose API is not served is retried (the server is not ready meanwhile); an optional one
    // (the ClusterProperty) is looked for again every OPTIONAL_RECHECK, quietly.
    let mut watched = Vec::new();
    let mut pending = Vec::new();
    for kind in &kinds {
        if kind.on_demand() {
            // Watched once the store wants it (looked at after every event).
            pending.push(kind.clone());
            continue;
        }
        if !kind.resource().required {
            match look_for(&client, kind).await {
                Some(r) => watched.push((kind.clone(), r)),
                None => pending.push(kind.clone()),
            }
            continue;
        }
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
    let watches = Watches {
        client: &client,
        config: &config,
        policy: &source.policy,
    };
    let mut scopes = Vec::new();
    let mut streams = Vec::new();
    for (kind, resource) in &watched {
        for (scope, stream) in watches.of(kind, resource) {
            let index = scopes.len();
            scopes.push(scope);
            streams.push(stream.map(move |e| (index, e)).boxed());
        }
    }
    let mut state = WatchState::new(scopes, source.policy.clone(), metrics.clone())
        .with_kinds(&kinds, source.selection.cluster_id.clone());
    let mut events = futures::stream::select_all(streams);
    let mut recheck = tokio::time::interval(OPTIONAL_RECHECK);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return,
            n = events.next(), if !events.is_empty() => n,
            _ = recheck.tick(), if !pending.is_empty() => {
                let mut still = Vec::new();
                for kind in pending.drain(..) {
                    if kind.on_demand() {
                        still.push(kind);
                        continue;
                    }
                    let Some(resource) = look_for(&client, &kind).await else {
                        still.push(kind);
                        continue;
                    };
                    info!(kind = %kind.kind(), "now served");
                    watches.add(&kind, &resource, &mut state, &mut events);
                }
                pending = still;
                continue;
            }
        };
        let Some((index, event)) = next else {
            warn!("all watches ended");
            return;
        };
        let kind = state.kind(index);
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
        // A kind watched on demand, wanted now: its watch starts (its API is the one of a
        // kind watched already, so no discovery waits).
        while let Some(at) = pending
            .iter()
            .position(|k| k.on_demand() && state.wants(k.kind()))
        {
            let kind = pending.remove(at);
            let Some(resource) = look_for(&client, &kind).await else {
                warn!(kind = %kind.kind(), "wanted but not served; not watched");
                continue;
            };
            info!(kind = %kind.kind(), "wanted now: watching");
            watches.add(&kind, &resource, &mut state, &mut events);
        }
    }
}

/// An optional kind's resource if the API server serves it; not being served is normal (its CRD
/// may never be installed), so it is said at debug only.
async fn look_for(
    client: &kube::Client,
    kind: &Arc<dyn AnyKind>,
) -> Option<kube::discovery::ApiResource> {
    discover(client, kind.as_ref())
        .await
        .map_err(|e| debug!(kind = %kind.kind(), "not watched until it is served: {e}"))
        .ok()
}

/// How often an optional kind whose API is not served is looked for again.
const OPTIONAL_RECHECK: Duration = Duration::from_secs(10);

/// What every watch is made from.
struct Watches<'a> {
    client: &'a kube::Client,
    config: &'a Config,
    policy: &'a Policy,
}

type EventStream =
    futures::stream::BoxStream<'static, Result<watcher::Event<DynamicObject>, watcher::Error>>;

impl Watches<'_> {
    /// Starts the watches of `kind` at `resource` after the first ones: their streams join
    /// `events`, tagged with their index in `state`.
    fn add(
        &self,
        kind: &Arc<dyn AnyKind>,
        resource: &kube::discovery::ApiResource,
        state: &mut WatchState,
        events: &mut futures::stream::SelectAll<
            futures::stream::BoxStream<'static, (usize, <EventStream as futures::Stream>::Item)>,
        >,
    ) {
        for (scope, stream) in self.of(kind, resource) {
            let index = state.add_stream(scope);
            events.push(stream.map(move |e| (index, e)).boxed());
        }
    }

    /// The watches of `kind` at `resource`: one per `--namespace` (or one of all namespaces),
    /// or one for a cluster-scoped kind.
    fn of(
        &self,
        kind: &Arc<dyn AnyKind>,
        resource: &kube::discovery::ApiResource,
    ) -> Vec<(Scope, EventStream)> {
        let namespaced = kind.resource().namespaced;
        let namespaces: Vec<Option<String>> = if self.config.namespaces.is_empty() || !namespaced {
            vec![None]
        } else {
            self.config.namespaces.iter().cloned().map(Some).collect()
        };
        // What is watched: all namespaces (cluster-scoped kinds included), or those named.
        let shown: Vec<&str> = namespaces.iter().flatten().map(String::as_str).collect();
        info!(kind = %kind.kind(), group = %resource.group, version = %resource.version, namespaces = ?shown, "watching");
        namespaces
            .into_iter()
            .map(|ns| {
                let mut wc = watcher::Config::default();
                if namespaced && ns.is_none() && !self.policy.exclude_namespaces.is_empty() {
                    // The API server leaves them out: they are neither sent nor held here.
                    wc = wc.fields(&excluded_namespaces_selector(self.policy));
                }
                if let Some(selector) = kind.selector() {
                    wc = wc.labels(selector);
                }
                if let Some(page) = kind.page_size() {
                    wc = wc.page_size(page);
                }
                let api: Api<DynamicObject> = match &ns {
                    Some(n) => Api::namespaced_with(self.client.clone(), n, resource),
                    None => Api::all_with(self.client.clone(), resource),
                };
                let scope = Scope {
                    kind: kind.clone(),
                    namespace: ns,
                };
                (scope, watcher::watcher(api, wc).default_backoff().boxed())
            })
            .collect()
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
