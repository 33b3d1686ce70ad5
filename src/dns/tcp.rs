//! DNS over TCP (RFC 7766): length-prefixed messages, several queries per connection answered in
//! order, an idle timeout (a query must arrive whole within it, so trickling clients count as
//! idle), and a cap on open connections. At the cap a new client takes the place of the
//! connection that has gone longest without a query (RFC 7766 §6.2.3), so a crowd of idle or
//! slowloris connections cannot lock new clients out.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::transfer::transfer;
use super::{QueryLog, Transport, respond};
use crate::cidr::Cidr;
use crate::metrics::{Answered, Metrics, QueryCounters};
use crate::zone::Zone;

#[derive(Debug, Clone)]
pub struct Config {
    /// A connection with no complete query for this long is closed.
    pub idle_timeout: Duration,
    /// Most connections open at once; a new one beyond it replaces the longest-idle one.
    pub max_connections: usize,
    /// Clients allowed zone transfers (AXFR, IXFR); everyone else is refused.
    pub allow_transfer: Vec<Cidr>,
    /// `--log-queries`: log every query at info.
    pub query_log: bool,
}

/// The open connections: when each last finished a query (or opened), and how to close it.
#[derive(Default)]
struct Open {
    next: u64,
    conns: HashMap<u64, (Instant, CancellationToken)>,
}

impl Open {
    /// Registers a new connection; at `max`, first closes the one idle longest.
    fn admit(&mut self, max: usize) -> (u64, CancellationToken, bool) {
        let mut evicted = false;
        while self.conns.len() >= max.max(1) {
            let Some((&oldest, _)) = self.conns.iter().min_by_key(|(_, (last, _))| *last) else {
                break;
            };
            if let Some((_, stop)) = self.conns.remove(&oldest) {
                stop.cancel();
                evicted = true;
            }
        }
        let id = self.next;
        self.next += 1;
        let stop = CancellationToken::new();
        self.conns.insert(id, (Instant::now(), stop.clone()));
        (id, stop, evicted)
    }

    fn touch(&mut self, id: u64) {
        if let Some((last, _)) = self.conns.get_mut(&id) {
            *last = Instant::now();
        }
    }
}

/// Accepts connections on `listener` until `shutdown`; then stops accepting and returns once
/// every connection has finished the query it was reading or answering (idle ones close at
/// once). The caller bounds that wait.
pub async fn serve(
    listener: TcpListener,
    config: Config,
    zone: Arc<Zone>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let open = Arc::new(Mutex::new(Open::default()));
    let counters = metrics.shared_counters();
    // Each connection holds a sender; `recv` returns `None` once the last of them is gone.
    let (alive, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
    loop {
        let (stream, src) = tokio::select! {
            _ = shutdown.cancelled() => {
                drop((listener, alive));
                let _ = all_closed.recv().await;
                return;
            }
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
        let (id, stop, evicted) = open
            .lock()
            .expect("connections lock")
            .admit(config.max_connections);
        if evicted {
            debug!(%src, max = config.max_connections, "TCP connection limit reached; closed the longest-idle connection");
            metrics.tcp_evicted();
        }
        let (zone, counters, shutdown, config, open, metrics, alive) = (
            zone.clone(),
            counters.clone(),
            shutdown.clone(),
            config.clone(),
            open.clone(),
            metrics.clone(),
            alive.clone(),
        );
        metrics.tcp_open(1);
        tokio::spawn(async move {
            let touch = || open.lock().expect("connections lock").touch(id);
            tokio::select! {
                _ = stop.cancelled() => {}
                r = connection(stream, src, &config, &zone, &counters, &touch, &shutdown) => if let Err(e) = r {
                    debug!(%src, error = %e, "TCP connection ended");
                },
            }
            open.lock().expect("connections lock").conns.remove(&id);
            metrics.tcp_open(-1);
            drop(alive);
        });
    }
}

async fn connection(
    mut stream: TcpStream,
    src: SocketAddr,
    config: &Config,
    zone: &Zone,
    counters: &QueryCounters,
    touch: &(dyn Fn() + Send + Sync),
    shutdown: &CancellationToken,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let idle = config.idle_timeout;
    let may_transfer = config.allow_transfer.iter().any(|c| c.contains(src.ip()));
    let log = QueryLog::new(config.query_log);
    let mut query = Vec::with_capacity(512);
    let mut out = Vec::with_capacity(4096);
    let mut messages = Vec::new();
    loop {
        // At shutdown a connection closes between queries: one that has begun to arrive, or
        // is pipelined behind the last, is still read and answered.
        let deadline = tokio::time::Instant::now() + idle;
        tokio::select! {
            biased;
            r = stream.readable() => r?,
            _ = shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep_until(deadline) => return Ok(()),
        }
        // The whole message, length and body, must arrive within the idle timeout: a client
        // trickling bytes is treated like an idle one.
        let read = async {
            let len = stream.read_u16().await? as usize;
            query.resize(len, 0);
            stream.read_exact(&mut query).await?;
            Ok::<usize, std::io::Error>(len)
        };
        let len = match tokio::time::timeout_at(deadline, read).await {
            Err(_) => return Ok(()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(r) => r?,
        };
        if len == 0 {
            return Ok(());
        }
        let start = Instant::now();
        touch();
        let outcome = if may_transfer {
            transfer(zone, &query, &mut messages)
        } else {
            None
        };
        let outcome = match outcome {
            Some(o) => o,
            None => {
                messages.clear();
                let Some(o) = respond(zone, &query, Transport::Tcp, &mut out) else {
                    continue;
                };
                messages.push(std::mem::take(&mut out));
                o
            }
        };
        let response_len = messages.iter().map(Vec::len).sum();
        let took = start.elapsed();
        counters.count(
            &outcome,
            Answered {
                tcp: true,
                v6: src.is_ipv6(),
                request_len: query.len(),
                response_len,
                took,
            },
        );
        log.log(src, Transport::Tcp, &messages[0], &outcome, took);
        let mut framed = Vec::with_capacity(response_len + 2 * messages.len());
        for m in &messages {
            framed.extend_from_slice(&(m.len() as u16).to_be_bytes());
            framed.extend_from_slice(m);
        }
        if messages.len() == 1 {
            out = messages.pop().expect("one message");
        }
        match timeout(idle, stream.write_all(&framed)).await {
            Ok(r) => r?,
            Err(_) => return Ok(()),
        }
    }
}
