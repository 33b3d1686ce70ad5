//! clusterset-dns: authoritative DNS for the Kubernetes Multi-Cluster Services API
//! (`<svc>.<ns>.svc.clusterset.local`), fed from the kinds of object [`source::kinds`] lists.
//!
//! ```text
//!  source::kube ─┐  model::Update   zone::build    zone: one published table of
//!  (watchers)    ├───────────────> (one writer) ─> precompiled answers, read through a View
//!  source::file ─┘  (plain values)                     │
//!  (both read the kinds source::kinds lists, each    │
//!   kept in its part of a source::store::Store)        │
//!                                                      v
//!  UDP workers (recvmmsg) ─┐                   dns::respond, dns::Batch ──> dns::account
//!  XDP workers (AF_XDP) ───┼─ query bytes ──>  (parse, look up, write)      (metrics, query log)
//!  TCP connections ────────┘                   dns::transfer (AXFR, `zone`)       │
//!                                                                                 v
//!                                                      admin: /metrics /health /ready
//! ```
//!
//!
//! `clusterset-dns linkerd-bridge` ([`bridge`]) runs apart from the server and writes the objects
//! the server reads, for Linkerd's multicluster:
//!
//! ```text
//!  ServiceExports ─> bridge::export (judge + controller) ─> Linkerd's label ─> Linkerd's
//!                                                                        service mirror
//!  every cluster's exports (bridge::clusters) ─┐                               │
//!  Linkerd's federated Services and mirrors ───┴> bridge::import (judge + controller)
//!                                                  ─> ServiceImports, EndpointSlices
//!  (both driven by bridge::runtime's runner, behind its lease)          └─> source::kube
//! ```
//!
//! `main` is thin: it parses flags ([`cli`]), binds [`server::Listeners`] and calls [`run`], which
//! tests call the same way with sockets bound to port 0.

pub mod admin;
pub mod bridge;
pub mod cidr;
pub mod cli;
mod clock;
pub mod dns;
#[doc(hidden)]
pub mod fuzzing;
pub mod metrics;
pub mod model;
pub mod server;
pub mod shutdown;
pub mod source;
#[allow(unsafe_code)]
pub mod sys;
pub mod wire;
pub mod zone;

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::metrics::Metrics;
use crate::server::{Listeners, Shutdown};
use crate::source::file;
use crate::zone::Zone;
use crate::zone::build::Builder;

/// Everything [`run`] needs besides its sockets: each module's own configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub zone: zone::Config,
    pub source: source::Config,
    /// Where the objects come from.
    pub origin: Origin,
    pub server: server::Config,
}

/// What a zone is built from: its settings, which objects are read, and from where (the part
/// of [`Config`] that `clusterset-dns zone` reads).
#[derive(Debug, Clone)]
pub struct Input {
    pub zone: zone::Config,
    pub source: source::Config,
    pub origin: Origin,
}

/// The source the objects come from.
#[derive(Debug, Clone)]
pub enum Origin {
    File(file::Config),
    Kube(source::kube::Config),
}

/// Why [`run`] or [`zone_text`] stopped: a variant per module.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    File(#[from] file::LoadError),
    #[error(transparent)]
    Client(#[from] source::kube::ClientError),
    #[error("the Kubernetes source stopped before its first full list")]
    SourceStopped,
    #[error("no full list of the watched objects from the Kubernetes API within {0:?}")]
    NoFullList(std::time::Duration),
    #[error("cannot serve: {0}")]
    Serve(#[from] std::io::Error),
}

/// The empty zone for `config`, its metrics (`server` is their `server` label) and its one
/// writer.
fn new_zone(config: &zone::Config, server: String) -> (Arc<Metrics>, Arc<Zone>, Builder) {
    let apexes = config.zones.apexes().to_vec();
    let zone_texts = apexes.iter().map(|a| wire::name_text(a)).collect();
    let metrics = Arc::new(Metrics::new(server, zone_texts));
    let zone = Arc::new(Zone::new(apexes, config.ttl));
    let builder = Builder::new(zone.clone(), &config.ns_addresses, metrics.clone())
        .with_limits(config.limits);
    (metrics, zone, builder)
}

/// Starts the Kubernetes source, sending to `updates` until `stop`. A configuration that cannot
/// work is the error; an API server that cannot be reached yet is retried meanwhile (the server
/// answers SERVFAIL and is not ready until the first full list).
async fn watch_kube(
    kc: &source::kube::Config,
    source: &source::Config,
    updates: mpsc::Sender<(std::time::Instant, model::Update)>,
    metrics: &Arc<Metrics>,
    stop: &CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, RunError> {
    let client = source::kube::client(kc).await?;
    Ok(tokio::spawn(source::kube::run(
        kc.clone(),
        source.clone(),
        client,
        updates,
        metrics.clone(),
        stop.clone(),
    )))
}

/// The zone the server would serve from `config`, in master-file form: the file loaded once, or
/// the Kubernetes API listed once (waiting at most `wait` for the first full list).
pub async fn zone_text(config: &Input, wait: std::time::Duration) -> Result<String, RunError> {
    let (metrics, zone, mut builder) = new_zone(&config.zone, "dns://zone".into());
    let services = match &config.origin {
        Origin::File(fc) => file::initial(fc, &config.source, &metrics)?.services,
        Origin::Kube(kc) => {
            let (tx, mut rx) = mpsc::channel(16);
            let stop = CancellationToken::new();
            let watch = watch_kube(kc, &config.source, tx, &metrics, &stop).await?;
            let first = tokio::time::timeout(wait, rx.recv()).await;
            stop.cancel();
            let _ = watch.await;
            match first {
                Ok(Some((_, model::Update::Reset(services)))) => services,
                Ok(_) => return Err(RunError::SourceStopped),
                Err(_) => return Err(RunError::NoFullList(wait)),
            }
        }
    };
    builder.apply(model::Update::Reset(services));
    Ok(dns::transfer::zone_text(&zone))
}

/// Runs the server until `shutdown` has been through its lame duck (see [`Shutdown`]). Fails
/// early (before serving) when the source's first load is unusable.
pub async fn run(config: Config, listeners: Listeners, shutdown: Shutdown) -> Result<(), RunError> {
    let (metrics, zone, builder) =
        new_zone(&config.zone, format!("dns://{}", listeners.dns_addr()));
    // Sources stop when the lame duck is over, as the listeners do.
    let stop = CancellationToken::new();
    let (tx, rx) = mpsc::channel(1024);
    match &config.origin {
        Origin::File(fc) => {
            let first = file::initial(fc, &config.source, &metrics)?;
            tokio::spawn(file::run(
                fc.clone(),
                config.source.clone(),
                first,
                tx,
                metrics.clone(),
                stop.clone(),
            ));
        }
        Origin::Kube(kc) => {
            watch_kube(kc, &config.source, tx, &metrics, &stop).await?;
        }
    }
    let builder = tokio::spawn(builder.run(rx));
    server::serve(config.server, listeners, zone, metrics, shutdown, stop).await?;
    builder.abort();
    info!("stopped");
    Ok(())
}
