//! The exporting clusters' endpoints in the import's slices: which clusters' pods, on which
//! ports, split how, and which addresses no slice may hold.

use super::*;
use crate::source::policy::Policy;

/// An endpoint with its conditions as a slice says them.
fn pod(ip: &str, ready: Option<bool>, serving: Option<bool>) -> Endpoint {
    Endpoint {
        ready,
        serving,
        ..ready_at(None, ip)
    }
}

fn port(name: &str, number: i32) -> Port {
    Port {
        name: name.into(),
        port: number,
        protocol: "TCP".into(),
        app_protocol: None,
    }
}

/// `cluster`'s export of web through a Link (None: this cluster's own), exported without a
/// gateway if `flat`, its pods as its slices give them.
fn member(cluster: Option<&str>, flat: bool, headless: bool, pods: Vec<Pods>) -> ClusterExport {
    let owner = cluster.unwrap_or("north");
    let c = carried(
        owner,
        "2026-12-04T10:00:00Z",
        &["http:80/TCP"],
        headless,
        "a",
    );
    let ip = (!headless).then_some("198.18.0.9");
    ClusterExport {
        flat,
        pods,
        ..read_export(&key("web"), cluster, ip, &c)
    }
}

/// Label `k` of object `s`.
fn label(s: &serde_json::Value, k: &str) -> Option<String> {
    s["metadata"]["labels"][k].as_str().map(str::to_string)
}

fn exports(members: Vec<ClusterExport>) -> Exports {
    Exports {
        by_service: BTreeMap::from([(key("web"), members)]),
        read: BTreeSet::from(["east".into(), "west".into()]),
        own_read: true,
    }
}

fn judge_with(
    services: &[Arc<Service>],
    exports: &Exports,
    policy: &Policy,
) -> crate::bridge::import::Judged {
    let naming = Naming {
        own: Some("north".into()),
        ..Naming::default()
    };
    crate::bridge::import::judge(
        &key("web"),
        services,
        &links(&["east", "west"]),
        (&naming, policy),
        exports,
    )
}

#[test]
fn a_federated_import_keeps_its_address_and_has_the_members_pods() {
    let local = carried(
        "north",
        "2026-12-04T10:00:00Z",
        &["http:80/TCP"],
        false,
        "a",
    );
    let fed = federated_here("east", "198.18.0.10", &local);
    let on_8080 = |endpoints| Pods {
        ports: vec![port("http", 8080)],
        endpoints,
    };
    let east = member(
        Some("east"),
        true,
        false,
        vec![on_8080(vec![
            pod("198.18.5.1", Some(true), None),
            pod("198.18.5.2", Some(false), Some(true)),
        ])],
    );
    let own = member(
        None,
        true,
        false,
        vec![on_8080(vec![pod("198.18.6.1", None, None)])],
    );
    // West exports through a gateway: its pods cannot be reached from here.
    let west = member(
        Some("west"),
        false,
        false,
        vec![on_8080(vec![pod("198.18.7.1", Some(true), None)])],
    );
    let j = judge_with(&[fed], &exports(vec![east, own, west]), &Policy::default());
    let i = j.import.expect("an import");
    assert_eq!(i.ips, vec!["198.18.0.10".parse::<IpAddr>().unwrap()]);
    assert_eq!(i.families, vec![Family::V4]);
    let slices: Vec<(&str, Vec<String>, &[Port])> = (i.slices.iter())
        .map(|s| {
            let ips = s.endpoints.iter().map(|e| e.ip.to_string()).collect();
            (s.cluster.as_str(), ips, &s.ports[..])
        })
        .collect();
    assert_eq!(
        slices,
        vec![
            (
                "east",
                vec!["198.18.5.1".into(), "198.18.5.2".into()],
                &[port("http", 8080)][..]
            ),
            (
                "north",
                vec!["198.18.6.1".into()],
                &[port("http", 8080)][..]
            ),
        ]
    );
    assert_eq!(i.status()["endpointSliceObjects"], "Present");
    // The conditions as the exporting cluster said them; none said, none written.
    let objects = i.slice_objects();
    let east = &objects[&slice_name("web", "east", Family::V4)];
    assert_eq!(
        east["endpoints"][1]["conditions"],
        json!({"ready": false, "serving": true})
    );
    let north = &objects[&slice_name("web", "north", Family::V4)];
    assert_eq!(north["endpoints"][0]["conditions"], json!({}));
    assert_eq!(
        north["ports"],
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
    );
    // Every MCS slice has a twin naming Linkerd's federated Service, so kube-proxy routes its
    // ClusterIP (the import's address) to the same pods; an MCS slice names no Service, and a
    // twin no import, so a reader of either kind never takes one for the other.
    let route = i.route.as_ref().expect("routed");
    assert_eq!(route.service, "web-federated");
    // Every port of the import is on it: nothing beside it.
    assert!(route.beside.is_empty());
    assert_eq!(i.ports_service(), None);
    assert_eq!(objects.len(), 2 * i.slices.len());
    for (name, s) in &objects {
        let Some(mcs) = name.strip_suffix("-route") else {
            assert_eq!(
                label(s, "multicluster.kubernetes.io/service-name").as_deref(),
                Some("web")
            );
            assert_eq!(label(s, "kubernetes.io/service-name"), None);
            continue;
        };
        let twin_of = &objects[mcs];
        assert_eq!(
            label(s, "kubernetes.io/service-name").as_deref(),
            Some("web-federated")
        );
        assert_eq!(label(s, "multicluster.kubernetes.io/service-name"), None);
        assert_eq!(
            label(s, "linkerd-bridge.clusterset-dns.io/serviceimport").as_deref(),
            Some("web")
        );
        assert_eq!(
            label(s, "endpointslice.kubernetes.io/managed-by").as_deref(),
            Some("linkerd-bridge.clusterset-dns.io")
        );
        assert_eq!(
            label(s, "multicluster.kubernetes.io/source-cluster"),
            label(twin_of, "multicluster.kubernetes.io/source-cluster")
        );
        for field in ["addressType", "endpoints", "ports"] {
            assert_eq!(s[field], twin_of[field], "{name}: {field}");
        }
    }
    // Routed only by the mesh (`--route-outside-mesh=false`): the MCS slices alone.
    let unrouted = Import {
        route: None,
        ..i.clone()
    };
    let unrouted = unrouted.slice_objects();
    assert_eq!(unrouted.len(), i.slices.len());
    assert!(
        unrouted
            .keys()
            .all(|n| objects.contains_key(n) && !n.ends_with("-route"))
    );
}

