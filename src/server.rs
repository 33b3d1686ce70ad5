//! Binds the DNS sockets and serves them: UDP and TCP on the same address, both answering
//! through [`crate::dns::respond`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::dns::{tcp, udp};
use crate::metrics::Metrics;
use crate::zone::Zone;

/// The sockets the server listens on, bound before it starts so tests can use port 0.
pub struct Listeners {
    pub udp: std::net::UdpSocket,
    pub tcp: std::net::TcpListener,
    pub admin: std::net::TcpListener,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {what} {addr}: {source}")]
pub struct BindError {
    what: &'static str,
    addr: SocketAddr,
    source: std::io::Error,
}

impl Listeners {
    /// Binds UDP and TCP on the same address (with port 0, on one free port for both) and the
    /// admin address.
    pub fn bind(dns: SocketAddr, admin: SocketAddr) -> Result<Self, BindError> {
        let err = |what, addr, source| BindError { what, addr, source };
        let mut tries = 0;
        let (udp, tcp) = loop {
            let udp = std::net::UdpSocket::bind(dns).map_err(|e| err("UDP", dns, e))?;
            let at = udp.local_addr().map_err(|e| err("UDP", dns, e))?;
            match std::net::TcpListener::bind(at) {
                Ok(tcp) => break (udp, tcp),
                // Port 0 picked a UDP port whose TCP twin is taken: pick again.
                Err(_) if dns.port() == 0 && tries < 20 => tries += 1,
                Err(e) => return Err(err("TCP", at, e)),
            }
        };
        let admin = std::net::TcpListener::bind(admin).map_err(|e| err("admin HTTP", admin, e))?;
        for (what, s) in [("TCP", &tcp), ("admin HTTP", &admin)] {
            s.set_nonblocking(true).map_err(|e| err(what, dns, e))?;
        }
        udp.set_nonblocking(true).map_err(|e| err("UDP", dns, e))?;
        Ok(Listeners { udp, tcp, admin })
    }

    pub fn dns_addr(&self) -> SocketAddr {
        self.udp.local_addr().expect("bound socket has an address")
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
            .local_addr()
            .expect("bound socket has an address")
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub tcp: tcp::Config,
    /// How long in-flight TCP answers get to finish at shutdown.
    pub grace: Duration,
}

/// Serves DNS on `udp` and `tcp` until `shutdown`.
pub async fn serve(
    config: Config,
    udp: std::net::UdpSocket,
    tcp: std::net::TcpListener,
    zone: Arc<Zone>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let udp = tokio::net::UdpSocket::from_std(udp)?;
    let tcp = tokio::net::TcpListener::from_std(tcp)?;
    info!(address = %udp.local_addr()?, "DNS listening on UDP");
    info!(address = %tcp.local_addr()?, max_connections = config.tcp.max_connections, "DNS listening on TCP");
    let udp = tokio::spawn(udp::serve(
        udp,
        zone.clone(),
        metrics.clone(),
        shutdown.clone(),
    ));
    let tcp = tokio::spawn(tcp::serve(tcp, config.tcp, zone, metrics, shutdown.clone()));
    shutdown.cancelled().await;
    let _ = tokio::time::timeout(config.grace, async {
        let _ = udp.await;
        let _ = tcp.await;
    })
    .await;
    Ok(())
}
