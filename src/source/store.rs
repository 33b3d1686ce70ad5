//! The objects a source currently knows, in the packed form (a few bytes an endpoint), joined
//! into `model::Service`s on demand: a source must hold every object it watches so that a change
//! to one can be turned back into its whole service.

use std::collections::{BTreeMap, HashMap};

use super::Object;
use super::linkerd::{self, Member, Role};
use crate::model::packed::{self, ImportHead, Packed, PackedImport};
use crate::model::{ObjectKind, Service, ServiceKey, ServiceSet};

/// An object in the store's form (a few bytes an endpoint), as a relist holds what it has
/// listed until the list is complete.
#[derive(Debug, Clone)]
pub enum PackedObject {
    Import(ServiceKey, PackedImport),
    /// The service it belongs to, and the slice (which knows its own name).
    Slice(ServiceKey, Packed),
    /// One of Linkerd's Services (a few per service: kept as read).
    Linkerd(Member),
    /// The ClusterProperty naming the own cluster: its name and the id.
    ClusterId(String, String),
}

impl From<Object> for PackedObject {
    /// The object in the store's form.
    fn from(object: Object) -> Self {
        match object {
            Object::Import(i) => PackedObject::Import(
                i.key,
                PackedImport::new(
                    ImportHead {
                        origin: ObjectKind::ServiceImport,
                        kind: i.kind,
                        locality: i.locality,
                        slices_absent: i.slices_absent,
                    },
                    &i.ips,
                    &i.ports,
                ),
            ),
            Object::Slice(s) => PackedObject::Slice(s.service, Packed::new(&s.slice)),
            Object::Linkerd(m) => PackedObject::Linkerd(m),
            Object::ClusterId(c) => PackedObject::ClusterId(c.object, c.id),
        }
    }
}

/// `(namespace, name)` of an object.
pub type ObjectId = (String, String);

/// The objects of one service: its ServiceImport (if seen yet) and its slices, packed.
#[derive(Debug, Default)]
struct Objects {
    import: Option<PackedImport>,
    /// Sorted by slice name.
    slices: Vec<Packed>,
}

/// The objects a source currently knows, joined into services on demand. Kept packed (a few
/// bytes an endpoint) because a source must hold every object it watches.
#[derive(Debug, Default)]
pub struct Store {
    services: HashMap<ServiceKey, Objects>,
    imports: usize,
    /// The service each slice is filed under, so a delete (or a relabel) finds it.
    slice_owner: HashMap<ObjectId, ServiceKey>,
    /// Linkerd's Services by the service they belong to, then by object name.
    linkerd: HashMap<ServiceKey, BTreeMap<String, Role>>,
    /// The service each of Linkerd's Services is filed under.
    linkerd_owner: HashMap<ObjectId, ServiceKey>,
    /// The ClusterProperty naming the own cluster, by object name, and the id it gives.
    cluster_id: Option<(String, String)>,
}

impl Store {
    /// Adds or replaces an object; returns the services whose DNS data may have changed.
    pub fn insert(&mut self, object: Object) -> Vec<ServiceKey> {
        self.insert_packed(object.into())
    }

    /// As [`Store::insert`], for an object already packed.
    pub fn insert_packed(&mut self, object: PackedObject) -> Vec<ServiceKey> {
        match object {
            PackedObject::Import(key, packed) => {
                let objects = self.services.entry(key.clone()).or_default();
                if objects.import.replace(packed).is_none() {
                    self.imports += 1;
                }
                vec![key]
            }
            PackedObject::Slice(service, packed) => {
                let name = packed.name().to_string();
                let mut affected = Vec::with_capacity(2);
                if let Some(old) = self
                    .slice_owner
                    .insert((service.namespace.clone(), name.clone()), service.clone())
                {
                    if old != service {
                        self.detach_slice(&old, &name);
                        affected.push(old);
                    }
                }
                let list = &mut self.services.entry(service.clone()).or_default().slices;
                match list.binary_search_by(|p| p.name().cmp(&name)) {
                    Ok(i) => list[i] = packed,
                    Err(i) => list.insert(i, packed),
                }
                affected.push(service);
                affected
            }
            PackedObject::Linkerd(m) => {
                let id = (m.service.namespace.clone(), m.object.clone());
                let mut affected = Vec::with_capacity(2);
                if let Some(old) = self.linkerd_owner.insert(id.clone(), m.service.clone()) {
                    if old != m.service {
                        self.detach_linkerd(&old, &id.1);
                        affected.push(old);
                    }
                }
                self.linkerd
                    .entry(m.service.clone())
                    .or_default()
                    .insert(m.object, m.role);
                affected.push(m.service);
                affected
            }
            // No service changes: the id changes every service's answers at once, which the
            // source sends as a full set (see [`Store::own_cluster`]).
            PackedObject::ClusterId(name, id) => {
                self.cluster_id = Some((name, id));
                Vec::new()
            }
        }
    }

