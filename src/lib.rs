//! clusterset-dns: authoritative DNS for the Kubernetes Multi-Cluster Services API
//! (`<svc>.<ns>.svc.clusterset.local`), fed from ServiceImports and EndpointSlices, and from
//! Linkerd's multicluster Services.
//!
//! ```text
//!  source::kube ─┐  model::Update   zone::build    zone: one published table of
//!  (watchers)    ├───────────────> (one writer) ─> precompiled answers, read through a View
//!  source::file ─┘  (plain values)                     │
//!  (both read ServiceImports and EndpointSlices, and, through source::linkerd,
//!   Linkerd's federated and mirror Services)           │
//!                                                      v
//!  UDP workers (recvmmsg) ─┐                   dns::respond, dns::Batch ──> dns::account
//!  XDP workers (AF_XDP) ───┼─ query bytes ──>  (parse, look up, write)      (metrics, query log)
//!  TCP connections ────────┘                   dns::transfer (AXFR, `zone`)       │
//!                                                                                 v
//!                                                      admin: /metrics /health /ready
//! ```
//!
//! `main` is thin: it parses flags ([`cli`]), binds [`server::Listeners`] and calls [`run`], which
//! tests call the same way with sockets bound to port 0.

pub mod admin;
pub mod cidr;
pub mod cli;
mod clock;
pub mod dns;
#[doc(hidden)]
pub mod fuzzing;
pub mod metrics;
pub mod model;
pub mod server;
pub mod source;
#[allow(unsafe_code)]
pub mod sys;
pub mod wire;
pub mod zone;

use std::net::IpAddr;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::metrics::Metrics;
use crate::server::{Listeners, Shutdown};
use crate::source::file;
use crate::wire::wire_name;
use crate::zone::Zone;
use crate::zone::build::{Builder, Limits};

/// Everything [`run`] needs besides its sockets.
#[derive(Debug, Clone)]
pub struct Config {
    /// Served zones, e.g. `clusterset.local`.
    pub zones: Zones,
    pub ttl: u32,
    /// Addresses of `ns.dns.<zone>`, given as glue with the apex NS record.
    pub ns_addresses: Vec<IpAddr>,
    /// The zone's budget.
    pub limits: Limits,
    pub server: server::Config,
    pub source: SourceConfig,
}

/// Where services come from.
#[derive(Debug, Clone)]
pub enum SourceConfig {
    File(file::Config),
    Kube(source::kube::Config),
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("zone {0:?} is not a DNS name short enough to hold service names")]
    BadZone(String),
    #[error("zone {0:?} is given twice")]
    DuplicateZone(String),
    #[error("at least one zone must be served")]
    NoZone,
}

/// The served zones, checked: lower-case wire names, at least one, none twice.
#[derive(Clone, PartialEq, Eq)]
pub struct Zones(Vec<Vec<u8>>);

impl Zones {
    pub fn parse<S: AsRef<str>>(zones: &[S]) -> Result<Zones, ConfigError> {
        if zones.is_empty() {
            return Err(ConfigError::NoZone);
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        for z in zones.iter().map(AsRef::as_ref) {
            // Room for `dns-version.<zone>` and a short service name at least.
            let w = wire_name(z)
                .filter(|w| w.len() > 1 && w.len() <= 200)
                .ok_or_else(|| ConfigError::BadZone(z.to_string()))?;
            if out.contains(&w) {
                return Err(ConfigError::DuplicateZone(z.to_string()));
            }
            out.push(w);
        }
        Ok(Zones(out))
    }

    /// The zones' wire names, in the order given.
    pub fn apexes(&self) -> &[Vec<u8>] {
        &self.0
    }
}

impl std::fmt::Debug for Zones {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|a| wire::name_text(a)))
            .finish()
    }
}

/// The empty zone for `config`, its metrics (`server` is their `server` label) and its one
/// writer.
fn new_zone(config: &Config, server: String) -> (Arc<Metrics>, Arc<Zone>, Builder) {
    let apexes = config.zones.apexes().to_vec();
    let zone_texts = apexes.iter().map(|a| wire::name_text(a)).collect();
    let metrics = Arc::new(Metrics::new(server, zone_texts));
    let zone = Arc::new(Zone::new(apexes, config.ttl));
    let builder = Builder::new(zone.clone(), &config.ns_addresses, metrics.clone())
        .with_limits(config.limits);
    (metrics, zone, builder)
}

/// The zone the server would serve with `config`, in master-file form: the file loaded once, or
/// the Kubernetes API listed once (waiting at most `wait` for the first full list).
pub async fn zone_text(config: &Config, wait: std::time::Duration) -> anyhow::Result<String> {
    let (metrics, zone, mut builder) = new_zone(config, "dns://zone".into());
    let services = match &config.source {
        SourceConfig::File(fc) => file::initial(fc, &metrics)?.services,
        SourceConfig::Kube(kc) => {
            let client = source::kube::client(kc).await?;
            let (tx, mut rx) = mpsc::channel(16);
            let stop = CancellationToken::new();
            let watch = tokio::spawn(source::kube::run(
                kc.clone(),
                client,
                tx,
                metrics.clone(),
                stop.clone(),
            ));
            let first = tokio::time::timeout(wait, rx.recv()).await;
            stop.cancel();
            let _ = watch.await;
            match first {
                Ok(Some((_, model::Update::Reset(services)))) => services,
                Ok(_) => anyhow::bail!("the Kubernetes source stopped before its first full list"),
                Err(_) => anyhow::bail!(
                    "no full list of the watched objects from the Kubernetes API within {wait:?}"
                ),
            }
        }
    };
    builder.apply(model::Update::Reset(services));
    Ok(dns::transfer::zone_text(&zone))
}

/// Runs the server until `shutdown` has been through its lame duck (see [`Shutdown`]). Fails
/// early (before serving) when the configuration or the source's first load is unusable.
pub async fn run(config: Config, listeners: Listeners, shutdown: Shutdown) -> anyhow::Result<()> {
    let (metrics, zone, builder) = new_zone(&config, format!("dns://{}", listeners.dns_addr()));
    // Sources, the admin server and the listeners stop when the lame duck is over.
    let stop = CancellationToken::new();
    tokio::spawn(shutdown.clone().lame_duck(
        config.server.lameduck,
        config.server.grace,
        stop.clone(),
    ));
    let (tx, rx) = mpsc::channel(1024);
    match &config.source {
        SourceConfig::File(fc) => {
            let first = file::initial(fc, &metrics)?;
            tokio::spawn(file::run(
                fc.clone(),
                first,
                tx,
                metrics.clone(),
                stop.clone(),
            ));
        }
        SourceConfig::Kube(kc) => {
            // A configuration that cannot work stops start-up; an API server that cannot be
            // reached yet is retried while the server answers SERVFAIL and is not ready.
            let client = source::kube::client(kc).await?;
            tokio::spawn(source::kube::run(
                kc.clone(),
                client,
                tx,
                metrics.clone(),
                stop.clone(),
            ));
        }
    }
    let builder = tokio::spawn(builder.run(rx));

    let admin = tokio::net::TcpListener::from_std(listeners.admin)?;
    info!(address = %admin.local_addr()?, "admin HTTP listening (/metrics /health /ready)");
    tokio::spawn(admin::serve(
        admin,
        zone.clone(),
        metrics.clone(),
        shutdown.clone(),
        stop.clone(),
    ));

    server::serve(
        config.server,
        listeners.udp,
        listeners.xdp,
        listeners.tcp,
        zone,
        metrics,
        stop,
        shutdown,
    )
    .await?;
    builder.abort();
    info!("stopped");
    Ok(())
}
