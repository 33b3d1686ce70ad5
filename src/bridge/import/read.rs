//! What the import half reads of one of Linkerd's Services: its shape (through
//! [`crate::source::linkerd::shape::classify`], the reading `--source linkerd` makes too), its
//! addresses, ports and the export spec carried on it.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt as _;

use crate::bridge::model::CARRIED;
use crate::bridge::model::{Family, Port, cluster_ips};
use crate::source::linkerd::carried::Carried;
use crate::source::linkerd::shape::{Shape, Unread, classify};

/// One of Linkerd's Services as the import reads it: what it stands for ([`Shape`]: a
/// federated Service, a mirror, or one host of a headless mirror) and what it says of it.
pub(super) struct Read {
    pub(super) object: String,
    pub(super) shape: Shape,
    /// `clusterIP: None`: a headless mirror.
    pub(super) headless: bool,
    /// Its ClusterIPs (a host's: its address), and their families (a federated Service's
    /// `ipFamilies`, where it has them).
    pub(super) ips: Vec<IpAddr>,
    pub(super) families: Vec<Family>,
    pub(super) ports: Vec<Port>,
    pub(super) carried: Option<Result<Carried, String>>,
}

/// What `svc` is, if it is one of Linkerd's multicluster Services; an error names what is
/// wrong with one that is.
pub(super) fn read(ns: &str, svc: &Service) -> Result<Option<Read>, String> {
    // The reading `--source linkerd` makes too.
    let shape = match classify(ns, svc.labels(), svc.annotations()) {
        Ok(shape) => shape,
        Err(Unread::Passed(_)) => return Ok(None),
        Err(Unread::Invalid(_, why)) => return Err(why),
    };
    let spec = svc.spec.clone().unwrap_or_default();
    let ips = cluster_ips(&spec)?;
    let families = match spec.ip_families {
        Some(f) if !f.is_empty() => f.iter().filter_map(|w| Family::from_word(w)).collect(),
        _ => ips.iter().map(Family::of).collect(),
    };
    let ports = spec.ports.iter().flatten().map(Port::of).collect();
    let carried = svc.annotations().get(CARRIED).map(|text| {
        Carried::parse(text)
            .map_err(|e| format!("{e}; the import leaves out the fields it carries"))
    });
    Ok(Some(Read {
        object: svc.metadata.name.clone().unwrap_or_default(),
        shape,
        headless: spec.cluster_ip.as_deref() == Some("None"),
        ips,
        families,
        ports,
        carried,
    }))
}