    /// The own cluster id the ClusterProperty gives, if one is held.
    pub fn own_cluster(&self) -> Option<&str> {
        self.cluster_id.as_ref().map(|(_, id)| id.as_str())
    }

    fn detach_linkerd(&mut self, owner: &ServiceKey, name: &str) {
        if let Some(members) = self.linkerd.get_mut(owner) {
            members.remove(name);
            if members.is_empty() {
                self.linkerd.remove(owner);
            }
        }
    }

    /// Forgets an object of `kind`; returns the service it belonged to if it was known.
    pub fn remove(&mut self, kind: ObjectKind, id: &ObjectId) -> Option<ServiceKey> {
        match kind {
            ObjectKind::ServiceImport => self.remove_import(id),
            ObjectKind::EndpointSlice => self.remove_slice(id),
            ObjectKind::Service => self.remove_linkerd(id),
            ObjectKind::ClusterProperty => {
                if self.cluster_id.as_ref().is_some_and(|(n, _)| *n == id.1) {
                    self.cluster_id = None;
                }
                None
            }
        }
    }

    /// Identities of the objects of `kind` (in `namespace`, or all).
    pub fn ids(&self, kind: ObjectKind, namespace: Option<&str>) -> Vec<ObjectId> {
        let in_namespace = |(ns, _): &&ObjectId| namespace.is_none_or(|n| ns == n);
        match kind {
            ObjectKind::ServiceImport => self
                .services
                .iter()
                .filter(|(k, o)| o.import.is_some() && namespace.is_none_or(|n| k.namespace == n))
                .map(|(k, _)| (k.namespace.clone(), k.name.clone()))
                .collect(),
            ObjectKind::EndpointSlice => self
                .slice_owner
                .keys()
                .filter(in_namespace)
                .cloned()
                .collect(),
            ObjectKind::Service => self
                .linkerd_owner
                .keys()
                .filter(in_namespace)
                .cloned()
                .collect(),
            // Cluster-scoped: no namespace.
            ObjectKind::ClusterProperty => self
                .cluster_id
                .iter()
                .map(|(n, _)| (String::new(), n.clone()))
                .collect(),
        }
    }

    /// How many objects of `kind` the store holds.
    pub fn count(&self, kind: ObjectKind) -> usize {
        match kind {
            ObjectKind::ServiceImport => self.imports,
            ObjectKind::EndpointSlice => self.slice_owner.len(),
            ObjectKind::Service => self.linkerd_owner.len(),
            ObjectKind::ClusterProperty => usize::from(self.cluster_id.is_some()),
        }
    }

    /// Forgets one of Linkerd's Services; returns the service it belonged to if it was known.
    fn remove_linkerd(&mut self, id: &ObjectId) -> Option<ServiceKey> {
        let owner = self.linkerd_owner.remove(id)?;
        self.detach_linkerd(&owner, &id.1);
        Some(owner)
    }

    /// When a ServiceImport and Linkerd's Services both give the service: the names of the
    /// latter, which lose (the ServiceImport is served).
    pub fn conflict(&self, key: &ServiceKey) -> Option<Vec<String>> {
        self.services.get(key)?.import.as_ref()?;
        let members = self.linkerd.get(key)?;
        linkerd::service(key, members)?;
        Some(members.keys().cloned().collect())
    }

    /// Every service that Linkerd's Services give, whether or not an import wins over it.
    pub fn linkerd_keys(&self) -> Vec<ServiceKey> {
        self.linkerd.keys().cloned().collect()
    }

    /// Drops the service's record once it holds nothing.
    fn tidy(&mut self, key: &ServiceKey) {
        if self
            .services
            .get(key)
            .is_some_and(|o| o.import.is_none() && o.slices.is_empty())
        {
            self.services.remove(key);
        }
    }

    fn detach_slice(&mut self, owner: &ServiceKey, name: &str) {
        if let Some(o) = self.services.get_mut(owner) {
            if let Ok(i) = o.slices.binary_search_by(|p| p.name().cmp(name)) {
                o.slices.remove(i);
            }
            o.slices.shrink_to_fit();
        }
        self.tidy(owner);
    }

    /// Forgets a ServiceImport; returns its service if it was known.
    fn remove_import(&mut self, id: &ObjectId) -> Option<ServiceKey> {
        let key = ServiceKey {
            namespace: id.0.clone(),
            name: id.1.clone(),
        };
        self.services.get_mut(&key)?.import.take()?;
        self.imports -= 1;
        self.tidy(&key);
        Some(key)
    }

