//! How the import half writes one service: its ServiceImport and slices (and the Service for the
//! ports Linkerd's federated Service lacks), or their removal.
//! Only objects the bridge created are written; one someone else created is left as it is.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ObjectMeta;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use tracing::info;

use super::super::Import;
use super::super::index::Said;
use super::super::object::{
    covers, difference, legacy_upgrade, owned_keys, same_spec, updated_by_a_bridge,
};
use super::Importer;
use crate::bridge::model::{
    FIELD_MANAGER, LABEL_MANAGER, LABEL_SLICE_MANAGER, MANAGER, PORTS_FIELD_MANAGER, PORTS_SUFFIX,
    Problem, ROUTE_SUFFIX,
};
use crate::bridge::model::{Reason, is_ours};
use crate::bridge::runtime::{self, Key};
use crate::source::mcs::LABEL_KUBERNETES_SERVICE_NAME;

impl Importer {
    /// Brings service `key` to `want`: its ServiceImport and slices written, or taken away.
    pub(super) async fn reconcile(
        &self,
        key: &Key,
        want: Option<&Import>,
        (mine, routes): &(Vec<Arc<EndpointSlice>>, Vec<Arc<Service>>),
        said: &mut Said,
    ) -> Result<(), kube::Error> {
        let (ns, name) = (key.0.as_str(), key.1.as_str());
        let in_store = self.imports.get(ns, name);
        let existing = self.written_imports.read(ns, name, in_store);
        let ours = existing
            .as_ref()
            .is_none_or(|o| is_ours(o.metadata.labels.as_ref(), LABEL_MANAGER));
        let si_api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &self.si);
        let slice_api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), ns);
        let Some(want) = want else {
            self.ports_service(key, None, routes, said).await?;
            for s in mine {
                let slice = s.metadata.name.clone().unwrap_or_default();
                absent_is_done(slice_api.delete(&slice, &DeleteParams::default()).await)?;
                self.written_slices.forget(ns, &slice);
            }
            if let Some(o) = existing.filter(|_| ours) {
                absent_is_done(si_api.delete(name, &DeleteParams::default()).await)?;
                self.written_imports.forget(ns, name);
                info!(
                    namespace = ns,
                    name, "ServiceImport deleted: no cluster exports the service now"
                );
                drop(o);
            }
            return Ok(());
        };
        if !ours {
            let o = existing.expect("not ours: it exists");
            self.not_taken_over(said, "ServiceImport", &o.metadata);
            return Ok(());
        }
        // The ServiceImport, applied server-side under the bridge's field manager: what it no
        // longer applies (a label no longer exported, `ips` once the federated Service went)
        // goes with the next apply, and labels and annotations others put on stay.
        let mut object = json!({
            "apiVersion": self.si.api_version,
            "kind": "ServiceImport",
            "metadata": want.metadata(),
            "spec": want.spec(),
        });
        object["metadata"]["name"] = name.into();
        object["metadata"]["namespace"] = ns.into();
        let apply = PatchParams::apply(FIELD_MANAGER).force();
        let have = match existing {
            Some(o) => serde_json::to_value(&*o).unwrap_or_default(),
            None => {
                // Not there as far as the store knows: applied without force, so one someone
                // else created since (with other values) is a conflict, not taken over.
                let create = PatchParams::apply(FIELD_MANAGER);
                match si_api.patch(name, &create, &Patch::Apply(&object)).await {
                    Ok(o) => {
                        info!(namespace = ns, name, "ServiceImport created");
                        let have = serde_json::to_value(&o).unwrap_or_default();
                        self.written_imports.wrote(None, o);
                        have
                    }
                    Err(kube::Error::Api(e)) if e.code == 409 => {
                        let o = si_api.get(name).await?;
                        if !is_ours(o.metadata.labels.as_ref(), LABEL_MANAGER) {
                            self.not_taken_over(said, "ServiceImport", &o.metadata);
                            return Ok(());
                        }
                        serde_json::to_value(o).unwrap_or_default()
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        // The version the next write goes over.
        let mut version = have["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_string);
        // Labels and annotations the bridge applied before and wants no more: exported no
        // longer.
        let stale = |what: &str| {
            owned_keys(&have, what)
                .into_iter()
                .any(|k| object["metadata"][what].get(&k).is_none())
        };
        if !covers(&have, &object)
            || !same_spec(&have["spec"], &object["spec"])
            || stale("labels")
            || stale("annotations")
        {
            let mut o = si_api.patch(name, &apply, &Patch::Apply(&object)).await?;
            // One a bridge wrote before it applied ServiceImports (its write answers with every
            // manager's record): what that bridge wrote becomes applied, and the apply made
            // again takes away what is no longer wanted. Each version written on the way is
            // one the store may show meanwhile.
            if updated_by_a_bridge(&o.metadata)
                && let Some(patch) = legacy_upgrade(&serde_json::to_value(&o).unwrap_or_default())
            {
                let patch = serde_json::from_value(patch).expect("a JSON patch");
                let over = std::mem::replace(&mut version, o.metadata.resource_version.clone());
                self.written_imports.wrote(over, o);
                let json = Patch::<()>::Json(patch);
                let patched = si_api.patch(name, &PatchParams::default(), &json).await?;
                let over =
                    std::mem::replace(&mut version, patched.metadata.resource_version.clone());
                self.written_imports.wrote(over, patched);
                o = si_api.patch(name, &apply, &Patch::Apply(&object)).await?;
                info!(
                    namespace = ns,
                    name, "ServiceImport an earlier bridge wrote taken up as applied"
                );
            }
            let over = std::mem::replace(&mut version, o.metadata.resource_version.clone());
            self.written_imports.wrote(over, o);
            let changed = difference(&have, &object)
                .unwrap_or_else(|| "a field the bridge no longer sets".into());
            info!(namespace = ns, name, changed, "ServiceImport updated");
        }
        let status = want.status();
        if !covers(&have["status"], &status)
            || have["status"]["clusters"].as_array().map(Vec::len)
                != status["clusters"].as_array().map(Vec::len)
        {
            let patch = json!({
                "apiVersion": self.si.api_version,
                "kind": "ServiceImport",
                "metadata": {"name": name, "namespace": ns},
                "status": status,
            });
            let o = si_api
                .patch_status(name, &apply, &Patch::Apply(&patch))
                .await?;
            self.written_imports.wrote(version, o);
        }
        // The slices: each written unless someone else's has its name; the bridge's others
        // taken away.
        let wanted = want.slice_objects();
        let create = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        let new = |object: &serde_json::Value| -> EndpointSlice {
            serde_json::from_value(object.clone()).expect("a slice")
        };
        for (slice, object) in &wanted {
            let store = match slice.ends_with(ROUTE_SUFFIX) || slice.ends_with(PORTS_SUFFIX) {
                true => &self.twins,
                false => &self.slices,
            };
            let in_store = store.get(ns, slice);
            let have = match self.written_slices.read(ns, slice, in_store) {
                Some(h) => h,
                None => match slice_api.create(&create, &new(object)).await {
                    Ok(o) => {
                        self.written_slices.wrote(None, o);
                        continue;
                    }
                    // Created since the store last showed it: judged as it is.
                    Err(kube::Error::Api(e)) if e.code == 409 => {
                        Arc::new(slice_api.get(slice).await?)
                    }
                    Err(e) => return Err(e),
                },
            };
            let over = have.metadata.resource_version.clone();
            if !is_ours(have.metadata.labels.as_ref(), LABEL_SLICE_MANAGER) {
                self.not_taken_over(said, "EndpointSlice", &have.metadata);
            } else if route_stale(&have, object) {
                // Deleted as it is and created anew: kube-proxy drops a slice's endpoints
                // from a Service only when it sees the slice go while naming it (a slice
                // whose label is taken away it ignores, keeping the routes; k8s.io/kubernetes
                // v1.37.2 pkg/proxy/endpointslicecache.go `endpointSliceCacheKeys`).
                absent_is_done(slice_api.delete(slice, &DeleteParams::default()).await)?;
                let o = slice_api.create(&create, &new(object)).await?;
                self.written_slices.recreated(over, o);
            } else if !covers(&serde_json::to_value(&*have).unwrap_or_default(), object) {
                let o = slice_api
                    .patch(slice, &apply, &Patch::Apply(object))
                    .await?;
                self.written_slices.wrote(over, o);
            }
        }
        for s in mine {
            let slice = s.metadata.name.clone().unwrap_or_default();
            if !wanted.contains_key(&slice) {
                absent_is_done(slice_api.delete(&slice, &DeleteParams::default()).await)?;
                self.written_slices.forget(ns, &slice);
            }
        }
        self.ports_service(key, want.ports_service(), routes, said)
            .await
    }

    /// Brings the bridge's Service of service `key` that carries ports Linkerd's federated
    /// Service lacks to `want` (name and object; see [`Import::ports_service`]), and takes away
    /// its others (`routes`). One the API server refuses (an admission policy that denies
    /// `externalIPs`, as `DenyServiceExternalIPs` does) is said on the import, and the rest of
    /// the import stands.
    async fn ports_service(
        &self,
        key: &Key,
        want: Option<(String, serde_json::Value)>,
        routes: &[Arc<Service>],
        said: &mut Said,
    ) -> Result<(), kube::Error> {
        let ns = key.0.as_str();
        let api: Api<Service> = Api::namespaced(self.client.clone(), ns);
        for s in routes {
            let other = s.metadata.name.as_deref().unwrap_or_default();
            if want.as_ref().is_none_or(|(w, _)| w != other) {
                absent_is_done(api.delete(other, &DeleteParams::default()).await)?;
                info!(
                    namespace = ns,
                    name = other,
                    "Service for the ports the federated Service lacks deleted"
                );
            }
        }
        let Some((service, object)) = want else {
            return Ok(());
        };
        let have = match self.services.get(ns, &service) {
            Some(h) => Some(h),
            None => {
                let create = PostParams {
                    field_manager: Some(PORTS_FIELD_MANAGER.into()),
                    ..PostParams::default()
                };
                let new: Service = serde_json::from_value(object.clone()).expect("a Service");
                match api.create(&create, &new).await {
                    Ok(_) => {
                        info!(
                            namespace = ns,
                            name = service,
                            "Service for the ports the federated Service lacks created"
                        );
                        None
                    }
                    // Created since the store last showed it: judged as it is.
                    Err(kube::Error::Api(e)) if e.code == 409 => {
                        Some(Arc::new(api.get(&service).await?))
                    }
                    // The namespace is being deleted, and the import with it: nothing to say.
                    Err(kube::Error::Api(e)) if namespace_terminating(&e) => None,
                    Err(kube::Error::Api(e)) if REFUSED.contains(&e.code) => {
                        self.not_routed(said, key, &service, &e.message);
                        None
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let Some(have) = have else {
            return Ok(());
        };
        if !is_ours(have.metadata.labels.as_ref(), LABEL_MANAGER) {
            self.not_taken_over(said, "Service", &have.metadata);
            return Ok(());
        }
        // The store keeps no IP family policy: two families say it.
        let mut compared = object.clone();
        if let Some(spec) = compared["spec"].as_object_mut() {
            spec.remove("ipFamilyPolicy");
        }
        if covers(&serde_json::to_value(&*have).unwrap_or_default(), &compared) {
            return Ok(());
        }
        // A merge patch, as the create was an update: the ports and external IPs replaced whole
        // (an apply would merge them, by port, with those the create holds).
        let update = PatchParams {
            field_manager: Some(PORTS_FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        match api.patch(&service, &update, &Patch::Merge(&object)).await {
            Ok(_) => info!(
                namespace = ns,
                name = service,
                "Service for the ports the federated Service lacks updated"
            ),
            Err(kube::Error::Api(e)) if REFUSED.contains(&e.code) => {
                self.not_routed(said, key, &service, &e.message);
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Notes that the API server refused the bridge's Service `service` for import `key`: the
    /// ports it would carry reach the pods only through the mesh.
    fn not_routed(&self, said: &mut Said, key: &Key, service: &str, why: &str) {
        let note = format!(
            "Service {}/{service}, which would route the ports the federated Service lacks to their endpoints for clients outside the mesh, was refused: {why}; those ports are reached through the mesh only",
            key.0
        );
        let p = Problem::new("ServiceImport", (&key.0, &key.1), Reason::NotRouted, note);
        said.messages.insert(p);
    }

    /// Notes that `o` is someone else's and stays so: said once in the log and an Event on
    /// it, and counted.
    fn not_taken_over(&self, said: &mut Said, kind: &'static str, meta: &ObjectMeta) {
        let (ns, name) = runtime::key(meta);
        let label = match kind {
            "EndpointSlice" => {
                said.foreign.1 += 1;
                LABEL_SLICE_MANAGER
            }
            "ServiceImport" => {
                said.foreign.0 += 1;
                LABEL_MANAGER
            }
            _ => LABEL_MANAGER,
        };
        let note = format!(
            "{kind} {ns}/{name} was not created by the linkerd-bridge (no label {label}={MANAGER}): it is left as it is, and the service's import from Linkerd is not written"
        );
        let p = Problem::new(kind, (&ns, &name), Reason::NotTakenOver, note);
        said.messages.insert(p);
    }
}

/// The API server's answers that refuse the bridge's Service for ports as it is (an admission
/// policy's, a validation's) rather than fail for now: said, not tried again at once.
const REFUSED: [u16; 3] = [400, 403, 422];

/// Whether the API server refused a create because its namespace is being deleted: its
/// namespace lifecycle admission answers 403 with the cause `NamespaceTerminating`
/// (k8s.io/apiserver v0.37.2 `pkg/admission/plugin/namespace/lifecycle/admission.go`), which
/// is no policy against the bridge's Service.
fn namespace_terminating(e: &kube::core::Status) -> bool {
    let mut causes = e.details.iter().flat_map(|d| &d.causes);
    e.code == 403 && causes.any(|c| c.reason == "NamespaceTerminating")
}

/// A delete of something already gone is done.
fn absent_is_done<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether slice `have` names a Service for kube-proxy that `want` does not: the federated
/// Service is another, or `have` is an MCS slice an earlier bridge labelled for kube-proxy too
/// (before routes had twins of their own).
fn route_stale(have: &EndpointSlice, want: &serde_json::Value) -> bool {
    let had = (have.metadata.labels.as_ref()).and_then(|l| l.get(LABEL_KUBERNETES_SERVICE_NAME));
    had.is_some_and(|h| want["metadata"]["labels"][LABEL_KUBERNETES_SERVICE_NAME] != h.as_str())
}

#[cfg(test)]
mod tests;
