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

/// The sending side the watches mark through. Cheap to clone.
#[derive(Debug)]
pub struct Marks<K>(mpsc::UnboundedSender<Mark<K>>);

impl<K> Clone for Marks<K> {
    fn clone(&self) -> Self {
        Marks(self.0.clone())
    }
}

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
    tx.send_if_modified(|was| {
        let changed = *was != on;
        *was = on;
        changed
    })
}

/// How a half's keys are worked through.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
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
    settings: Settings,
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
        // over, and at 10,000 exports each walk took milliseconds from every change).
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
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// The next key to run, as [`Queue::next`] gives it, without its wait.
    fn key<K: Clone + Eq + Hash + Debug>(q: &mut Queue<K>, now: Instant) -> Option<K> {
        q.next(now).map(|(k, _)| k)
    }

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn a_key_marked_twice_is_queued_once_in_the_order_marked() {
        let t0 = Instant::now();
        let mut q = Queue::new(10, Backoff::DEFAULT);
        for k in ["b", "a", "b", "c", "a"] {
            q.mark(k, t0);
        }
        let order: Vec<_> = std::iter::from_fn(|| key(&mut q, t0)).collect();
        assert_eq!(order, ["b", "a", "c"]);
    }

    #[test]
    fn at_most_concurrency_keys_run_at_once() {
        let t0 = Instant::now();
        let mut q = Queue::new(2, Backoff::DEFAULT);
        ["a", "b", "c"].into_iter().for_each(|k| q.mark(k, t0));
        assert_eq!(key(&mut q, t0), Some("a"));
        assert_eq!(key(&mut q, t0), Some("b"));
        assert_eq!(key(&mut q, t0), None);
        q.done(&"a", true, t0);
        assert_eq!(key(&mut q, t0), Some("c"));
    }

    #[test]
    fn a_key_marked_while_it_runs_runs_again_after_and_not_at_once() {
        let t0 = Instant::now();
        let mut q = Queue::new(10, Backoff::DEFAULT);
        q.mark("a", t0);
        assert_eq!(key(&mut q, t0), Some("a"));
        q.mark("a", t0);
        assert_eq!(key(&mut q, t0), None, "never twice at once");
        q.done(&"a", true, t0);
        assert_eq!(key(&mut q, t0), Some("a"));
        q.done(&"a", true, t0);
        assert!(q.idle());
    }

    #[test]
    fn backoff_doubles_to_its_cap() {
        let b = Backoff {
            first: Duration::from_secs(1),
            max: Duration::from_secs(10),
        };
        let waits: Vec<u64> = (1..=6).map(|n| b.after(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
        assert_eq!(b.after(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn a_failed_key_waits_longer_each_time_and_a_success_resets_it() {
        let t0 = Instant::now();
        let mut q = Queue::new(10, Backoff::DEFAULT);
        q.mark("a", t0);
        let mut now = t0;
        for (failure, wait) in [(1, 1_000), (2, 2_000), (3, 4_000)] {
            assert_eq!(key(&mut q, now), Some("a"));
            q.done(&"a", false, now);
            assert_eq!(q.failures(&"a"), failure);
            assert_eq!(q.next_due(), Some(at(now, wait)));
            assert_eq!(key(&mut q, at(now, wait - 1)), None, "not before its wait");
            now = at(now, wait);
        }
        assert_eq!(key(&mut q, now), Some("a"));
        q.done(&"a", true, now);
        assert_eq!((q.failures(&"a"), q.next_due()), (0, None));
        q.mark("a", t0);
        assert_eq!(key(&mut q, now), Some("a"));
        q.done(&"a", false, now);
        assert_eq!(q.next_due(), Some(at(now, 1_000)), "the count starts again");
    }

    /// A change to a key that waits after a failure runs it now (something changed); its
    /// failures stay counted, so the wait after another failure is longer.
    #[test]
    fn a_mark_runs_a_waiting_key_now() {
        let t0 = Instant::now();
        let mut q = Queue::new(10, Backoff::DEFAULT);
        q.mark("a", t0);
        key(&mut q, t0);
        q.done(&"a", false, t0);
        q.mark("a", t0);
        assert_eq!(key(&mut q, t0), Some("a"));
        q.done(&"a", false, t0);
        assert_eq!(q.next_due(), Some(at(t0, 2_000)));
        // Its earlier wait was dropped: it is queued once when due.
        assert_eq!(key(&mut q, at(t0, 2_000)), Some("a"));
        assert_eq!(key(&mut q, at(t0, 2_000)), None);
    }

    #[test]
    fn a_key_waits_from_its_first_mark_and_a_retry_from_none() {
        let t0 = Instant::now();
        let mut q = Queue::new(10, Backoff::DEFAULT);
        q.mark("a", t0);
        q.mark("a", at(t0, 3));
        assert_eq!(
            q.next(at(t0, 5)),
            Some(("a", Some(Duration::from_millis(5))))
        );
        // Marked while it runs: it waits from that mark, through the rest of the run.
        q.mark("a", at(t0, 7));
        q.done(&"a", true, at(t0, 9));
        assert_eq!(
            q.next(at(t0, 10)),
            Some(("a", Some(Duration::from_millis(3))))
        );
        // Failed: the retry after its wait was marked by nothing.
        q.done(&"a", false, at(t0, 10));
        assert_eq!(q.next(at(t0, 1_010)), Some(("a", None)));
    }

    #[test]
    fn one_failing_key_does_not_hold_the_others() {
        let t0 = Instant::now();
        let mut q = Queue::new(1, Backoff::DEFAULT);
        ["bad", "b", "c"].into_iter().for_each(|k| q.mark(k, t0));
        assert_eq!(key(&mut q, t0), Some("bad"));
        q.done(&"bad", false, t0);
        assert_eq!(key(&mut q, t0), Some("b"));
        q.done(&"b", true, t0);
        assert_eq!(key(&mut q, t0), Some("c"));
        q.done(&"c", true, t0);
        assert_eq!(key(&mut q, t0), None);
        assert_eq!(key(&mut q, at(t0, 1_000)), Some("bad"));
    }

    /// A half that records what it ran; `slow` keys take 10 s, `bad` ones fail.
    #[derive(Default)]
    struct Half {
        keys: Vec<&'static str>,
        ran: Mutex<Vec<(&'static str, bool, Instant)>>,
        timings: Mutex<Vec<(&'static str, Timing)>>,
        idle: Mutex<usize>,
    }

    impl Reconciler for Arc<Half> {
        type Key = &'static str;
        type Error = String;

        fn every_key(&self) -> Vec<&'static str> {
            self.keys.clone()
        }

        async fn reconcile(&self, key: &'static str) -> Result<(), String> {
            if key.starts_with("slow") {
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
            if key.starts_with("bad") {
                return Err("refused".into());
            }
            Ok(())
        }

        fn ran(
            &self,
            key: &&'static str,
            result: &Result<(), String>,
            _: Option<Duration>,
            timing: Timing,
        ) {
            let now = Instant::now();
            self.ran.lock().unwrap().push((key, result.is_ok(), now));
            self.timings.lock().unwrap().push((key, timing));
        }

        fn idle(&self) {
            *self.idle.lock().unwrap() += 1;
        }
    }

    struct Started {
        half: Arc<Half>,
        marks: Marks<&'static str>,
        leading: watch::Sender<bool>,
        ready: watch::Sender<bool>,
        shutdown: CancellationToken,
        task: tokio::task::JoinHandle<()>,
    }

    fn start(keys: Vec<&'static str>) -> Started {
        let half = Arc::new(Half {
            keys,
            ..Half::default()
        });
        let (marks, rx) = Marks::channel();
        let (leading, lrx) = watch::channel(false);
        let (ready, rrx) = watch::channel(false);
        let shutdown = CancellationToken::new();
        let settings = Settings {
            concurrency: 4,
            backoff: Backoff::DEFAULT,
            resync: Duration::from_secs(300),
        };
        let (h, s) = (half.clone(), shutdown.clone());
        let task = tokio::spawn(async move { run(&h, rx, lrx, rrx, settings, s).await });
        Started {
            half,
            marks,
            leading,
            ready,
            shutdown,
            task,
        }
    }

    impl Started {
        fn ran(&self) -> Vec<(&'static str, bool)> {
            let ran = self.half.ran.lock().unwrap();
            ran.iter().map(|(k, ok, _)| (*k, *ok)).collect()
        }

        /// Lets the runner do what it can now. (A sleep, not yields: with the clock paused,
        /// a yield lets the clock run on to the next timer, the resync's.)
        async fn settle(&self) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }

        async fn stop(self) {
            self.shutdown.cancel();
            self.task.await.unwrap();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_runs_until_leading_and_ready_and_then_everything_does() {
        let s = start(vec!["a", "b"]);
        s.marks.keys(["c"]);
        s.settle().await;
        s.leading.send_replace(true);
        s.settle().await;
        assert_eq!(s.ran(), [], "not ready: nothing written");
        s.ready.send_replace(true);
        s.settle().await;
        let mut ran = s.ran();
        ran.sort();
        assert_eq!(ran, [("a", true), ("b", true), ("c", true)]);
        assert!(*s.half.idle.lock().unwrap() >= 1);
        s.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn losing_the_lead_stops_new_work_and_winning_it_marks_everything() {
        let s = start(vec!["a"]);
        s.ready.send_replace(true);
        s.leading.send_replace(true);
        s.settle().await;
        assert_eq!(s.ran(), [("a", true)]);
        s.leading.send_replace(false);
        s.settle().await;
        s.marks.keys(["b"]);
        s.settle().await;
        assert_eq!(s.ran().len(), 1, "a follower writes nothing");
        s.leading.send_replace(true);
        s.settle().await;
        let mut ran = s.ran();
        ran.sort();
        assert_eq!(ran, [("a", true), ("a", true), ("b", true)]);
        s.stop().await;
    }

    /// No batch barrier: a key that takes 10 s does not hold one marked after it.
    #[tokio::test(start_paused = true)]
    async fn a_slow_key_holds_only_itself() {
        let s = start(vec![]);
        s.ready.send_replace(true);
        s.leading.send_replace(true);
        s.settle().await;
        s.marks.keys(["slow"]);
        s.settle().await;
        s.marks.keys(["quick"]);
        s.settle().await;
        assert_eq!(s.ran(), [("quick", true)]);
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert_eq!(s.ran(), [("quick", true), ("slow", true)]);
        s.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_key_is_retried_with_growing_waits() {
        let s = start(vec![]);
        s.ready.send_replace(true);
        s.leading.send_replace(true);
        let t0 = Instant::now();
        s.marks.keys(["bad"]);
        tokio::time::sleep(Duration::from_millis(7_500)).await;
        let ran = s.half.ran.lock().unwrap().clone();
        let times: Vec<u64> = ran
            .iter()
            .map(|(_, _, t)| (*t - t0).as_millis() as u64)
            .collect();
        // At 0, then 1 s, 2 s and 4 s after each failure: 0, 1, 3, 7 s.
        assert_eq!(times, [0, 1_000, 3_000, 7_000]);
        s.stop().await;
    }

    /// A key's wait counts from its first mark to its start; its work, its run. A retry after
    /// a failure's wait has no mark to count from.
    #[tokio::test(start_paused = true)]
    async fn each_run_says_how_long_its_key_waited_and_worked() {
        let s = start(vec![]);
        // Marked while nothing may run: they wait until this replica leads and is ready.
        s.marks.keys(["slow-1", "quick", "quick"]);
        s.settle().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        s.ready.send_replace(true);
        s.leading.send_replace(true);
        s.settle().await;
        s.marks.keys(["bad"]);
        tokio::time::sleep(Duration::from_millis(11_500)).await;
        let timings = s.half.timings.lock().unwrap().clone();
        let secs = |d: Duration| (d.as_millis() as f64 / 1000.0).round();
        let seen: Vec<(&str, Option<f64>, f64)> = timings
            .iter()
            .map(|(k, t)| (*k, t.waited.map(secs), secs(t.worked)))
            .collect();
        assert_eq!(
            seen,
            [
                ("quick", Some(2.0), 0.0),
                ("bad", Some(0.0), 0.0),
                ("bad", None, 0.0),
                ("bad", None, 0.0),
                ("bad", None, 0.0),
                ("slow-1", Some(2.0), 10.0),
            ]
        );
        s.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_resync_marks_everything() {
        let s = start(vec!["a"]);
        s.ready.send_replace(true);
        s.leading.send_replace(true);
        s.settle().await;
        assert_eq!(s.ran().len(), 1);
        tokio::time::sleep(Duration::from_secs(301)).await;
        assert_eq!(s.ran().len(), 2);
        s.stop().await;
    }
}
