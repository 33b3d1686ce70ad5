//! A source's store: the objects it currently knows, each in the part of the store its kind
//! names ([`super::object::Part`]: the kind's own file says what it keeps and how its objects join), turned
//! back into whole `model::Service`s on demand. A source must hold every object it watches so
//! that a change to one can be turned back into its whole service.
//!
//! The store names no kind. It routes each object to its kind's part, asks the parts in
//! precedence order (the order of [`super::kinds`]) for a service, and after each change
//! ([`Store::settle`]) reports the services that more than one part gives and knows the own
//! cluster id: the one step both sources take.

use std::collections::HashSet;
use std::sync::Arc;

use tracing::{info, warn};

use super::object::ObjectId;
use super::{AnyKind, AnyPart, Object};
use crate::metrics::Metrics;
use crate::model::{ObjectKind, Service, ServiceKey, ServiceSet, Skip};

/// The objects a source currently knows, in their kinds' parts.
pub struct Store {
    /// In precedence order.
    parts: Vec<Box<dyn AnyPart>>,
    /// The part each kind's objects go to.
    route: Vec<(ObjectKind, usize)>,
    /// `--cluster-id`, which wins over what a part says (the ClusterProperty).
    cluster_id: Option<String>,
    /// Services that more than one part gives, as last reported.
    conflicts: HashSet<ServiceKey>,
}

impl Store {
    /// An empty store for `kinds` (as [`super::kinds`] lists them, in precedence order), with
    /// the own cluster `cluster_id` when `--cluster-id` gives it.
    pub fn new(kinds: &[Arc<dyn AnyKind>], cluster_id: Option<String>) -> Self {
        let mut parts: Vec<(std::any::TypeId, Box<dyn AnyPart>)> = Vec::new();
        let mut route = Vec::new();
        for kind in kinds {
            let at = match parts.iter().position(|(id, _)| *id == kind.part()) {
                Some(at) => at,
                None => {
                    parts.push((kind.part(), kind.new_part()));
                    parts.len() - 1
                }
            };
            route.push((kind.kind(), at));
        }
        let mut store = Store {
            parts: parts.into_iter().map(|(_, p)| p).collect(),
            route,
            cluster_id,
            conflicts: HashSet::new(),
        };
        store.tell_own_cluster();
        store
    }

    /// Tells every part the own cluster id, which an object of `kind` may just have changed.
    fn tell_own_cluster(&mut self) {
        let own = self.own_cluster().map(str::to_string);
        for p in &mut self.parts {
            p.set_own_cluster(own.as_deref());
        }
    }

