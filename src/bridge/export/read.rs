//! What the export half reads of Services: what an exported one carries for other clusters,
//! what the judge compares, and the peers Linkerd's mirrors show for clusters that cannot be
//! read.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt as _;
use kube::api::DynamicObject;

use super::judge::{ClusterExport, Exported, Port};
use crate::bridge::model::CARRIED;
use crate::bridge::runtime::Key;
use crate::source::linkerd::LABEL_GATEWAY;
use crate::source::linkerd::carried::Carried;
use crate::source::linkerd::shape::{Shape, classify, services_named};

/// What `svc` exported by `export` carries for other clusters (see [`Carried`]): the exporting
/// cluster's id `cluster`, the export's creation time (the MCS API resolves conflicts by the
/// oldest export), the Service's headlessness, `sessionAffinity`, `sessionAffinityConfig`,
/// `internalTrafficPolicy`, `trafficDistribution`, `ipFamilies` and ports with their
/// `appProtocol`, and the export's `exportedLabels` and `exportedAnnotations`.
pub(super) fn carried(svc: &Service, export: &DynamicObject, cluster: Option<String>) -> Carried {
    // The CRD's schema makes these maps of strings; anything else is not carried.
    let strings = |key: &str| serde_json::from_value(export.data["spec"][key].clone());
    Carried {
        cluster,
        export_created: export.creation_timestamp().map(|t| t.0.to_string()),
        exported_labels: strings("exportedLabels").unwrap_or_default(),
        exported_annotations: strings("exportedAnnotations").unwrap_or_default(),
        ..Carried::of_service(&svc.spec.clone().unwrap_or_default())
    }
}

/// What the export half reads of a Service (without what its export carries).
pub(super) fn exported(svc: &Service) -> Exported {
    let spec = svc.spec.clone().unwrap_or_default();
    Exported {
        kind: spec.type_.unwrap_or_else(|| "ClusterIP".into()),
        headless: spec.cluster_ip.as_deref() == Some("None"),
        ports: spec
            .ports
            .iter()
            .flatten()
            .map(|p| Port::of(p).mirrored())
            .collect(),
        carried: Carried::default(),
    }
}

/// Whether `svc` is a Service Linkerd's service mirror wrote (not a gateway's mirror).
pub(super) fn linkerd_wrote(svc: &Service) -> bool {
    let labels = svc.metadata.labels.as_ref();
    crate::source::linkerd::selected(labels)
        && !labels.is_some_and(|l| l.contains_key(LABEL_GATEWAY))
}

/// The other clusters' exports of `ns/name` that Linkerd's service mirror shows here as mirrors
/// (`mirror.linkerd.io/cluster-name`, `remote-svc-fq-name` of `<name>.<ns>.svc.…`), for the
/// clusters whose exports cannot be read through their Links' credentials. A federated Service
/// shows no peer: Linkerd writes it from its local member, so it would compare the export with
/// itself.
pub(super) fn mirror_peers(ns: &str, name: &str, services: &[Arc<Service>]) -> Vec<ClusterExport> {
    let mut out = Vec::new();
    for s in services
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(ns))
    {
        let annotations = s.annotations();
        // The reading the import half and `--source linkerd` make.
        let Ok(Shape::Mirror { link, service }) = classify(ns, s.labels(), annotations) else {
            continue;
        };
        if service != name {
            continue;
        }
        let e = exported(s);
        // What the peer's export half carried (Linkerd copies every annotation onto the
        // mirror); none when the peer was labelled by hand.
        let carried = annotations
            .get(CARRIED)
            .and_then(|text| Carried::parse(text).ok());
        let object = s.metadata.name.clone().unwrap_or_default();
        out.push(ClusterExport {
            cluster: carried
                .as_ref()
                .and_then(|c| c.cluster.clone())
                .unwrap_or_else(|| link.clone()),
            link: Some(link),
            shown: format!("mirror {object}"),
            object: Some(object),
            headless: e.headless,
            ports: e.ports.into_iter().collect(),
            carried,
            ..ClusterExport::default()
        });
    }
    out
}

/// The exports a change of `svc` can affect: its own, and, for one of Linkerd's mirrors or
/// federated Services, those it names ([`services_named`]: a host mirror's service, not the
/// host; a federated Service's remote and local members).
pub(super) fn keys_of_service(svc: &Service) -> Vec<Key> {
    let (Some(ns), Some(name)) = (&svc.metadata.namespace, &svc.metadata.name) else {
        return Vec::new();
    };
    let mut keys: Vec<Key> = vec![(ns.into(), name.into())];
    if linkerd_wrote(svc) {
        keys.extend(
            services_named(ns, svc.annotations())
                .into_iter()
                .map(|n| (ns.into(), n.into())),
        );
        keys.sort();
        keys.dedup();
    }
    keys
}