/// The MCS conformance suite's StrictPortConflict shapes (`conformance/connectivity.go`): this
/// cluster (north, the older export) exports `tcp` 42, west `tcp2` 4242 or `tcp` 4242, each to
/// its pods' port 42; Linkerd's federated Service has the ports of one member only.
#[test]
fn ports_the_federated_service_lacks_are_routed_by_a_service_of_the_bridges_own() {
    let flat = |cluster: Option<&str>, name: &str, number: i32, ip: &str| ClusterExport {
        ports: vec![port(name, number)],
        ..member(
            cluster,
            true,
            false,
            vec![Pods {
                ports: vec![port(name, 42)],
                endpoints: vec![pod(ip, Some(true), None)],
            }],
        )
    };
    let own = flat(None, "tcp", 42, "198.18.6.1");
    let fed_of = |ports: &[&str]| {
        let c = carried("north", "2026-12-04T10:00:00Z", ports, false, "a");
        federated_here("west", "198.18.0.10", &c)
    };

    // A port name only west exports, on a federated Service written from north's member.
    let west = flat(Some("west"), "tcp2", 4242, "198.18.7.1");
    let j = judge_with(
        &[fed_of(&["tcp:42/TCP"])],
        &exports(vec![own.clone(), west]),
        &Policy::default(),
    );
    let i = j.import.expect("an import");
    assert_eq!(i.ports, vec![port("tcp", 42), port("tcp2", 4242)]);
    let route = i.route.clone().expect("routed");
    assert_eq!(route.beside, vec![port("tcp2", 4242)]);
    let (name, service) = i.ports_service().expect("a Service for tcp2");
    assert_eq!(name, "web-federated-ports");
    assert_eq!(
        service,
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web-federated-ports", "namespace": "shop", "labels": {
                "app.kubernetes.io/managed-by": "linkerd-bridge.clusterset-dns.io",
                "linkerd-bridge.clusterset-dns.io/serviceimport": "web",
            }},
            "spec": {
                "type": "ClusterIP",
                "externalIPs": ["198.18.0.10"],
                "ipFamilies": ["IPv4"],
                "ports": [{"name": "tcp2", "port": 4242, "protocol": "TCP"}],
            },
        })
    );
    // West's slice, the one with tcp2, has a twin naming that Service; north's has not.
    let objects = i.slice_objects();
    let west_slice = slice_name("web", "west", Family::V4);
    let north_slice = slice_name("web", "north", Family::V4);
    let ports_twin = &objects[&format!("{west_slice}-ports")];
    assert_eq!(
        label(ports_twin, "kubernetes.io/service-name").as_deref(),
        Some("web-federated-ports")
    );
    assert_eq!(
        label(ports_twin, "linkerd-bridge.clusterset-dns.io/serviceimport").as_deref(),
        Some("web")
    );
    assert_eq!(ports_twin["endpoints"], objects[&west_slice]["endpoints"]);
    assert_eq!(
        ports_twin["ports"],
        json!([{"name": "tcp2", "port": 42, "protocol": "TCP"}])
    );
    assert!(!objects.contains_key(&format!("{north_slice}-ports")));
    assert_eq!(objects.len(), 5);

    // One port name, two numbers: the import has the older export's (north's 42). Where
    // Linkerd wrote the federated Service from west's member (4242), 42 is lacking, and its
    // endpoints are north's pods alone (west's are left out of a name it has otherwise).
    let west = flat(Some("west"), "tcp", 4242, "198.18.7.1");
    let j = judge_with(
        &[fed_of(&["tcp:4242/TCP"])],
        &exports(vec![own.clone(), west.clone()]),
        &Policy::default(),
    );
    let i = j.import.expect("an import");
    assert_eq!(i.ports, vec![port("tcp", 42)]);
    assert_eq!(i.route.as_ref().unwrap().beside, vec![port("tcp", 42)]);
    let (_, service) = i.ports_service().expect("a Service for tcp 42");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "tcp", "port": 42, "protocol": "TCP"}])
    );
    let twins: Vec<String> = (i.slice_objects().into_keys())
        .filter(|n| n.ends_with("-ports"))
        .collect();
    assert_eq!(twins, [format!("{north_slice}-ports")]);
    // Where it has 42 (written from north's), nothing is lacking.
    let j = judge_with(
        &[fed_of(&["tcp:42/TCP"])],
        &exports(vec![own, west]),
        &Policy::default(),
    );
    assert_eq!(j.import.expect("an import").ports_service(), None);
}

