//! `clusterset-dns linkerd-bridge`: the API half of the Multi-Cluster Services API for Linkerd,
//! in two halves that run together or apart in one process, behind one Lease:
//! - the [`export`] half turns each ServiceExport (`multicluster.x-k8s.io`) into the label
//!   Linkerd's service mirror selects Services by, applied server-side under the bridge's own
//!   field manager, and writes the export's conditions;
//! - the [`import`] half turns every cluster's exports (read through the Links' credentials, see
//!   [`clusters`]) and the Services Linkerd's service mirror writes into ServiceImports and
//!   EndpointSlices.
//!
//! Each half is a pure judge (`export::judge`, `import::judge`) and a controller that reads the
//! objects and writes what its judge says, driven by the one [`runner`]: level-triggered, every
//! change marks the keys it can affect, and a relist, a resync or taking the [`lease`] marks
//! everything.

pub mod clusters;
pub mod export;
pub mod import;
pub mod metrics;
pub mod names;
pub mod runtime;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kube::discovery::ApiResource;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::source::kube::ClientError;
pub use export::Settings as ExportSettings;
pub use import::Settings as ImportSettings;
use metrics::BridgeMetrics;
use runtime::{api_error, events, lease, runner};

/// What writes the bridge's Events: the controller `linkerd-bridge.clusterset-dns.io`, this
/// replica's Lease identity as its instance.
fn recorder(client: &kube::Client, identity: &str) -> events::Recorder {
    events::Recorder::new(client.clone(), names::MANAGER, identity)
}

/// Writes an Event about `reference` (its note cut to the API's 1,000 characters); one that
/// cannot be written is logged, and the work it reports on stands.
async fn event(
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

/// How many keys each half brings up to date at once.
const CONCURRENT: usize = 16;
/// How often the API server is asked again for a CRD it did not serve.
const CRD_RECHECK: Duration = Duration::from_secs(10);

/// The ServiceExport and ServiceImport CRDs: mcs-api v0.5.2 stores v1beta1 and still serves
/// v1alpha1.
const SERVICE_EXPORT: Crd = Crd::mcs(
    "ServiceExport",
    "serviceexports",
    "install the CRDs of sigs.k8s.io/mcs-api v0.5.2 (kubectl apply -f deploy/crds/multicluster.x-k8s.io_serviceexports.yaml)",
);
const SERVICE_IMPORT: Crd = Crd::mcs(
    "ServiceImport",
    "serviceimports",
    "install the CRDs of sigs.k8s.io/mcs-api v0.5.2 (kubectl apply -f deploy/crds/multicluster.x-k8s.io_serviceimports.yaml)",
);

/// Linkerd's Link (linkerd2 `version-2.20` serves v1alpha3 and still v1alpha1, v1alpha2).
const LINK: Crd = Crd {
    group: "multicluster.linkerd.io",
    versions: &["v1alpha3", "v1alpha2", "v1alpha1"],
    kind: "Link",
    plural: "links",
    install: "install Linkerd's multicluster extension (linkerd multicluster install), which defines Links",
};

pub use runtime::Key;

#[derive(Debug, Clone)]
pub struct Config {
    pub kube: crate::source::kube::Config,
    /// The export half, if it runs.
    pub export: Option<ExportSettings>,
    /// The import half, if it runs.
    pub import: Option<ImportSettings>,
    /// The admin HTTP server: /metrics, /health, /ready.
    pub admin: SocketAddr,
    /// The Lease the replicas share, so that one writes at a time.
    pub lease: lease::Config,
    /// `--cluster-id`: this cluster's id, over its ClusterProperty's.
    pub cluster_id: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("cannot listen on --admin-listen {addr}: {error}")]
    Admin {
        addr: SocketAddr,
        error: std::io::Error,
    },
}

