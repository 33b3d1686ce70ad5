//! DNS over UDP: each datagram answered from the zone through [`super::respond`].

use std::sync::Arc;

use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::{Transport, respond};
use crate::metrics::{Metrics, rcode_label, type_label};
use crate::zone::Zone;

/// Answers datagrams on `socket` until shutdown.
pub async fn serve(
    socket: UdpSocket,
    zone: Arc<Zone>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let mut packet = vec![0u8; 65535];
    let mut out = Vec::with_capacity(4096);
    loop {
        let (len, src) = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = socket.recv_from(&mut packet) => match r {
                Ok(r) => r,
                Err(e) => {
                    // ICMP errors from earlier sends surface here; they concern one client only.
                    debug!(error = %e, "UDP receive failed");
                    continue;
                }
            },
        };
        // A source port of 0 cannot be answered (and is a classic reflection trick).
        if src.port() == 0 {
            continue;
        }
        let Some(outcome) = respond(&zone, &packet[..len], Transport::Udp, &mut out) else {
            continue;
        };
        metrics.answered(&outcome, false, src.is_ipv6());
        debug!(%src, qtype = type_label(outcome.qtype), rcode = rcode_label(outcome.rcode), truncated = outcome.truncated, "answered over UDP");
        if let Err(e) = socket.send_to(&out, src).await {
            warn!(%src, error = %e, "UDP send failed");
        }
    }
}