#[test]
fn a_headless_import_has_its_hosts_and_families_before_any_endpoint() {
    let host = |h: &str, ip: &str| Endpoint {
        hostname: Some(h.into()),
        ..pod(ip, Some(true), None)
    };
    let west = member(
        Some("west"),
        true,
        true,
        vec![Pods {
            ports: vec![port("pg", 5432)],
            endpoints: vec![host("db-0", "198.18.7.1"), host("db-1", "fd00::7:1")],
        }],
    );
    let j = judge_with(&[], &exports(vec![west.clone()]), &Policy::default());
    let i = j.import.expect("an import");
    assert!(i.headless);
    assert_eq!(i.families, vec![Family::V4, Family::V6]);
    let hosts: Vec<(Family, Option<&str>)> = (i.slices.iter())
        .flat_map(|s| {
            s.endpoints
                .iter()
                .map(|e| (s.family, e.hostname.as_deref()))
        })
        .collect();
    assert_eq!(
        hosts,
        vec![(Family::V4, Some("db-0")), (Family::V6, Some("db-1"))]
    );
    // Nothing for kube-proxy to route: a headless import has no address of its own.
    assert_eq!(i.route, None);
    assert_eq!(i.ports_service(), None);
    for s in i.slice_objects().values() {
        assert!(
            s["metadata"]["labels"]
                .get("kubernetes.io/service-name")
                .is_none()
        );
    }
    // No pod yet: the families its export carried.
    let mut empty = west;
    empty.pods.clear();
    empty.carried.as_mut().unwrap().ip_families = Some(vec!["IPv6".into()]);
    let i = judge_with(&[], &exports(vec![empty]), &Policy::default())
        .import
        .expect("an import");
    assert!(i.slices.is_empty());
    assert_eq!(i.families, vec![Family::V6]);
    assert_eq!(i.spec()["ipFamilies"], json!(["IPv6"]));
}

