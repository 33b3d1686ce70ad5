//! Sources of services. Each turns Kubernetes objects into `model` values and sends `Update`s to
//! the zone builder; `object` (the shapes read and their validation), `linkerd` (Linkerd's
//! multicluster Services read as the same services), `store` (what a source keeps) and `policy`
//! (what imported data may say) are what they share.

pub mod file;
pub mod kube;
pub mod linkerd;
pub mod object;
pub mod policy;
pub mod store;

/// Which objects a source interprets (`--source`): the MCS API's ServiceImports and
/// EndpointSlices, Linkerd's multicluster Services, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub mcs: bool,
    pub linkerd: Option<linkerd::Config>,
}

impl Default for Selection {
    /// The MCS API only, as before `--source` existed.
    fn default() -> Self {
        Selection {
            mcs: true,
            linkerd: None,
        }
    }
}
