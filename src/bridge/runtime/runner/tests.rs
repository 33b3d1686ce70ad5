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
    let settings = Config {
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
