//! The test harness's own tests: the one way to wait ([`common::wait`]) waits until a
//! condition holds, fails naming it when it never does, and stretches with the patience the
//! environment gives.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::assert_eventually;
use crate::common;
use crate::common::wait::{eventually, patience, until, value, within};

#[test]
fn waits_until_the_condition_holds_and_says_how_long() {
    let _module = common::module(module_path!());
    let calls = Cell::new(0);
    let took = until("the third call", 5, || {
        calls.set(calls.get() + 1);
        calls.get() == 3
    });
    assert_eq!(calls.get(), 3, "polled until it held, and no more");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(value("a value", 5, || (calls.get() >= 3).then_some(7)), 7);
    assert_eventually!(calls.get() == 3);
}

#[test]
fn a_condition_that_never_holds_fails_naming_it_after_the_timeout() {
    let _module = common::module(module_path!());
    let start = Instant::now();
    let failed = std::panic::catch_unwind(|| {
        until("the impossible", Duration::from_millis(300), || false);
    })
    .expect_err("it never holds, so it fails");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("the impossible"), "{message}");
    assert!(start.elapsed() >= within(Duration::from_millis(300)));
    let failed = std::panic::catch_unwind(|| {
        let n = 41;
        assert_eventually!(n == 42, Duration::from_millis(100), "n is {n}");
    })
    .expect_err("it never holds");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("n is 41"), "{message}");
}

#[test]
fn patience_stretches_every_timeout() {
    let _module = common::module(module_path!());
    // The factor this run was given (1 unless the environment says otherwise) applies to
    // whole seconds and to durations alike.
    let p = patience();
    assert_eq!(within(2), Duration::from_secs(2).mul_f64(p));
    assert_eq!(
        within(Duration::from_millis(500)),
        Duration::from_millis(500).mul_f64(p)
    );
}

#[tokio::test]
async fn eventually_polls_on_the_runtime() {
    let _module = common::module(module_path!());
    let calls = std::sync::atomic::AtomicU32::new(0);
    assert!(
        eventually(5, || async {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 2
        })
        .await
    );
    assert!(!eventually(Duration::from_millis(100), || async { false }).await);
}