    fn part_of(&self, kind: ObjectKind) -> Option<usize> {
        self.route
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, at)| *at)
    }

    /// Adds or replaces an object; returns the services whose DNS data may have changed.
    pub fn insert(&mut self, object: Object) -> Vec<ServiceKey> {
        let kind = object.kind();
        let applied = self
            .part_of(kind)
            .and_then(|at| self.parts[at].apply(object));
        if kind == ObjectKind::ClusterProperty {
            self.tell_own_cluster();
        }
        applied.unwrap_or_else(|| {
            // The store is made from the kinds that read the objects, so this does not happen.
            warn!(%kind, "an object of a kind this store does not hold; ignored");
            Vec::new()
        })
    }

    /// Forgets an object of `kind`; returns the service it belonged to if it was known.
    pub fn remove(&mut self, kind: ObjectKind, id: &ObjectId) -> Option<ServiceKey> {
        let at = self.part_of(kind)?;
        let removed = self.parts[at].delete(kind, id);
        if kind == ObjectKind::ClusterProperty {
            self.tell_own_cluster();
        }
        removed
    }

    /// Identities of the objects of `kind` (in `namespace`, or all).
    pub fn ids(&self, kind: ObjectKind, namespace: Option<&str>) -> Vec<ObjectId> {
        self.part_of(kind)
            .map(|at| self.parts[at].ids(kind, namespace))
            .unwrap_or_default()
    }

    /// How many objects of `kind` the store holds.
    pub fn count(&self, kind: ObjectKind) -> usize {
        self.part_of(kind)
            .map_or(0, |at| self.parts[at].count(kind))
    }

    /// The service as DNS sees it: from the first part that gives it.
    pub fn service(&self, key: &ServiceKey) -> Option<Service> {
        self.parts.iter().find_map(|p| p.service(key))
    }

    /// Whether objects of `kind`, watched on demand, would change a service now.
    pub fn wants(&self, kind: ObjectKind) -> bool {
        self.part_of(kind)
            .is_some_and(|at| self.parts[at].wants(kind))
    }

    /// The server's own cluster id: `--cluster-id` when given, else what a part's objects say.
    pub fn own_cluster(&self) -> Option<&str> {
        self.cluster_id
            .as_deref()
            .or_else(|| self.parts.iter().find_map(|p| p.own_cluster()))
    }

    /// The step after a change to `keys`: each service that more than one part now gives is
    /// reported (warn, and the losing objects counted as skipped with `reason="conflict"`) once
    /// until it is over. The first part's is served (see [`Store::service`]).
    pub fn settle<'a>(
        &mut self,
        keys: impl IntoIterator<Item = &'a ServiceKey>,
        metrics: &Metrics,
    ) {
        // With one part (one source's kinds) no service can be given twice.
        if self.parts.len() < 2 {
            return;
        }
        for key in keys {
            let mut giving = (0..self.parts.len()).filter(|&i| self.parts[i].gives(key));
            let first = giving.next();
            // Empty, and so not allocated, unless a second part gives the service too.
            let losers: Vec<usize> = giving.collect();
            let Some(first) = first.filter(|_| !losers.is_empty()) else {
                if self.conflicts.remove(key) {
                    info!(service = %key, "only one kind of object gives this service now");
                }
                continue;
            };
            if !self.conflicts.insert(key.clone()) {
                continue;
            }
            let origin = |i: usize| self.parts[i].service(key).map(|s| s.origin);
            let Some(winner) = origin(first) else {
                continue;
            };
            for &loser in &losers {
                let Some(kind) = origin(loser) else { continue };
                warn!(
                    service = %key,
                    reason = %Skip::Conflict,
                    "skipped {kind} {}/{}: the {winner} {key} gives the same names, and is served",
                    key.namespace,
                    self.parts[loser].objects(key).join(","),
                );
                metrics.skipped(kind, Skip::Conflict);
            }
        }
    }

    /// [`Store::settle`] every service: the services of every part but the first, since a
    /// conflict needs a second part.
    pub fn settle_all(&mut self, metrics: &Metrics) {
        let mut keys: Vec<ServiceKey> = self.parts.iter().skip(1).flat_map(|p| p.keys()).collect();
        keys.sort();
        keys.dedup();
        self.settle(&keys, metrics);
    }

    /// Every service, still packed (a few bytes an endpoint), with the own cluster id: the
    /// builder unpacks them one at a time, so a full load never holds them all unpacked.
    pub fn snapshot(&self) -> ServiceSet {
        let mut all = Vec::new();
        for (i, part) in self.parts.iter().enumerate() {
            let earlier = &self.parts[..i];
            all.extend(
                part.packed()
                    .into_iter()
                    .filter(|(k, ..)| !earlier.iter().any(|p| p.gives(k))),
            );
        }
        all.sort_by(|a, b| a.0.cmp(&b.0));
        ServiceSet::packed(all).with_own_cluster(self.own_cluster().map(str::to_string))
    }

    /// As [`Store::snapshot`], for a store that is done with: its objects move into the
    /// snapshot instead of being copied, so a full load never holds them twice.
    pub fn into_snapshot(mut self) -> ServiceSet {
        let own = self.own_cluster().map(str::to_string);
        let mut all = Vec::new();
        // The last part first, so that the parts it loses to are still there to ask.
        while let Some(part) = self.parts.pop() {
            let earlier = &self.parts;
            all.extend(
                part.into_packed()
                    .into_iter()
                    .filter(|(k, ..)| !earlier.iter().any(|p| p.gives(k))),
            );
        }
        all.sort_by(|a, b| a.0.cmp(&b.0));
        ServiceSet::packed(all).with_own_cluster(own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::file::tests::one;
    use crate::source::{Classified, Selection, kinds};

    #[test]
    fn store_joins_slices_to_imports() {
        let mut store = Store::new(&kinds(&Selection::default(), None), None);
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

    #[test]
    fn a_service_two_parts_give_is_answered_from_the_first_and_reported_once() {
        let selection = Selection {
            linkerd: Some(Default::default()),
            ..Selection::default()
        };
        let kinds = kinds(&selection, None);
        let metrics = crate::metrics::Metrics::new("dns://test".into(), vec![]);
        let conflicts = || {
            metrics
                .render()
                .lines()
                .find_map(|l| {
                    l.strip_prefix(
                        "clusterset_dns_skipped_objects_total{kind=\"Service\",reason=\"conflict\"} ",
                    )?
                    .parse::<u64>()
                    .ok()
                })
                .unwrap_or(0)
        };
        let mut store = Store::new(&kinds, Some("east".into()));
        let read = |yaml: &str| {
            let Classified::Object(o) = crate::source::file::classify_with(
                serde_yaml_ng::from_str(yaml).unwrap(),
                &Default::default(),
                &kinds,
            ) else {
                panic!("{yaml}")
            };
            o
        };
        let federated = "apiVersion: v1\nkind: Service\nmetadata: {name: web-federated, namespace: shop, labels: {mirror.linkerd.io/mirrored-service: 'true'}, annotations: {multicluster.linkerd.io/remote-discovery: web@west}}\nspec: {clusterIP: 10.96.0.1}";
        let import = "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\nspec: {type: ClusterSetIP, ips: [10.42.0.1]}";
        let web = store.insert(read(federated));
        assert_eq!(store.service(&web[0]).unwrap().origin, ObjectKind::Service);
        store.insert(read(import));
        store.settle(&web, &metrics);
        store.settle(&web, &metrics);
        assert_eq!(conflicts(), 1, "reported once while it lasts");
        let served = store.service(&web[0]).unwrap();
        assert_eq!(
            (served.origin, served.ips[0].to_string()),
            (ObjectKind::ServiceImport, "10.42.0.1".into())
        );
        let all = store.snapshot();
        assert_eq!((all.len(), all.own_cluster()), (1, Some("east")));
        // The import goes: Linkerd's Service is served again, and a new conflict is a new report.
        store.remove(ObjectKind::ServiceImport, &("shop".into(), "web".into()));
        store.settle(&web, &metrics);
        assert_eq!(store.service(&web[0]).unwrap().origin, ObjectKind::Service);
        store.insert(read(import));
        store.settle_all(&metrics);
        assert_eq!(conflicts(), 2);
        let moved: Vec<Service> = store.into_snapshot().into_iter().collect();
        assert_eq!(moved.len(), 1);
        assert_eq!(moved[0].origin, ObjectKind::ServiceImport);
    }

    /// Submariner Lighthouse under Globalnet: its slice of this cluster's headless service holds
    /// the pods' global addresses, which this cluster cannot route; the service is answered from
    /// this cluster's own slices of it, as Lighthouse's resolver answers
    /// (`coredns/resolver/endpoint_slice.go`@9d3c39e), once the own cluster is known.
    #[test]
    fn lighthouse_globalnet_slices_of_the_own_cluster_give_way_to_its_own_slices() {
        let kinds = kinds(&Selection::default(), None);
        let read = |yaml: &str| match crate::source::file::classify_with(
            serde_yaml_ng::from_str(yaml).unwrap(),
            &Default::default(),
            &kinds,
        ) {
            Classified::Object(o) => o,
            other => panic!("{yaml}: {other:?}"),
        };
        let lighthouse = |name: &str, cluster: &str, global: &str, ip: &str| {
            format!(
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}\n  namespace: shop\n  labels: {{multicluster.kubernetes.io/service-name: db, multicluster.kubernetes.io/source-cluster: {cluster}, lighthouse.submariner.io/sourceNamespace: shop, lighthouse.submariner.io/is-headless: 'true'}}\n  annotations: {{lighthouse.submariner.io/globalnet-enabled: '{global}'}}\naddressType: IPv4\nports: [{{name: sql, protocol: TCP, port: 5432}}]\nendpoints: [{{addresses: [{ip}], hostname: db-0}}]"
            )
        };
        let local = "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: db-k8s\n  namespace: shop\n  labels: {kubernetes.io/service-name: db, service.kubernetes.io/headless: ''}\naddressType: IPv4\nports: [{name: sql, protocol: TCP, port: 5432}]\nendpoints: [{addresses: [10.1.0.5], hostname: db-0}, {addresses: [10.1.0.6], hostname: db-1, conditions: {ready: false}}]";
        let addresses_of = |service: &Service| -> Vec<(Option<String>, String)> {
            let mut out: Vec<_> = (service.slices.iter())
                .flat_map(|s| {
                    s.endpoints.iter().flat_map(|e| {
                        e.addresses
                            .iter()
                            .map(|a| (s.cluster.clone(), a.to_string()))
                    })
                })
                .collect();
            out.sort();
            out
        };
        let key = ServiceKey {
            namespace: "shop".into(),
            name: "db".into(),
        };
        let addresses = |store: &Store| addresses_of(&store.service(&key).unwrap());
        let pair = |c: &str, a: &str| (Some(c.to_string()), a.to_string());
        let mut store = Store::new(&kinds, None);
        assert!(
            !store.wants(ObjectKind::LocalEndpointSlice),
            "no Lighthouse Globalnet slice: this cluster's own are not watched"
        );
        for yaml in [
            "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: db, namespace: shop}\nspec: {type: Headless}".to_string(),
            lighthouse("db-west", "west", "true", "242.0.0.5"),
            lighthouse("db-east", "east", "true", "242.1.0.7"),
        ] {
            store.insert(read(&yaml));
        }
        assert!(store.wants(ObjectKind::LocalEndpointSlice));
        let as_written = vec![pair("east", "242.1.0.7"), pair("west", "242.0.0.5")];
        assert_eq!(addresses(&store), as_written, "no own cluster yet");
        // A slice of a Service that is not headless is not this cluster's headless one.
        let plain = local.replace(", service.kubernetes.io/headless: ''", "");
        let skipped = crate::source::file::classify_with(
            serde_yaml_ng::from_str(&plain).unwrap(),
            &Default::default(),
            &kinds,
        );
        assert!(matches!(skipped, Classified::Ignored(_)), "{skipped:?}");
        assert_eq!(store.insert(read(local)).len(), 1);
        assert_eq!(store.count(ObjectKind::LocalEndpointSlice), 1);
        assert_eq!(addresses(&store), as_written, "still no own cluster");
        // The ClusterProperty names this cluster west: west's own ready pod, east's as written.
        store.insert(read(
            "apiVersion: about.k8s.io/v1alpha1\nkind: ClusterProperty\nmetadata: {name: cluster.clusterset.k8s.io}\nspec: {value: west}",
        ));
        let own = vec![pair("east", "242.1.0.7"), pair("west", "10.1.0.5")];
        assert_eq!(addresses(&store), own);
        let snapshot: Vec<Service> = store.snapshot().into_iter().collect();
        assert_eq!(snapshot[0], store.service(&snapshot[0].key).unwrap());
        // Written by Lighthouse without Globalnet: its addresses are the pods' own already.
        store.insert(read(&lighthouse("db-west", "west", "false", "10.1.0.9")));
        assert_eq!(
            addresses(&store),
            vec![pair("east", "242.1.0.7"), pair("west", "10.1.0.9")]
        );
        // Written by Lighthouse 0.15, before the annotation: as Globalnet's.
        let v015 = lighthouse("db-west", "west", "true", "242.0.0.5").replace(
            "  annotations: {lighthouse.submariner.io/globalnet-enabled: 'true'}\n",
            "",
        );
        store.insert(read(&v015));
        assert_eq!(addresses(&store), own);
        // Without its own slices, this cluster's are answered as Lighthouse wrote them.
        store.remove(
            ObjectKind::LocalEndpointSlice,
            &("shop".into(), "db-k8s".into()),
        );
        assert_eq!(addresses(&store), as_written);
        let moved: Vec<Service> = store.into_snapshot().into_iter().collect();
        assert_eq!(addresses_of(&moved[0]), as_written);
    }
}
