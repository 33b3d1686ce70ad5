//! Each socket's counters, written by its worker and read at scrape time with the kernel's own
//! drop counts.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use prometheus::proto::{MetricFamily, MetricType};

use super::frame;
use super::socket::{Socket, get};
use crate::metrics::{Family, Shape};

/// Where [`Stats::dropped`] counts answers dropped for want of a free send frame.
pub(super) const NO_SEND_FRAME: usize = frame::Dropped::ALL.len();

/// One socket's counters: written by its worker, read at scrape time.
pub(super) struct Stats {
    pub(super) queue: u32,
    /// The socket, for the kernel's own drop counts.
    pub(super) fd: Arc<OwnedFd>,
    pub(super) received: AtomicU64,
    /// By [`frame::Dropped`] (its discriminant), then answers without a free send frame.
    pub(super) dropped: [AtomicU64; NO_SEND_FRAME + 1],
    /// False once the interface went away (its worker has stopped).
    pub(super) up: AtomicBool,
}

impl Stats {
    pub(super) fn new(socket: &Socket) -> Self {
        Stats {
            queue: socket.queue,
            fd: socket.fd.clone(),
            received: AtomicU64::new(0),
            dropped: Default::default(),
            up: AtomicBool::new(true),
        }
    }

    /// The kernel's XDP_STATISTICS for the socket, labelled.
    pub(super) fn kernel(&self) -> Option<[(&'static str, u64); 5]> {
        // SAFETY: the option's C struct, plain old data; the descriptor is open while `self` is.
        let st: libc::xdp_statistics =
            unsafe { get(self.fd.as_raw_fd(), libc::SOL_XDP, libc::XDP_STATISTICS) }.ok()?;
        Some([
            ("dropped", st.rx_dropped),
            ("rx_ring_full", st.rx_ring_full),
            ("fill_ring_empty", st.rx_fill_ring_empty_descs),
            ("rx_invalid", st.rx_invalid_descs),
            ("tx_invalid", st.tx_invalid_descs),
        ])
    }
}

const UP: Shape = Shape {
    name: "clusterset_dns_xdp_up",
    help: "1 while the AF_XDP socket of a receive queue is bound to its interface, 0 once the interface went away (the ordinary sockets answer then; restart to attach again).",
    kind: MetricType::GAUGE,
    labels: &["interface", "queue"],
};
const RECEIVED: Shape = Shape {
    name: "clusterset_dns_xdp_received_total",
    help: "Frames the XDP program handed to the server, by receive queue.",
    kind: MetricType::COUNTER,
    labels: &["interface", "queue"],
};
const DROPPED: Shape = Shape {
    name: "clusterset_dns_xdp_dropped_total",
    help: "Frames the server dropped unanswered, as the kernel's UDP stack would (reason: not_plain_udp, length, checksum, source, port, destination), and answers dropped for want of a free send frame (no_send_frame).",
    kind: MetricType::COUNTER,
    labels: &["interface", "queue", "reason"],
};
const KERNEL_DROPPED: Shape = Shape {
    name: "clusterset_dns_xdp_kernel_dropped_total",
    help: "Frames the kernel dropped at the AF_XDP socket (XDP_STATISTICS), by queue and reason.",
    kind: MetricType::COUNTER,
    labels: &["interface", "queue", "reason"],
};

/// The families [`collect`] builds.
pub(super) const SHAPES: [&Shape; 4] = [&UP, &RECEIVED, &DROPPED, &KERNEL_DROPPED];

/// The XDP sockets' metrics now.
pub(super) fn collect(iface: &str, stats: &[Arc<Stats>]) -> Vec<MetricFamily> {
    let (mut up, mut received) = (Family::new(&UP), Family::new(&RECEIVED));
    let (mut dropped, mut kernel) = (Family::new(&DROPPED), Family::new(&KERNEL_DROPPED));
    for s in stats {
        let queue = s.queue.to_string();
        let q = queue.as_str();
        up.gauge(&[iface, q], s.up.load(Ordering::Relaxed) as u8 as f64);
        received.counter(&[iface, q], s.received.load(Ordering::Relaxed));
        let reasons = frame::Dropped::ALL.iter().map(|d| d.label());
        for (reason, n) in reasons.chain(["no_send_frame"]).zip(&s.dropped) {
            dropped.counter(&[iface, q, reason], n.load(Ordering::Relaxed));
        }
        for (reason, n) in s.kernel().into_iter().flatten() {
            kernel.counter(&[iface, q, reason], n);
        }
    }
    vec![up.done(), received.done(), dropped.done(), kernel.done()]
}
