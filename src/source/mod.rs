//! Sources of services. Each turns Kubernetes objects into `model` values and sends `Update`s to
//! the zone builder.
//!
//! The imports run one way: `object` (what every kind shares, and the [`object::Kind`] trait) ←
//! the kinds, a file each (`mcs` for ServiceImports and EndpointSlices, `linkerd` for Linkerd's
//! multicluster Services) ← this file ([`Object`], the kinds a [`Selection`] reads) ← `store`
//! (what a source keeps), `file` and `kube` (the two sources). `policy` (what imported data may
//! say) sits under `object`.

pub mod about;
pub mod file;
pub mod kube;
pub mod linkerd;
pub mod mcs;
pub mod object;
pub mod policy;
pub mod store;

use std::sync::Arc;

use ::kube::api::DynamicObject;
use serde_yaml_ng::Value;

use self::object::{Kind, ObjectError, Read, Refused, Resource, from_dynamic};
use self::policy::Policy;
use crate::model::{ObjectKind, Skip};

/// What every source is told: what imported data may say, and which objects it reads. Where
/// they come from (`file::Config` or `kube::Config`) is the crate root's [`crate::Origin`].
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub policy: Policy,
    pub selection: Selection,
}

/// Which objects a source interprets (`--source`): the MCS API's ServiceImports and
/// EndpointSlices, Linkerd's multicluster Services, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub mcs: bool,
    pub linkerd: Option<linkerd::Config>,
    /// `--cluster-id`: the server's own cluster, instead of the ClusterProperty
    /// `cluster.clusterset.k8s.io` (which is then not read).
    pub cluster_id: Option<String>,
}

impl Selection {
    /// The server's own cluster id: `--cluster-id` when given, else what the ClusterProperty
    /// `property` says.
    pub fn own_cluster(&self, property: Option<&str>) -> Option<String> {
        self.cluster_id.as_deref().or(property).map(str::to_string)
    }
}

impl Default for Selection {
    /// The MCS API only, as before `--source` existed; the own cluster from its ClusterProperty.
    fn default() -> Self {
        Selection {
            mcs: true,
            linkerd: None,
            cluster_id: None,
        }
    }
}

/// One object read from a source, already validated: what one of the kinds gives.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    Import(mcs::Import),
    Slice(mcs::SliceObject),
    /// One of Linkerd's Services (`--source linkerd`).
    Linkerd(linkerd::Member),
    /// The ClusterProperty that names the server's own cluster.
    ClusterId(about::ClusterId),
}

impl From<about::ClusterId> for Object {
    fn from(c: about::ClusterId) -> Self {
        Object::ClusterId(c)
    }
}

impl From<mcs::Import> for Object {
    fn from(i: mcs::Import) -> Self {
        Object::Import(i)
    }
}

impl From<mcs::SliceObject> for Object {
    fn from(s: mcs::SliceObject) -> Self {
        Object::Slice(s)
    }
}

impl From<linkerd::Member> for Object {
    fn from(m: linkerd::Member) -> Self {
        Object::Linkerd(m)
    }
}

impl Object {
    /// The object's kind and `namespace/name`, as log lines name it.
    pub fn identity(&self) -> (ObjectKind, String) {
        match self {
            Object::Import(i) => (ObjectKind::ServiceImport, i.key.to_string()),
            Object::Slice(s) => (
                ObjectKind::EndpointSlice,
                format!("{}/{}", s.service.namespace, s.slice.name),
            ),
            Object::Linkerd(m) => (
                ObjectKind::Service,
                format!("{}/{}", m.service.namespace, m.object),
            ),
            Object::ClusterId(c) => (ObjectKind::ClusterProperty, c.object.clone()),
        }
    }

    /// The addresses the object gave that are not served.
    pub fn refused(&self) -> &[Refused] {
        match self {
            Object::Import(i) => &i.refused,
            Object::Slice(s) => &s.refused,
            Object::Linkerd(m) => &m.refused,
            Object::ClusterId(_) => &[],
        }
    }
}

