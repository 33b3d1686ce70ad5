//! The controller loop both halves share: keys in, each brought up to date by `reconcile(key)`
//! while this replica leads and its watches have listed everything, several at once.
//!
//! kube-runtime's `Controller` does not fit the bridge as it is: the export half acts on an
//! export that is gone (to take its label back), an import's key is a logical service with no
//! root object, and nothing in it waits for a Lease. What it does, this does too:
//! - a key marked while queued is queued once; one marked while it runs runs again after;
//! - no batch: a slow key holds only itself, and the watches are read all along;
//! - a key that fails waits, longer at each failure in a row ([`Backoff`]), and a success
//!   forgets its failures;
//! - everything is marked when this replica starts leading, when it becomes ready, and at every
//!   resync (level-triggered: a change missed is made at the next of these).
//!
//! [`Queue`] is the pure part (marks, what runs next, what waits until when); [`run`] drives it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What a watch says to the runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark<K> {
    /// These keys may need work.
    Keys(Vec<K>),
    /// Every key may (a relist, a change that touches everything).
    All,
}

/// The sending side the watches mark through.
#[derive(Debug)]
pub struct Marks<K>(mpsc::UnboundedSender<Mark<K>>);

impl<K> Marks<K> {
    pub fn channel() -> (Marks<K>, mpsc::UnboundedReceiver<Mark<K>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Marks(tx), rx)
    }

    pub fn keys(&self, keys: impl IntoIterator<Item = K>) {
        let keys: Vec<K> = keys.into_iter().collect();
        if !keys.is_empty() {
            let _ = self.0.send(Mark::Keys(keys));
        }
    }

    pub fn all(&self) {
        let _ = self.0.send(Mark::All);
    }
}

/// How long a key that failed waits before it is tried again: `first` after one failure,
/// doubled at each failure in a row, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Backoff {
    pub const DEFAULT: Backoff = Backoff {
        first: Duration::from_secs(1),
        max: Duration::from_secs(60),
    };

    /// The wait after the `failures`th failure in a row (1 or more).
    pub fn after(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.first
            .checked_mul(1 << doublings)
            .map_or(self.max, |d| d.min(self.max))
    }
}

/// The keys waiting, running and failing, and what may run next. Pure: time is passed in.
#[derive(Debug)]
pub struct Queue<K> {
    /// Marked, in the order marked, once each.
    ready: VecDeque<K>,
    /// The keys in `ready`, and when each was first marked from outside (a watch, a resync,
    /// taking the lead) since it last started: what its [`Timing::waited`] counts from (none
    /// for a key queued by its wait after a failure ending).
    queued: HashMap<K, Option<Instant>>,
    running: HashSet<K>,
    /// Marked while running: queued again when done (with when it was first marked, as
    /// `queued`). One table with `queued`, not a third for the times: a start marks every key.
    again: HashMap<K, Option<Instant>>,
    /// Failures in a row, and when the key is tried again (its place in `due`).
    failing: HashMap<K, (u32, Instant, u64)>,
    /// The same, by when.
    due: BTreeMap<(Instant, u64), K>,
    /// Tie-breaker of `due`'s keys.
    seq: u64,
    backoff: Backoff,
    concurrency: usize,
}

impl<K: Clone + Eq + Hash + Debug> Queue<K> {
    pub fn new(concurrency: usize, backoff: Backoff) -> Queue<K> {
        Queue {
            ready: VecDeque::new(),
            queued: HashMap::new(),
            running: HashSet::new(),
            again: HashMap::new(),
            failing: HashMap::new(),
            due: BTreeMap::new(),
            seq: 0,
            backoff,
            concurrency: concurrency.max(1),
        }
    }

    /// `key` may need work, says a watch or a resync at `now`: it runs as soon as a slot is
    /// free (a key waiting after a failure too: something changed), or again after it if it is
    /// running now; its wait counts from its first mark since it last started.
    pub fn mark(&mut self, key: K, now: Instant) {
        self.enqueue(key, Some(now));
    }