    /// Forgets an EndpointSlice; returns the service it belonged to if it was known.
    fn remove_slice(&mut self, id: &ObjectId) -> Option<ServiceKey> {
        let owner = self.slice_owner.remove(id)?;
        self.detach_slice(&owner, &id.1);
        Some(owner)
    }

    /// The service as DNS sees it: from its ServiceImport if one is known, else from Linkerd's
    /// Services if they give one.
    pub fn service(&self, key: &ServiceKey) -> Option<Service> {
        if let Some(objects) = self.services.get(key) {
            if let Some(import) = &objects.import {
                return Some(packed::service(key.clone(), import, &objects.slices));
            }
        }
        linkerd::service(key, self.linkerd.get(key)?)
    }

    /// The services that only Linkerd's Services give, packed as imports are.
    fn linkerd_only(&self) -> Vec<(ServiceKey, PackedImport, Vec<Packed>)> {
        self.linkerd
            .iter()
            .filter(|(k, _)| self.services.get(*k).is_none_or(|o| o.import.is_none()))
            .filter_map(|(k, members)| {
                let s = linkerd::service(k, members)?;
                let slices = s.slices.iter().map(Packed::new).collect();
                Some((
                    k.clone(),
                    PackedImport::new(ImportHead::of(&s), &s.ips, &s.ports),
                    slices,
                ))
            })
            .collect()
    }

    /// Every service, still packed (a few bytes an endpoint): the builder unpacks them one at
    /// a time, so a full load never holds them all unpacked.
    pub fn snapshot(&self) -> ServiceSet {
        let mut all: Vec<_> = self
            .services
            .iter()
            .filter_map(|(k, o)| Some((k.clone(), o.import.clone()?, o.slices.clone())))
            .collect();
        all.extend(self.linkerd_only());
        all.sort_by(|a, b| a.0.cmp(&b.0));
        ServiceSet::packed(all)
    }

    /// As [`Store::snapshot`], for a store that is done with: its objects move into the
    /// snapshot instead of being copied, so a full load never holds them twice.
    pub fn into_snapshot(self) -> ServiceSet {
        let linkerd = self.linkerd_only();
        let mut all: Vec<_> = self
            .services
            .into_iter()
            .filter_map(|(k, o)| Some((k, o.import?, o.slices)))
            .collect();
        all.extend(linkerd);
        all.sort_by(|a, b| a.0.cmp(&b.0));
        ServiceSet::packed(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Classified;
    use crate::source::file::tests::one;

    #[test]
    fn store_joins_slices_to_imports() {
        let mut store = Store::default();
        for yaml in [
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: z, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web}}\naddressType: IPv4\nendpoints: [{addresses: [10.0.0.2]}]",
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: a, namespace: shop, labels: {multicluster.kubernetes.io/service-name: web}}\naddressType: IPv4\nendpoints: [{addresses: [10.0.0.1]}]",
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: b, namespace: shop, labels: {multicluster.kubernetes.io/service-name: orphan}}\naddressType: IPv4",
            "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\nspec: {type: Headless}",
        ] {
            let Classified::Object(o) = one(yaml) else {
                panic!()
            };
            store.insert(o);
        }
        let services: Vec<Service> = store.snapshot().into_iter().collect();
        assert_eq!(services.len(), 1);
        let names: Vec<_> = services[0].slices.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "z"]);
        assert_eq!(store.count(ObjectKind::EndpointSlice), 3);
        // A relabelled slice moves to its new service; a removed one is gone from its service.
        let web = ServiceKey {
            namespace: "shop".into(),
            name: "web".into(),
        };
        let orphan = ServiceKey {
            namespace: "shop".into(),
            name: "orphan".into(),
        };
        let Classified::Object(o) = one(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: z, namespace: shop, labels: {multicluster.kubernetes.io/service-name: orphan}}\naddressType: IPv4",
        ) else {
            panic!()
        };
        assert_eq!(store.insert(o), [web.clone(), orphan.clone()]);
        assert_eq!(store.service(&web).unwrap().slices.len(), 1);
        assert_eq!(
            store.remove(ObjectKind::EndpointSlice, &("shop".into(), "a".into())),
            Some(web.clone())
        );
        assert!(store.service(&web).unwrap().slices.is_empty());
        assert_eq!(
            store.remove(ObjectKind::EndpointSlice, &("shop".into(), "a".into())),
            None
        );
        assert_eq!(store.ids(ObjectKind::EndpointSlice, Some("shop")).len(), 2);
        assert_eq!(store.ids(ObjectKind::EndpointSlice, Some("other")).len(), 0);
        // A store that is done with hands over the same services, moved instead of copied.
        let copied: Vec<Service> = store.snapshot().into_iter().collect();
        let moved: Vec<Service> = store.into_snapshot().into_iter().collect();
        assert_eq!(moved, copied);
    }
}