/// Runs the halves `config` names until `shutdown`. A CRD the API server does not serve is
/// said at start and on `/ready`, and looked for again every [`CRD_RECHECK`].
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), BridgeError> {
    let listener = tokio::net::TcpListener::bind(config.admin)
        .await
        .map_err(|error| BridgeError::Admin {
            addr: config.admin,
            error,
        })?;
    let metrics = Arc::new(BridgeMetrics::new());
    let m = metrics.clone();
    tokio::spawn(crate::admin::serve_with(
        listener,
        shutdown.clone(),
        move |method, path| m.route(method, path),
    ));
    let client = crate::source::kube::client(&config.kube).await?;
    let (leading_tx, leading) = tokio::sync::watch::channel(false);
    let mut said = leading_tx.subscribe();
    let m = metrics.clone();
    tokio::spawn(async move {
        while said.changed().await.is_ok() {
            m.leading(*said.borrow_and_update());
        }
    });
    let holding = tokio::spawn(lease::hold(
        client.clone(),
        config.lease.clone(),
        leading_tx,
        shutdown.clone(),
    ));
    let clusters = clusters::start(
        client.clone(),
        config.cluster_id.clone(),
        metrics.clone(),
        shutdown.clone(),
    );
    let shared = Shared {
        client,
        clusters,
        metrics,
        leading,
        shutdown: shutdown.clone(),
    };
    for (half, on) in [
        ("export", config.export.is_some()),
        ("import", config.import.is_some()),
    ] {
        if on {
            shared.metrics.waiting(half, Some("starting".into()));
        }
    }
    info!(admin = %config.admin, export = config.export.is_some(), import = config.import.is_some(), "linkerd-bridge starting");
    let export = config.export.clone().map(|settings| {
        let shared = shared.clone();
        let identity = config.lease.identity.clone();
        tokio::spawn(export::run(shared, settings, identity))
    });
    let import = config.import.clone().map(|settings| {
        let shared = shared.clone();
        let identity = config.lease.identity.clone();
        tokio::spawn(import::run(shared, settings, identity))
    });
    for half in [export, import].into_iter().flatten() {
        let _ = half.await;
    }
    // The Lease is given up before the process ends, so another replica takes over at once.
    let _ = holding.await;
    Ok(())
}

/// What both halves share.
#[derive(Clone)]
struct Shared {
    client: kube::Client,
    /// The exports of this cluster and every linked one.
    clusters: clusters::Clusters,
    metrics: Arc<BridgeMetrics>,
    /// Whether this replica holds the Lease: only then does it write.
    leading: tokio::sync::watch::Receiver<bool>,
    shutdown: CancellationToken,
}

/// A custom resource a half reads or writes.
struct Crd {
    group: &'static str,
    /// The versions the half can use, preferred first.
    versions: &'static [&'static str],
    kind: &'static str,
    plural: &'static str,
    /// What to do when the API server serves none of them.
    install: &'static str,
}

impl Crd {
    /// One of the MCS API's.
    const fn mcs(kind: &'static str, plural: &'static str, install: &'static str) -> Crd {
        Crd {
            group: "multicluster.x-k8s.io",
            versions: &["v1beta1", "v1alpha1"],
            kind,
            plural,
            install,
        }
    }
}

impl Shared {
    /// Runs a half: its watches (`watch`, given where to mark keys and where to say that
    /// everything was listed) beside the runner that brings what they mark up to date while
    /// this replica leads.
    async fn drive<R, F>(
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
        let settings = runner::Settings {
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
    async fn wait_for(&self, half: &'static str, crd: &Crd) -> Option<ApiResource> {
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

/// `crd` at the first of its versions the API server serves, or why there is none.
async fn resource(client: &kube::Client, crd: &Crd) -> Result<ApiResource, String> {
    let missing = |detail: String| {
        format!(
            "the API server serves no {} ({}, {}): {}; {detail}",
            crd.kind,
            crd.group,
            crd.versions.join(" or "),
            crd.install
        )
    };
    let group = kube::discovery::group(client, crd.group)
        .await
        .map_err(|e| missing(e.to_string()))?;
    let served: Vec<&str> = group.versions().collect();
    let version = crd
        .versions
        .iter()
        .find(|v| {
            served.contains(v)
                && group
                    .versioned_resources(v)
                    .iter()
                    .any(|(r, _)| r.kind == crd.kind)
        })
        .ok_or_else(|| missing(format!("the group serves {served:?} without it")))?;
    Ok(ApiResource {
        group: crd.group.into(),
        version: (*version).into(),
        api_version: format!("{}/{version}", crd.group),
        kind: crd.kind.into(),
        plural: crd.plural.into(),
    })
}
