//! Sources of services. Each turns Kubernetes objects into `model` values and sends `Update`s to
//! the zone builder.
//!
//! The imports run one way: `object` (what every kind shares: the [`object::Kind`] and
//! [`object::Part`] traits) ← the kinds, a file (or folder) each with its part of the store, as
//! [`kinds`] lists them ← this file ([`Object`], [`AnyKind`], [`AnyPart`], the list of kinds) ←
//! `store` (what a source keeps, routed to the kinds' parts), `file` and `kube` (the two
//! sources). `policy` (what imported data may say) sits under `object`.

pub mod about;
pub mod file;
pub mod kube;
pub mod linkerd;
pub mod mcs;
pub mod object;
pub mod policy;
pub mod store;

use std::any::{Any, TypeId};
use std::sync::Arc;

use ::kube::api::DynamicObject;
use serde_yaml_ng::Value;

use self::object::{Kind, ObjectError, ObjectId, Part, Read, Refused, Resource, from_dynamic};
use self::policy::Policy;
use crate::model::packed::PackedService;
use crate::model::{ObjectKind, Service, ServiceKey, Skip};

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

/// One object read from a source, already validated and packed by its kind for its part of the
/// store, with what log lines and counters say of it. Whatever its kind: the sources and the
/// store never look inside.
pub struct Object {
    kind: ObjectKind,
    /// `namespace/name`, as log lines name it.
    name: String,
    refused: Vec<Refused>,
    packed: Box<dyn Any + Send>,
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.name)?;
        if !self.refused.is_empty() {
            write!(f, " {:?}", self.refused)?;
        }
        Ok(())
    }
}

impl Object {
    /// `K`'s object, packed for its part of the store.
    fn of<K: Kind>(object: K::Output) -> Self {
        Object {
            kind: K::KIND,
            name: K::object_name(&object),
            refused: K::refused(&object).to_vec(),
            packed: Box::new(K::pack(object)),
        }
    }

    /// The object's kind and `namespace/name`, as log lines name it.
    pub fn identity(&self) -> (ObjectKind, String) {
        (self.kind, self.name.clone())
    }

    pub fn kind(&self) -> ObjectKind {
        self.kind
    }

    /// The addresses the object gave that are not served.
    pub fn refused(&self) -> &[Refused] {
        &self.refused
    }

    /// The object as its part keeps it: `P::Object` for the part `P` that keeps its kind, `None`
    /// for any other (the store hands each object to the part its kind names).
    pub fn into_packed<P: Part>(self) -> Option<P::Object> {
        self.packed.downcast::<P::Object>().ok().map(|b| *b)
    }
}

/// What a source did with one raw object.
pub type Classified = Read<Object>;

/// A kind as the sources use it, whatever its shape: the erased form of [`object::Kind`].
pub trait AnyKind: Send + Sync {
    fn kind(&self) -> ObjectKind;
    /// Which part of the store keeps it: kinds that join share one.
    fn part(&self) -> TypeId;
    /// A new, empty part of that type.
    fn new_part(&self) -> Box<dyn AnyPart>;
    fn resource(&self) -> Resource;
    fn selector(&self) -> Option<&'static str>;
    fn page_size(&self) -> Option<u32>;
    /// The version to watch instead of discovering one.
    fn version(&self) -> Option<&str>;
    /// Whether a file's document of `api_version` and `kind` is of this kind.
    fn reads(&self, api_version: &str, kind: &str) -> bool;
    /// Whether it is watched only once the store wants it ([`object::Kind::ON_DEMAND`]).
    fn on_demand(&self) -> bool;
    /// Reads an object the Kubernetes API gave (namespace exclusion first: an unreadable object
    /// in an excluded namespace is ignored too).
    fn read_api(&self, o: DynamicObject, policy: &Policy) -> Classified;
    /// Reads a file's document, `object` being its `namespace/name` as far as it could be read.
    fn read_file(&self, v: Value, object: &str, policy: &Policy) -> Classified;
}

impl<K: Kind> AnyKind for K {
    fn kind(&self) -> ObjectKind {
        K::KIND
    }

    fn part(&self) -> TypeId {
        TypeId::of::<K::Part>()
    }

