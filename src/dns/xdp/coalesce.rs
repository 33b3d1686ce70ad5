//! Waiting after a batch that did not fill (`--xdp-coalesce`), so that the queries arriving
//! meanwhile are answered together: always, or adaptively while the queue is busy.

use std::time::{Duration, Instant};

use crate::dns::BATCH;
pub use crate::dns::coalescing::Coalescing;

/// How long an adaptive XDP worker waits (`--xdp-coalesce auto`).
pub const ADAPTIVE_WAIT: Duration = Duration::from_micros(100);

/// `--xdp-coalesce`: `auto`, `0` (off) or a duration up to 1 ms, such as `50us`.
pub fn parse(s: &str) -> Result<Coalescing, String> {
    crate::dns::coalescing::parse(s, ADAPTIVE_WAIT)
}

/// One worker's [`Coalescing`], with what the adaptive kind goes by.
pub(super) struct Coalesce {
    pub(super) how: Coalescing,
    /// Adaptive: whether the worker waits now.
    pub(super) on: bool,
    /// Adaptive: the current window: when it began, the time spent waiting in it (polls and
    /// sleeps), and the frames the batches right after a sleep brought.
    pub(super) since: Instant,
    pub(super) idle: Duration,
    pub(super) sleeps: u64,
    pub(super) after_sleeps: u64,
}

/// How often an adaptive worker reconsiders.
pub(super) const WINDOW: Duration = Duration::from_millis(10);

impl Coalesce {
    pub(super) fn new(how: Coalescing, now: Instant) -> Self {
        Coalesce {
            how,
            on: false,
            since: now,
            idle: Duration::ZERO,
            sleeps: 0,
            after_sleeps: 0,
        }
    }

    /// The time now, when the worker's choice depends on it (adaptive); else no clock is read.
    pub(super) fn clock(&self) -> Option<Instant> {
        matches!(self.how, Coalescing::Adaptive(_)).then(Instant::now)
    }

    /// Time spent waiting since `from` (from [`Coalesce::clock`]).
    pub(super) fn waited_since(&mut self, from: Option<Instant>) {
        if let Some(t) = from {
            self.idle(t.elapsed());
        }
    }

    /// Time spent waiting.
    pub(super) fn idle(&mut self, d: Duration) {
        self.idle += d;
    }

    /// After a batch of `n` frames (`slept`: right after a sleep of ours; `now`: from
    /// [`Coalesce::clock`]): how long to sleep.
    pub(super) fn after_batch(
        &mut self,
        n: u32,
        slept: bool,
        now: Option<Instant>,
    ) -> Option<Duration> {
        let wait = match self.how {
            Coalescing::Off => return None,
            Coalescing::Always(d) => d,
            Coalescing::Adaptive(d) => {
                if let Some(now) = now {
                    self.reconsider(n, slept, now);
                }
                if !self.on {
                    return None;
                }
                d
            }
        };
        (n < BATCH as u32).then_some(wait)
    }

    /// Adaptive: counts the batch, and at the end of a window decides whether to wait.
    pub(super) fn reconsider(&mut self, n: u32, slept: bool, now: Instant) {
        if slept {
            self.sleeps += 1;
            self.after_sleeps += n as u64;
        }
        let elapsed = now - self.since;
        if elapsed < WINDOW {
            return;
        }
        let busy = 1.0 - self.idle.as_secs_f64() / elapsed.as_secs_f64();
        if !self.on {
            // Busy more than half the time: queries queue behind each other already, so
            // waiting for more costs little latency and saves the per-wake-up work.
            self.on = busy > 0.5;
        } else if busy < 0.2 || self.after_sleeps < 4 * self.sleeps {
            // The waits no longer gather several queries each.
            self.on = false;
        }
        self.since = now;
        self.idle = Duration::ZERO;
        self.sleeps = 0;
        self.after_sleeps = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_parses_auto_off_and_a_wait_up_to_a_millisecond() {
        assert_eq!(parse("0"), Ok(Coalescing::Off));
        assert_eq!(
            parse("1ms"),
            Ok(Coalescing::Always(Duration::from_millis(1)))
        );
        assert_eq!(parse("auto"), Ok(Coalescing::Adaptive(ADAPTIVE_WAIT)));
        assert!(parse("2ms").unwrap_err().contains("1ms"));
        assert!(parse("sometimes").unwrap_err().contains("auto"));
    }

    /// Feeds `co` one window of batches of `n` frames, `busy` of the time working (the rest
    /// idle), each batch after a sleep of its own if `slept`; returns the last decision.
    fn window(
        co: &mut Coalesce,
        start: Instant,
        n: u32,
        busy: f64,
        slept: bool,
    ) -> Option<Duration> {
        let batches = 10;
        let step = WINDOW / batches;
        let mut last = None;
        for k in 1..=batches {
            co.idle(step.mul_f64(1.0 - busy));
            last = co.after_batch(n, slept, Some(start + step * k));
        }
        last
    }

    #[test]
    fn coalescing_waits_as_asked() {
        let t = Instant::now();
        let us = Duration::from_micros(100);
        let mut off = Coalesce::new(Coalescing::Off, t);
        assert_eq!(window(&mut off, t, 1, 1.0, false), None);
        let mut always = Coalesce::new(Coalescing::Always(us), t);
        assert_eq!(always.after_batch(1, false, Some(t)), Some(us));
        assert_eq!(
            always.after_batch(BATCH as u32 - 1, true, Some(t)),
            Some(us)
        );
        // A full batch: more are waiting already.
        assert_eq!(always.after_batch(BATCH as u32, true, Some(t)), None);
        // Idle or quiet windows change nothing for it.
        assert_eq!(window(&mut always, t, 1, 0.01, true), Some(us));
    }

    #[test]
    fn adaptive_coalescing_follows_the_load() {
        let t = Instant::now();
        let us = Duration::from_micros(100);
        let mut co = Coalesce::new(Coalescing::Adaptive(us), t);
        // Starts without waiting, and stays so while the queue is busy half the time or less.
        assert_eq!(co.after_batch(1, false, Some(t)), None);
        assert_eq!(window(&mut co, t, 2, 0.5, false), None);
        assert_eq!(window(&mut co, t + WINDOW, 2, 0.3, false), None);
        // Busier: waits from the next window on.
        assert_eq!(window(&mut co, t + WINDOW * 2, 2, 0.8, false), Some(us));
        // While each wait gathers four or more, it goes on waiting, however busy the worker
        // looks now that it waits.
        assert_eq!(window(&mut co, t + WINDOW * 3, 6, 0.4, true), Some(us));
        assert_eq!(window(&mut co, t + WINDOW * 4, 4, 0.3, true), Some(us));
        // Waits that gather fewer: it stops.
        assert_eq!(window(&mut co, t + WINDOW * 5, 3, 0.4, true), None);
        // Busy again, then nearly idle: it stops even when the few waits gather enough.
        assert_eq!(window(&mut co, t + WINDOW * 6, 2, 0.9, false), Some(us));
        assert_eq!(window(&mut co, t + WINDOW * 7, 8, 0.1, true), None);
        // A full batch never waits.
        assert_eq!(window(&mut co, t + WINDOW * 8, 2, 0.9, false), Some(us));
        assert_eq!(
            co.after_batch(BATCH as u32, true, Some(t + WINDOW * 9)),
            None
        );
    }
}
