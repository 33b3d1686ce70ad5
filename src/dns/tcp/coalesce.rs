//! Waiting before a TCP worker parks (`--tcp-coalesce`), so that the queries arriving on any of
//! its connections meanwhile are answered in one wake-up.
//!
//! At a held rate every query wakes the server, and the wake-up (the scheduler, the interrupt,
//! epoll) costs more than the answer: at 5,000 q/s over 8 connections the floor responder
//! (`benches/floor.c`) spends 38 µs of kernel time a query. A worker that sleeps a little after
//! answering finds several queries at its next look, and each wake-up serves all of them. The
//! sleep itself is a wake-up, so it pays only when it gathers more than one query: the adaptive
//! kind waits only while the rate makes a wait of at most its budget gather [`WORTH`] queries,
//! and then waits as long as [`GATHER`] of them take to arrive.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::dns::coalescing::Coalescing;

/// The most an adaptive TCP worker waits (`--tcp-coalesce auto`).
pub const ADAPTIVE_BUDGET: Duration = Duration::from_millis(1);

/// `--tcp-coalesce`: `auto`, `0` (off) or a duration up to 1 ms (always that wait).
pub fn parse(s: &str) -> Result<Coalescing, String> {
    crate::dns::coalescing::parse(s, ADAPTIVE_BUDGET)
}

/// How often an adaptive worker measures its rate.
const WINDOW: Duration = Duration::from_millis(20);
/// An adaptive worker waits only while a wait of its budget would gather this many queries: a
/// wait is a wake-up of its own (a timer's), and one that gathers two costs more than the two
/// wake-ups it replaces (measured at 2,000 q/s over 8 connections: 65 µs a query against 53).
const WORTH: f64 = 4.0;
/// …and then it waits for as long as this many queries take to arrive, at most its budget.
const GATHER: f64 = 5.0;

thread_local! {
    /// Queries this thread has answered (its connections run on it alone).
    static ANSWERED: Cell<u64> = const { Cell::new(0) };
}

/// Counts `n` answered queries on this thread.
pub(super) fn answered(n: usize) {
    ANSWERED.with(|c| c.set(c.get() + n as u64));
}

fn answered_so_far() -> u64 {
    ANSWERED.with(Cell::get)
}

/// One worker's pacing: what it has answered, and (adaptive) its current wait.
pub(super) struct Pace {
    how: Coalescing,
    /// Answered by the last park.
    at_park: u64,
    /// Adaptive: the current window's start and what had been answered then, and the wait it
    /// decided on (zero: none).
    since: Instant,
    at_since: u64,
    wait: Duration,
}

impl Pace {
    pub(super) fn new(how: Coalescing, now: Instant) -> Self {
        Pace {
            how,
            at_park: 0,
            since: now,
            at_since: 0,
            wait: Duration::ZERO,
        }
    }

    /// Before the worker parks, with `answered` queries answered on it so far: how long to
    /// sleep first. Only after a wake-up that answered something: one that found nothing
    /// (a timer, an accept) has nothing to gather for.
    pub(super) fn before_park(&mut self, answered: u64, now: impl FnOnce() -> Instant) -> Duration {
        let fresh = answered > self.at_park;
        self.at_park = answered;
        let wait = match self.how {
            Coalescing::Off => return Duration::ZERO,
            Coalescing::Always(d) => d,
            Coalescing::Adaptive(budget) => {
                let now = now();
                let elapsed = now.saturating_duration_since(self.since);
                if elapsed >= WINDOW {
                    let rate = (answered - self.at_since) as f64 / elapsed.as_secs_f64();
                    self.wait = if rate * budget.as_secs_f64() >= WORTH {
                        budget.min(Duration::from_secs_f64(GATHER / rate))
                    } else {
                        Duration::ZERO
                    };
                    self.since = now;
                    self.at_since = answered;
                }
                self.wait
            }
        };
        if fresh { wait } else { Duration::ZERO }
    }

    /// [`Pace::before_park`] on this thread's count and clock.
    pub(super) fn before_park_now(&mut self) -> Duration {
        self.before_park(answered_so_far(), Instant::now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_parses_auto_off_and_a_wait_up_to_a_millisecond() {
        assert_eq!(parse("auto"), Ok(Coalescing::Adaptive(ADAPTIVE_BUDGET)));
        assert_eq!(parse("0"), Ok(Coalescing::Off));
        assert_eq!(
            parse("250us"),
            Ok(Coalescing::Always(Duration::from_micros(250)))
        );
        assert!(parse("5ms").unwrap_err().contains("1ms"));
        assert!(parse("soon").unwrap_err().contains("auto"));
    }

    /// Runs `pace` through `ms` milliseconds at `rate` queries a second, one park after each
    /// query; returns the wait of the last park.
    fn at_rate(
        pace: &mut Pace,
        start: Instant,
        answered: &mut u64,
        rate: u64,
        ms: u64,
    ) -> Duration {
        let n = rate * ms / 1000;
        let mut wait = Duration::ZERO;
        for k in 1..=n {
            *answered += 1;
            let t = start + Duration::from_millis(ms) * k as u32 / n as u32;
            wait = pace.before_park(*answered, || t);
        }
        wait
    }

    #[test]
    fn adaptive_waits_only_while_the_rate_fills_the_wait_and_never_past_the_budget() {
        let t = Instant::now();
        let budget = Duration::from_millis(1);
        let mut pace = Pace::new(Coalescing::Adaptive(budget), t);
        let mut n = 0;
        // 2,000 q/s: a 1 ms wait would gather two queries, too few, so it never waits.
        assert_eq!(at_rate(&mut pace, t, &mut n, 2_000, 100), Duration::ZERO);
        // 4,000 q/s: five queries take 1.25 ms, more than the budget: it waits the budget.
        let t = t + Duration::from_millis(100);
        assert_eq!(at_rate(&mut pace, t, &mut n, 4_000, 100), budget);
        // 20,000 q/s: five queries take 250 µs.
        let t = t + Duration::from_millis(100);
        let w = at_rate(&mut pace, t, &mut n, 20_000, 100);
        assert!(
            w > Duration::from_micros(240) && w < Duration::from_micros(260),
            "{w:?}"
        );
        // Back to 1,000 q/s: it stops waiting within a window.
        let t = t + Duration::from_millis(100);
        assert_eq!(at_rate(&mut pace, t, &mut n, 1_000, 100), Duration::ZERO);
    }

    #[test]
    fn a_wake_up_that_answered_nothing_never_waits() {
        let t = Instant::now();
        let us = Duration::from_micros(300);
        let mut always = Pace::new(Coalescing::Always(us), t);
        assert_eq!(always.before_park(1, || t), us);
        // A timer or an accept woke it: nothing new answered.
        assert_eq!(always.before_park(1, || t), Duration::ZERO);
        assert_eq!(always.before_park(4, || t), us);
        let mut adaptive = Pace::new(Coalescing::Adaptive(us), t);
        let mut n = 0;
        assert!(!at_rate(&mut adaptive, t, &mut n, 50_000, 50).is_zero());
        assert_eq!(
            adaptive.before_park(n, || t + Duration::from_millis(51)),
            Duration::ZERO
        );
        let mut off = Pace::new(Coalescing::Off, t);
        assert_eq!(off.before_park(10, || t), Duration::ZERO);
    }
}