    /// Queues `key`; its wait counts from `marked`, or from an earlier mark since it last
    /// started.
    fn enqueue(&mut self, key: K, marked: Option<Instant>) {
        let running = self.running.contains(&key);
        let table = match running {
            true => &mut self.again,
            false => &mut self.queued,
        };
        match table.get_mut(&key) {
            Some(at) => {
                if at.is_none() {
                    *at = marked;
                }
            }
            None => {
                if !running {
                    self.ready.push_back(key.clone());
                }
                table.insert(key, marked);
            }
        }
    }

    /// The next key to run now, if a slot is free, and how long it waited since a mark (none
    /// for a retry after a failure's wait); it counts as running until [`Queue::done`].
    pub fn next(&mut self, now: Instant) -> Option<(K, Option<Duration>)> {
        self.wake(now);
        if self.running.len() >= self.concurrency {
            return None;
        }
        let key = self.ready.pop_front()?;
        let waited = self.queued.remove(&key).flatten().map(|at| now - at);
        self.running.insert(key.clone());
        if self.ready.is_empty() && self.queued.capacity() > 1024 {
            // Drained: a queue that held every key (a start, a relist, a resync) gives its
            // tables back instead of keeping them at their largest.
            self.ready.shrink_to_fit();
            self.queued.shrink_to_fit();
        }
        Some((key, waited))
    }

    /// `key` ran: a success forgets its failures; a failure waits by [`Backoff`] unless it was
    /// marked while it ran (then it runs again now, its failures still counted). The wait, for a
    /// failure.
    pub fn done(&mut self, key: &K, ok: bool, now: Instant) -> Option<Duration> {
        self.running.remove(key);
        // Its earlier wait, if it still stands, is dropped: this run replaces it.
        let failures = match self.failing.remove(key) {
            Some((n, at, seq)) => {
                self.due.remove(&(at, seq));
                n
            }
            None => 0,
        };
        let wait = (!ok).then(|| {
            let wait = self.backoff.after(failures + 1);
            self.seq += 1;
            self.failing
                .insert(key.clone(), (failures + 1, now + wait, self.seq));
            self.due.insert((now + wait, self.seq), key.clone());
            wait
        });
        if let Some(marked) = self.again.remove(key) {
            self.enqueue(key.clone(), marked);
        }
        wait
    }

    /// Queues the failed keys whose wait is over.
    fn wake(&mut self, now: Instant) {
        while let Some(entry) = self.due.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.enqueue(key, None);
        }
    }

    /// When the next failed key is due, if any.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.keys().next().map(|(at, _)| *at)
    }

    /// Whether nothing is queued or running.
    pub fn idle(&self) -> bool {
        self.ready.is_empty() && self.running.is_empty()
    }

    /// Failures in a row of `key`.
    pub fn failures(&self, key: &K) -> u32 {
        self.failing.get(key).map_or(0, |(n, ..)| *n)
    }
}

/// Sets `tx` to `on`, telling its receivers only of a change; whether it changed.
pub fn set(tx: &watch::Sender<bool>, on: bool) -> bool {
    tx.send_if_modified(|was| std::mem::replace(was, on) != on)
}

/// How a half's keys are worked through.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// How many keys are brought up to date at once (each is a round trip or two to the API
    /// server).
    pub concurrency: usize,
    pub backoff: Backoff,
    /// Everything is marked this often.
    pub resync: Duration,
}

/// How long one run of a key took: from the first mark since its last start (a watch, a
/// resync, taking the lead; a mark while it runs counts, and the run it waits for with it) to
/// its start, if something marked it (not a retry after a failure's wait), and the run itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub waited: Option<Duration>,
    pub worked: Duration,
}

/// What a half gives the runner: every key it knows of, and the work on one.
pub trait Reconciler {
    type Key: Clone + Eq + Hash + Debug + Send + 'static;
    type Error: std::fmt::Display;

    /// Every key there may be work on: marked on `All`, on leading, on ready, on resync.
    fn every_key(&self) -> Vec<Self::Key>;

