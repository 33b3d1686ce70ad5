//! `clusterset-dns linkerd-bridge`: the API half of the Multi-Cluster Services API for Linkerd,
//! in two halves that run together or apart in one process, behind one Lease:
//! - the [`export`] half turns each ServiceExport (`multicluster.x-k8s.io`) into the label
//!   Linkerd's service mirror selects Services by, applied server-side under the bridge's own
//!   field manager, and writes the export's conditions;
//! - the [`import`] half turns every cluster's exports (read through the Links' credentials, see
//!   [`clusters`]) and the Services Linkerd's service mirror writes into ServiceImports and
//!   EndpointSlices.
//!
//! The floors, each importing only from those below it:
//! 1. [`runtime`]: knows nothing of MCS or Linkerd (keys, stores, the runner, the Lease,
//!    Events, indexes, CRD discovery);
//! 2. [`model`]: the shared words (the names the bridge writes by, one cluster's export, a
//!    port, an address family, a condition, a problem);
//! 3. [`metrics`], then [`clusters`]: the only reader of Links, their credentials, the linked
//!    clusters' exports and this cluster's id;
//! 4. `shared`: what both halves share, and how a half is driven;
//! 5. the halves, [`export`] and [`import`], each a pure judge and a controller that writes
//!    what it says (they import nothing of each other);
//! 6. this file, which only wires them: level-triggered, every change marks the keys it can
//!    affect, and a relist, a resync or taking the Lease marks everything.

pub mod clusters;
pub mod export;
pub mod import;
pub mod metrics;
pub mod model;
pub mod runtime;
mod shared;

use std::net::SocketAddr;
use std::sync::Arc;

use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::source::kube::ClientError;
pub use export::Config as ExportConfig;
pub use import::Config as ImportConfig;
use metrics::BridgeMetrics;
use runtime::feed::Feed;
use runtime::lease;
use runtime::store::{Codec, Writer};
use shared::Shared;

#[derive(Debug, Clone)]
pub struct Config {
    pub kube: crate::source::kube::Config,
    /// The export half, if it runs.
    pub export: Option<ExportConfig>,
    /// The import half, if it runs.
    pub import: Option<ImportConfig>,
    /// The admin HTTP server: /metrics, /health, /ready.
    pub admin: SocketAddr,
    /// The Lease the replicas share, so that one writes at a time.
    pub lease: lease::Config,
    /// `--cluster-id`: this cluster's id, over its ClusterProperty's.
    pub cluster_id: Option<String>,
    /// `--max-objects-per-link`: the most objects of each kind kept of one linked cluster.
    pub max_per_link: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("cannot listen on --admin-listen {addr}: {error}")]
    Admin {
        addr: SocketAddr,
        error: std::io::Error,
    },
}

/// Runs the halves `config` names until `shutdown`. A CRD the API server does not serve is
/// said at start and on `/ready`, and looked for again every [`CRD_RECHECK`](runtime::crd::CRD_RECHECK).
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), BridgeError> {
    let listener = tokio::net::TcpListener::bind(config.admin)
        .await
        .map_err(|error| BridgeError::Admin {
            addr: config.admin,
            error,
        })?;
    let metrics = Arc::new(BridgeMetrics::new());
    let m = metrics.clone();
    tokio::spawn(crate::admin::serve_with(
        listener,
        shutdown.clone(),
        move |method, path| m.route(method, path),
    ));
    let client = crate::source::kube::client(&config.kube).await?;
    let (leading_tx, leading) = tokio::sync::watch::channel(false);
    let mut said = leading_tx.subscribe();
    let m = metrics.clone();
    tokio::spawn(async move {
        while said.changed().await.is_ok() {
            m.leading(*said.borrow_and_update());
        }
    });
    let holding = tokio::spawn(lease::hold(
        client.clone(),
        config.lease.clone(),
        leading_tx,
        shutdown.clone(),
    ));
    let services = Feed::new(Writer::new(shared::service_marks, Codec::services()));
    let (api, all) = (kube::Api::all(client.clone()), watcher::Config::default());
    tokio::spawn(services.clone().run(api, all, "Services", shutdown.clone()));
    let clusters = clusters::start(
        client.clone(),
        (
            config.cluster_id.clone(),
            config.max_per_link,
            config.import.is_some(),
        ),
        metrics.clone(),
        &services,
        shutdown.clone(),
    );
    let shared = Shared {
        client,
        services,
        clusters,
        metrics,
        leading,
        shutdown: shutdown.clone(),
    };
    let on = [
        ("export", config.export.is_some()),
        ("import", config.import.is_some()),
    ];
    for (half, _) in on.iter().filter(|(_, on)| *on) {
        shared.metrics.waiting(half, Some("starting".into()));
    }
    info!(admin = %config.admin, export = on[0].1, import = on[1].1, "linkerd-bridge starting");
    let id = &config.lease.identity;
    let export =
        (config.export.clone()).map(|c| tokio::spawn(export::run(shared.clone(), c, id.clone())));
    let import =
        (config.import.clone()).map(|c| tokio::spawn(import::run(shared.clone(), c, id.clone())));
    for half in [export, import].into_iter().flatten() {
        let _ = half.await;
    }
    // The Lease is given up before the process ends, so another replica takes over at once.
    let _ = holding.await;
    Ok(())
}
