//! The linkerd-bridge as the cluster set's MCS implementation, in the set of real components of
//! `clusterset` (a node each with kubelet, containerd and kube-proxy, pod networks routed to each
//! other), without the MCS API's controller and the test syncer: in each cluster the chart with
//! both bridge halves (its cluster id from the ClusterProperty), a Link to the other cluster
//! whose credentials are a token of Linkerd's remote-access ServiceAccount (its chart's
//! ClusterRole), and Linkerd's service mirror replayed (its federated Services, as
//! linkerd_bridge_conflicts.rs replays them). No pod is meshed: a client pod in east opens real
//! TCP connections through `<svc>.shop.svc.clusterset.local`, which our server answers with
//! the import's address (Linkerd's federated ClusterIP), and kube-proxy routes to the exporting
//! clusters' pods because the bridge's twins of its slices name that Service (the chart's
//! default). Needs root.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::Steps;
use common::node::repo;
use common::until;
use serde_json::json;

use crate::clusterset::members::{Member, hold_if_asked, install_chart, start_pair};
use crate::linkerd_bridge_conflicts::{Kube, get_json, service_mirror};

impl Kube for Member {
    fn kubectl(&self) -> std::process::Command {
        self.node.kubectl_cmd()
    }
    fn apply(&self, yaml: &str) {
        self.node.apply(yaml);
    }
    fn delete(&self, kind: &str, ns: &str, name: &str) {
        self.node.k(&[
            "delete",
            kind,
            "-n",
            ns,
            name,
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
}

/// Linkerd's remote-access ServiceAccount and ClusterRole (linkerd2 `version-2.20`,
/// `multicluster/charts/linkerd-multicluster/templates/remote-access-service-mirror-rbac.yaml`:
/// the rules the bridge's reads need), whose token a Link's credentials in the other cluster
/// hold.
const REMOTE_ACCESS: &str = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: linkerd-service-mirror-remote-access-default, namespace: linkerd-multicluster}\n\
---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: linkerd-service-mirror-remote-access-default}\n\
rules:\n- {apiGroups: [''], resources: [pods, endpoints, services], verbs: [list, get, watch]}\n\
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, get, watch]}\n\
---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: linkerd-service-mirror-remote-access-default}\n\
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: linkerd-service-mirror-remote-access-default}\n\
subjects:\n- {kind: ServiceAccount, name: linkerd-service-mirror-remote-access-default, namespace: linkerd-multicluster}\n";

/// One member: the MCS CRDs of deploy/crds, Linkerd's Link CRD, the ClusterProperty naming it,
/// Linkerd's remote access, and the chart with both bridge halves (the addresses of
/// 198.18.111.0/24 refused) behind CoreDNS.
fn member_setup(m: &Member) {
    let node = &m.node;
    let crds = repo().join("deploy/crds");
    node.install_crds(
        &[
            crds.join("multicluster.x-k8s.io_serviceimports.yaml"),
            crds.join("multicluster.x-k8s.io_serviceexports.yaml"),
            crds.join("clusterproperty.yaml"),
            repo().join("tests/k8s/crds/linkerd-links.yaml"),
        ],
        &[
            "serviceimports.multicluster.x-k8s.io",
            "serviceexports.multicluster.x-k8s.io",
            "clusterproperties.about.k8s.io",
            "links.multicluster.linkerd.io",
        ],
    );
    node.apply(&format!(
        "apiVersion: about.k8s.io/v1alpha1\nkind: ClusterProperty\nmetadata: {{name: cluster.clusterset.k8s.io}}\nspec: {{value: {}}}\n\
         ---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n\
         ---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: demo}}\n\
         ---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: linkerd-multicluster}}\n",
        m.name()
    ));
    node.apply(REMOTE_ACCESS);
    let sets = [
        "linkerdBridge.enabled=true",
        "hardening.denyCidrs={198.18.111.0/24}",
    ];
    install_chart(node, &sets);
}

