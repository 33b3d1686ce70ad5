//! The names the bridge writes by: its field manager, the labels that say an object is its own,
//! the annotation it carries an export's spec in, and its EndpointSlices' names.

use super::import::Family;

pub use super::runtime::FIELD_MANAGER;

/// The value of `endpointslice.kubernetes.io/managed-by` on the bridge's EndpointSlices, and of
/// `app.kubernetes.io/managed-by` on its ServiceImports: what carries it is the bridge's to
/// change and delete; nothing else is. Also the controller its Events are reported by.
pub const MANAGER: &str = "linkerd-bridge.clusterset-dns.io";
pub const LABEL_SLICE_MANAGER: &str = "endpointslice.kubernetes.io/managed-by";
pub const LABEL_MANAGER: &str = "app.kubernetes.io/managed-by";

/// The Service annotation in which the export half carries, through Linkerd's service mirror
/// (which copies every annotation onto its mirrors and federated Services), what the import
/// half needs and Linkerd does not copy: the export's creation time, the Service's
/// `sessionAffinity`, `sessionAffinityConfig`, `internalTrafficPolicy`, `trafficDistribution`,
/// `ipFamilies` and its ports with their `appProtocol`, as JSON
/// ([`crate::source::linkerd::carried::Carried`]).
pub const CARRIED: &str = crate::source::linkerd::ANNOTATION_CARRIED;

/// Whether an object's `labels` say it is the bridge's: `label` ([`LABEL_MANAGER`] or
/// [`LABEL_SLICE_MANAGER`]) is [`MANAGER`].
pub fn is_ours(labels: Option<&std::collections::BTreeMap<String, String>>, label: &str) -> bool {
    labels.and_then(|l| l.get(label)).map(String::as_str) == Some(MANAGER)
}

/// The object name of the slice of `service`'s addresses of `family` from `cluster`:
/// readable, and unique in the namespace through a hash of all three (`a-b` of cluster `c` and
/// `a` of cluster `b-c` differ).
pub fn slice_name(service: &str, cluster: &str, family: Family) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in service
        .bytes()
        .chain([0])
        .chain(cluster.bytes())
        .chain([0])
        .chain(family.word().bytes())
    {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{service}-{}-{h:08x}", cluster.replace('.', "-"))
}
