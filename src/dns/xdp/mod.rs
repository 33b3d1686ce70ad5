//! The AF_XDP path (`--xdp IFACE`): an XDP program on the interface hands the server's UDP
//! queries to an AF_XDP socket per receive queue, before the kernel's IP and UDP layers, and the
//! answers go back out through the same socket. It skips the per-packet socket work that is most
//! of the CPU a socket-based server spends (routing, building the socket buffer, the UDP socket
//! lookup and queueing). Frames the program does not take (IP options, fragments, VLAN tags,
//! other addresses) and all of TCP reach the ordinary sockets, which stay bound and answer alike.
//!
//! Sockets run in copy mode, which every driver and generic XDP support. The program is attached
//! through a BPF link, so it goes away with the process, however the process ends.
//!
//! Here: attaching (the program, the socket map, a socket per queue) and starting the workers.
//! `program` builds and loads the XDP program, `queues` counts the receive queues, `socket`
//! holds the UMEM and rings, `worker` answers, `frame` reads and writes the Ethernet/IP/UDP
//! frames, `coalesce` paces the workers, `stats` counts, and `diagnose` explains refusals.

mod coalesce;
mod diagnose;
pub mod frame;
pub mod program;
mod queues;
mod socket;
mod stats;
mod worker;

pub use coalesce::{ADAPTIVE_WAIT, Coalescing, parse as parse_coalesce};
use diagnose::{LOOPBACK_IFINDEX, loopback_ready, permission_hint};
use queues::queue_bound;
use socket::{MAX_FRAME, Socket, ring_frames};
use stats::Stats;
use worker::Worker;

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;

use tracing::warn;

use crate::dns::QueryLog;
use crate::metrics::{Metrics, ScrapeCollector};
use crate::zone::Zone;
pub use program::Mode;

/// Why `--xdp` could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve UDP through XDP on {iface}: {message}")]
pub struct XdpError {
    iface: String,
    message: String,
}

/// The program attached to an interface and one AF_XDP socket per receive queue.
pub struct Xdp {
    /// Detaches the program when closed; closed before the sockets (field order).
    _link: OwnedFd,
    sockets: Vec<Socket>,
    pub mode: Mode,
    pub iface: String,
    pub coalesce: Coalescing,
}

