//! The import half's watches: each event of a store's watch as what it says (an object
//! applied or deleted, or a full list done).

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher;

use crate::bridge::runtime::{object_of, store};

/// What a watch of the import half said.
pub(super) enum Seen<K> {
    Listed,
    Applied(K),
    Deleted(K),
}

/// The import half's watch of `api`, feeding `w`.
pub(super) fn watch_of<K: crate::bridge::runtime::Watched + serde::Serialize>(
    w: store::Writer<K>,
    api: Api<K>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<Seen<K>, watcher::Error>> {
    crate::bridge::runtime::watch(w, api, config).filter_map(|ev| {
        futures::future::ready(match ev {
            Ok(watcher::Event::InitDone) => Some(Ok(Seen::Listed)),
            Ok(watcher::Event::Delete(o)) => Some(Ok(Seen::Deleted(o))),
            Ok(ev) => object_of(ev).map(|o| Ok(Seen::Applied(o))),
            Err(e) => Some(Err(e)),
        })
    })
}

/// An object's namespace and name.
pub(super) fn names_of(
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (String, String) {
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}