/// In `from`, the Link to `to` and its credentials Secret as `linkerd multicluster link
/// --gateway=false` writes them (`multicluster/cmd/link.go`): the server at `to`'s node
/// address, the user a token of `to`'s remote-access ServiceAccount.
fn link(from: &Member, to: &Member) {
    let token = to.node.k(&[
        "-n",
        "linkerd-multicluster",
        "create",
        "token",
        "linkerd-service-mirror-remote-access-default",
        "--duration=2h",
    ]);
    let target = to.name();
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {target}\n  cluster: {{server: \"https://{}:6443\", insecure-skip-tls-verify: true}}\n\
         users:\n- name: remote\n  user: {{token: {}}}\ncontexts:\n- name: {target}\n  context: {{cluster: {target}, user: remote}}\ncurrent-context: {target}\n",
        to.node.net.node_ip,
        token.trim()
    );
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "mirror.linkerd.io/remote-kubeconfig",
            "metadata": {"name": format!("cluster-credentials-{target}"), "namespace": "linkerd-multicluster"},
            "stringData": {"kubeconfig": kubeconfig},
        },
        {
            "apiVersion": "multicluster.linkerd.io/v1alpha3",
            "kind": "Link",
            "metadata": {"name": target, "namespace": "linkerd-multicluster"},
            "spec": {
                "targetClusterName": target,
                "targetClusterDomain": "cluster.local",
                "clusterCredentialsSecret": format!("cluster-credentials-{target}"),
                "selector": {"matchLabels": {"mirror.linkerd.io/exported": "true"}},
                "remoteDiscoverySelector": {"matchLabels": {"mirror.linkerd.io/exported": "remote-discovery"}},
                "federatedServiceSelector": {"matchLabels": {"mirror.linkerd.io/federated": "member"}},
            },
        },
    ]});
    from.node.apply(&objects.to_string());
}

/// `m`'s workloads in shop: web (`replicas` pods answering `<pod> <cluster>` on port 80), and in
/// west the headless db; a client pod in demo, in no mesh.
fn workloads(m: &Member, replicas: usize) {
    let cluster = m.name();
    let serve = |name: &str| {
        format!(
            "metadata: {{labels: {{app: {name}}}}}\n    spec:\n      terminationGracePeriodSeconds: 0\n      containers:\n      \
             - {{name: {name}, image: clusterset-dns-test/client:1, imagePullPolicy: Never, command: [serve, '80', {cluster}], ports: [{{containerPort: 80}}]}}\n"
        )
    };
    let mut yaml = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: shop}}\n\
         spec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    {}\
         ---\napiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: shop}}\n\
         spec: {{selector: {{app: web}}, ports: [{{name: http, port: 80, protocol: TCP}}]}}\n\
         ---\napiVersion: v1\nkind: Pod\nmetadata: {{name: client, namespace: demo}}\n\
         spec:\n  terminationGracePeriodSeconds: 0\n  containers:\n  \
         - {{name: client, image: clusterset-dns-test/client:1, imagePullPolicy: Never, command: [sleep, infinity]}}\n",
        serve("web")
    );
    if cluster == "west" {
        yaml += &format!(
            "---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: db, namespace: shop}}\n\
             spec:\n  serviceName: db\n  replicas: 1\n  selector: {{matchLabels: {{app: db}}}}\n  template:\n    {}\
             ---\napiVersion: v1\nkind: Service\nmetadata: {{name: db, namespace: shop}}\n\
             spec: {{clusterIP: None, selector: {{app: db}}, ports: [{{name: http, port: 80, protocol: TCP}}]}}\n",
            serve("db")
        );
    }
    m.node.apply(&yaml);
}

fn export(m: &Member, name: &str) {
    m.node.apply(&format!(
        "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {{name: {name}, namespace: shop}}\n"
    ));
}

/// The pods of `app` in shop: (name, IP), sorted.
fn pods(m: &Member, app: &str) -> Vec<(String, String)> {
    let out = m.node.k(&[
        "-n",
        "shop",
        "get",
        "pods",
        "-l",
        &format!("app={app}"),
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.status.podIP}{\"\\n\"}{end}",
    ]);
    let mut v: Vec<(String, String)> = (out.lines())
        .filter_map(|l| l.split_once(' '))
        .map(|(n, ip)| (n.to_string(), ip.to_string()))
        .collect();
    v.sort();
    v
}

/// The addresses of the slices of `k` that `selector` selects in shop, sorted.
fn addresses(m: &Member, selector: &str) -> Vec<String> {
    let list = get_json(m, &["get", "endpointslices", "-n", "shop", "-l", selector]);
    let mut v: Vec<String> = (list.iter())
        .flat_map(|l| l["items"].as_array().cloned().unwrap_or_default())
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    v.sort();
    v
}

/// Who `n` connections from east's client to `name` reached (`<pod> <cluster>` each; a failed
/// one is left out).
fn reached(east: &Member, name: &str, n: usize) -> Vec<String> {
    reached_on(east, name, 80, n)
}

/// [`reached`] on `port`.
fn reached_on(east: &Member, name: &str, port: u16, n: usize) -> Vec<String> {
    (0..n).filter_map(|_| east.connect_to(name, port)).collect()
}

