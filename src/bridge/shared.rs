//! What both halves share, on the floor above [`super::clusters`]: the client, the linked
//! clusters' exports, the metrics, whether this replica leads; how a half is driven, waits for
//! its CRDs and writes its Events.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::core::v1::Service;
use kube::discovery::ApiResource;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

use super::clusters;
use super::metrics::BridgeMetrics;
use super::model::{EXPORTED, LABEL_MANAGER, LABEL_ROUTE_OF, LABELLED, LINKERDS, ROUTES};
use super::model::{is_ours, owned_labels};
use super::runtime::crd::{CRD_RECHECK, Crd, resource};
use super::runtime::feed::{Feed, merged};
use super::runtime::runner::{self, Mark, Marks};
use super::runtime::store::Heard;
use super::runtime::{Key, api_error, events};

/// How many keys each half brings up to date at once.
const CONCURRENT: usize = 16;

/// Writes an Event about `reference` (its note cut to the API's 1,000 characters); one that
/// cannot be written is logged, and the work it reports on stands.
pub(super) async fn event(
    recorder: &events::Recorder,
    reference: &k8s_openapi::api::core::v1::ObjectReference,
    type_: events::Type,
    reason: &str,
    note: &str,
    action: &str,
) {
    let note: String = note.chars().take(1000).collect();
    if let Err(e) = recorder
        .publish(type_, reason, &note, action, reference)
        .await
    {
        tracing::warn!(error = %api_error(&e), reason, "an Event could not be written");
    }
}

/// One run of one of `half`'s keys, counted, and a failure that will be retried logged.
pub(super) fn ran(
    metrics: &BridgeMetrics,
    half: &str,
    key: &Key,
    result: &Result<(), kube::Error>,
    (wait, timing): (Option<Duration>, runner::Timing),
) {
    metrics.reconciled(half, result.is_ok(), timing);
    if let (Err(e), Some(wait)) = (result, wait) {
        warn!(namespace = %key.0, name = %key.1, error = %api_error(e), "{half} not brought up to date; trying again in {wait:?}");
    }
}

/// The marks of one of this cluster's Services (see [`EXPORTED`]).
pub(super) fn service_marks(svc: &Service) -> u8 {
    let labels = svc.metadata.labels.as_ref();
    let linkerds = crate::source::linkerd::selected(labels);
    let routes =
        is_ours(labels, LABEL_MANAGER) && labels.is_some_and(|l| l.contains_key(LABEL_ROUTE_OF));
    (u8::from(clusters::is_exported(svc)) * EXPORTED)
        | (u8::from(!owned_labels(svc).is_empty()) * LABELLED)
        | (u8::from(linkerds) * LINKERDS)
        | (u8::from(routes) * ROUTES)
}

/// What both halves share.
#[derive(Clone)]
pub(super) struct Shared {
    pub(super) client: kube::Client,
    /// Every Service of this cluster, watched once for every reader.
    pub(super) services: Feed<Service>,
    /// The exports of this cluster and every linked one.
    pub(super) clusters: clusters::Clusters,
    pub(super) metrics: Arc<BridgeMetrics>,
    /// Whether this replica holds the Lease: only then does it write.
    pub(super) leading: tokio::sync::watch::Receiver<bool>,
    pub(super) shutdown: CancellationToken,
}

impl Shared {
    /// Runs a half (`name`) while this replica leads: the runner that brings what is marked up
    /// to date, and the half's watches. Each change its feeds (`heard`) tell of marks what
    /// `on_key` says it can affect (given which feed, the key, and its marks before or now);
    /// a feed's full list, or a cluster that came, went or was listed, marks everything. The
    /// half is ready (on `/ready`, and for the runner) once every feed and every cluster was
    /// listed: until then a judgement would leave out what exists (`not_listed` says why).
    pub(super) async fn drive<R>(
        &self,
        (name, half): (&'static str, &R),
        resync: Duration,
        (heard, not_listed): (Vec<UnboundedReceiver<Heard>>, &str),
        on_key: impl Fn(usize, Key, u8, &Marks<Key>),
    ) where
        R: runner::Reconciler<Key = Key>,
    {
        let (marks, marked) = Marks::channel();
        let (ready, ready_rx) = tokio::sync::watch::channel(false);
        let config = runner::Config {
            concurrency: CONCURRENT,
            backoff: runner::Backoff::DEFAULT,
            resync,
        };
        let (leading, shutdown) = (self.leading.clone(), self.shutdown.clone());
        let working = runner::run(half, marked, leading, ready_rx, config, shutdown);
        let mut listed = vec![false; heard.len()];
        let mut feeds = std::pin::pin!(merged(heard));
        let mut changes = self.clusters.subscribe();
        let watching = async {
            loop {
                tokio::select! {
                    _ = self.shutdown.cancelled() => return,
                    h = feeds.next() => match h {
                        Some((n, Heard::Listed)) => {
                            listed[n] = true;
                            marks.all();
                        }
                        Some((n, Heard::Key { key, was, now })) => on_key(n, key, was | now, &marks),
                        None => return,
                    },
                    change = changes.recv() => match change {
                        Some(Mark::Keys(keys)) => marks.keys(keys),
                        Some(Mark::All) => marks.all(),
                        None => return,
                    },
                }
                let why = if listed.contains(&false) {
                    Some(not_listed)
                } else if !self.clusters.settled() {
                    Some("the linked clusters' exports have not all been listed yet")
                } else {
                    None
                };
                self.metrics.waiting(name, why.map(str::to_string));
                runner::set(&ready, why.is_none());
            }
        };
        tokio::join!(watching, working);
    }

    /// `crd` at the first of its versions the API server serves, waiting (and saying why on
    /// `/ready`, for `half`) until it does; `None` on shutdown.
    pub(super) async fn wait_for(&self, half: &'static str, crd: &Crd) -> Option<ApiResource> {
        let mut said = None;
        loop {
            match resource(&self.client, crd).await {
                Ok(r) => return Some(r),
                Err(why) => {
                    if said.as_ref() != Some(&why) {
                        error!("{why}; looking again every {CRD_RECHECK:?}");
                        said = Some(why.clone());
                    }
                    self.metrics.waiting(half, Some(why));
                    tokio::select! {
                        _ = self.shutdown.cancelled() => return None,
                        _ = tokio::time::sleep(CRD_RECHECK) => {}
                    }
                }
            }
        }
    }
}
