//! The zones and names the lookup benchmarks use (benches/lookup.rs, examples/lookup_cost.rs):
//! `n` services, nine in ten ClusterSetIP and one in ten headless with six endpoints over three
//! clusters, and 1,024 names spread over them that exist, or as many that do not.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use clusterset_dns::metrics::Metrics;
use clusterset_dns::model::{
    Endpoint, Port, Protocol, Service, ServiceKey, ServiceType, Slice, Update,
};
use clusterset_dns::wire::wire_name;
use clusterset_dns::zone::Zone;
use clusterset_dns::zone::build::Builder;

pub fn services(n: usize) -> Vec<Service> {
    let http = Port {
        name: Some("http".into()),
        protocol: Protocol::Tcp,
        port: 80,
    };
    (0..n)
        .map(|i| {
            let key = ServiceKey {
                namespace: format!("ns{}", i % 50),
                name: format!("svc{i}"),
            };
            let ip = |a: u8| IpAddr::V4(Ipv4Addr::new(10, a, (i >> 8) as u8, i as u8));
            if i % 10 == 9 {
                let slices = ["east", "west", "central"]
                    .iter()
                    .enumerate()
                    .map(|(c, cluster)| Slice {
                        name: format!("svc{i}-{cluster}"),
                        cluster: Some(cluster.to_string()),
                        ports: vec![http.clone()],
                        endpoints: (0..2)
                            .map(|k| Endpoint {
                                addresses: vec![ip(200 + (c * 2 + k) as u8)],
                                hostname: Some(format!("pod-{}", c * 2 + k)),
                            })
                            .collect(),
                    })
                    .collect();
                Service {
                    locality: clusterset_dns::model::Locality::Any,
                    slices_absent: false,
                    origin: clusterset_dns::model::ObjectKind::ServiceImport,
                    key,
                    kind: ServiceType::Headless,
                    ips: vec![],
                    ports: vec![http.clone()],
                    slices,
                }
            } else {
                Service {
                    locality: clusterset_dns::model::Locality::Any,
                    slices_absent: false,
                    origin: clusterset_dns::model::ObjectKind::ServiceImport,
                    key,
                    kind: ServiceType::ClusterSetIp,
                    ips: vec![ip(100)],
                    ports: vec![http.clone()],
                    slices: vec![],
                }
            }
        })
        .collect()
}

pub fn zone(n: usize) -> Arc<Zone> {
    let zone = Arc::new(Zone::new(vec![wire_name("clusterset.local").unwrap()], 5));
    let metrics = Arc::new(Metrics::new(
        "dns://bench".into(),
        vec!["clusterset.local.".into()],
    ));
    let mut b = Builder::new(zone.clone(), &[], metrics);
    b.apply(Update::Reset(services(n).into()));
    zone
}

pub fn names(n: usize, hit: bool) -> Vec<String> {
    (0..1024)
        .map(|k| {
            let i = (k * 7919) % n;
            if hit {
                format!("svc{i}.ns{}.svc.clusterset.local", i % 50)
            } else {
                format!("missing{i}.ns{}.svc.clusterset.local", i % 50)
            }
        })
        .collect()
}