#[test]
fn addresses_no_slice_may_hold_are_left_out_and_said() {
    let policy = Policy::from_flags(&["198.18.9.0/24".parse().unwrap()], &[], &[], &[]).unwrap();
    let addresses = [
        "198.18.5.1",
        "127.0.0.1",
        "169.254.169.254",
        "fe80::1",
        "::1",
        "100.100.100.200",
        "fd00:ec2::254",
        "239.1.1.1",
        "198.18.9.7",
        "fd00::5:1",
    ];
    let west = member(
        Some("west"),
        true,
        true,
        vec![Pods {
            ports: vec![port("pg", 5432)],
            endpoints: addresses.iter().map(|a| pod(a, Some(true), None)).collect(),
        }],
    );
    let j = judge_with(&[], &exports(vec![west]), &policy);
    let i = j.import.expect("an import");
    let kept: Vec<String> = (i.slices.iter().flat_map(|s| &s.endpoints))
        .map(|e| e.ip.to_string())
        .collect();
    assert_eq!(kept, ["198.18.5.1", "fd00::5:1"]);
    assert_eq!(j.refused, 8);
    let said: Vec<&Problem> = (j.problems.iter())
        .filter(|p| p.reason == Reason::AddressRefused)
        .collect();
    assert_eq!(said.len(), 1, "{:?}", j.problems);
    let (p, m) = (said[0], &said[0].message);
    assert_eq!((p.kind, p.object.as_str()), ("ServiceImport", "web"));
    assert!(
        m.starts_with("8 of cluster west's endpoints of shop/web"),
        "{m}"
    );
    for why in [
        "127.0.0.1 (loopback)",
        "169.254.169.254 (link_local)",
        "fe80::1 (link_local)",
        "::1 (loopback)",
        "100.100.100.200 (metadata)",
        "fd00:ec2::254 (metadata)",
        "239.1.1.1 (multicast)",
        "198.18.9.7 (denied)",
    ] {
        assert!(m.contains(why), "{why}: {m}");
    }
}

#[test]
fn many_endpoints_or_other_ports_make_more_slices() {
    let many: Vec<Endpoint> = (0..2100)
        .map(|n| {
            pod(
                &format!("198.18.{}.{}", 10 + n / 250, n % 250),
                Some(true),
                None,
            )
        })
        .collect();
    let east = member(
        Some("east"),
        true,
        true,
        vec![
            Pods {
                ports: vec![port("http", 8080)],
                endpoints: many,
            },
            // Pods of the same Service listening elsewhere (a named targetPort).
            Pods {
                ports: vec![port("http", 9090)],
                endpoints: vec![pod("198.18.99.1", Some(true), None)],
            },
        ],
    );
    let i = judge_with(&[], &exports(vec![east]), &Policy::default())
        .import
        .expect("an import");
    let parts: Vec<(usize, usize, i32)> = (i.slices.iter())
        .map(|s| (s.part, s.endpoints.len(), s.ports[0].port))
        .collect();
    assert_eq!(
        parts,
        [
            (0, 1000, 8080),
            (1, 1000, 8080),
            (2, 100, 8080),
            (3, 1, 9090)
        ]
    );
    let names: BTreeSet<String> = i.slice_objects().into_keys().collect();
    let first = slice_name("web", "east", Family::V4);
    let want: BTreeSet<String> = [
        first.clone(),
        format!("{first}-1"),
        format!("{first}-2"),
        format!("{first}-3"),
    ]
    .into_iter()
    .collect();
    assert_eq!(names, want);
}

#[test]
fn a_port_an_older_export_has_otherwise_is_routed_to_the_older_clusters_pods_only() {
    // This cluster's export is the older: http is port 80 here, 8080 in east's.
    let local = carried(
        "north",
        "2026-12-04T10:00:00Z",
        &["admin:9000/TCP", "http:80/TCP"],
        false,
        "a",
    );
    let theirs = carried(
        "east",
        "2026-12-04T11:00:00Z",
        &["admin:9000/TCP", "http:8080/TCP"],
        false,
        "a",
    );
    let fed = federated_here("east", "198.18.0.10", &local);
    let pods = |ip: &str| {
        vec![Pods {
            ports: vec![port("admin", 9001), port("http", 8080)],
            endpoints: vec![pod(ip, Some(true), None)],
        }]
    };
    let own = ClusterExport {
        flat: true,
        pods: pods("198.18.6.1"),
        ..read_export(&key("web"), None, Some("198.18.0.9"), &local)
    };
    let east = ClusterExport {
        flat: true,
        pods: pods("198.18.5.1"),
        ..read_export(&key("web"), Some("east"), Some("198.18.0.9"), &theirs)
    };
    let i = judge_with(&[fed], &exports(vec![own, east]), &Policy::default())
        .import
        .expect("an import");
    let ports_of = |cluster: &str| -> Vec<Vec<Port>> {
        (i.slices.iter())
            .filter(|s| s.cluster == cluster)
            .map(|s| s.ports.clone())
            .collect()
    };
    // The import's http is the older export's; east's pods are not in it, so kube-proxy sends
    // the import's http to this cluster's pods only, and admin to both.
    assert_eq!(
        ports_of("north"),
        [vec![port("admin", 9001), port("http", 8080)]]
    );
    assert_eq!(ports_of("east"), [vec![port("admin", 9001)]]);
}