impl Xdp {
    /// Attaches to the configured interface for the DNS server on `listen` (its UDP sockets
    /// must be bound already: they answer what the program passes on).
    pub fn attach(config: &Config, listen: SocketAddr) -> Result<Xdp, XdpError> {
        let (iface, coalesce) = (config.interface.as_str(), config.coalesce);
        // `busy`: what EBUSY means at this step.
        let fail = |what: &str, busy: &str, error: io::Error| {
            let hint = match error.raw_os_error() {
                Some(libc::EPERM) => {
                    let read = |f| std::fs::read_to_string(f).unwrap_or_default();
                    permission_hint(&read("/proc/self/status"), &read("/proc/self/uid_map"))
                }
                Some(libc::EBUSY | libc::EEXIST) => busy.to_string(),
                Some(libc::ENOBUFS) => " (the sockets' frames are locked in memory, up to 4 MiB \
                                        a receive queue: raise RLIMIT_MEMLOCK or grant \
                                        CAP_IPC_LOCK)"
                    .to_string(),
                _ => String::new(),
            };
            XdpError {
                iface: iface.to_string(),
                message: format!("{what}: {error}{hint}"),
            }
        };
        let name = std::ffi::CString::new(iface)
            .map_err(|_| fail("bad interface name", "", io::ErrorKind::InvalidInput.into()))?;
        // SAFETY: a NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(fail("no such interface", "", io::Error::last_os_error()));
        }
        if ifindex == LOOPBACK_IFINDEX {
            loopback_ready(iface, listen).map_err(|message| XdpError {
                iface: iface.to_string(),
                message: message.to_string(),
            })?;
        }
        let bound = queue_bound(iface, ifindex);
        let map = program::socket_map(bound).map_err(|e| fail("creating the socket map", "", e))?;
        // The program first: it fails at once if the interface has one, and until a queue's
        // socket is in the map it passes that queue's frames on to the ordinary sockets.
        let prog = program::load(listen, MAX_FRAME, &map)
            .map_err(|e| fail("loading the program", "", e))?;
        let (link, mode, refused) = program::attach(&prog, ifindex).map_err(|e| {
            fail(
                "attaching the program",
                " (the interface has an XDP program already)",
                e,
            )
        })?;
        match refused {
            // The driver has no XDP: generic mode is all there is.
            Some(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
            Some(e) => {
                let hint = match e.raw_os_error() {
                    Some(libc::ENOSPC) => {
                        " (veth takes XDP only with at least as many receive queues as its \
                         peer has send queues)"
                    }
                    _ => "",
                };
                warn!(interface = iface, error = %e, "the driver refused XDP{hint}; using generic mode, which costs more per frame");
            }
            None => {}
        }
        let frames = ring_frames(bound);
        let mut sockets = Vec::with_capacity(bound as usize);
        for queue in 0..bound {
            let s = match Socket::new(ifindex, queue, listen.port(), frames) {
                Ok(s) => s,
                // Past the last queue the interface has (the bound can be too high).
                Err(e) if queue > 0 && e.raw_os_error() == Some(libc::EINVAL) => break,
                Err(e) => {
                    return Err(fail(
                        "opening an AF_XDP socket",
                        " (another AF_XDP socket holds a receive queue of the interface)",
                        e,
                    ));
                }
            };
            program::set_socket(&map, queue, s.fd.as_raw_fd())
                .map_err(|e| fail("filling the socket map", "", e))?;
            sockets.push(s);
        }
        Ok(Xdp {
            _link: link,
            sockets,
            mode,
            iface: iface.to_string(),
            coalesce,
        })
    }

    pub fn queues(&self) -> usize {
        self.sockets.len()
    }

    /// Memory the sockets' frames lock, in bytes.
    pub fn locked(&self) -> usize {
        self.sockets.iter().map(|s| s.umem.len).sum()
    }

    /// Starts one worker thread per socket; they stop when `stop` is set. The program stays
    /// attached until the returned guard is dropped.
    pub fn spawn(
        self,
        zone: Arc<Zone>,
        metrics: &Metrics,
        stop: Arc<AtomicBool>,
        log: QueryLog,
    ) -> io::Result<(Attached, Vec<JoinHandle<()>>)> {
        let Xdp {
            _link,
            sockets,
            iface,
            coalesce,
            ..
        } = self;
        let stats: Vec<Arc<Stats>> = sockets.iter().map(|s| Arc::new(Stats::new(s))).collect();
        let workers = sockets
            .into_iter()
            .zip(&stats)
            .map(|(socket, stats)| {
                let (zone, counters, stop) = (zone.clone(), metrics.counters(), stop.clone());
                let (stats, iface) = (stats.clone(), iface.clone());
                std::thread::Builder::new()
                    .name(format!("xdp-{}", socket.queue))
                    .spawn(move || {
                        Worker::new(socket, stats, log)
                            .run(&iface, &zone, &counters, &stop, coalesce);
                    })
            })
            .collect::<io::Result<_>>()?;
        metrics.register(Box::new(ScrapeCollector::new(&stats::SHAPES, move || {
            stats::collect(&iface, &stats)
        })));
        Ok((Attached(_link), workers))
    }
}

/// Keeps the program attached while it lives.
pub struct Attached(#[allow(dead_code)] OwnedFd);

/// The XDP listener's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The interface whose receive queues get the program and the AF_XDP sockets.
    pub interface: String,
    /// How workers wait after a receive that did not fill a batch (see `Worker::run`).
    pub coalesce: Coalescing,
}
