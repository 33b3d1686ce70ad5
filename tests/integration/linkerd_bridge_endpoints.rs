//! Endpoints, not just names: with `clusterset-dns linkerd-bridge` on two real API servers
//! linked both ways (as in linkerd_bridge_conflicts.rs, Linkerd's service mirror replayed), every
//! cluster's ServiceImport of a service exported without a gateway has the exporting clusters'
//! endpoints in its MCS EndpointSlices, read through the Links' credentials from their own
//! slices: per cluster and family, with the pods' ports and conditions. A federated import keeps
//! its ClusterSetIP (Linkerd's federated Service) and gains its slices; a headless one gets its
//! hosts and `ipFamilies`, and the DNS server reading the imports answers them. An address no
//! slice may hold is left out, the rest of the slice kept, and said in an Event and a metric.
//!
//! No endpointslice controller runs beside these API servers: the test writes each exported
//! Service's slices as it writes them (k8s.io/endpointslice v0.37.2, utils.go
//! `setEndpointSliceLabels`: the Service's labels copied, Linkerd's export label included, and
//! `kubernetes.io/service-name`, `endpointslice.kubernetes.io/managed-by`, and for a headless
//! Service `service.kubernetes.io/headless`).

use crate::common;

use common::k8s::Cluster;
use common::{spawn_binary, until};

use crate::linkerd_bridge::{Bridge, events};
use crate::linkerd_bridge_conflicts::{get_json, link_to, member, service_mirror};
use crate::linkerd_bridge_import::{list, summary};

/// A Service `name` in `shop` exported with the default mode (federated; headless: remote
/// discovery), its port `port_name` at `port`, its pods listening on `target`.
fn export(k: &Cluster, name: &str, headless: bool, port_name: &str, port: u16, target: u16) {
    let cluster_ip = if headless { "clusterIP: None, " } else { "" };
    k.apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: shop}}\n\
         spec: {{{cluster_ip}selector: {{app: {name}}}, ports: [{{name: {port_name}, port: {port}, targetPort: {target}, protocol: TCP}}]}}\n\
         ---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {{name: {name}, namespace: shop}}\n"
    ));
}

/// The slice `slice` of Service `service` as the endpointslice controller writes it once the
/// export half labelled the Service with Linkerd's `label`.
fn slice(k: &Cluster, slice: &str, service: &str, label: &str, port: &str, endpoints: &str) {
    let headless = if label.contains("remote-discovery") {
        ", service.kubernetes.io/headless: ''"
    } else {
        ""
    };
    k.apply(&format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {slice}, namespace: shop, labels: {{kubernetes.io/service-name: {service}, \
         endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io, {label}{headless}}}}}\n\
         addressType: IPv4\nports: [{port}]\nendpoints: {endpoints}\n"
    ));
}

/// The ports of `k`'s MCS slices of `name` from `cluster`.
fn slice_ports(k: &Cluster, name: &str, cluster: &str) -> Vec<String> {
    let selector = format!(
        "multicluster.kubernetes.io/service-name={name},multicluster.kubernetes.io/source-cluster={cluster}"
    );
    list(k, "shop", "endpointslices", &selector)
        .iter()
        .map(|s| s["ports"].to_string())
        .collect()
}

/// Waits, replaying Linkerd's service mirror meanwhile, until `name`'s import holds every one
/// of `has` in both clusters.
fn settles(set: &[(&str, &Cluster); 2], bridges: &[Bridge; 2], name: &str, has: &[&str]) {
    let last = std::cell::RefCell::new(String::new());
    until(
        common::wait::Lazy(|| {
            format!(
                "{}\neast's bridge:\n{}\nwest's bridge:\n{}",
                last.borrow(),
                bridges[0].log(),
                bridges[1].log()
            )
        }),
        40,
        || {
            service_mirror(set);
            let seen: Vec<String> = set.iter().map(|(_, k)| summary(k, "shop", name)).collect();
            *last.borrow_mut() = format!("{name}: east {}\n  west {}", seen[0], seen[1]);
            seen.iter().all(|s| has.iter().all(|h| s.contains(h)))
        },
    );
}

const FEDERATED: &str = "mirror.linkerd.io/federated: member";
const REMOTE_DISCOVERY: &str = "mirror.linkerd.io/exported: remote-discovery";