    fn new_part(&self) -> Box<dyn AnyPart> {
        Box::new(K::Part::default())
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

    fn on_demand(&self) -> bool {
        K::ON_DEMAND
    }

    fn reads(&self, api_version: &str, kind: &str) -> bool {
        kind == K::file_kind()
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
            Ok(shape) => self.convert(shape, policy).map(Object::of::<K>),
            Err(e) => Read::Invalid(e),
        }
    }

    fn read_file(&self, v: Value, object: &str, policy: &Policy) -> Classified {
        match serde_yaml_ng::from_value::<K::Shape>(v) {
            Ok(shape) => self.convert(shape, policy).map(Object::of::<K>),
            Err(e) => Read::Invalid(ObjectError::new(
                K::KIND,
                object,
                Skip::Malformed,
                format!("cannot be read: {e}"),
            )),
        }
    }
}

/// A part of the store as the store drives it, whatever it keeps: the erased form of
/// [`object::Part`] (see there for each method).
pub trait AnyPart: Send {
    /// `None` when the object is not of this part's kinds (the store routes each object by its
    /// kind, so that does not happen).
    fn apply(&mut self, object: Object) -> Option<Vec<ServiceKey>>;
    fn delete(&mut self, kind: ObjectKind, id: &ObjectId) -> Option<ServiceKey>;
    fn ids(&self, kind: ObjectKind, namespace: Option<&str>) -> Vec<ObjectId>;
    fn count(&self, kind: ObjectKind) -> usize;
    fn service(&self, key: &ServiceKey) -> Option<Service>;
    fn gives(&self, key: &ServiceKey) -> bool;
    fn keys(&self) -> Vec<ServiceKey>;
    fn packed(&self) -> Vec<PackedService>;
    fn into_packed(self: Box<Self>) -> Vec<PackedService>;
    fn objects(&self, key: &ServiceKey) -> Vec<String>;
    fn own_cluster(&self) -> Option<&str>;
    fn set_own_cluster(&mut self, own: Option<&str>);
    fn wants(&self, kind: ObjectKind) -> bool;
}

impl<P: Part> AnyPart for P {
    fn apply(&mut self, object: Object) -> Option<Vec<ServiceKey>> {
        Some(Part::apply(self, object.into_packed::<P>()?))
    }

    fn delete(&mut self, kind: ObjectKind, id: &ObjectId) -> Option<ServiceKey> {
        Part::delete(self, kind, id)
    }

    fn ids(&self, kind: ObjectKind, namespace: Option<&str>) -> Vec<ObjectId> {
        Part::ids(self, kind, namespace)
    }

    fn count(&self, kind: ObjectKind) -> usize {
        Part::count(self, kind)
    }

    fn service(&self, key: &ServiceKey) -> Option<Service> {
        Part::service(self, key)
    }

    fn gives(&self, key: &ServiceKey) -> bool {
        Part::gives(self, key)
    }

    fn keys(&self) -> Vec<ServiceKey> {
        Part::keys(self)
    }

    fn packed(&self) -> Vec<PackedService> {
        Part::packed(self)
    }

    fn into_packed(self: Box<Self>) -> Vec<PackedService> {
        Part::into_packed(*self)
    }

    fn objects(&self, key: &ServiceKey) -> Vec<String> {
        Part::objects(self, key)
    }

    fn own_cluster(&self) -> Option<&str> {
        Part::own_cluster(self)
    }

    fn set_own_cluster(&mut self, own: Option<&str>) {
        Part::set_own_cluster(self, own);
    }

    fn wants(&self, kind: ObjectKind) -> bool {
        Part::wants(self, kind)
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

/// The kinds `selection` reads, in the order they are listed and watched, which is also the
/// precedence of their parts of the store: a service that both the MCS API's objects and
/// Linkerd's give is answered from the former.
pub fn kinds(selection: &Selection, import_version: Option<&str>) -> Vec<Arc<dyn AnyKind>> {
    let mut kinds: Vec<Arc<dyn AnyKind>> = Vec::new();
    if selection.mcs {
        kinds.push(Arc::new(mcs::Imports {
            version: import_version.map(str::to_string),
        }));
        // Slices also carry ServiceImports' endpoints; Linkerd's objects need none.
        kinds.push(Arc::new(mcs::Slices));
        // This cluster's own headless slices, for Lighthouse's Globalnet slices of it (watched
        // once there are any).
        kinds.push(Arc::new(mcs::LocalSlices));
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
