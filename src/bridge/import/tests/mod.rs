use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;

use super::*;
use crate::bridge::model::Problem;
use crate::bridge::model::{
    Carried, ClusterExport, Endpoint, Exports, Family, LABEL_MANAGER, MANAGER, Pods, Port, Reason,
    slice_name,
};
use crate::bridge::runtime::Key;
use serde_json::json;

/// What the judge says of every service: each one that a Service names (as the controller
/// finds them, [`super::index::keys_of_service`]) or that an export names, judged alone with
/// the Services that name it.
struct World {
    imports: BTreeMap<Key, Import>,
    problems: Vec<Problem>,
}

fn judge_all(
    services: &[Arc<Service>],
    links: &BTreeSet<String>,
    naming: &Naming,
    exports: &Exports,
) -> World {
    let mut keys: BTreeSet<Key> = exports.by_service.keys().cloned().collect();
    keys.extend(
        services
            .iter()
            .flat_map(|s| super::index::keys_of_service(s)),
    );
    let mut world = World {
        imports: BTreeMap::new(),
        problems: Vec::new(),
    };
    for key in keys {
        let naming_it: Vec<Arc<Service>> = services
            .iter()
            .filter(|s| super::index::keys_of_service(s).contains(&key))
            .cloned()
            .collect();
        let policy = crate::source::policy::Policy::default();
        let j = super::judge(&key, &naming_it, links, (naming, &policy), exports);
        world.imports.extend(j.import.map(|i| (key, i)));
        // One problem of an object that names several services is said once (as the
        // controller's record of what is said holds it).
        for p in j.problems {
            if !world.problems.contains(&p) {
                world.problems.push(p);
            }
        }
    }
    world
}

/// A cluster's export of `key` as `clusters/` reads its Service, whose bridge carried
/// `carried`: at ClusterIP `ip` (None: headless), this cluster's own if `link` is None.
fn read_export(
    key: &Key,
    link: Option<&str>,
    ip: Option<&str>,
    carried: &Carried,
) -> ClusterExport {
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"namespace": key.0, "name": key.1,
            "annotations": {crate::bridge::model::CARRIED: carried.text()}},
        "spec": {"clusterIP": ip.unwrap_or("None")}
    }))
    .expect("a Service");
    crate::bridge::clusters::cluster_export(link, &svc).expect("readable")
}

/// The judge from Linkerd's objects alone: no linked cluster's exports read.
fn judge(services: &[Arc<Service>], links: &BTreeSet<String>, naming: &Naming) -> World {
    judge_all(services, links, naming, &Exports::default())
}

fn svc(yaml: &str) -> Arc<Service> {
    Arc::new(serde_yaml_ng::from_str(yaml).unwrap())
}

fn mirror(svc_name: &str, link: &str, ip: &str) -> Arc<Service> {
    svc(&format!(
        "metadata: {{name: {svc_name}-{link}, namespace: shop, labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: {link}}}, annotations: {{mirror.linkerd.io/remote-svc-fq-name: {svc_name}.shop.svc.cluster.local}}}}\n\
         spec: {{clusterIP: '{ip}', clusterIPs: ['{ip}'], ports: [{{name: http, port: 80, protocol: TCP}}]}}"
    ))
}

fn links(l: &[&str]) -> BTreeSet<String> {
    l.iter().map(|s| s.to_string()).collect()
}

fn key(name: &str) -> Key {
    ("shop".into(), name.into())
}

/// What a cluster's export half carries for `web` exported at `created` with `ports`
/// (`name:port/PROTO`), labels `team=<team>`.
fn carried(cluster: &str, created: &str, ports: &[&str], headless: bool, team: &str) -> Carried {
    Carried {
        version: 1,
        cluster: Some(cluster.into()),
        export_created: Some(created.into()),
        headless,
        ports: ports
            .iter()
            .map(|p| {
                let (name, rest) = p.split_once(':').unwrap();
                let (port, protocol) = rest.split_once('/').unwrap();
                crate::source::linkerd::carried::Port {
                    name: name.into(),
                    port: port.parse().unwrap(),
                    protocol: protocol.into(),
                    app_protocol: None,
                }
            })
            .collect(),
        exported_labels: BTreeMap::from([("team".into(), team.into())]),
        ..Carried::default()
    }
}