/// What a source did with one raw object.
pub type Classified = Read<Object>;

/// A kind as the sources use it, whatever its shape: the erased form of [`object::Kind`].
pub trait AnyKind: Send + Sync {
    fn kind(&self) -> ObjectKind;
    fn resource(&self) -> Resource;
    fn selector(&self) -> Option<&'static str>;
    fn page_size(&self) -> Option<u32>;
    /// The version to watch instead of discovering one.
    fn version(&self) -> Option<&str>;
    /// Whether a file's document of `api_version` and `kind` is of this kind.
    fn reads(&self, api_version: &str, kind: &str) -> bool;
    /// Reads an object the Kubernetes API gave (namespace exclusion first: an unreadable object
    /// in an excluded namespace is ignored too).
    fn read_api(&self, o: DynamicObject, policy: &Policy) -> Classified;
    /// Reads a file's document, `object` being its `namespace/name` as far as it could be read.
    fn read_file(&self, v: Value, object: &str, policy: &Policy) -> Classified;
}

impl<K: Kind> AnyKind for K
where
    Object: From<K::Output>,
{
    fn kind(&self) -> ObjectKind {
        K::KIND
    }

    fn resource(&self) -> Resource {
        K::RESOURCE
    }

    fn selector(&self) -> Option<&'static str> {
        Kind::selector(self)
    }

    fn page_size(&self) -> Option<u32> {
        Kind::page_size(self)
    }

    fn version(&self) -> Option<&str> {
        Kind::version(self)
    }

    fn reads(&self, api_version: &str, kind: &str) -> bool {
        kind == K::KIND.label()
            && K::RESOURCE
                .versions
                .iter()
                .any(|v| K::RESOURCE.api_version(v) == api_version)
    }

    fn read_api(&self, o: DynamicObject, policy: &Policy) -> Classified {
        let namespace = o.metadata.namespace.as_deref().unwrap_or("");
        let name = o.metadata.name.as_deref().unwrap_or("?");
        if let Some(ignored) = excluded(K::KIND, &format!("{namespace}/{name}"), namespace, policy)
        {
            return ignored;
        }
        match from_dynamic::<K>(o) {
            Ok(shape) => self.convert(shape, policy).map(Object::from),
            Err(e) => Read::Invalid(e),
        }
    }

    fn read_file(&self, v: Value, object: &str, policy: &Policy) -> Classified {
        match serde_yaml_ng::from_value::<K::Shape>(v) {
            Ok(shape) => self.convert(shape, policy).map(Object::from),
            Err(e) => Read::Invalid(ObjectError::new(
                K::KIND,
                object,
                Skip::Malformed,
                format!("cannot be read: {e}"),
            )),
        }
    }
}

/// Why object `object` (`namespace/name`) of `kind` is not served, when the policy leaves its
/// namespace out. Each source asks before reading the object into its shape, so an unreadable
/// object there is ignored too.
pub fn excluded(
    kind: ObjectKind,
    object: &str,
    namespace: &str,
    policy: &Policy,
) -> Option<Classified> {
    (!policy.serves_namespace(namespace)).then(|| {
        Read::Ignored(format!(
            "{kind} {object}: namespace {namespace} is excluded (--exclude-namespace)"
        ))
    })
}

/// The kinds `selection` reads, in the order they are listed and watched.
pub fn kinds(selection: &Selection, import_version: Option<&str>) -> Vec<Arc<dyn AnyKind>> {
    let mut kinds: Vec<Arc<dyn AnyKind>> = Vec::new();
    if selection.mcs {
        kinds.push(Arc::new(mcs::Imports {
            version: import_version.map(str::to_string),
        }));
        // Slices also carry ServiceImports' endpoints; Linkerd's objects need none.
        kinds.push(Arc::new(mcs::Slices));
    }
    if let Some(config) = &selection.linkerd {
        kinds.push(Arc::new(linkerd::Services {
            config: config.clone(),
        }));
    }
    if selection.cluster_id.is_none() {
        kinds.push(Arc::new(about::ClusterProperties));
    }
    kinds
}
