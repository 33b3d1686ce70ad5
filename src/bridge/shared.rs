//! What both halves share, on the floor above [`super::clusters`]: the client, the linked
//! clusters' exports, the metrics, whether this replica leads; how a half is driven, waits for
//! its CRDs and writes its Events.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::discovery::ApiResource;
use tokio_util::sync::CancellationToken;
use tracing::error;

use super::clusters;
use super::metrics::BridgeMetrics;
use super::model::{EXPORTED, LABELLED, LINKERDS, MANAGER, owned_labels};
use super::runtime::crd::{CRD_RECHECK, Crd, resource};
use super::runtime::feed::Feed;
use super::runtime::{Key, api_error, events, runner};

/// How many keys each half brings up to date at once.
const CONCURRENT: usize = 16;

/// What writes the bridge's Events: the controller `linkerd-bridge.clusterset-dns.io`, this
/// replica's Lease identity as its instance.
pub(super) fn recorder(client: &kube::Client, identity: &str) -> events::Recorder {
    events::Recorder::new(client.clone(), MANAGER, identity)
}

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

/// The marks of one of this cluster's Services (see [`EXPORTED`]).
pub(super) fn service_marks(svc: &Service) -> u8 {
    let linkerds = crate::source::linkerd::selected(svc.metadata.labels.as_ref());
    (u8::from(clusters::is_exported(svc)) * EXPORTED)
        | (u8::from(!owned_labels(svc).is_empty()) * LABELLED)
        | (u8::from(linkerds) * LINKERDS)
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
    /// Runs a half: its watches (`watch`, given where to mark keys and where to say that
    /// everything was listed) beside the runner that brings what they mark up to date while
    /// this replica leads.
    pub(super) async fn drive<R, F>(
        &self,
        half: &R,
        resync: Duration,
        watch: impl FnOnce(runner::Marks<Key>, tokio::sync::watch::Sender<bool>) -> F,
    ) where
        R: runner::Reconciler<Key = Key>,
        F: std::future::Future<Output = ()>,
    {
        let (marks, marked) = runner::Marks::channel();
        let (ready, ready_rx) = tokio::sync::watch::channel(false);
        let settings = runner::Config {
            concurrency: CONCURRENT,
            backoff: runner::Backoff::DEFAULT,
            resync,
        };
        let leading = self.leading.clone();
        let working = runner::run(
            half,
            marked,
            leading,
            ready_rx,
            settings,
            self.shutdown.clone(),
        );
        tokio::join!(watch(marks, ready), working);
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
