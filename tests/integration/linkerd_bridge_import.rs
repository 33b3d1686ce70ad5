//! `clusterset-dns linkerd-bridge`, the import half, against a real API server: the Services
//! Linkerd's service mirror writes (in the exact shapes of linkerd2 `version-2.20`, see
//! linkerd_source.rs) and Links become ServiceImports and EndpointSlices, through the churn the
//! service mirror makes; and the DNS server reading those ServiceImports answers as it does
//! reading Linkerd's Services.

use crate::common;

use std::time::{Duration, Instant};

use common::k8s::Cluster;
use common::wait::value;
use common::{Steps, spawn_binary, until};
use serde_json::Value;

use crate::linkerd_bridge::{Bridge, CRDS, bridge_rbac, events};
use crate::linkerd_source::{cluster_ip, host_mirror, linkerd_service, mirror, sorted};

const LINK_CRD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/k8s/crds/linkerd-links.yaml"
);

/// A cluster with the MCS CRDs of deploy/crds, Linkerd's Link CRD, namespaces `shop`, `data`
/// and `linkerd-multicluster`, and the bridge's roles; Services get ClusterIPs from `range`.
pub(crate) fn import_cluster(range: &str) -> Cluster {
    let k = Cluster::start_with(range);
    for crd in [
        format!("{CRDS}/multicluster.x-k8s.io_serviceexports.yaml"),
        format!("{CRDS}/multicluster.x-k8s.io_serviceimports.yaml"),
        LINK_CRD.to_string(),
    ] {
        k.apply(&std::fs::read_to_string(crd).unwrap());
    }
    for ns in ["shop", "data", "linkerd-multicluster"] {
        k.apply(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"
        ));
    }
    k.apply(&bridge_rbac());
    until("the CRDs served", 30, || {
        k.kubectl_ok(&["get", "serviceimports,links", "-A"])
    });
    k
}

/// A Link to cluster `target`, as `linkerd multicluster link` writes it (v1alpha3).
pub(crate) fn link(target: &str) -> String {
    format!(
        "---\napiVersion: multicluster.linkerd.io/v1alpha3\nkind: Link\nmetadata: {{name: {target}, namespace: linkerd-multicluster}}\n\
         spec: {{targetClusterName: {target}, targetClusterDomain: cluster.local, gatewayAddress: 198.18.9.1, gatewayPort: '4143'}}\n"
    )
}

/// The federated Service of `svc` in `ns`: remote members `remote` (`svc@cluster,…`), a local
/// member if `local`, and the export half's carried annotation `carried` if given. With a local
/// member, that member too: the Service `svc` labelled `mirror.linkerd.io/federated=member`,
/// whose annotations Linkerd copies onto the federated Service (the local member is always its
/// oldest, linkerd2 `version-2.20` `handleFederatedServiceJoin`).
pub(crate) fn federated(
    ns: &str,
    svc: &str,
    remote: &str,
    local: bool,
    carried: Option<&str>,
) -> String {
    let mut annotations = format!("multicluster.linkerd.io/remote-discovery: '{remote}'");
    if local {
        annotations += &format!(", multicluster.linkerd.io/local-discovery: {svc}");
    }
    let mut own = String::new();
    if let Some(c) = carried {
        annotations += &format!(", linkerd-bridge.clusterset-dns.io/export: '{c}'");
        own = format!(", annotations: {{linkerd-bridge.clusterset-dns.io/export: '{c}'}}");
    }
    let mut out = linkerd_service(
        ns,
        &format!("{svc}-federated"),
        "app: web",
        &annotations,
        false,
    );
    if local {
        out += &format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {svc}, namespace: {ns}, labels: {{mirror.linkerd.io/federated: member}}{own}}}\n\
             spec: {{ports: [{{name: http, protocol: TCP, port: 80, targetPort: 80, appProtocol: http}}]}}\n"
        );
    }
    out
}