    /// Brings `key` to what its judge says.
    fn reconcile(&self, key: Self::Key) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// `key` ran, taking `timing`: count it, say a failure (it is tried again after `wait`).
    fn ran(
        &self,
        key: &Self::Key,
        result: &Result<(), Self::Error>,
        wait: Option<Duration>,
        timing: Timing,
    );

    /// Nothing is queued or running: a moment for gauges that look at everything (at most once
    /// a second).
    fn idle(&self) {}
}

/// The least time between two calls of [`Reconciler::idle`].
const IDLE_EVERY: Duration = Duration::from_secs(1);

/// Works through the keys `marks` gives until `shutdown` (or until every sender is gone), while
/// `leading` and `ready` both say true; what is marked meanwhile waits.
pub async fn run<R: Reconciler>(
    half: &R,
    mut marks: mpsc::UnboundedReceiver<Mark<R::Key>>,
    mut leading: watch::Receiver<bool>,
    mut ready: watch::Receiver<bool>,
    settings: Config,
    shutdown: CancellationToken,
) {
    let mut queue: Queue<R::Key> = Queue::new(settings.concurrency, settings.backoff);
    let mut running = FuturesUnordered::new();
    // An `All` seen while not allowed to write: marked when allowed, from the stores then.
    let mut all = false;
    let mut was_open = false;
    let mut resync = tokio::time::interval(settings.resync);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    resync.tick().await;
    let mut was_idle = true;
    let mut release_due = false;
    let (mut gauges_due, mut last_gauges) = (false, None::<Instant>);
    loop {
        let open = *leading.borrow_and_update() && *ready.borrow_and_update();
        // Taking the lead, or becoming ready: everything, as the stores hold it now.
        all |= open && !was_open;
        was_open = open;
        if open {
            if std::mem::take(&mut all) {
                let now = Instant::now();
                half.every_key()
                    .into_iter()
                    .for_each(|k| queue.mark(k, now));
                release_due = true;
            }
            while let Some((key, waited)) = queue.next(Instant::now()) {
                let (k, start) = (key.clone(), Instant::now());
                running.push(async move {
                    let result = half.reconcile(key).await;
                    let worked = start.elapsed();
                    (k, result, Timing { waited, worked })
                });
            }
        }
        // The gauges walk every object: once when the queue drains, but at most once an
        // IDLE_EVERY (a change and the watch events of its own writes drain it three times
        // over, and a walk is not free at scale: docs/performance.md).
        let idle = queue.idle();
        gauges_due |= idle && !was_idle;
        was_idle = idle;
        if idle && std::mem::take(&mut release_due) {
            // Every key was worked through (a start, a relist, a resync): what its watches'
            // lists and its writes held meanwhile is free now, and goes back to the system
            // rather than staying resident at the peak.
            crate::sys::release_free_memory();
        }
        let now = Instant::now();
        let gauges_at = (gauges_due && idle).then(|| last_gauges.map_or(now, |t| t + IDLE_EVERY));
        if gauges_at.is_some_and(|at| at <= now) {
            half.idle();
            (gauges_due, last_gauges) = (false, Some(now));
        }
        let gauges_at = gauges_at.filter(|at| *at > now);
        let due = queue.next_due();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            Some((key, result, timing)) = running.next(), if !running.is_empty() => {
                let wait = queue.done(&key, result.is_ok(), Instant::now());
                half.ran(&key, &result, wait, timing);
            }
            marked = marks.recv() => match marked {
                Some(Mark::Keys(keys)) => {
                    let now = Instant::now();
                    keys.into_iter().for_each(|k| queue.mark(k, now));
                }
                Some(Mark::All) => all = true,
                None => return,
            },
            changed = leading.changed() => if changed.is_err() {
                return;
            },
            changed = ready.changed() => if changed.is_err() {
                return;
            },
            _ = resync.tick() => all = true,
            _ = super::sleep_until(due), if open => {}
            _ = super::sleep_until(gauges_at), if gauges_at.is_some() => {}
        }
    }
}

#[cfg(test)]
mod tests;
