//! DNS over TCP (RFC 7766): length-prefixed messages, several queries per connection answered in
//! order, an idle timeout, and a cap on open connections so idle clients cannot crowd out others.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::{Transport, respond};
use crate::metrics::{Metrics, QueryCounters, rcode_label, type_label};
use crate::zone::Zone;

#[derive(Debug, Clone)]
pub struct Config {
    /// A connection with no complete query for this long is closed.
    pub idle_timeout: Duration,
    /// Connections beyond this many are closed as soon as they are accepted.
    pub max_connections: usize,
}

/// Accepts connections on `listener` until shutdown.
pub async fn serve(
    listener: TcpListener,
    config: Config,
    zone: Arc<Zone>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let counters = metrics.counters();
    loop {
        let (stream, src) = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = listener.accept() => match r {
                Ok(r) => r,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    warn!(error = %e, "TCP accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            debug!(%src, max = config.max_connections, "TCP connection limit reached; closing the new connection");
            continue;
        };
        let (zone, counters, shutdown, idle) = (
            zone.clone(),
            counters.clone(),
            shutdown.clone(),
            config.idle_timeout,
        );
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                r = connection(stream, src, idle, &zone, &counters) => if let Err(e) = r {
                    debug!(%src, error = %e, "TCP connection ended");
                },
            }
            drop(slot);
        });
    }
}

async fn connection(
    mut stream: TcpStream,
    src: SocketAddr,
    idle: Duration,
    zone: &Zone,
    counters: &QueryCounters,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut query = Vec::with_capacity(512);
    let mut out = Vec::with_capacity(4096);
    loop {
        // The whole message, length and body, must arrive within the idle timeout: a client
        // trickling bytes is treated like an idle one.
        let read = async {
            let len = stream.read_u16().await? as usize;
            query.resize(len, 0);
            stream.read_exact(&mut query).await?;
            Ok::<usize, std::io::Error>(len)
        };
        let len = match timeout(idle, read).await {
            Err(_) => return Ok(()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(r) => r?,
        };
        if len == 0 {
            return Ok(());
        }
        let Some(outcome) = respond(zone, &query, Transport::Tcp, &mut out) else {
            continue;
        };
        counters.count(&outcome, true, src.is_ipv6());
        debug!(%src, qtype = type_label(outcome.qtype), rcode = rcode_label(outcome.rcode), "answered over TCP");
        let mut framed = Vec::with_capacity(out.len() + 2);
        framed.extend_from_slice(&(out.len() as u16).to_be_bytes());
        framed.extend_from_slice(&out);
        match timeout(idle, stream.write_all(&framed)).await {
            Ok(r) => r?,
            Err(_) => return Ok(()),
        }
    }
}
