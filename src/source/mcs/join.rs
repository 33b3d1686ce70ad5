//! The MCS API's part of a source's store: each ServiceImport joined with the EndpointSlices that
//! name its service, kept packed (a few bytes an endpoint) because a source must hold every
//! object it watches, and turned back into a whole `model::Service` when one of them changes.
//!
//! This cluster's own slices of its headless Services are kept beside them: where Submariner
//! Lighthouse's slices of this cluster hold Globalnet's global addresses (which this cluster
//! cannot route, [`super::lighthouse_global`]), the service is answered from this cluster's own
//! slices of it instead, as Lighthouse's resolver answers (while there are any; until then, from
//! Lighthouse's).

use std::borrow::Cow;
use std::collections::HashMap;

use super::Import;
use crate::model::packed::{self, ImportHead, Packed, PackedImport, PackedService};
use crate::model::{ObjectKind, Service, ServiceKey};
use crate::source::object::{ObjectId, Part};

/// A ServiceImport or an EndpointSlice as the part keeps it.
#[derive(Debug, Clone)]
pub enum Stored {
    Import(ServiceKey, PackedImport),
    /// The service it belongs to, the slice (which knows its own name), and the cluster whose
    /// Lighthouse Globalnet slice it is, if it is one.
    Slice(ServiceKey, Packed, Option<String>),
    /// One of this cluster's own slices of a headless Service, and that Service.
    Local(ServiceKey, Packed),
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
    /// Of `slices`, Lighthouse's Globalnet ones: name and cluster.
    global: Vec<(String, String)>,
    /// This cluster's own slices of the service, sorted by name.
    local: Vec<Packed>,
}

impl Objects {
    fn is_empty(&self) -> bool {
        self.import.is_none() && self.slices.is_empty() && self.local.is_empty()
    }
}

/// The slices `o`'s service is answered from in cluster `own`: its own, where Lighthouse's
/// Globalnet slices of `own` stand and `own` has slices of the service; else as they are.
fn slices_for<'a>(own: Option<&str>, o: &'a Objects) -> Cow<'a, [Packed]> {
    let Some(own) = own.filter(|own| !o.local.is_empty() && o.global.iter().any(|g| g.1 == *own))
    else {
        return Cow::Borrowed(&o.slices);
    };
    let replaced = |p: &Packed| o.global.iter().any(|(n, c)| c == own && n == p.name());
    let mut out: Vec<Packed> = o.slices.iter().filter(|p| !replaced(p)).cloned().collect();
    for l in &o.local {
        let mut s = l.unpack();
        s.cluster = Some(own.to_string());
        out.push(Packed::new(&s));
    }
    out.sort_by(|a, b| a.name().cmp(b.name()));
    Cow::Owned(out)
}

/// ServiceImports and EndpointSlices, by the service they give. A service is given once its
/// import is known; slices that name a service without one wait for it.
#[derive(Debug, Default)]
pub struct Joined {
    services: HashMap<ServiceKey, Objects>,
    imports: usize,
    /// The service each slice is filed under, so a delete (or a relabel) finds it.
    slice_owner: HashMap<ObjectId, ServiceKey>,
    /// The same, for this cluster's own slices.
    local_owner: HashMap<ObjectId, ServiceKey>,
    /// The server's own cluster id.
    own: Option<String>,
    /// How many of the slices are Lighthouse's Globalnet ones: this cluster's own slices are
    /// watched once there is one.
    global_slices: usize,
}

impl Joined {
    /// Drops the service's record once it holds nothing.
    fn tidy(&mut self, key: &ServiceKey) {
        if self.services.get(key).is_some_and(Objects::is_empty) {
            self.services.remove(key);
        }
    }

    fn detach_slice(&mut self, owner: &ServiceKey, name: &str, local: bool) {
        if let Some(o) = self.services.get_mut(owner) {
            let list = if local { &mut o.local } else { &mut o.slices };
            if let Ok(i) = list.binary_search_by(|p| p.name().cmp(name)) {
                list.remove(i);
            }
            list.shrink_to_fit();
            if !local {
                let before = o.global.len();
                o.global.retain(|(n, _)| n != name);
                self.global_slices -= before - o.global.len();
            }
        }
        self.tidy(owner);
    }