/// With `CLUSTERSET_KEEP=<minutes>` (`tests/clusterset-up.sh --bridge`), the set is left
/// running for a hand run of the MCS API's conformance suite: Linkerd's real service mirror
/// instead of the test's replay (`LINKERD_CONTROLLER`, linkerd2's `controller` binary built from
/// its source: `service-mirror` for the Link with `-enable-headless-services`, and one
/// `-local-mirror`, in each cluster), the stand-ins of the suite's pod images
/// (tests/mcs/conformance-images.sh) in both nodes, and web exported from west to show the set
/// works. Returns true once the set was held (see [`hold_if_asked`]); false at once without it.
fn keep_for_a_hand_run(east: &mut Member, west: &mut Member) -> bool {
    if std::env::var("CLUSTERSET_KEEP").is_err() {
        return false;
    }
    let controller = std::env::var("LINKERD_CONTROLLER").unwrap_or_else(|_| {
        panic!("CLUSTERSET_KEEP with the bridge: give LINKERD_CONTROLLER=<linkerd2's controller binary>, whose service mirror writes Linkerd's objects here")
    });
    let images = common::node::setup("tests/mcs/conformance-images.sh");
    for m in [&*east, &*west] {
        for tar in ["socat.tar", "netshoot.tar"] {
            let out = m
                .node
                .ctr(&["images", "import", images.join(tar).to_str().unwrap()]);
            assert!(
                out.status.success(),
                "ctr import {tar}: {}",
                common::output_text(&out)
            );
        }
    }
    // Stopped with the node's other processes when the test ends.
    for (m, other) in [(&mut *east, "west"), (&mut *west, "east")] {
        let kubeconfig = m.node.path("admin.kubeconfig");
        // Through env: the mirror takes its Lease identity from HOSTNAME, as a pod has it.
        let args = |metrics: &str, more: &[&str]| -> Vec<String> {
            let mut a = vec![
                format!("HOSTNAME={}-{metrics}", m.name()),
                controller.clone(),
                "service-mirror".to_string(),
                format!("-kubeconfig={kubeconfig}"),
                "-namespace=linkerd-multicluster".into(),
                format!("-metrics-addr=127.0.0.1:{metrics}"),
            ];
            a.extend(more.iter().map(|m| m.to_string()));
            a
        };
        let (link, local) = (
            args("9998", &["-enable-headless-services", other]),
            args("9997", &["-local-mirror"]),
        );
        let bin = std::path::Path::new("/usr/bin/env");
        m.node.spawn("linkerd-service-mirror", bin, &link);
        m.node.spawn("linkerd-local-mirror", bin, &local);
    }
    export(west, "web");
    until(
        "east's client connects to web through Linkerd's own mirror",
        Duration::from_secs(120),
        || east.connect("web.shop.svc.clusterset.local").is_some(),
    );
    hold_if_asked(east, west, "web.shop.svc.clusterset.local")
}