/// `web-federated` as Linkerd's service mirror writes it in a cluster with a local member
/// and the remote member `web@<other>`: ports and annotations from the local member,
/// "always treated as the oldest" (linkerd2 `version-2.20`, cluster_watcher.go
/// `handleFederatedServiceJoin`).
fn federated_here(other: &str, ip: &str, local: &Carried) -> Arc<Service> {
    let ports: Vec<String> = local
        .ports
        .iter()
        .map(|p| {
            format!(
                "{{name: {}, port: {}, protocol: {}}}",
                p.name, p.port, p.protocol
            )
        })
        .collect();
    svc(&format!(
        "metadata: {{name: web-federated, namespace: shop, labels: {{mirror.linkerd.io/mirrored-service: 'true'}}, annotations: {{multicluster.linkerd.io/remote-discovery: 'web@{other}', multicluster.linkerd.io/local-discovery: web, linkerd-bridge.clusterset-dns.io/export: '{}'}}}}\n\
         spec: {{clusterIP: {ip}, clusterIPs: [{ip}], ipFamilies: [IPv4], ports: [{}]}}",
        local.text(),
        ports.join(", ")
    ))
}

#[test]
fn every_exporting_cluster_imports_the_same_spec() {
    // The conformance suite's port sets: east exports first with tcp/udp 42, west a second
    // later with tcp 42 and stcp 142/SCTP (and, in the second round, udp 43).
    for (west_ports, want_ports) in [
        (
            &["tcp:42/TCP", "stcp:142/SCTP"][..],
            "stcp:142/SCTP,tcp:42/TCP,udp:42/UDP",
        ),
        (&["tcp:42/TCP", "udp:43/UDP"][..], "tcp:42/TCP,udp:42/UDP"),
    ] {
        let east = carried(
            "east",
            "2026-12-04T10:00:00Z",
            &["tcp:42/TCP", "udp:42/UDP"],
            false,
            "a",
        );
        let west = carried("west", "2026-12-04T10:00:01Z", west_ports, false, "b");
        let in_cluster = |own: &Carried, other: &Carried, other_name: &str, ip: &str| {
            let by_service = BTreeMap::from([(
                key("web"),
                vec![
                    read_export(&key("web"), None, Some(ip), own),
                    read_export(&key("web"), Some(other_name), Some("198.18.7.7"), other),
                ],
            )]);
            let exports = Exports {
                by_service,
                read: BTreeSet::from([other_name.to_string()]),
                own_read: true,
            };
            let naming = Naming {
                own: own.cluster.clone(),
                ..Naming::default()
            };
            let j = judge_all(
                &[federated_here(other_name, ip, own)],
                &links(&[other_name]),
                &naming,
                &exports,
            );
            j.imports[&key("web")].clone()
        };
        let (e, w) = (
            in_cluster(&east, &west, "west", "198.18.0.10"),
            in_cluster(&west, &east, "east", "198.18.0.20"),
        );
        let ports = |i: &Import| {
            i.ports
                .iter()
                .map(|p| format!("{}:{}/{}", p.name, p.port, p.protocol))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(ports(&e), want_ports);
        let mut w_spec = w.spec();
        w_spec["ips"] = e.spec()["ips"].clone();
        assert_eq!(e.spec(), w_spec, "only the ClusterSetIP differs");
        assert_eq!(e.status(), w.status());
        assert_eq!(e.clusters, BTreeSet::from(["east".into(), "west".into()]));
        // The oldest export's labels, in both.
        assert_eq!(e.labels, w.labels);
        assert_eq!(e.labels["team"], "a");
    }
}

#[test]
fn what_linkerd_still_says_of_a_cluster_that_was_read_adds_nothing() {
    // West withdrew its export; Linkerd's federated Service here still names it (its
    // service mirror lags). West's exports were read: it exports nothing, so the import is
    // this cluster's alone. Were west not read, the federated Service would stand for it.
    let own = carried("east", "2026-12-04T10:00:00Z", &["http:80/TCP"], false, "a");
    let fed = federated_here("west", "198.18.0.10", &own);
    let mut exports = Exports {
        by_service: BTreeMap::from([(
            key("web"),
            vec![read_export(&key("web"), None, Some("198.18.0.5"), &own)],
        )]),
        read: BTreeSet::from(["west".to_string()]),
        own_read: true,
    };
    let naming = Naming {
        own: Some("east".into()),
        ..Naming::default()
    };
    let clusters = |exports: &Exports| {
        judge_all(
            std::slice::from_ref(&fed),
            &links(&["west"]),
            &naming,
            exports,
        )
        .imports[&key("web")]
            .clusters
            .clone()
    };
    assert_eq!(clusters(&exports), BTreeSet::from(["east".into()]));
    exports.read.clear();
    assert_eq!(
        clusters(&exports),
        BTreeSet::from(["east".into(), "west".into()])
    );
}

#[test]
fn an_exporting_cluster_imports_its_own_export_without_a_mirror() {
    // A remote-discovery export seen by nobody yet: this cluster's own import has its own
    // cluster, with the Service's ClusterIP as its slice.
    let own = carried("east", "2026-12-04T10:00:00Z", &["http:80/TCP"], false, "a");
    let exports = Exports {
        by_service: BTreeMap::from([(
            key("web"),
            vec![read_export(&key("web"), None, Some("198.18.0.10"), &own)],
        )]),
        read: BTreeSet::new(),
        own_read: true,
    };
    let with = |own: Option<&str>| {
        let naming = Naming {
            own: own.map(str::to_string),
            ..Naming::default()
        };
        judge_all(&[], &links(&[]), &naming, &exports)
    };
    let j = with(Some("east"));
    let i = &j.imports[&key("web")];
    assert_eq!(i.clusters, BTreeSet::from(["east".into()]));
    assert!(i.ips.is_empty());
    assert_eq!(i.slices.len(), 1);
    assert_eq!(i.slices[0].endpoints, vec![ready_at(None, "198.18.0.10")]);
    // Without an id of its own the carried one names it; without either it is left out
    // (the export half says why, on the export).
    let mut anonymous = exports.clone();
    let export = &mut anonymous.by_service.get_mut(&key("web")).unwrap()[0];
    export.carried.as_mut().unwrap().cluster = None;
    let j = judge_all(&[], &links(&[]), &Naming::default(), &anonymous);
    assert!(j.imports.is_empty());
    assert!(j.problems.is_empty(), "{:?}", j.problems);
    let named = judge_all(&[], &links(&[]), &Naming::default(), &exports);
    assert_eq!(
        named.imports[&key("web")].clusters,
        BTreeSet::from(["east".into()]),
        "the id its export half carried"
    );
}

#[test]
fn an_exporting_cluster_imports_its_own_headless_hosts() {
    // A headless export here (gateway mode): its own import has a slice of its own hosts, as
    // the other clusters' have of theirs from Linkerd's host mirrors.
    let own = carried("east", "2026-12-04T10:00:00Z", &["tcp:5432/TCP"], true, "a");
    let hosts = vec![
        ready_at(None, "198.18.1.12"),
        ready_at(Some("db-0"), "198.18.1.10"),
        ready_at(Some("db-1"), "fd00::11"),
    ];
    let exports = Exports {
        by_service: BTreeMap::from([(
            key("db"),
            // Its hosts, as `clusters/` reads them from its slices.
            vec![ClusterExport {
                pods: vec![Pods {
                    ports: own.ports.clone(),
                    endpoints: hosts.clone(),
                }],
                ..read_export(&key("db"), None, None, &own)
            }],
        )]),
        read: BTreeSet::new(),
        own_read: true,
    };
    let naming = Naming {
        own: Some("east".into()),
        ..Naming::default()
    };
    let j = judge_all(&[], &links(&[]), &naming, &exports);
    let i = &j.imports[&key("db")];
    assert!(i.headless);
    assert_eq!(i.clusters, BTreeSet::from(["east".into()]));
    assert_eq!(i.families, vec![Family::V4, Family::V6]);
    let slices: Vec<(&str, Family, &Vec<Endpoint>)> = i
        .slices
        .iter()
        .map(|s| (s.cluster.as_str(), s.family, &s.endpoints))
        .collect();
    assert_eq!(
        slices,
        vec![
            (
                "east",
                Family::V4,
                &vec![hosts[0].clone(), hosts[1].clone()]
            ),
            ("east", Family::V6, &vec![hosts[2].clone()]),
        ]
    );
    // Its hosts are its own: another cluster's export of the same name gives none of them.
    let mut theirs = exports.clone();
    theirs.by_service.get_mut(&key("db")).unwrap()[0].link = Some("west".into());
    theirs.read.insert("west".into());
    let j = judge_all(&[], &links(&["west"]), &naming, &theirs);
    assert!(
        j.imports
            .get(&key("db"))
            .is_none_or(|i| i.slices.is_empty()),
        "{:?}",
        j.imports
    );
}

#[test]
fn federated_gives_its_addresses_and_members() {
    let fed = svc(
        "metadata: {name: web-federated, namespace: shop, labels: {mirror.linkerd.io/mirrored-service: 'true'}, annotations: {multicluster.linkerd.io/remote-discovery: 'web@east,web@west', multicluster.linkerd.io/local-discovery: web, linkerd-bridge.clusterset-dns.io/export: '{\"sessionAffinity\":\"ClientIP\",\"ports\":[{\"name\":\"http\",\"port\":80,\"protocol\":\"TCP\",\"appProtocol\":\"http\"}]}'}}\n\
         spec: {clusterIP: 198.18.0.10, clusterIPs: [198.18.0.10], ipFamilies: [IPv4], ports: [{name: http, port: 80, protocol: TCP}]}",
    );
    let naming = Naming {
        cluster_ids: BTreeMap::from([("west".into(), "west.eu".into())]),
        own: Some("north".into()),
    };
    let j = judge(
        std::slice::from_ref(&fed),
        &links(&["east", "west"]),
        &naming,
    );
    let i = &j.imports[&key("web")];
    assert!(!i.headless && i.slices.is_empty());
    assert_eq!(i.ips, vec!["198.18.0.10".parse::<IpAddr>().unwrap()]);
    assert_eq!(i.families, vec![Family::V4]);
    assert_eq!(
        i.clusters,
        BTreeSet::from(["east".into(), "west.eu".into(), "north".into()])
    );
    assert_eq!(i.ports[0].app_protocol.as_deref(), Some("http"));
    assert_eq!(i.spec()["sessionAffinity"], "ClientIP");
    assert_eq!(i.status()["endpointSliceObjects"], "Absent");
    assert!(j.problems.is_empty(), "{:?}", j.problems);

    // A Link gone: its member does not count; the last one gone, no import.
    let j = judge(
        std::slice::from_ref(&fed),
        &links(&["west"]),
        &Naming::default(),
    );
    assert_eq!(
        j.imports[&key("web")].clusters,
        BTreeSet::from(["west".into()])
    );
    assert_eq!(j.problems.len(), 1, "the local member without --cluster-id");
    let gone = svc(
        "metadata: {name: web-federated, namespace: shop, labels: {mirror.linkerd.io/mirrored-service: 'true'}, annotations: {multicluster.linkerd.io/remote-discovery: ''}}\n\
         spec: {clusterIP: 198.18.0.10, ports: [{name: http, port: 80}]}",
    );
    assert!(
        judge(&[gone], &links(&["east"]), &naming)
            .imports
            .is_empty()
    );
    assert!(
        judge(&[fed], &links(&[]), &Naming::default())
            .imports
            .is_empty()
    );
}

#[test]
fn mirrors_only_give_a_slice_per_cluster() {
    let j = judge(
        &[
            mirror("api", "east", "198.18.1.1"),
            mirror("api", "west", "fd00::5"),
            mirror("api", "south", "198.18.1.3"),
        ],
        &links(&["east", "west"]),
        &Naming::default(),
    );
    let i = &j.imports[&key("api")];
    assert!(i.ips.is_empty() && !i.headless);
    assert_eq!(i.families, vec![Family::V4, Family::V6]);
    assert_eq!(i.clusters, BTreeSet::from(["east".into(), "west".into()]));
    let objects = i.slice_objects();
    assert_eq!(objects.len(), 2);
    let east = &objects[&slice_name("api", "east", Family::V4)];
    assert_eq!(east["addressType"], "IPv4");
    assert_eq!(east["endpoints"][0]["addresses"][0], "198.18.1.1");
    assert_eq!(
        east["metadata"]["labels"]["multicluster.kubernetes.io/source-cluster"],
        "east"
    );
    assert_eq!(east["ports"][0]["name"], "http");
    assert_eq!(i.status()["endpointSliceObjects"], "Present");
}

#[test]
fn headless_mirrors_name_each_host() {
    let parent = svc(
        "metadata: {name: db-east, namespace: shop, labels: {mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east}, annotations: {mirror.linkerd.io/remote-svc-fq-name: db.shop.svc.cluster.local}}\n\
         spec: {clusterIP: None, ports: [{name: pg, port: 5432}]}",
    );
    let host = |h: &str, ip: &str| {
        svc(&format!(
            "metadata: {{name: {h}-east, namespace: shop, labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east, mirror.linkerd.io/headless-mirror-svc-name: db-east}}, annotations: {{mirror.linkerd.io/remote-svc-fq-name: {h}.db.shop.svc.cluster.local}}}}\n\
             spec: {{clusterIP: '{ip}', ports: [{{name: pg, port: 5432}}]}}"
        ))
    };
    let j = judge(
        &[
            parent,
            host("db-1", "198.18.2.2"),
            host("db-0", "198.18.2.1"),
        ],
        &links(&["east"]),
        &Naming::default(),
    );
    let i = &j.imports[&key("db")];
    assert!(i.headless && i.ips.is_empty());
    assert_eq!(
        i.slices[0].endpoints,
        vec![
            ready_at(Some("db-0"), "198.18.2.1"),
            ready_at(Some("db-1"), "198.18.2.2")
        ]
    );
    assert_eq!(i.spec()["type"], "Headless");
}

/// An endpoint that is ready, as Linkerd's objects' addresses are.
fn ready_at(hostname: Option<&str>, ip: &str) -> Endpoint {
    Endpoint::ready(hostname.map(str::to_string), ip.parse().unwrap())
}

/// Where exports disagree, and what the judge does with what it cannot use.
mod conflicts;
/// The exporting clusters' endpoints in the import's slices.
mod endpoints;
