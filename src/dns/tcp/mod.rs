//! DNS over TCP (RFC 7766): length-prefixed messages, several queries per connection answered in
//! order, an idle timeout (a query must arrive whole within it, so trickling clients count as
//! idle), and a cap on open connections. At the cap a new client takes the place of the
//! connection that has gone longest without a query (RFC 7766 §6.2.3), so a crowd of idle or
//! slowloris connections cannot lock new clients out.
//!
//! Connections are spread over worker threads, each a current-thread runtime of its own (as
//! each UDP worker is a thread of its own): a query is read, answered and written on the thread
//! that woke for it, with no hand-over between threads, and each worker can wait a little before
//! it parks so that one wake-up answers several queries (`coalesce`).

mod coalesce;

pub use coalesce::{ADAPTIVE_BUDGET, parse as parse_coalesce};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::coalescing::Coalescing;
use super::transfer::transfer;
use super::{BATCH, Batch, QueryLog, Transport, account, respond_in};
use crate::cidr::Cidr;
use crate::metrics::{Metrics, QueryCounters};
use crate::zone::Zone;

#[derive(Debug, Clone)]
pub struct Config {
    /// A connection with no complete query for this long is closed.
    pub idle_timeout: Duration,
    /// Most connections open at once; a new one beyond it replaces the longest-idle one.
    pub max_connections: usize,
    /// Clients allowed zone transfers (AXFR, IXFR); everyone else is refused.
    pub allow_transfer: Vec<Cidr>,
    /// Worker threads the connections are spread over.
    pub workers: usize,
    /// Whether a worker waits before it parks (`--tcp-coalesce`).
    pub coalesce: Coalescing,
}

/// The open connections: whether its worker has taken each up yet, when it last finished a
/// query (or was taken up, or opened), and how to close it.
#[derive(Default)]
struct Connections {
    next: u64,
    conns: HashMap<u64, Open>,
}

struct Open {
    started: bool,
    last: Instant,
    stop: CancellationToken,
}

impl Connections {
    /// Registers a new connection; at `max`, first closes the one idle longest among those
    /// their workers have taken up (a flood of new connections accepted faster than the
    /// workers take them up must not close a client's before it could send its query), or,
    /// when none has been, the oldest.
    fn admit(&mut self, max: usize) -> (u64, CancellationToken, bool) {
        let mut evicted = false;
        while self.conns.len() >= max.max(1) {
            let Some((&oldest, _)) = self.conns.iter().min_by_key(|(_, o)| (!o.started, o.last))
            else {
                break;
            };
            if let Some(o) = self.conns.remove(&oldest) {
                o.stop.cancel();
                evicted = true;
            }
        }
        let id = self.next;
        self.next += 1;
        let stop = CancellationToken::new();
        let open = Open {
            started: false,
            last: Instant::now(),
            stop: stop.clone(),
        };
        self.conns.insert(id, open);
        (id, stop, evicted)
    }

    /// Its worker has taken the connection up: its idle time counts from now.
    fn start(&mut self, id: u64) {
        if let Some(o) = self.conns.get_mut(&id) {
            (o.started, o.last) = (true, Instant::now());
        }
    }

    fn touch(&mut self, id: u64) {
        if let Some(o) = self.conns.get_mut(&id) {
            o.last = Instant::now();
        }
    }
}

