//! The MCS API's part of a source's store: each ServiceImport joined with the EndpointSlices that
//! name its service, kept packed (a few bytes an endpoint) because a source must hold every
//! object it watches, and turned back into a whole `model::Service` when one of them changes.

use std::collections::HashMap;

use super::Import;
use crate::model::packed::{self, ImportHead, Packed, PackedImport, PackedService};
use crate::model::{ObjectKind, Service, ServiceKey};
use crate::source::object::{ObjectId, Part};

/// A ServiceImport or an EndpointSlice as the part keeps it.
#[derive(Debug, Clone)]
pub enum Stored {
    Import(ServiceKey, PackedImport),
    /// The service it belongs to, and the slice (which knows its own name).
    Slice(ServiceKey, Packed),
}

impl Stored {
    pub fn import(i: Import) -> Self {
        let head = ImportHead {
            origin: ObjectKind::ServiceImport,
            kind: i.kind,
            locality: i.locality,
            slices_absent: i.slices_absent,
        };
        Stored::Import(i.key, PackedImport::new(head, &i.ips, &i.ports))
    }
}

/// The objects of one service: its ServiceImport (if seen yet) and its slices, packed.
#[derive(Debug, Default)]
struct Objects {
    import: Option<PackedImport>,
    /// Sorted by slice name.
    slices: Vec<Packed>,
}

/// ServiceImports and EndpointSlices, by the service they give. A service is given once its
/// import is known; slices that name a service without one wait for it.
#[derive(Debug, Default)]
pub struct Joined {
    services: HashMap<ServiceKey, Objects>,
    imports: usize,
    /// The service each slice is filed under, so a delete (or a relabel) finds it.
    slice_owner: HashMap<ObjectId, ServiceKey>,
}

impl Joined {
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
}

impl Part for Joined {
    type Object = Stored;

    fn apply(&mut self, object: Stored) -> Vec<ServiceKey> {
        match object {
            Stored::Import(key, packed) => {
                let objects = self.services.entry(key.clone()).or_default();
                if objects.import.replace(packed).is_none() {
                    self.imports += 1;
                }
                vec![key]
            }
            Stored::Slice(service, packed) => {
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
        }
    }

    fn delete(&mut self, kind: ObjectKind, id: &ObjectId) -> Option<ServiceKey> {
        match kind {
            ObjectKind::ServiceImport => self.remove_import(id),
            _ => self.remove_slice(id),
        }
    }

    fn ids(&self, kind: ObjectKind, namespace: Option<&str>) -> Vec<ObjectId> {
        let in_namespace = |ns: &str| namespace.is_none_or(|n| ns == n);
        match kind {
            ObjectKind::ServiceImport => self
                .services
                .iter()
                .filter(|(k, o)| o.import.is_some() && in_namespace(&k.namespace))
                .map(|(k, _)| (k.namespace.clone(), k.name.clone()))
                .collect(),
            _ => self
                .slice_owner
                .keys()
                .filter(|(ns, _)| in_namespace(ns))
                .cloned()
                .collect(),
        }
    }

    fn count(&self, kind: ObjectKind) -> usize {
        match kind {
            ObjectKind::ServiceImport => self.imports,
            _ => self.slice_owner.len(),
        }
    }

    fn service(&self, key: &ServiceKey) -> Option<Service> {
        let objects = self.services.get(key)?;
        let import = objects.import.as_ref()?;
        Some(packed::service(key.clone(), import, &objects.slices))
    }

    fn gives(&self, key: &ServiceKey) -> bool {
        self.services.get(key).is_some_and(|o| o.import.is_some())
    }

    fn keys(&self) -> Vec<ServiceKey> {
        self.services
            .iter()
            .filter(|(_, o)| o.import.is_some())
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn packed(&self) -> Vec<PackedService> {
        self.services
            .iter()
            .filter_map(|(k, o)| Some((k.clone(), o.import.clone()?, o.slices.clone())))
            .collect()
    }

    fn into_packed(self) -> Vec<PackedService> {
        self.services
            .into_iter()
            .filter_map(|(k, o)| Some((k, o.import?, o.slices)))
            .collect()
    }

    fn objects(&self, key: &ServiceKey) -> Vec<String> {
        match self.services.get(key) {
            Some(o) if o.import.is_some() => vec![key.name.clone()],
            _ => Vec::new(),
        }
    }
}