    /// Files slice `packed` (this cluster's own if `local`) under `service`; the services it
    /// changes (the one it was filed under before too).
    fn file_slice(
        &mut self,
        service: ServiceKey,
        packed: Packed,
        local: bool,
        global: Option<String>,
    ) -> Vec<ServiceKey> {
        let name = packed.name().to_string();
        let owners = if local {
            &mut self.local_owner
        } else {
            &mut self.slice_owner
        };
        let mut affected = Vec::with_capacity(2);
        if let Some(old) = owners.insert((service.namespace.clone(), name.clone()), service.clone())
            && old != service
        {
            self.detach_slice(&old, &name, local);
            affected.push(old);
        }
        let o = self.services.entry(service.clone()).or_default();
        let list = if local { &mut o.local } else { &mut o.slices };
        match list.binary_search_by(|p| p.name().cmp(&name)) {
            Ok(i) => list[i] = packed,
            Err(i) => list.insert(i, packed),
        }
        if !local {
            let before = o.global.len();
            o.global.retain(|(n, _)| *n != name);
            if let Some(cluster) = global {
                o.global.push((name, cluster));
            }
            self.global_slices = self.global_slices + o.global.len() - before;
        }
        affected.push(service);
        affected
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

    /// Forgets an EndpointSlice (this cluster's own if `local`); returns the service it
    /// belonged to if it was known.
    fn remove_slice(&mut self, id: &ObjectId, local: bool) -> Option<ServiceKey> {
        let owners = if local {
            &mut self.local_owner
        } else {
            &mut self.slice_owner
        };
        let owner = owners.remove(id)?;
        self.detach_slice(&owner, &id.1, local);
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
            Stored::Slice(service, packed, global) => {
                self.file_slice(service, packed, false, global)
            }
            Stored::Local(service, packed) => self.file_slice(service, packed, true, None),
        }
    }

    fn delete(&mut self, kind: ObjectKind, id: &ObjectId) -> Option<ServiceKey> {
        match kind {
            ObjectKind::ServiceImport => self.remove_import(id),
            ObjectKind::LocalEndpointSlice => self.remove_slice(id, true),
            _ => self.remove_slice(id, false),
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
            ObjectKind::LocalEndpointSlice => self
                .local_owner
                .keys()
                .filter(|(ns, _)| in_namespace(ns))
                .cloned()
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
            ObjectKind::LocalEndpointSlice => self.local_owner.len(),
            _ => self.slice_owner.len(),
        }
    }

    fn service(&self, key: &ServiceKey) -> Option<Service> {
        let objects = self.services.get(key)?;
        let import = objects.import.as_ref()?;
        let slices = slices_for(self.own.as_deref(), objects);
        Some(packed::service(key.clone(), import, &slices))
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
        let own = self.own.as_deref();
        self.services
            .iter()
            .filter_map(|(k, o)| {
                let import = o.import.clone()?;
                Some((k.clone(), import, slices_for(own, o).into_owned()))
            })
            .collect()
    }

    fn into_packed(self) -> Vec<PackedService> {
        let own = self.own;
        self.services
            .into_iter()
            .filter_map(|(k, o)| {
                let replaced = match slices_for(own.as_deref(), &o) {
                    Cow::Owned(slices) => Some(slices),
                    Cow::Borrowed(_) => None,
                };
                Some((k, o.import?, replaced.unwrap_or(o.slices)))
            })
            .collect()
    }

    fn set_own_cluster(&mut self, own: Option<&str>) {
        self.own = own.map(str::to_string);
    }

    fn wants(&self, kind: ObjectKind) -> bool {
        kind != ObjectKind::LocalEndpointSlice || self.global_slices > 0
    }

    fn objects(&self, key: &ServiceKey) -> Vec<String> {
        match self.services.get(key) {
            Some(o) if o.import.is_some() => vec![key.name.clone()],
            _ => Vec::new(),
        }
    }
}