/// Starts `config.workers` threads that serve connections from `listener` until `shutdown`;
/// then they stop accepting, and the returned receiver fires once every connection has finished
/// the query it was reading or answering (idle ones close at once). The caller bounds that wait.
pub fn spawn(
    listener: std::net::TcpListener,
    config: Config,
    log: QueryLog,
    zone: Arc<Zone>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> std::io::Result<tokio::sync::oneshot::Receiver<()>> {
    let mut runtimes = Vec::new();
    for _ in 0..config.workers.max(1) {
        let pace = Mutex::new(coalesce::Pace::new(config.coalesce, Instant::now()));
        let metrics = metrics.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(move || {
                let wait = pace.lock().expect("pace lock").before_park_now();
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                    metrics.tcp_waited(wait);
                }
            })
            .build()?;
        runtimes.push(runtime);
    }
    let workers: Vec<_> = runtimes.iter().map(|r| r.handle().clone()).collect();
    // Accepting has a thread of its own, so that it keeps the kernel's backlog drained while
    // the workers answer, and a flood of new connections (each evicting the longest idle at
    // the cap) never keeps a worker from reading the query of a client that has just come.
    let accept = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let listener = {
        let _in = accept.enter();
        TcpListener::from_std(listener)?
    };
    // Workers serve until the acceptor says every connection is over; a thread that cannot be
    // started ends the ones already started.
    let over = CancellationToken::new();
    let started = over.clone().drop_guard();
    let coalescing = config.coalesce != Coalescing::Off;
    for (i, runtime) in runtimes.into_iter().enumerate() {
        let over = over.clone();
        std::thread::Builder::new()
            .name(format!("tcp-{i}"))
            .spawn(move || {
                if coalescing {
                    crate::sys::precise_sleeps();
                }
                runtime.block_on(over.cancelled());
            })?;
    }
    let (finished, done) = tokio::sync::oneshot::channel();
    let serve = serve(listener, workers, config, log, zone, metrics, shutdown);
    std::thread::Builder::new()
        .name("tcp-accept".into())
        .spawn(move || {
            accept.block_on(serve);
            over.cancel();
            let _ = finished.send(());
        })?;
    started.disarm();
    Ok(done)
}

/// Accepts connections on `listener` until `shutdown`, spreading them over `workers` in turn;
/// then stops accepting and returns once every connection has finished the query it was
/// reading or answering.
async fn serve(
    listener: TcpListener,
    workers: Vec<tokio::runtime::Handle>,
    config: Config,
    log: QueryLog,
    zone: Arc<Zone>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let open = Arc::new(Mutex::new(Connections::default()));
    let counters = metrics.shared_counters();
    // Each connection holds a sender; `recv` returns `None` once the last of them is gone.
    let (alive, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
    let mut next = 0;
    let handoff = Arc::new(tokio::sync::Semaphore::new(HANDOFF * workers.len()));
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
        // The acceptor stays at most a few connections ahead of the workers (the rest wait in
        // the kernel's backlog), so that at the cap there is always one a worker has taken up
        // to close rather than a client's that has just come.
        let taken_up = handoff
            .clone()
            .acquire_owned()
            .await
            .expect("the hand-off semaphore is never closed");
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
        // The connection moves to its worker's reactor.
        let stream = stream.into_std();
        let worker = &workers[next % workers.len()];
        next += 1;
        worker.spawn(async move {
            // Its worker has it: the first read follows at once, on this thread.
            open.lock().expect("connections lock").start(id);
            drop(taken_up);
            let touch = || open.lock().expect("connections lock").touch(id);
            let stream = stream.and_then(TcpStream::from_std);
            tokio::select! {
                _ = stop.cancelled() => {}
                r = async { connection(stream?, src, &config, log, &zone, &counters, &touch, &shutdown).await } => if let Err(e) = r {
                    debug!(%src, error = %e, "TCP connection ended");
                },
            }
            open.lock().expect("connections lock").conns.remove(&id);
            metrics.tcp_open(-1);
            drop(alive);
        });
    }
}

/// Connections accepted and not yet taken up by their worker, per worker, at most.
const HANDOFF: usize = 8;

/// The input buffer's size: many pipelined queries. It grows to hold a longer frame whole (up to
/// 64 KiB) and shrinks back once that is answered, so a thousand open connections hold a few
/// MiB, not 64 each.
const READ_BUFFER: usize = 4096;
/// Answers written so far are sent once they reach this many bytes, so a long pipeline of large
/// answers (or a zone transfer) cannot pile up in memory before the first write.
const WRITE_AT: usize = 64 * 1024;

/// One connection's buffers, reused for every batch: whatever one read brought (any number of
/// whole queries and the start of the next) is answered together, in order, into one buffer that
/// is sent with one write. A client pipelining queries costs a read and a write per batch, not a
/// read of the length, a read of the body and a write per query, and no allocation.
struct Conn {
    /// Received bytes; `start..end` is not yet answered (at most the start of one frame once a
    /// batch is done).
    input: Box<[u8]>,
    start: usize,
    end: usize,
    /// Framed answers waiting to be written.
    output: Vec<u8>,
    /// Made when a read first brings several queries: a client asking one at a time (most
    /// of them) costs no more memory than it did before batching.
    batch: Option<Box<Batch>>,
    answers: Vec<Vec<u8>>,
    /// A zone transfer's messages.
    messages: Vec<Vec<u8>>,
}

