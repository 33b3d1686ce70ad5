//! One worker thread per socket: receive a batch, answer it through the shared lookup, send,
//! and refill the rings.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use tracing::{debug, warn};

use crate::dns::{BATCH, Batch, QueryLog, Transport, account};
use crate::metrics::QueryCounters;
use crate::zone::{View, Zone, prefetch};

use super::coalesce::{Coalesce, Coalescing};
use super::frame;
use super::socket::{FRAME, Socket};
use super::stats::{NO_SEND_FRAME, Stats};

/// How often an idle worker looks at the stop flag, in milliseconds.
const IDLE_CHECK_MS: i32 = 100;

/// Buffers of one worker, reused for every batch.
pub(super) struct Worker {
    pub(super) socket: Socket,
    pub(super) stats: Arc<Stats>,
    /// Send frames not in the kernel's hands.
    pub(super) free_tx: Vec<u64>,
    pub(super) batch: Batch,
    pub(super) answers: Vec<Vec<u8>>,
    pub(super) log: QueryLog,
}

impl Worker {
    pub(super) fn new(socket: Socket, stats: Arc<Stats>, log: QueryLog) -> Self {
        Worker {
            free_tx: (socket.frames..2 * socket.frames)
                .map(|k| k as u64 * FRAME as u64)
                .collect(),
            socket,
            stats,
            batch: Batch::default(),
            answers: (0..BATCH).map(|_| Vec::with_capacity(2048)).collect(),
            log,
        }
    }

    /// Answers until `stop`. After a receive that did not fill a batch, it may wait (as
    /// `coalesce` says) before looking again: the queries that arrive meanwhile are then
    /// answered together, and each send and each wake-up serves several answers instead of one
    /// or two (at the load of `benches/compare-knot.sh`, 1.4 answers a send without the wait).
    pub(super) fn run(
        mut self,
        iface: &str,
        zone: &Zone,
        counters: &QueryCounters,
        stop: &AtomicBool,
        coalesce: Coalescing,
    ) {
        let mut view = zone.view();
        let mut failed = false;
        if coalesce != Coalescing::Off {
            crate::sys::precise_sleeps();
        }
        let mut co = Coalesce::new(coalesce, Instant::now());
        // Whether the last thing this worker did was a coalescing sleep.
        let mut slept = false;
        while !stop.load(Ordering::Relaxed) {
            let n = self.socket.rx.ready().min(BATCH as u32);
            if n == 0 {
                // Answers still in the send ring (the last kick found the device busy) get
                // another kick soon; otherwise sleep until frames come.
                let ms = if self.socket.sending() {
                    self.kick(&mut failed);
                    1
                } else {
                    IDLE_CHECK_MS
                };
                // A socket whose interface went away gets no more frames, so its error is
                // looked at only after a wait that timed out (not once per wake-up).
                let t = co.clock();
                let woken = self.socket.wait(ms);
                co.waited_since(t);
                slept = false;
                if !woken && let Some(e) = self.socket.error() {
                    let down = e.raw_os_error() == Some(libc::ENETDOWN);
                    if down && self.socket.bound() {
                        // The error without the unbinding: the socket still serves once the
                        // link is up again.
                        debug!(
                            interface = iface,
                            queue = self.socket.queue,
                            "the link went down; the socket stays bound"
                        );
                    } else if down {
                        warn!(
                            interface = iface,
                            queue = self.socket.queue,
                            "the interface went away: UDP on it is answered by the ordinary sockets from now on (restart to attach XDP again)"
                        );
                        self.stats.up.store(false, Ordering::Relaxed);
                        return;
                    } else {
                        warn!(interface = iface, error = %e, queue = self.socket.queue, "AF_XDP socket error");
                    }
                }
                self.socket.reap(&mut self.free_tx);
                // Also while idle, so an old generation is not kept alive.
                view.refresh();
                continue;
            }
            view.refresh();
            self.batch(n, &view, counters);
            self.kick(&mut failed);
            let now = co.clock();
            let sleep = co.after_batch(n, slept, now);
            slept = false;
            if let Some(d) = sleep {
                std::thread::sleep(d);
                co.waited_since(now);
                slept = true;
            }
        }
        debug!(queue = self.socket.queue, "XDP worker stopped");
    }

    pub(super) fn kick(&self, failed: &mut bool) {
        match self.socket.kick() {
            Ok(()) => *failed = false,
            Err(e) => {
                if !*failed {
                    warn!(error = %e, queue = self.socket.queue, "XDP send failed");
                }
                *failed = true;
            }
        }
    }

    /// Answers the `n` received frames waiting, puts the answers in the send ring, and gives
    /// the frames back to the fill ring.
    pub(super) fn batch(&mut self, n: u32, view: &View<'_>, counters: &QueryCounters) {
        let start = Instant::now();
        let socket = &self.socket;
        socket.reap(&mut self.free_tx);
        let mut packets: [&[u8]; BATCH] = [&[]; BATCH];
        let mut replies: [Option<frame::Reply>; BATCH] = [None; BATCH];
        let mut addrs = [0u64; BATCH];
        let mut frames: [&[u8]; BATCH] = [&[]; BATCH];
        // The frames were written on the CPU that received them: start loading them all (the
        // headers and a typical query fill two cache lines) before reading any.
        for k in 0..n as usize {
            let d = socket.rx.read(k as u32);
            addrs[k] = d.addr;
            frames[k] = socket.frame(d.addr, d.len as usize);
            prefetch(frames[k].as_ptr());
            prefetch(frames[k].as_ptr().wrapping_add(64));
        }
        for k in 0..n as usize {
            match frame::parse(frames[k], socket.port) {
                Ok((reply, message)) => {
                    packets[k] = message;
                    replies[k] = Some(reply);
                }
                Err(why) => add(&self.stats.dropped[why as usize], 1),
            }
        }
        add(&self.stats.received, n as u64);
        let n = n as usize;
        let (outcomes, took) =
            self.batch
                .respond_datagrams(view, &packets[..n], &mut self.answers[..n], start);
        let mut queued = 0;
        for k in 0..n {
            let (Some(outcome), Some(reply)) = (outcomes[k], replies[k]) else {
                continue;
            };
            let answer = &self.answers[k];
            let Some(tx) = self.free_tx.pop() else {
                add(&self.stats.dropped[NO_SEND_FRAME], 1);
                continue;
            };
            account(
                counters,
                self.log,
                Transport::Udp,
                reply.client,
                &outcome,
                packets[k].len(),
                std::slice::from_ref(answer),
                took,
            );
            let len = frame::write(&reply, answer, socket.frame_mut(tx));
            socket.tx.write(
                queued,
                libc::xdp_desc {
                    addr: tx,
                    len: len as u32,
                    options: 0,
                },
            );
            queued += 1;
        }
        socket.tx.submit(queued);
        socket.rx.release(n as u32);
        // The fill ring holds every receive frame, so there is always room for these.
        debug_assert!(socket.fill.room() >= n as u32);
        for (k, &addr) in addrs[..n].iter().enumerate() {
            socket.fill.write(k as u32, addr & !(FRAME as u64 - 1));
        }
        socket.fill.submit(n as u32);
    }
}

/// Adds to a counter only this thread writes (no locked instruction).
pub(super) fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}