/// What the export half carries for a Service with sessionAffinity ClientIP and port http's
/// appProtocol `http`, exported with label `team: shop` and annotation `dummy-annotation`
/// (the conformance suite's), as JSON in a single-quoted YAML scalar.
pub(crate) const CARRIED: &str = r#"{"exportCreated":"2026-12-04T00:00:00Z","sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":600}},"ports":[{"name":"http","port":80,"protocol":"TCP","appProtocol":"http"}],"exportedLabels":{"team":"shop"},"exportedAnnotations":{"dummy-annotation":"true"}}"#;

fn get(k: &Cluster, ns: &str, kind: &str, name: &str) -> Option<Value> {
    let out = k
        .kubectl()
        .args(["get", kind, "-n", ns, name, "-o", "json"])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

pub(crate) fn list(k: &Cluster, ns: &str, kind: &str, selector: &str) -> Vec<Value> {
    let out = k
        .kubectl()
        .args(["get", kind, "-n", ns, "-l", selector, "-o", "json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["items"].as_array().cloned().unwrap_or_default()
}

/// A ServiceImport and its slices in a line: type, ips, ipFamilies, status.clusters,
/// endpointSliceObjects, then each slice's source cluster, address type and endpoints
/// (`host=address`), sorted. "none" when there is no ServiceImport.
pub(crate) fn summary(k: &Cluster, ns: &str, name: &str) -> String {
    let Some(si) = get(k, ns, "serviceimport", name) else {
        return "none".into();
    };
    let words = |v: &Value| -> String {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|x| {
                x.as_str()
                    .map_or_else(|| x["cluster"].to_string(), str::to_string)
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut slices: Vec<String> = list(
        k,
        ns,
        "endpointslices",
        &format!("multicluster.kubernetes.io/service-name={name}"),
    )
    .iter()
    .map(|s| {
        let eps: Vec<String> = s["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                let addr = e["addresses"][0].as_str().unwrap_or_default();
                let not_ready = match e["conditions"]["ready"] == false {
                    true => "(not ready)",
                    false => "",
                };
                match e["hostname"].as_str() {
                    Some(h) => format!("{h}={addr}{not_ready}"),
                    None => format!("{addr}{not_ready}"),
                }
            })
            .collect();
        format!(
            "{}/{}[{}]",
            s["metadata"]["labels"]["multicluster.kubernetes.io/source-cluster"]
                .as_str()
                .unwrap_or("?"),
            s["addressType"].as_str().unwrap_or("?"),
            eps.join(" ")
        )
    })
    .collect();
    slices.sort();
    format!(
        "{} ips={} families={} clusters={} slices={} {}",
        si["spec"]["type"].as_str().unwrap_or("?"),
        words(&si["spec"]["ips"]),
        words(&si["spec"]["ipFamilies"]),
        words(&si["status"]["clusters"]).replace('"', ""),
        si["status"]["endpointSliceObjects"].as_str().unwrap_or("?"),
        slices.join(" ")
    )
}

/// Waits until `ns/name` reads `want` (see [`summary`]); how long it took.
pub(crate) fn settles(k: &Cluster, bridge: &Bridge, ns: &str, name: &str, want: &str) -> Duration {
    let start = Instant::now();
    let last = std::cell::RefCell::new(String::new());
    value(
        common::wait::Lazy(|| {
            format!(
                "{ns}/{name}: {want}\nlast: {}\nbridge log:\n{}",
                last.borrow(),
                bridge.log()
            )
        }),
        20,
        || {
            let have = summary(k, ns, name);
            let done = have == want;
            *last.borrow_mut() = have;
            done.then_some(())
        },
    );
    start.elapsed()
}

/// The Linkerd objects of a consuming cluster linked to `east` and `west`: `web` federated
/// (remote members in both, a local member) with its mirrors, `api` mirrored only, `db` a
/// gateway-mode headless export with two hosts mirrored from `east`.
pub(crate) fn linkerd_objects(k: &Cluster) {
    k.apply(&(link("east") + &link("west")));
    k.apply(
        &(federated("shop", "web", "web@east,web@west", true, Some(CARRIED))
            + &mirror("shop", "web", "east", false)
            + &mirror("shop", "web", "west", false)
            + &mirror("shop", "api", "east", false)
            + &mirror("shop", "api", "west", false)
            + &mirror("data", "db", "east", true)
            + &host_mirror("data", "db", "db-0", "east")
            + &host_mirror("data", "db", "db-1", "east")),
    );
}

pub(crate) const IMPORT_ARGS: [&str; 8] = [
    "--halves",
    "import",
    "--cluster-id",
    "north",
    "--linkerd-cluster-id",
    "west=west.eu",
    "--resync",
    "2s",
];

/// Every shape Linkerd's service mirror writes becomes its ServiceImport and slices, and follows
/// the service mirror's churn: a member leaving, a Link deleted, the federated Service gone;
/// objects the bridge did not create stay as they are; a user's own `<svc>-federated` and a
/// malformed annotation change nothing else; a restarted bridge converges.
#[test]
fn linkerd_services_become_service_imports() {
    let _module = common::module(module_path!());
    let mut steps = Steps::default();
    let k = import_cluster("198.19.224.0/19");
    steps.next("1. Linkerd's objects become ServiceImports and slices");
    linkerd_objects(&k);
    // A user's own Service that only looks like a federated one by name, and a mirror whose
    // carried annotation is not JSON (its import is still written, without those fields).
    k.apply(
        "apiVersion: v1\nkind: Service\nmetadata: {name: cart-federated, namespace: shop, annotations: {multicluster.linkerd.io/remote-discovery: cart@east}}\nspec: {ports: [{port: 80}]}\n",
    );
    k.apply(&linkerd_service(
        "shop",
        "bad-east",
        "mirror.linkerd.io/cluster-name: east",
        "mirror.linkerd.io/remote-svc-fq-name: bad.shop.svc.cluster.local, linkerd-bridge.clusterset-dns.io/export: '{not json'",
        false,
    ));
    let ip = |ns: &str, name: &str| cluster_ip(&k, ns, name);
    let (web, web_east, api_east, api_west, bad) = (
        ip("shop", "web-federated"),
        ip("shop", "web-east"),
        ip("shop", "api-east"),
        ip("shop", "api-west"),
        ip("shop", "bad-east"),
    );
    let (db0, db1) = (ip("data", "db-0-east"), ip("data", "db-1-east"));
    let mut bridge = Bridge::start(&k, &IMPORT_ARGS);
    settles(
        &k,
        &bridge,
        "shop",
        "web",
        &format!("ClusterSetIP ips={web} families=IPv4 clusters=east,north,west.eu slices=Absent "),
    );
    let si = get(&k, "shop", "serviceimport", "web").unwrap();
    assert_eq!(
        si["spec"]["ports"],
        serde_json::json!([{"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "http"}]),
        "ports, with the appProtocol Linkerd drops and the export half carried"
    );
    assert_eq!(si["spec"]["sessionAffinity"], "ClientIP");
    assert_eq!(
        si["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
        600
    );
    assert_eq!(
        si["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "linkerd-bridge.clusterset-dns.io"
    );
    assert_eq!(si["metadata"]["labels"]["team"], "shop", "exported label");
    assert_eq!(
        si["metadata"]["annotations"]["dummy-annotation"], "true",
        "exported annotation"
    );
    settles(
        &k,
        &bridge,
        "shop",
        "api",
        &format!(
            "ClusterSetIP ips= families=IPv4 clusters=east,west.eu slices=Present east/IPv4[{api_east}] west.eu/IPv4[{api_west}]"
        ),
    );
    settles(
        &k,
        &bridge,
        "data",
        "db",
        &format!(
            "Headless ips= families=IPv4 clusters=east slices=Present east/IPv4[db-0={db0} db-1={db1}]"
        ),
    );
    settles(
        &k,
        &bridge,
        "shop",
        "bad",
        &format!("ClusterSetIP ips= families=IPv4 clusters=east slices=Present east/IPv4[{bad}]"),
    );
    let slice = &list(
        &k,
        "shop",
        "endpointslices",
        "multicluster.kubernetes.io/service-name=api",
    )[0];
    assert_eq!(
        slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
        "linkerd-bridge.clusterset-dns.io"
    );
    assert_eq!(
        slice["ports"],
        serde_json::json!([{"name": "http", "port": 80, "protocol": "TCP"}])
    );
    assert_eq!(
        summary(&k, "shop", "cart"),
        "none",
        "a user's own cart-federated"
    );
    until("the Event on the malformed annotation", 10, || {
        events(&k, "shop", "NotImported")
            .iter()
            .any(|e| e.starts_with("bad-east: annotation linkerd-bridge.clusterset-dns.io/export is not what a bridge writes"))
    });
    // The gauges that walk every object are counted at most once a second.
    let counted = [
        "clusterset_dns_bridge_managed{kind=\"ServiceImport\"} 4",
        "clusterset_dns_bridge_managed{kind=\"EndpointSlice\"} 4",
        "clusterset_dns_bridge_unusable_objects 1",
    ];
    until(
        common::wait::Lazy(|| format!("{counted:?} in\n{}", bridge.admin("/metrics").1)),
        10,
        || {
            let (code, metrics) = bridge.admin("/metrics");
            code == 200 && counted.iter().all(|s| metrics.contains(s))
        },
    );

    // Written only when something changed: two resyncs later nothing was written again.
    let versions = || {
        let out = k
            .kubectl()
            .args([
                "get",
                "serviceimports,endpointslices",
                "-A",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}",
            ])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let before = versions();
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        versions(),
        before,
        "rewritten by a resync:\n{}",
        bridge.log()
    );

    steps.next("2. a member leaves the federated Service");
    k.apply(&federated("shop", "web", "web@east", true, Some(CARRIED)));
    let took = settles(
        &k,
        &bridge,
        "shop",
        "web",
        &format!("ClusterSetIP ips={web} families=IPv4 clusters=east,north slices=Absent "),
    );
    eprintln!("member left: the import followed in {took:?}");

    steps.next("2b. clusters export api with other ports: the import has their union");
    // As the MCS conformance suite's "union of the constituent service ports" spec asks:
    // `west` exports api with a second port, so the import has both, and each export that
    // export is said to conflict where exports differ (as the suite wants Conflict on each).
    let http = "{name: http, protocol: TCP, port: 80, targetPort: 80}";
    k.apply(&mirror("shop", "api", "west", false).replace(
        &format!("ports: [{http}]"),
        &format!("ports: [{http}, {{name: admin, protocol: TCP, port: 9990, targetPort: 9990}}]"),
    ));
    let ports = |want: Value| {
        until(format!("shop/api's ports {want}"), 20, || {
            get(&k, "shop", "serviceimport", "api").is_some_and(|si| si["spec"]["ports"] == want)
        })
    };
    ports(serde_json::json!([
        {"name": "admin", "port": 9990, "protocol": "TCP"},
        {"name": "http", "port": 80, "protocol": "TCP"}
    ]));
    until("an ExportConflict Event on each mirror", 10, || {
        let said = events(&k, "shop", "ExportConflict");
        ["api-east", "api-west"].iter().all(|m| {
            said.iter().any(|e| {
                e.starts_with(&format!("{m}: cluster "))
                    && e.ends_with("the import has the union of the exports' ports [admin:9990/TCP, http:80/TCP]")
            })
        })
    });

    steps.next("2c. the exported labels and annotations change: the bridge's follow, others' stay");
    assert!(k.kubectl_ok(&["label", "serviceimport", "-n", "shop", "web", "by-hand=yes"]));
    k.apply(&federated(
        "shop",
        "web",
        "web@east",
        true,
        Some(&CARRIED.replace(
            r#""exportedLabels":{"team":"shop"},"exportedAnnotations":{"dummy-annotation":"true"}"#,
            r#""exportedLabels":{"team":"cart","bad key!":"x"}"#,
        )),
    ));
    until("web's labels and annotations", 20, || {
        let Some(si) = get(&k, "shop", "serviceimport", "web") else {
            return false;
        };
        let m = &si["metadata"];
        m["labels"]["team"] == "cart"
            && m["labels"]["by-hand"] == "yes"
            && m["labels"]["app.kubernetes.io/managed-by"] == "linkerd-bridge.clusterset-dns.io"
            && m["labels"].get("bad key!").is_none()
            && m["annotations"].get("dummy-annotation").is_none()
    });
    until("the Event on the label left out", 10, || {
        events(&k, "shop", "NotImported").iter().any(|e| {
            e.starts_with("web: exported label bad key!=\"x\" is left out of the ServiceImport: the key name \"bad key!\" is not")
        })
    });
    assert_eq!(
        summary(&k, "shop", "web"),
        format!("ClusterSetIP ips={web} families=IPv4 clusters=east,north slices=Absent "),
        "the rest of the import as it was"
    );

    steps.next("3. a Link is deleted: its cluster's mirrors stay, and are not served");
    k.delete("link", "linkerd-multicluster", "west");
    settles(
        &k,
        &bridge,
        "shop",
        "api",
        &format!(
            "ClusterSetIP ips= families=IPv4 clusters=east slices=Present east/IPv4[{api_east}]"
        ),
    );
    // The union is of the exports served: west's port went with its Link.
    ports(serde_json::json!([{"name": "http", "port": 80, "protocol": "TCP"}]));
    assert!(
        get(&k, "shop", "service", "api-west").is_some(),
        "Linkerd's mirror left behind"
    );

    steps.next("4. the federated Service goes: the mirrors give the import, then nothing");
    // Its last members leave (the local one unexported), and Linkerd deletes it.
    k.delete("service", "shop", "web");
    k.delete("service", "shop", "web-federated");
    settles(
        &k,
        &bridge,
        "shop",
        "web",
        &format!(
            "ClusterSetIP ips= families=IPv4 clusters=east slices=Present east/IPv4[{web_east}]"
        ),
    );
    k.delete("service", "shop", "web-east");
    k.delete("service", "shop", "web-west");
    settles(&k, &bridge, "shop", "web", "none");
    assert!(
        list(
            &k,
            "shop",
            "endpointslices",
            "multicluster.kubernetes.io/service-name=web"
        )
        .is_empty(),
        "the bridge's slices go with its import"
    );

    steps.next("5. a ServiceImport someone else made is left as it is");
    k.apply(
        "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: other, namespace: shop}\nspec: {type: ClusterSetIP, ips: [198.18.7.7], ports: [{port: 81, protocol: TCP}]}\n",
    );
    k.apply(&mirror("shop", "other", "east", false));
    until("the Event on the ServiceImport left alone", 10, || {
        events(&k, "shop", "NotTakenOver").iter().any(|e| {
            e.starts_with("other: ServiceImport shop/other was not created by the linkerd-bridge")
        })
    });
    until("counted", 10, || {
        bridge
            .admin("/metrics")
            .1
            .contains("clusterset_dns_bridge_not_taken_over{kind=\"ServiceImport\"} 1")
    });
    let other = get(&k, "shop", "serviceimport", "other").unwrap();
    assert_eq!(other["spec"]["ips"], serde_json::json!(["198.18.7.7"]));
    assert!(other["metadata"]["labels"].is_null());
    assert!(
        list(
            &k,
            "shop",
            "endpointslices",
            "multicluster.kubernetes.io/service-name=other"
        )
        .is_empty()
    );
    assert_eq!(
        bridge
            .log()
            .matches("ServiceImport shop/other was not created")
            .count(),
        1,
        "said once, through resyncs"
    );

    steps.next("6. a restarted bridge converges from what it lists");
    drop(bridge);
    k.delete("serviceimport", "shop", "api");
    k.apply(&link("west"));
    bridge = Bridge::start(&k, &IMPORT_ARGS);
    settles(
        &k,
        &bridge,
        "shop",
        "api",
        &format!(
            "ClusterSetIP ips= families=IPv4 clusters=east,west.eu slices=Present east/IPv4[{api_east}] west.eu/IPv4[{api_west}]"
        ),
    );
    assert_eq!(bridge.admin("/ready").0, 200);
}

/// In an IPv6-only cluster Linkerd's Services get IPv6 ClusterIPs (it writes no families), and
/// the imports say IPv6.
#[test]
fn an_ipv6_only_cluster_imports_ipv6() {
    let _module = common::module(module_path!());
    let k = import_cluster("fd98:18::/112");
    linkerd_objects(&k);
    let web = cluster_ip(&k, "shop", "web-federated");
    let (api_east, api_west) = (
        cluster_ip(&k, "shop", "api-east"),
        cluster_ip(&k, "shop", "api-west"),
    );
    assert!(web.contains(':'), "an IPv6 ClusterIP: {web}");
    let bridge = Bridge::start(&k, &IMPORT_ARGS);
    settles(
        &k,
        &bridge,
        "shop",
        "web",
        &format!("ClusterSetIP ips={web} families=IPv6 clusters=east,north,west.eu slices=Absent "),
    );
    settles(
        &k,
        &bridge,
        "shop",
        "api",
        &format!(
            "ClusterSetIP ips= families=IPv6 clusters=east,west.eu slices=Present east/IPv6[{api_east}] west.eu/IPv6[{api_west}]"
        ),
    );
}

/// A ServiceImport a bridge wrote before it applied them (created, then replaced, under its
/// field manager) is taken up as applied: what the bridge no longer wants goes (its `ips`, a
/// label no longer exported), and a label someone else put on stays.
#[test]
fn an_import_an_earlier_bridge_wrote_loses_what_is_no_longer_wanted() {
    let _module = common::module(module_path!());
    let k = import_cluster("198.19.224.0/19");
    linkerd_objects(&k);
    let (api_east, api_west) = (
        cluster_ip(&k, "shop", "api-east"),
        cluster_ip(&k, "shop", "api-west"),
    );
    k.kubectl_input(
        &["create", "--field-manager", "clusterset-dns-linkerd-bridge", "-f", "-"],
        "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\n\
         metadata: {name: api, namespace: shop, labels: {app.kubernetes.io/managed-by: linkerd-bridge.clusterset-dns.io, team: gone}}\n\
         spec: {type: ClusterSetIP, ips: [198.19.0.99], ports: [{name: http, port: 80, protocol: TCP}]}\n",
    )
    .unwrap();
    assert!(k.kubectl_ok(&["label", "serviceimport", "-n", "shop", "api", "theirs=kept"]));
    let bridge = Bridge::start(&k, &IMPORT_ARGS);
    settles(
        &k,
        &bridge,
        "shop",
        "api",
        &format!(
            "ClusterSetIP ips= families=IPv4 clusters=east,west.eu slices=Present east/IPv4[{api_east}] west.eu/IPv4[{api_west}]"
        ),
    );
    let si: Value = serde_json::from_str(&k.kubectl_out(&[
        "get",
        "serviceimport",
        "-n",
        "shop",
        "api",
        "-o",
        "json",
        "--show-managed-fields",
    ]))
    .unwrap();
    let labels = &si["metadata"]["labels"];
    assert!(labels.get("team").is_none(), "{labels}");
    assert_eq!(labels["theirs"], "kept", "{labels}");
    let records = si["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        records
            .iter()
            .any(|m| m["manager"] == "clusterset-dns-linkerd-bridge"
                && m["operation"] == "Apply"
                && m["subresource"].is_null()),
        "{records:?}"
    );
    assert!(
        !records
            .iter()
            .any(|m| m["manager"] == "clusterset-dns-linkerd-bridge" && m["operation"] == "Update"),
        "{records:?}"
    );
}

/// A headless Service this cluster exports (gateway mode: Linkerd's label
/// `mirror.linkerd.io/exported=true`) is in its own import with its own hosts, from its
/// EndpointSlices as Kubernetes' endpointslice controller writes them (the Service's labels
/// copied, `service.kubernetes.io/headless` added: k8s.io/endpointslice v0.37.2, utils.go
/// `setEndpointSliceLabels`); every endpoint with its conditions (the DNS server answers the
/// ready ones), and they follow the slices' changes.
#[test]
fn this_clusters_headless_export_imports_its_own_hosts() {
    let _module = common::module(module_path!());
    let k = import_cluster("198.19.224.0/19");
    let labels = "{mirror.linkerd.io/exported: 'true'}";
    k.apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: db, namespace: data, labels: {labels}}}\n\
         spec: {{clusterIP: None, selector: {{app: db}}, ports: [{{name: tcp, port: 5432, protocol: TCP}}]}}\n"
    ));
    // Its slice; and one of a headless Service not exported, which gives no import.
    let slice = |name: &str, service: &str, labels: &str, endpoints: &str| {
        k.apply(&format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {name}, namespace: data, labels: {{kubernetes.io/service-name: {service}, \
             endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io, service.kubernetes.io/headless: '', {labels}}}}}\n\
             addressType: IPv4\nports: [{{name: tcp, port: 5432, protocol: TCP}}]\nendpoints: {endpoints}\n"
        ));
    };
    let copied = labels.trim_matches(|c| c == '{' || c == '}');
    slice(
        "db-x1",
        "db",
        copied,
        "[{addresses: [198.18.96.10], hostname: db-0, conditions: {ready: true}}, \
         {addresses: [198.18.96.11], hostname: db-1}, \
         {addresses: [198.18.96.12], hostname: db-2, conditions: {ready: false}}]",
    );
    k.apply(
        "apiVersion: v1\nkind: Service\nmetadata: {name: cache, namespace: data}\n\
         spec: {clusterIP: None, selector: {app: cache}, ports: [{name: tcp, port: 6379, protocol: TCP}]}\n",
    );
    slice(
        "cache-x1",
        "cache",
        "app: cache",
        "[{addresses: [198.18.96.20], hostname: cache-0}]",
    );
    let bridge = Bridge::start(&k, &IMPORT_ARGS);
    settles(
        &k,
        &bridge,
        "data",
        "db",
        "Headless ips= families=IPv4 clusters=north slices=Present north/IPv4[db-0=198.18.96.10 db-1=198.18.96.11 db-2=198.18.96.12(not ready)]",
    );
    // A host becomes ready, one goes, one without a hostname comes.
    slice(
        "db-x1",
        "db",
        copied,
        "[{addresses: [198.18.96.10], hostname: db-0, conditions: {ready: false}}, \
         {addresses: [198.18.96.12], hostname: db-2, conditions: {ready: true}}, \
         {addresses: [198.18.96.13]}]",
    );
    settles(
        &k,
        &bridge,
        "data",
        "db",
        "Headless ips= families=IPv4 clusters=north slices=Present north/IPv4[198.18.96.13 db-0=198.18.96.10(not ready) db-2=198.18.96.12]",
    );
    assert_eq!(summary(&k, "data", "cache"), "none");
}

/// The answer does not depend on the path: the DNS server reading the bridge's ServiceImports
/// (`--source mcs`) answers as it does reading the Linkerd Services they came from
/// (`--source linkerd --linkerd-mirrors`), name by name and type by type, but for the SRV of a
/// port only one cluster exports, which only the bridge's per-cluster slices can send to that
/// cluster alone.
#[test]
fn the_answers_do_not_depend_on_the_path() {
    let _module = common::module(module_path!());
    let k = import_cluster("198.19.224.0/19");
    linkerd_objects(&k);
    // west exports api with port http at another number, and a port east has not: the
    // ports differ by cluster, on both paths.
    let http = "{name: http, protocol: TCP, port: 80, targetPort: 80}";
    k.apply(&mirror("shop", "api", "west", false).replace(
        &format!("ports: [{http}]"),
        "ports: [{name: http, protocol: TCP, port: 81, targetPort: 81}, {name: admin, protocol: TCP, port: 9990, targetPort: 9990}]",
    ));
    let bridge = Bridge::start(&k, &IMPORT_ARGS);
    settles(
        &k,
        &bridge,
        "data",
        "db",
        &format!(
            "Headless ips= families=IPv4 clusters=east slices=Present east/IPv4[db-0={} db-1={}]",
            cluster_ip(&k, "data", "db-0-east"),
            cluster_ip(&k, "data", "db-1-east")
        ),
    );
    settles(
        &k,
        &bridge,
        "shop",
        "api",
        &format!(
            "ClusterSetIP ips= families=IPv4 clusters=east,west.eu slices=Present east/IPv4[{}] west.eu/IPv4[{}]",
            cluster_ip(&k, "shop", "api-east"),
            cluster_ip(&k, "shop", "api-west")
        ),
    );
    let admin = k.kubeconfig("admin");
    let mcs = spawn_binary(&[
        "--kubeconfig",
        &admin,
        "--source",
        "mcs",
        "--cluster-id",
        "north",
    ]);
    let linkerd = spawn_binary(&[
        "--kubeconfig",
        &admin,
        "--source",
        "linkerd",
        "--linkerd-mirrors",
        "--linkerd-cluster-id",
        "west=west.eu",
        "--cluster-id",
        "north",
    ]);
    until("both ready", 30, || {
        common::ready(&mcs) && common::ready(&linkerd)
    });
    let (mut compared, mut empty) = (0, Vec::new());
    for (name, types) in [
        ("web.shop", &["A", "AAAA", "SRV", "TXT"][..]),
        ("_http._tcp.web.shop", &["SRV"][..]),
        ("api.shop", &["A", "AAAA", "SRV"][..]),
        ("_http._tcp.api.shop", &["SRV"][..]),
        ("_admin._tcp.api.shop", &["SRV"][..]),
        ("db.data", &["A", "AAAA", "SRV"][..]),
        ("_http._tcp.db.data", &["SRV"][..]),
        ("db-0.east.db.data", &["A", "AAAA"][..]),
        ("db-1.east.db.data", &["A"][..]),
        ("east.db.data", &["A"][..]),
        ("nothing.shop", &["A"][..]),
    ] {
        for t in types {
            let q = format!("{t} {name}.svc.clusterset.local");
            let answer = |s: &common::Running| {
                let out = common::dig(s.dns, &format!("+noall +answer +comments {q}"));
                let status = out
                    .lines()
                    .find_map(|l| l.split("status: ").nth(1))
                    .map(|s| s.split(',').next().unwrap_or_default().to_string())
                    .unwrap_or_default();
                let records: Vec<String> = out
                    .lines()
                    .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
                    .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                    .collect();
                (status, sorted(records))
            };
            let (a, b) = (answer(&mcs), answer(&linkerd));
            if q == "SRV _admin._tcp.api.shop.svc.clusterset.local" {
                // The one answer that differs, by design: only west exports admin. The
                // bridge's import has no clusterset IPs and a slice per cluster, so the port
                // leads to west's mirror alone (KEP-1645: a port goes only to the clusters
                // that expose it); --linkerd-mirrors serves the mirrors' ClusterIPs as one
                // import's ips, which cannot say which mirror has which port.
                let west = cluster_ip(&k, "shop", "api-west").replace('.', "-");
                assert_eq!(
                    a,
                    (
                        "NOERROR".to_string(),
                        vec![format!(
                            "_admin._tcp.api.shop.svc.clusterset.local. 5 IN SRV 0 100 9990 {west}.west.eu.api.shop.svc.clusterset.local."
                        )]
                    ),
                    "{q}: --source mcs"
                );
                assert_eq!(
                    b,
                    (
                        "NOERROR".to_string(),
                        vec![
                            "_admin._tcp.api.shop.svc.clusterset.local. 5 IN SRV 0 50 9990 api.shop.svc.clusterset.local."
                                .to_string()
                        ]
                    ),
                    "{q}: --source linkerd"
                );
            } else {
                assert_eq!(a, b, "{q}: --source mcs (left) vs --source linkerd (right)");
            }
            compared += 1;
            if a.1.is_empty() {
                empty.push(format!("{q} {}", a.0));
            }
        }
    }
    assert_eq!(compared, 19);
    // Equal and empty would prove nothing: only what an IPv4-only cluster set has no records
    // for is empty on both paths.
    assert_eq!(
        empty,
        [
            "AAAA web.shop.svc.clusterset.local NOERROR",
            "TXT web.shop.svc.clusterset.local NOERROR",
            "AAAA api.shop.svc.clusterset.local NOERROR",
            "AAAA db.data.svc.clusterset.local NOERROR",
            "AAAA db-0.east.db.data.svc.clusterset.local NOERROR",
            "A east.db.data.svc.clusterset.local NOERROR",
            "A nothing.shop.svc.clusterset.local NXDOMAIN",
        ]
    );
}
