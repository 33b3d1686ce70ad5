//! One watch of a kind in one cluster, feeding one [`Store`] and every reader of it: what
//! kube-runtime gives several readers with one shared reflector (`reflector::store_shared` and
//! its subscribers), over the bridge's packed stores. A reader is told each object added,
//! changed or removed as its key and marks ([`Heard`]) and reads the object from the store when
//! it needs it; one that subscribes late is told first what the store holds.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::Watched;
use super::store::{Heard, Store, Writer};

/// A store, the watch that feeds it and its readers. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Feed<K> {
    store: Store<K>,
    state: Arc<Mutex<Feeding<K>>>,
}

struct Feeding<K> {
    writer: Writer<K>,
    readers: Vec<mpsc::UnboundedSender<Heard>>,
}

impl<K: Watched + serde::Serialize> Feed<K> {
    pub(crate) fn new(writer: Writer<K>) -> Self {
        Feed {
            store: writer.reader(),
            state: Arc::new(Mutex::new(Feeding {
                writer,
                readers: Vec::new(),
            })),
        }
    }

    pub(crate) fn store(&self) -> &Store<K> {
        &self.store
    }

    /// What changes from now on, after every object the store holds (as added) and
    /// [`Heard::Listed`] if a list was done; a list under way tells its objects when it is
    /// done.
    pub(crate) fn subscribe(&self) -> mpsc::UnboundedReceiver<Heard> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut state = self.state.lock().expect("not poisoned");
        if state.writer.listed {
            for heard in self.store.replay().into_iter().chain([Heard::Listed]) {
                let _ = tx.send(heard);
            }
        }
        state.readers.push(tx);
        rx
    }

    /// Brings the store up to date with one event of its watch, and tells every reader what
    /// it changed.
    pub(crate) fn apply(&self, ev: &watcher::Event<K>) {
        let mut state = self.state.lock().expect("not poisoned");
        let heard = state.writer.apply(ev);
        if !heard.is_empty() {
            state
                .readers
                .retain(|r| heard.iter().all(|h| r.send(h.clone()).is_ok()));
        }
    }

    /// Feeds the store from the watch of `api` until `shutdown`: an error is said in the log
    /// (of `what`), and the watch goes on after kube-runtime's default backoff.
    pub(crate) async fn run(
        self,
        api: kube::Api<K>,
        config: watcher::Config,
        what: &'static str,
        shutdown: CancellationToken,
    ) {
        let mut events = std::pin::pin!(super::watched(api, config));
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                ev = events.next() => match ev {
                    Some(Ok(ev)) => self.apply(&ev),
                    Some(Err(e)) => warn!(error = %e, "watching {what}"),
                    None => return,
                },
            }
        }
    }
}

/// What several readers' receivers tell, as one stream: each with the index of its receiver.
pub(crate) fn merged(
    heard: Vec<mpsc::UnboundedReceiver<Heard>>,
) -> impl futures::Stream<Item = (usize, Heard)> {
    futures::stream::select_all(heard.into_iter().enumerate().map(|(n, rx)| {
        let told = futures::stream::unfold(rx, |mut rx| async { Some((rx.recv().await?, rx)) });
        Box::pin(told.map(move |h| (n, h)))
    }))
}

#[cfg(test)]
mod tests;