impl Conn {
    fn new() -> Self {
        Conn {
            input: vec![0; READ_BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
            output: Vec::new(),
            batch: None,
            // Each grows to the answers it holds once, then is reused.
            answers: (0..BATCH).map(|_| Vec::new()).collect(),
            messages: Vec::new(),
        }
    }

    /// The next whole frames in the input, up to [`BATCH`], as ranges of their bodies; the
    /// flag says a zero-length frame (the client's goodbye) followed them.
    fn frames(&self, ranges: &mut [std::ops::Range<usize>; BATCH]) -> (usize, bool) {
        let mut at = self.start;
        let mut n = 0;
        while n < BATCH && self.end - at >= 2 {
            let len = u16::from_be_bytes([self.input[at], self.input[at + 1]]) as usize;
            if len == 0 {
                return (n, true);
            }
            if self.end - at - 2 < len {
                break;
            }
            ranges[n] = at + 2..at + 2 + len;
            at += 2 + len;
            n += 1;
        }
        (n, false)
    }

    /// Makes room for the rest of the frame that has begun to arrive: moves it to the front,
    /// and grows the buffer if the frame is longer than it (or shrinks it back when empty).
    fn make_room(&mut self) {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
            if self.input.len() > READ_BUFFER {
                self.input = vec![0; READ_BUFFER].into_boxed_slice();
            }
            return;
        }
        if self.start > 0 {
            self.input.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end >= 2 {
            let need = 2 + u16::from_be_bytes([self.input[0], self.input[1]]) as usize;
            if need > self.input.len() {
                let mut bigger = vec![0; need].into_boxed_slice();
                bigger[..self.end].copy_from_slice(&self.input[..self.end]);
                self.input = bigger;
            }
        }
    }
}

/// Appends one message, framed with its length (RFC 1035 §4.2.2).
fn frame(output: &mut Vec<u8>, message: &[u8]) {
    output.extend_from_slice(&(message.len() as u16).to_be_bytes());
    output.extend_from_slice(message);
}

#[allow(clippy::too_many_arguments)]
async fn connection(
    mut stream: TcpStream,
    src: SocketAddr,
    config: &Config,
    log: QueryLog,
    zone: &Zone,
    counters: &QueryCounters,
    touch: &(dyn Fn() + Send + Sync),
    shutdown: &CancellationToken,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let idle = config.idle_timeout;
    let may_transfer = config.allow_transfer.iter().any(|c| c.contains(src.ip()));
    let mut c = Conn::new();
    // A query must arrive whole within the idle timeout of the last one (or of the connection's
    // start): a client trickling bytes is treated like an idle one.
    let idle_until = tokio::time::sleep(idle);
    tokio::pin!(idle_until);
    let mut ranges: [std::ops::Range<usize>; BATCH] = std::array::from_fn(|_| 0..0);
    loop {
        let mut consumed = false;
        let mut goodbye = false;
        while !goodbye {
            let (n, end) = c.frames(&mut ranges);
            goodbye = end;
            if n == 0 {
                break;
            }
            consumed = true;
            let start = Instant::now();
            let view = zone.view();
            let mut outcomes = [None; BATCH];
            if may_transfer {
                // Rare (an allow-listed client): one query at a time, in order, as a transfer
                // may be any of them.
                for r in &ranges[..n] {
                    let query = &c.input[r.clone()];
                    let (outcome, messages) = match transfer(zone, query, &mut c.messages) {
                        Some(o) => (o, &c.messages[..]),
                        None => {
                            let answer = &mut c.answers[0];
                            match respond_in(&view, query, Transport::Tcp, answer) {
                                Some(o) => (o, std::slice::from_ref(answer)),
                                None => continue,
                            }
                        }
                    };
                    let took = start.elapsed();
                    account(
                        counters,
                        log,
                        Transport::Tcp,
                        src,
                        &outcome,
                        query.len(),
                        messages,
                        took,
                    );
                    for m in messages {
                        frame(&mut c.output, m);
                    }
                    if c.output.len() >= WRITE_AT {
                        write(&mut stream, &mut c.output, idle).await?;
                    }
                }
            } else if n == 1 {
                let query = &c.input[ranges[0].clone()];
                outcomes[0] = respond_in(&view, query, Transport::Tcp, &mut c.answers[0]);
            } else {
                let mut packets: [&[u8]; BATCH] = [&[]; BATCH];
                for (p, r) in packets.iter_mut().zip(&ranges[..n]) {
                    *p = &c.input[r.clone()];
                }
                c.batch.get_or_insert_default().respond(
                    &view,
                    &packets[..n],
                    Transport::Tcp,
                    &mut c.answers[..n],
                    &mut outcomes[..n],
                );
            }
            drop(view);
            coalesce::answered(n);
            let took = start.elapsed();
            for (i, outcome) in outcomes[..n].iter().enumerate() {
                if let Some(o) = outcome {
                    let answer = &c.answers[i];
                    let response = std::slice::from_ref(answer);
                    account(
                        counters,
                        log,
                        Transport::Tcp,
                        src,
                        o,
                        ranges[i].len(),
                        response,
                        took,
                    );
                    frame(&mut c.output, answer);
                }
            }
            c.start = ranges[n - 1].end;
            if c.output.len() >= WRITE_AT {
                write(&mut stream, &mut c.output, idle).await?;
            }
        }
        if !c.output.is_empty() {
            write(&mut stream, &mut c.output, idle).await?;
        }
        if goodbye {
            return Ok(());
        }
        if consumed {
            touch();
            idle_until
                .as_mut()
                .reset(tokio::time::Instant::now() + idle);
        }
        c.make_room();
        // At shutdown a connection closes between queries: one that has begun to arrive, or
        // is pipelined behind the last, is still read and answered.
        let between = c.start == c.end;
        debug_assert!(c.end < c.input.len(), "room for the rest of the frame");
        let n = tokio::select! {
            biased;
            r = stream.read(&mut c.input[c.end..]) => r?,
            _ = shutdown.cancelled(), if between => return Ok(()),
            _ = &mut idle_until => return Ok(()),
        };
        if n == 0 {
            return Ok(());
        }
        c.end += n;
    }
}

/// Writes the framed answers (within the idle timeout, or the connection closes) and empties
/// the buffer for the next batch.
async fn write(
    stream: &mut TcpStream,
    output: &mut Vec<u8>,
    idle: Duration,
) -> std::io::Result<()> {
    let r = timeout(idle, stream.write_all(output)).await;
    output.clear();
    match r {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the client read no answer within the idle timeout",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_a_new_connection_takes_the_place_of_the_longest_idle() {
        let mut open = Connections::default();
        let (a, stop_a, evicted) = open.admit(3);
        assert!(!evicted);
        std::thread::sleep(Duration::from_millis(2));
        let (b, stop_b, _) = open.admit(3);
        std::thread::sleep(Duration::from_millis(2));
        let (c, stop_c, _) = open.admit(3);
        assert_eq!(open.conns.len(), 3);
        // a finishes a query: b is now the one idle longest.
        std::thread::sleep(Duration::from_millis(2));
        open.touch(a);
        let (d, stop_d, evicted) = open.admit(3);
        assert!(evicted);
        assert!(stop_b.is_cancelled(), "the longest idle is closed");
        assert!(!stop_a.is_cancelled() && !stop_c.is_cancelled() && !stop_d.is_cancelled());
        let mut ids: Vec<u64> = open.conns.keys().copied().collect();
        ids.sort();
        assert_eq!(ids, [a, c, d]);
        assert!(b < c && c < d, "ids are never reused");
        // Touching a closed connection changes nothing; a cap of 0 still admits one.
        open.touch(b);
        assert_eq!(open.conns.len(), 3);
        let mut one = Connections::default();
        let (_, first, _) = one.admit(0);
        let (_, _, evicted) = one.admit(0);
        assert!(evicted && first.is_cancelled());
        assert_eq!(one.conns.len(), 1);
    }

    #[test]
    fn a_connection_its_worker_has_not_taken_up_is_closed_last() {
        let mut open = Connections::default();
        // e was accepted first but its worker has not read from it yet; f has been taken up.
        let (_, stop_e, _) = open.admit(2);
        std::thread::sleep(Duration::from_millis(2));
        let (f, stop_f, _) = open.admit(2);
        open.start(f);
        let (_, stop_g, evicted) = open.admit(2);
        assert!(
            evicted && stop_f.is_cancelled(),
            "the one taken up goes first"
        );
        assert!(!stop_e.is_cancelled() && !stop_g.is_cancelled());
        // None taken up: the oldest goes.
        let (_, _, evicted) = open.admit(2);
        assert!(evicted && stop_e.is_cancelled() && !stop_g.is_cancelled());
    }
}
