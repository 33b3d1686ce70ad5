//! What the import half reads of one of Linkerd's Services: its shape (through
//! [`crate::source::linkerd::shape::classify`], the reading `--source linkerd` makes too), its
//! addresses, ports and the export spec carried on it.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;

use crate::bridge::model::CARRIED;
use crate::bridge::model::{Family, Port, cluster_ips};
use crate::source::linkerd::carried::Carried;
use crate::source::linkerd::shape as linkerd_shape;

/// What one of Linkerd's Services is of the exported service: its federated Service, a mirror,
/// a headless mirror or one of its hosts (what [`linkerd_shape::Shape`] says, with the
/// addresses the import needs).
#[derive(Debug, Clone)]
pub(super) enum Piece {
    Federated {
        remote: Vec<String>,
        local: bool,
        ips: Vec<IpAddr>,
        families: Vec<Family>,
    },
    Mirror {
        cluster: String,
        ips: Vec<IpAddr>,
    },
    HeadlessMirror {
        cluster: String,
    },
    Host {
        cluster: String,
        parent: String,
        hostname: String,
        ip: Option<IpAddr>,
    },
}

pub(super) struct Read {
    /// The exported service's name (for a host, its headless mirror's object name).
    pub(super) service: String,
    pub(super) object: String,
    pub(super) shape: Piece,
    pub(super) ports: Vec<Port>,
    pub(super) carried: Option<Result<Carried, String>>,
}

/// What `svc` is, if it is one of Linkerd's multicluster Services; an error names what is
/// wrong with one that is.
pub(super) fn read(ns: &str, svc: &Service) -> Result<Option<Read>, String> {
    let labels = svc.metadata.labels.clone().unwrap_or_default();
    let annotations = svc.metadata.annotations.clone().unwrap_or_default();
    // The reading `--source linkerd` makes too.
    let shape = match linkerd_shape::classify(ns, &labels, &annotations) {
        Ok(shape) => shape,
        Err(linkerd_shape::Unread::Passed(_)) => return Ok(None),
        Err(linkerd_shape::Unread::Invalid(_, why)) => return Err(why),
    };
    let object = svc.metadata.name.clone().unwrap_or_default();
    let spec = svc.spec.clone().unwrap_or_default();
    let headless = spec.cluster_ip.as_deref() == Some("None");
    let ips = cluster_ips(&spec)?;
    let ports = spec
        .ports
        .unwrap_or_default()
        .iter()
        .map(|p| Port {
            name: p.name.clone().unwrap_or_default(),
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            port: p.port,
            app_protocol: p.app_protocol.clone(),
        })
        .collect();
    let carried = annotations.get(CARRIED).map(|text| {
        Carried::parse(text)
            .map_err(|e| format!("{e}; the import leaves out the fields it carries"))
    });
    let (service, shape) = match shape {
        linkerd_shape::Shape::Federated {
            service,
            remote,
            local,
        } => {
            let families = match spec.ip_families {
                Some(f) if !f.is_empty() => f
                    .iter()
                    .filter_map(|w| match w.as_str() {
                        "IPv4" => Some(Family::V4),
                        "IPv6" => Some(Family::V6),
                        _ => None,
                    })
                    .collect(),
                _ => ips.iter().map(Family::of).collect(),
            };
            let shape = Piece::Federated {
                remote,
                local,
                ips,
                families,
            };
            (service, shape)
        }
        linkerd_shape::Shape::Host {
            link,
            service,
            parent,
            hostname,
        } => {
            let shape = Piece::Host {
                cluster: link,
                parent,
                hostname,
                ip: ips.first().copied(),
            };
            (service, shape)
        }
        linkerd_shape::Shape::Mirror { link, service } if headless => {
            (service, Piece::HeadlessMirror { cluster: link })
        }
        linkerd_shape::Shape::Mirror { link, service } => {
            (service, Piece::Mirror { cluster: link, ips })
        }
    };
    Ok(Some(Read {
        service,
        object,
        shape,
        ports,
        carried,
    }))
}
