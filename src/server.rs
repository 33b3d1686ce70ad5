//! Binds the DNS sockets and serves them: UDP (one SO_REUSEPORT socket per worker thread) and
//! TCP (worker threads of its own) on the same address, both answering through
//! [`crate::dns::respond`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::dns::xdp::{self, Xdp, XdpError};
use crate::dns::{QueryLog, tcp, udp};
use crate::metrics::Metrics;
pub use crate::shutdown::Shutdown;
use crate::zone::Zone;

/// The sockets the server listens on, bound before it starts so tests can use port 0.
pub struct Listeners {
    /// One per UDP worker, all on the same address.
    pub udp: Vec<std::net::UdpSocket>,
    pub tcp: std::net::TcpListener,
    pub admin: std::net::TcpListener,
    /// `--xdp`: the program on an interface and its AF_XDP sockets.
    pub xdp: Option<Xdp>,
}

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error(transparent)]
    Xdp(#[from] XdpError),
}

#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {what} {addr}: {error}")]
pub struct BindError {
    what: &'static str,
    addr: SocketAddr,
    error: std::io::Error,
}

impl Listeners {
    /// Binds what `config` says: the UDP workers' sockets and a TCP listener on the listen
    /// address (with port 0, on one free port for both), the admin address, and XDP's program
    /// and sockets when asked for.
    pub fn bind(config: &Config) -> Result<Self, ListenError> {
        let mut listeners = Self::bind_sockets(config.listen, config.udp.workers, config.admin)?;
        if let Some(x) = &config.xdp {
            listeners.xdp = Some(Xdp::attach(x, listeners.dns_addr())?);
        }
        Ok(listeners)
    }

    fn bind_sockets(
        dns: SocketAddr,
        udp_workers: usize,
        admin: SocketAddr,
    ) -> Result<Self, BindError> {
        let err = |what, addr, error| BindError { what, addr, error };
        let mut tries = 0;
        let (udp, tcp) = loop {
            let udp = match udp::bind(dns, udp_workers) {
                Ok(udp) => udp,
                // Port 0 picked a port that was taken before the UDP group bound it: again.
                Err(e)
                    if e.kind() == std::io::ErrorKind::AddrInUse
                        && dns.port() == 0
                        && tries < 20 =>
                {
                    tries += 1;
                    continue;
                }
                Err(e) => return Err(err("UDP", dns, e)),
            };
            let at = udp[0].local_addr().map_err(|e| err("UDP", dns, e))?;
            match std::net::TcpListener::bind(at) {
                Ok(tcp) => break (udp, tcp),
                // Port 0 picked a UDP port whose TCP twin is taken: pick again.
                Err(_) if dns.port() == 0 && tries < 20 => tries += 1,
                Err(e) => return Err(err("TCP", at, e)),
            }
        };
        {
            use std::os::fd::AsRawFd;
            crate::sys::listen_backlog(tcp.as_raw_fd(), 4096).map_err(|e| err("TCP", dns, e))?;
        }
        let admin = std::net::TcpListener::bind(admin).map_err(|e| err("admin HTTP", admin, e))?;
        for (what, s) in [("TCP", &tcp), ("admin HTTP", &admin)] {
            s.set_nonblocking(true).map_err(|e| err(what, dns, e))?;
        }
        Ok(Listeners {
            udp,
            tcp,
            admin,
            xdp: None,
        })
    }

    pub fn dns_addr(&self) -> SocketAddr {
        self.udp[0]
            .local_addr()
            .expect("bound socket has an address")
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
            .local_addr()
            .expect("bound socket has an address")
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    /// DNS over UDP and TCP (and XDP's UDP).
    pub listen: SocketAddr,
    /// The admin HTTP server: /metrics, /health, /ready.
    pub admin: SocketAddr,
    pub udp: udp::Config,
    /// `--xdp`: also answer UDP through AF_XDP.
    pub xdp: Option<xdp::Config>,
    pub tcp: tcp::Config,
    /// `--log-queries`: every listener logs every query at info.
    pub query_log: bool,
    /// How long in-flight TCP answers get to finish at shutdown.
    pub grace: Duration,
    /// How long every listener keeps answering after [`Shutdown::begin`] while `/ready` says
    /// 503 (zero: stop at once).
    pub lameduck: Duration,
}

/// Serves the admin endpoints and DNS on every listener until `shutdown`'s lame duck is over
/// (then `stop` is cancelled, for the sources too); then gives in-flight TCP answers the grace
/// period, or none once `shutdown` says [`Shutdown::now`].
pub async fn serve(
    config: Config,
    listeners: Listeners,
    zone: Arc<Zone>,
    metrics: Arc<Metrics>,
    shutdown: Shutdown,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let Listeners {
        udp,
        tcp,
        admin,
        xdp,
    } = listeners;
    tokio::spawn(
        shutdown
            .clone()
            .lame_duck(config.lameduck, config.grace, stop.clone()),
    );
    let admin = tokio::net::TcpListener::from_std(admin)?;
    info!(address = %admin.local_addr()?, "admin HTTP listening (/metrics /health /ready)");
    tokio::spawn(crate::admin::serve(
        admin,
        zone.clone(),
        metrics.clone(),
        shutdown.clone(),
        stop.clone(),
    ));
    info!(address = %udp[0].local_addr()?, workers = udp.len(), "DNS listening on UDP");
    info!(address = %tcp.local_addr()?, workers = config.tcp.workers, max_connections = config.tcp.max_connections, coalesce = %config.tcp.coalesce, "DNS listening on TCP");
    let halt = Arc::new(AtomicBool::new(false));
    // One decision for every listener: whether query lines are written, and at which level.
    let log = QueryLog::new(config.query_log);
    let mut workers = udp::spawn(udp, zone.clone(), &metrics, halt.clone(), log)?;
    let attached = match xdp {
        Some(xdp) => {
            info!(interface = %xdp.iface, mode = %xdp.mode, queues = xdp.queues(), locked_mib = xdp.locked() >> 20, coalesce = %xdp.coalesce, "DNS answering UDP through AF_XDP");
            let (attached, more) = xdp.spawn(zone.clone(), &metrics, halt.clone(), log)?;
            workers.extend(more);
            Some(attached)
        }
        None => None,
    };
    let tcp = tcp::spawn(tcp, config.tcp, log, zone, metrics, stop.clone())?;
    stop.cancelled().await;
    halt.store(true, Ordering::Relaxed);
    let drain = async {
        let _ = tcp.await;
        let _ =
            tokio::task::spawn_blocking(move || workers.into_iter().for_each(|w| drop(w.join())))
                .await;
    };
    tokio::select! {
        drained = tokio::time::timeout(config.grace, drain) => if drained.is_err() {
            warn!(grace = ?config.grace, "shutdown grace period over; stopping anyway");
        },
        _ = shutdown.hurried() => {}
    }
    drop(attached);
    Ok(())
}