#[test]
fn the_bridge_routes_clients_outside_the_mesh_to_every_exporting_clusters_pods() {
    let _module = common::module(module_path!());
    let mut steps = Steps::default();

    steps.next("0. two clusters from real components, joined");
    let (mut east, mut west) = start_pair();

    steps.next("1. in each: the CRDs, Linkerd's remote access, the chart with both bridge halves; Links both ways");
    member_setup(&east);
    member_setup(&west);
    link(&east, &west);
    link(&west, &east);
    workloads(&east, 1);
    workloads(&west, 2);
    east.node.rollout("shop", "deployment/web");
    west.node.rollout("shop", "deployment/web");
    west.node.rollout("shop", "statefulset/db");
    east.node.wait_ready("client");
    if keep_for_a_hand_run(&mut east, &mut west) {
        return;
    }
    let set = [("east", &east), ("west", &west)];
    let mirror = || service_mirror(&set);
    let bridge_log = |m: &Member| {
        m.node.kubectl_text(&[
            "-n",
            "clusterset-dns",
            "logs",
            "deployment/clusterset-dns-linkerd-bridge",
            "--tail=40",
        ])
    };

    steps.next("2. west exports web: east's client, in no mesh, reaches every west pod by name");
    let web = "web.shop.svc.clusterset.local";
    export(&west, "web");
    let west_web: BTreeSet<String> = (pods(&west, "web").into_iter())
        .map(|(n, _)| format!("{n} west"))
        .collect();
    let started = Instant::now();
    until(
        common::wait::Lazy(|| format!("{}\n{}", bridge_log(&east), bridge_log(&west))),
        Duration::from_secs(120),
        || {
            mirror();
            east.connect(web).is_some()
        },
    );
    eprintln!(
        "west exported web -> east's client connected through its name: {:.1?}",
        started.elapsed()
    );
    // The name is the import's address, Linkerd's federated ClusterIP in east.
    let federated = east.node.k(&[
        "-n",
        "shop",
        "get",
        "service",
        "web-federated",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    assert_eq!(east.resolve(web), std::slice::from_ref(&federated));
    let seen: BTreeSet<String> = reached(&east, web, 30).into_iter().collect();
    assert_eq!(seen, west_web, "every west pod of web reached from east");
    // East's MCS slice of west's web holds what west's own slices say.
    let mut west_ips: Vec<String> = pods(&west, "web").into_iter().map(|p| p.1).collect();
    west_ips.sort();
    assert_eq!(addresses(&west, "kubernetes.io/service-name=web"), west_ips);
    assert_eq!(
        addresses(
            &east,
            "multicluster.kubernetes.io/service-name=web,multicluster.kubernetes.io/source-cluster=west"
        ),
        west_ips
    );

    steps.next("3. east exports web too: connections reach both clusters' pods");
    export(&east, "web");
    let east_web: BTreeSet<String> = (pods(&east, "web").into_iter())
        .map(|(n, _)| format!("{n} east"))
        .collect();
    let both: BTreeSet<String> = west_web.union(&east_web).cloned().collect();
    let mut seen = BTreeSet::new();
    until(
        "connections reach east's pod and west's",
        Duration::from_secs(90),
        || {
            mirror();
            seen.extend(reached(&east, web, 5));
            seen == both
        },
    );

    steps.next("4. west withdraws: within seconds no new connection reaches west");
    west.node
        .k(&["-n", "shop", "delete", "serviceexport", "web"]);
    let withdrawn = Instant::now();
    until(
        "ten connections in a row reach east alone",
        Duration::from_secs(60),
        || {
            mirror();
            let r = reached(&east, web, 10);
            r.len() == 10 && r.iter().all(|w| w.ends_with(" east"))
        },
    );
    let took = withdrawn.elapsed();
    eprintln!("west withdrew web -> east's connections reach east alone: {took:.1?}");
    let after = reached(&east, web, 20);
    assert!(
        after.len() == 20 && after.iter().all(|w| east_web.contains(w)),
        "{after:?}"
    );

    steps.next("5. headless db from west: east resolves db-0.west and connects to it");
    export(&west, "db");
    let (db_pod, db_ip) = pods(&west, "db").remove(0);
    let host = "db-0.west.db.shop.svc.clusterset.local";
    until(
        common::wait::Lazy(|| bridge_log(&east)),
        Duration::from_secs(90),
        || {
            mirror();
            east.resolve(host) == [db_ip.clone()]
        },
    );
    assert_eq!(
        east.resolve("db.shop.svc.clusterset.local"),
        std::slice::from_ref(&db_ip)
    );
    assert_eq!(east.connect(host), Some(format!("{db_pod} west")));

    steps.next("6. an address no slice may hold: left out of east's slice, the pod beside it kept, the refusal said");
    // A Service without a selector whose slice (written as a user writes one, with the label
    // the export half gives the Service) holds a west pod, Alibaba's metadata address and one
    // of the chart's hardening.denyCidrs.
    let pod_ip = &west_ips[0];
    west.node.apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: odd, namespace: shop}}\n\
         spec: {{ports: [{{name: http, port: 80, protocol: TCP}}]}}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: odd-1, namespace: shop, labels: \
         {{kubernetes.io/service-name: odd, endpointslice.kubernetes.io/managed-by: test, mirror.linkerd.io/federated: member}}}}\n\
         addressType: IPv4\nports: [{{name: http, port: 80, protocol: TCP}}]\n\
         endpoints: [{{addresses: [{pod_ip}]}}, {{addresses: [100.100.100.200]}}, {{addresses: [198.18.111.5]}}]\n"
    ));
    export(&west, "odd");
    let odd_from_west = "multicluster.kubernetes.io/service-name=odd,multicluster.kubernetes.io/source-cluster=west";
    until(
        common::wait::Lazy(|| bridge_log(&east)),
        Duration::from_secs(90),
        || {
            mirror();
            addresses(&east, odd_from_west) == [pod_ip.clone()]
        },
    );
    let events = || {
        east.node.k(&[
            "-n",
            "shop",
            "get",
            "events",
            "--field-selector",
            "reason=AddressRefused,involvedObject.name=odd",
            "-o",
            "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
        ])
    };
    until(
        "the refusal said on east's import",
        Duration::from_secs(30),
        || {
            let e = events();
            e.contains("100.100.100.200 (metadata)") && e.contains("198.18.111.5 (denied)")
        },
    );
    // And the name reaches the pod through kube-proxy.
    assert_eq!(
        east.connect("odd.shop.svc.clusterset.local")
            .map(|w| w.ends_with(" west")),
        Some(true)
    );

    steps.next("7. a port only west exports: missing from east's federated Service, carried by the bridge's Service at its address; east's client reaches west on it");
    // Linkerd writes east's federated Service from east's own member (web: http 80); west's
    // web now has alt 8080 too, and exports again.
    // West's web with port alt (to its pods' 80) beside http.
    let web_with_alt = |port: u16| {
        west.node.apply(&format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: shop}}\n\
             spec: {{selector: {{app: web}}, ports: [{{name: http, port: 80, protocol: TCP}}, {{name: alt, port: {port}, protocol: TCP, targetPort: 80}}]}}\n"
        ));
    };
    web_with_alt(8080);
    export(&west, "web");
    until(
        common::wait::Lazy(|| bridge_log(&east)),
        Duration::from_secs(90),
        || {
            mirror();
            east.connect_to(web, 8080).is_some()
        },
    );
    let ports_service = get_json(
        &east,
        &["get", "service", "-n", "shop", "web-federated-ports"],
    )
    .expect("the bridge's Service for port alt");
    assert_eq!(ports_service["spec"]["externalIPs"], json!([federated]));
    assert_eq!(
        ports_service["spec"]["ports"][0]["port"],
        json!(8080),
        "{ports_service}"
    );
    assert_eq!(
        (ports_service["spec"]["ports"].as_array().map(Vec::len)),
        Some(1),
        "only the port the federated Service lacks: {ports_service}"
    );
    // Port 8080 is west's alone; port 80 still reaches both clusters.
    let on_alt = reached_on(&east, web, 8080, 10);
    assert!(
        on_alt.len() == 10 && on_alt.iter().all(|w| west_web.contains(w)),
        "{on_alt:?}"
    );
    let mut seen = BTreeSet::new();
    until(
        "port 80 reaches east's pod and west's",
        Duration::from_secs(60),
        || {
            seen.extend(reached(&east, web, 5));
            seen == both
        },
    );
    // West moves alt to 8081: the bridge's Service is changed (patched, not created), and then
    // left alone; no other writer of the bridge's takes its labels (the export half applies
    // its own on Services).
    web_with_alt(8081);
    until(
        common::wait::Lazy(|| bridge_log(&east)),
        Duration::from_secs(90),
        || {
            mirror();
            east.connect_to(web, 8081).is_some()
        },
    );
    let version = || {
        east.node.k(&[
            "-n",
            "shop",
            "get",
            "service",
            "web-federated-ports",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
    };
    let settled = version();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        version(),
        settled,
        "the bridge's Service is written again and again"
    );

    steps.next("8. routeOutsideMesh=false in east: the twins and the bridge's Service go, and only a meshed client could reach web");
    let routed = || {
        let slices = get_json(
            &east,
            &[
                "get",
                "endpointslices",
                "-n",
                "shop",
                "-l",
                "linkerd-bridge.clusterset-dns.io/serviceimport=web",
            ],
        );
        (slices.iter())
            .flat_map(|l| l["items"].as_array().cloned().unwrap_or_default())
            .count()
    };
    // Until now, the twins naming the federated Service of east's slice and of west's, and
    // that of west's naming the bridge's Service (only west has port alt).
    assert_eq!(routed(), 3);
    let chart = repo().join("deploy/helm/clusterset-dns");
    east.node.helm(
        "clusterset-dns",
        &[
            "upgrade",
            "clusterset-dns",
            chart.to_str().unwrap(),
            "--namespace",
            "clusterset-dns",
            "--reuse-values",
            "--set",
            "linkerdBridge.import.routeOutsideMesh=false",
            "--wait",
            "--timeout",
            "180s",
        ],
    );
    until(
        common::wait::Lazy(|| bridge_log(&east)),
        Duration::from_secs(90),
        || {
            routed() == 0
                && get_json(
                    &east,
                    &[
                        "get",
                        "service",
                        "-n",
                        "shop",
                        "-l",
                        "linkerd-bridge.clusterset-dns.io/serviceimport",
                    ],
                )
                .is_some_and(|l| l["items"].as_array().is_some_and(Vec::is_empty))
        },
    );
    // The import and its answer stay; kube-proxy has no endpoint for the address now.
    assert_eq!(east.resolve(web), std::slice::from_ref(&federated));
    until(
        "web unreachable from east's client",
        Duration::from_secs(30),
        || reached(&east, web, 3).is_empty(),
    );
}
