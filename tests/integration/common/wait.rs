//! The one way the tests wait: a condition polled until it holds, within a timeout that
//! `CLUSTERSET_DNS_TEST_PATIENCE` stretches on a slow machine, or a failure that says what was
//! awaited and for how long. The shape of linkerd2-proxy's `assert_eventually!`: the test
//! states what must come to hold, never how long to sleep.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// The environment variable that multiplies every timeout (a number, default 1; `3` on a machine
/// three times slower). Polling intervals do not change: only how long a test keeps trying.
pub const PATIENCE: &str = "CLUSTERSET_DNS_TEST_PATIENCE";

/// The factor [`PATIENCE`] says, or 1. A value that is not a positive number stops the test
/// with a message naming it, rather than silently waiting some other time.
pub fn patience() -> f64 {
    match std::env::var(PATIENCE) {
        Err(_) => 1.0,
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(f) if f.is_finite() && f > 0.0 => f,
            _ => panic!("{PATIENCE}={v:?} is not a positive number"),
        },
    }
}

/// How long a test may wait for something: whole seconds or a [`Duration`], before
/// [`patience`] stretches it.
pub trait Timeout {
    fn duration(self) -> Duration;
}

impl Timeout for u64 {
    fn duration(self) -> Duration {
        Duration::from_secs(self)
    }
}

impl Timeout for Duration {
    fn duration(self) -> Duration {
        self
    }
}

/// `timeout` as this machine's patience stretches it.
pub fn within(timeout: impl Timeout) -> Duration {
    timeout.duration().mul_f64(patience())
}

/// How often a condition is polled: often enough that a test waits little past the moment it
/// holds (a short wait, 50 ms at 10 s), rarely enough that polling a subprocess (kubectl, dig)
/// over minutes does not load the machine (200 ms).
fn interval(timeout: Duration) -> Duration {
    (timeout / 200).clamp(Duration::from_millis(25), Duration::from_millis(200))
}

/// Polls `check` until it gives a value, for at most `timeout` (stretched by [`patience`]);
/// returns the value and how long it took, or `Err` with how long was waited.
pub fn poll<T>(
    timeout: impl Timeout,
    mut check: impl FnMut() -> Option<T>,
) -> Result<(T, Duration), Duration> {
    let limit = within(timeout);
    let every = interval(limit);
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return Ok((v, start.elapsed()));
        }
        if start.elapsed() >= limit {
            return Err(start.elapsed());
        }
        std::thread::sleep(every);
    }
}

/// Waits until `check` holds, for at most `timeout`; returns how long that took. Panics with
/// `what` when it never does.
pub fn until(
    what: impl Display,
    timeout: impl Timeout,
    mut check: impl FnMut() -> bool,
) -> Duration {
    awaited(what, timeout, || check().then_some(())).1
}

/// Waits until `check` gives a value, for at most `timeout`, and returns it. Panics with `what`
/// when it never does.
pub fn value<T>(what: impl Display, timeout: impl Timeout, check: impl FnMut() -> Option<T>) -> T {
    awaited(what, timeout, check).0
}

/// [`poll`], failing the test with `what` on a timeout.
fn awaited<T>(
    what: impl Display,
    timeout: impl Timeout,
    check: impl FnMut() -> Option<T>,
) -> (T, Duration) {
    poll(timeout, check)
        .unwrap_or_else(|waited| panic!("timed out waiting for: {what} (waited {waited:.1?})"))
}

/// [`until`] for async tests: polls `check` on the test's runtime; `false` when it never held
/// within `timeout`, for the caller to assert with its own message.
pub async fn eventually<F, Fut>(timeout: impl Timeout, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let limit = within(timeout);
    let every = interval(limit);
    let start = tokio::time::Instant::now();
    loop {
        if check().await {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(every).await;
    }
}

/// Asserts that a condition comes to hold within a timeout (10 s unless given), polling it;
/// the failure names the condition (or the message given).
///
/// ```ignore
/// assert_eventually!(ready(&s));
/// assert_eventually!(ready(&s), 30);
/// assert_eventually!(count() == 2, 5, "both replicas, got {}", count());
/// ```
#[macro_export]
macro_rules! assert_eventually {
    ($cond:expr $(,)?) => {
        $crate::common::wait::until(stringify!($cond), 10, || $cond)
    };
    ($cond:expr, $timeout:expr $(,)?) => {
        $crate::common::wait::until(stringify!($cond), $timeout, || $cond)
    };
    ($cond:expr, $timeout:expr, $($what:tt)+) => {
        $crate::common::wait::until(
            $crate::common::wait::Lazy(|| format!($($what)+)),
            $timeout,
            || $cond,
        )
    };
}

/// A message made only when it is shown (a failure), from a closure.
pub struct Lazy<F>(pub F);

impl<F: Fn() -> String> Display for Lazy<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&(self.0)())
    }
}
