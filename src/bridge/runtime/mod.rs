//! The bridge's machinery, which knows nothing of MCS or Linkerd: what a reconciled key is, the
//! watches that feed the [`store`]s, the level-triggered [`runner`] both halves are driven by,
//! the [`lease`] that lets one replica work, the [`events`] it reports by, and the [`index`]es
//! that say which keys an object can change and which writes are still to be read back. The
//! halves above use it; it uses nothing of theirs.

pub mod crd;
pub mod events;
pub(crate) mod feed;
pub mod index;
pub mod lease;
pub mod runner;
pub(crate) mod store;

use kube::runtime::watcher;
use tokio::time::Instant;

/// A namespace and a name: of a ServiceExport (and the Service it exports), or of a
/// ServiceImport (and the service Linkerd's objects stand for). Each part is kept inline up to
/// 23 bytes, and shared past that: every store's table, index and queue holds a copy of each
/// key, and a restart holds them all at once (docs/performance.md has what that cost).
pub type Key = (SmolStr, SmolStr);

pub use smol_str::SmolStr;

/// The key of the object `meta` is of.
pub(crate) fn key(meta: &kube::api::ObjectMeta) -> Key {
    let (ns, name) = (meta.namespace.as_deref(), meta.name.as_deref());
    (
        ns.unwrap_or_default().into(),
        name.unwrap_or_default().into(),
    )
}

/// The field manager of what the bridge writes (but the Services the import half makes for
/// ports, which have their own): what it applied is what it takes back, and the only manager
/// whose records [`slim`] keeps.
pub const FIELD_MANAGER: &str = "clusterset-dns-linkerd-bridge";

/// What the API server said, in a line: its code, reason and message for an API error.
pub(crate) fn api_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        e => e.to_string(),
    }
}

/// A kind the bridge watches into a store: what kube-runtime's watcher needs of it.
pub(crate) trait Watched:
    kube::Resource<DynamicType: Clone + Eq + std::hash::Hash>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> Watched for K where
    K: kube::Resource<DynamicType: Clone + Eq + std::hash::Hash>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// The events of a watch of `api`, its objects kept as [`slim`] makes them (the stores are
/// most of the bridge's memory), retried with kube-runtime's default backoff.
pub(crate) fn watched<K: Watched>(
    api: kube::Api<K>,
    config: watcher::Config,
) -> impl futures::Stream<Item = watcher::Result<watcher::Event<K>>> + Send {
    use kube::runtime::WatchStreamExt;
    let config = config.page_size(PAGE);
    watcher(api, config).modify(slim::<K>).default_backoff()
}

/// How many objects one page of a watch's list holds (kube-runtime's default is 500). A page is
/// decoded whole, every object in full, before [`slim`] and the store make each small: after a
/// restart at 10,000 exports, the bridge's watches listing at once held most of its high-water
/// mark in pages (docs/performance.md has the figures).
const PAGE: u32 = 100;

/// What the bridge keeps of an object it watches: all of it but the field managers' records
/// of other managers than [`FIELD_MANAGER`], the parts of its own record but the
/// labels and annotations it holds (all that is read of them: `owned_labels`, `owned_keys`),
/// and kubectl's last applied configuration, which nothing reads. Those are most of an
/// object's size: every writer adds a record (a JSON tree as deep as what it wrote), kubectl a
/// copy of the whole object.
pub(crate) fn slim<K: kube::Resource>(o: &mut K) {
    let meta = o.meta_mut();
    if let Some(fields) = &mut meta.managed_fields {
        fields.retain(|f| f.manager.as_deref() == Some(FIELD_MANAGER) && f.subresource.is_none());
        for f in fields.iter_mut() {
            if let Some(v1) = &mut f.fields_v1
                && let Some(tree) = v1.0.as_object_mut()
            {
                tree.retain(|k, _| k == "f:metadata");
                if let Some(m) = tree.get_mut("f:metadata").and_then(|m| m.as_object_mut()) {
                    m.retain(|k, _| k == "f:labels" || k == "f:annotations");
                }
            }
        }
        if fields.is_empty() {
            meta.managed_fields = None;
        }
    }
    if let Some(annotations) = &mut meta.annotations {
        annotations.remove(LAST_APPLIED);
    }
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The service an object is of, named by its `label`: `kubernetes.io/service-name` for a
/// cluster's own slices, the MCS label for an import's, the bridge's own for its twins and
/// Services.
pub(crate) fn service_of(object: &impl kube::Resource, label: &str) -> Option<Key> {
    let meta = object.meta();
    let svc = meta.labels.as_ref()?.get(label)?;
    Some((meta.namespace.as_deref()?.into(), svc.into()))
}

/// Sleeps until `at`, or for ever.
pub(crate) async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
