//! How the server is told to stop, and its lame duck: a leaf the admin endpoints (which say 503
//! from the first signal) and the listeners (which answer through the lame duck) both read.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::info;

/// How the server is told to stop (the binary: SIGTERM or SIGINT).
///
/// [`begin`](Self::begin) starts the lame duck: `/ready` answers 503 at once, so the endpoint is
/// withdrawn (by the kubelet's probe and every node's kube-proxy) while UDP, XDP and TCP keep
/// answering for [`crate::server::Config::lameduck`]; then the server stops accepting, gives in-flight TCP
/// answers [`crate::server::Config::grace`] and returns. [`now`](Self::now) (a second signal) cuts both short.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    lame_duck: CancellationToken,
    now: CancellationToken,
}

impl Shutdown {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts the lame duck (once; later calls change nothing).
    pub fn begin(&self) {
        self.lame_duck.cancel();
    }

    /// Stops at once: no lame duck, no drain.
    pub fn now(&self) {
        self.lame_duck.cancel();
        self.now.cancel();
    }

    /// Whether [`begin`](Self::begin) or [`now`](Self::now) was called: `/ready` is 503 from then.
    pub fn stopping(&self) -> bool {
        self.lame_duck.is_cancelled()
    }

    /// Cancels `stop` when the lame duck is over: `lameduck` after [`begin`](Self::begin), or at
    /// [`now`](Self::now). One log line at each step.
    pub(crate) async fn lame_duck(
        self,
        lameduck: Duration,
        grace: Duration,
        stop: CancellationToken,
    ) {
        self.lame_duck.cancelled().await;
        if self.now.is_cancelled() {
            info!("stopping at once");
        } else if !lameduck.is_zero() {
            info!(lameduck = ?lameduck, "lame duck: /ready answers 503, DNS still answered");
            tokio::select! {
                _ = tokio::time::sleep(lameduck) => info!(grace = ?grace, "lame duck over: no longer answering, draining TCP"),
                _ = self.now.cancelled() => info!("lame duck cut short: stopping at once"),
            }
        } else {
            info!(grace = ?grace, "stopping: no longer answering, draining TCP");
        }
        stop.cancel();
    }

    /// Completes at [`now`](Self::now).
    pub(crate) async fn hurried(&self) {
        self.now.cancelled().await;
    }
}