#[test]
fn every_cluster_imports_the_exporting_clusters_endpoints() {
    let _module = common::module(module_path!());
    let (east, west) = (
        member("east", "198.18.64.0/20"),
        member("west", "198.18.80.0/20"),
    );
    link_to(&east, &west, "west");
    link_to(&west, &east, "east");
    let args = ["--resync", "5s", "--deny-cidr", "198.18.111.0/24"];
    let bridges = [Bridge::start(&east, &args), Bridge::start(&west, &args)];
    let set = [("east", &east), ("west", &west)];

    // web, federated from both clusters; its pods listen on 8080. West's slice holds a ready
    // pod, a terminating one still serving, Alibaba's metadata address and one of
    // --deny-cidr.
    export(&east, "web", false, "http", 80, 8080);
    export(&west, "web", false, "http", 80, 8080);
    let http = "{name: http, port: 8080, protocol: TCP}";
    slice(
        &east,
        "web-e1",
        "web",
        FEDERATED,
        http,
        "[{addresses: [198.18.112.10], conditions: {ready: true, serving: true, terminating: false}}]",
    );
    slice(
        &west,
        "web-w1",
        "web",
        FEDERATED,
        http,
        "[{addresses: [198.18.110.10], conditions: {ready: true}}, \
         {addresses: [198.18.110.11], conditions: {ready: false, serving: true, terminating: true}}, \
         {addresses: [100.100.100.200], conditions: {ready: true}}, \
         {addresses: [198.18.111.5], conditions: {ready: true}}]",
    );
    // db, headless from west alone (so exported for remote discovery), with a host.
    export(&west, "db", true, "pg", 5432, 5432);
    slice(
        &west,
        "db-w1",
        "db",
        REMOTE_DISCOVERY,
        "{name: pg, port: 5432, protocol: TCP}",
        "[{addresses: [198.18.110.20], hostname: db-0, conditions: {ready: true}}]",
    );

    settles(
        &set,
        &bridges,
        "web",
        &[
            "ClusterSetIP ips=198.18.",
            "clusters=east,west slices=Present east/IPv4[198.18.112.10] west/IPv4[198.18.110.10 198.18.110.11(not ready)]",
        ],
    );
    settles(
        &set,
        &bridges,
        "db",
        &["Headless ips= families=IPv4 clusters=west slices=Present west/IPv4[db-0=198.18.110.20]"],
    );
    for (cluster, k) in &set {
        // The federated import's address is this cluster's federated Service's.
        let federated = crate::linkerd_source::cluster_ip(k, "shop", "web-federated");
        assert!(
            summary(k, "shop", "web").contains(&format!("ips={federated} ")),
            "{cluster}: {}",
            summary(k, "shop", "web")
        );
        // The pods' ports, not the Service's; the conditions as the exporting cluster said.
        for from in ["east", "west"] {
            assert_eq!(
                slice_ports(k, "web", from),
                [r#"[{"name":"http","port":8080,"protocol":"TCP"}]"#],
                "{cluster}'s slice of {from}"
            );
        }
        let west_slice = &list(
            k,
            "shop",
            "endpointslices",
            "multicluster.kubernetes.io/service-name=web,multicluster.kubernetes.io/source-cluster=west",
        )[0];
        assert_eq!(
            west_slice["endpoints"][1]["conditions"],
            serde_json::json!({"ready": false, "serving": true, "terminating": true}),
            "{cluster}"
        );
        // Each has a twin naming the federated Service, for kube-proxy (--route-outside-mesh,
        // on by default), with the same endpoints; the headless import's have none.
        assert_eq!(
            routed(k, "web"),
            ["web-federated", "web-federated"],
            "{cluster}"
        );
        assert!(routed(k, "db").is_empty(), "{cluster}");
        for from in ["east", "west"] {
            let twin = |l: &str| {
                let selector = format!("{l},multicluster.kubernetes.io/source-cluster={from}");
                let s = list(k, "shop", "endpointslices", &selector);
                assert_eq!(s.len(), 1, "{cluster}: {selector}");
                [&s[0]["endpoints"], &s[0]["ports"]].map(|v| v.to_string())
            };
            assert_eq!(
                twin("linkerd-bridge.clusterset-dns.io/serviceimport=web"),
                twin("multicluster.kubernetes.io/service-name=web"),
                "{cluster}: {from}'s twin"
            );
        }
        // Linkerd's federated Service is Linkerd's alone: the bridge wrote nothing into it.
        let fed = get_json(
            k,
            &[
                "get",
                "service",
                "-n",
                "shop",
                "web-federated",
                "--show-managed-fields",
            ],
        )
        .expect("web-federated");
        let managers: Vec<&str> = (fed["metadata"]["managedFields"].as_array().unwrap().iter())
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert!(
            !managers.is_empty() && !managers.contains(&"clusterset-dns-linkerd-bridge"),
            "{cluster}: {managers:?}"
        );
    }
    // The refused addresses: said on the import in both clusters, and counted.
    for (i, (cluster, k)) in set.iter().enumerate() {
        until("the refusal said", 20, || {
            events(k, "shop", "AddressRefused").iter().any(|e| {
                e.starts_with("web: 2 of cluster west's endpoints of shop/web")
                    && e.contains("100.100.100.200 (metadata)")
                    && e.contains("198.18.111.5 (denied)")
            })
        });
        let scrape = bridges[i].admin("/metrics").1;
        assert_eq!(
            common::metric_in(&scrape, "clusterset_dns_bridge_refused_endpoints"),
            2.0,
            "{cluster}: {scrape}"
        );
    }

    // The DNS server reading east's imports answers west's headless host.
    let dns = spawn_binary(&[
        "--kubeconfig",
        &east.kubeconfig("admin"),
        "--source",
        "mcs",
        "--cluster-id",
        "east",
    ]);
    until("the DNS server ready", 30, || common::ready(&dns));
    for name in ["db-0.west.db.shop", "db.shop"] {
        let q = format!("+short A {name}.svc.clusterset.local");
        until(format!("{name} answered"), 20, || {
            common::dig(dns.dns, &q).trim() == "198.18.110.20"
        });
    }
    let srv = common::dig(dns.dns, "+short SRV _pg._tcp.db.shop.svc.clusterset.local");
    assert!(
        srv.contains("5432 db-0.west.db.shop.svc.clusterset.local."),
        "{srv}"
    );

    // West's ready pod goes; then west withdraws its export: the slices follow.
    slice(
        &west,
        "web-w1",
        "web",
        FEDERATED,
        http,
        "[{addresses: [198.18.110.11], conditions: {ready: false, serving: true, terminating: true}}]",
    );
    settles(
        &set,
        &bridges,
        "web",
        &["east/IPv4[198.18.112.10] west/IPv4[198.18.110.11(not ready)]"],
    );
    west.delete("serviceexport", "shop", "web");
    settles(
        &set,
        &bridges,
        "web",
        &["clusters=east slices=Present east/IPv4[198.18.112.10]"],
    );
    until("west's slices of web gone in both clusters", 20, || {
        set.iter()
            .all(|(_, k)| slice_ports(k, "web", "west").is_empty())
    });

    // East's bridge restarted with --route-outside-mesh=false: its twins go, nothing else
    // changes; west's stay.
    let [east_bridge, _west_bridge] = bridges;
    drop(east_bridge);
    let off = [&args[..], &["--route-outside-mesh", "false"]].concat();
    let east_bridge = Bridge::start(&east, &off);
    until(
        common::wait::Lazy(|| format!("{:?}\n{}", routed(&east, "web"), east_bridge.log())),
        40,
        || routed(&east, "web").is_empty(),
    );
    assert_eq!(slice_ports(&east, "web", "east").len(), 1);
    assert_eq!(routed(&west, "web"), ["web-federated"]);
}

/// The Service each twin of `k`'s MCS slices of `name` names for kube-proxy (`kubernetes.io/
/// service-name`).
fn routed(k: &Cluster, name: &str) -> Vec<String> {
    let selector = format!("linkerd-bridge.clusterset-dns.io/serviceimport={name}");
    list(k, "shop", "endpointslices", &selector)
        .iter()
        .map(|s| {
            let label = &s["metadata"]["labels"]["kubernetes.io/service-name"];
            label.as_str().unwrap_or_default().to_string()
        })
        .collect()
}
