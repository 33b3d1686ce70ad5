//! Two clusters export one service through `clusterset-dns linkerd-bridge`, on two real API
//! servers linked both ways as `linkerd multicluster link` links them (a Link and its
//! credentials Secret in `linkerd-multicluster`), with what Linkerd's service mirror writes
//! replayed between them: the MCS API's conflict rules hold, and every cluster agrees. Both
//! clusters' ServiceImports are equal (but for the ClusterSetIP each cluster has of its own) and
//! every export involved says `Conflict=True` with mcs-api's reason, for different port names,
//! one name with other ports, headlessness, exported labels and annotations; one export
//! withdrawn clears it. Each cluster's bridge takes its id from its ClusterProperty (no flags).
//!
//! What Linkerd's service mirror does is replayed by [`service_mirror`], from linkerd2
//! `version-2.20`, `multicluster/service-mirror/cluster_watcher.go`:
//! - a Service labelled `mirror.linkerd.io/federated=member` joins `<svc>-federated` in every
//!   linked cluster (`handleFederatedServiceJoin`) and, through the `-local-mirror` service
//!   mirror, in its own; the federated Service's labels, annotations and ports are its oldest
//!   member's, and "Always treat the local cluster as the oldest"; its members are in
//!   `multicluster.linkerd.io/remote-discovery: <svc>@<link>` and
//!   `multicluster.linkerd.io/local-discovery: <svc>`; a headless Service "cannot join
//!   federated service";
//! - labels are copied but those with the `mirror.linkerd.io/` prefix
//!   (`getCommonServiceLabels`), annotations are all copied (`getCommonServiceAnnotations`);
//! - a headless Service exported for remote discovery gets no mirror (the export half says so).

use crate::common;

use std::time::{Duration, Instant};

use common::k8s::Cluster;
use common::until;
use serde_json::{Value, json};

use crate::linkerd_bridge::Bridge;
use crate::linkerd_bridge_import::import_cluster;

/// Linkerd's remote-access ClusterRole (linkerd2 `version-2.20`,
/// `multicluster/charts/linkerd-multicluster/templates/remote-access-service-mirror-rbac.yaml`,
/// the rules the bridge's reads need), bound to the user a Link's credentials name.
const REMOTE_ACCESS: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: linkerd-service-mirror-remote-access-default}\n\
rules:\n- {apiGroups: [''], resources: [pods, endpoints, services], verbs: [list, get, watch]}\n\
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, get, watch]}\n\
---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: linkerd-service-mirror-remote-access-default}\n\
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: linkerd-service-mirror-remote-access-default}\n\
subjects:\n- {kind: User, name: linkerd-remote, apiGroup: rbac.authorization.k8s.io}\n";

/// A member of the set named `name`: the import cluster's objects, a ClusterProperty that
/// names it, and Linkerd's remote access for the other cluster's bridge.
pub(crate) fn member(name: &str, range: &str) -> Cluster {
    let k = import_cluster(range);
    k.apply(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/crds/clusterproperty.yaml"
        ))
        .unwrap(),
    );
    k.apply(REMOTE_ACCESS);
    k.apply(&format!(
        "apiVersion: about.k8s.io/v1alpha1\nkind: ClusterProperty\nmetadata: {{name: cluster.clusterset.k8s.io}}\nspec: {{value: {name}}}\n"
    ));
    k
}

/// In `from`, the Link to `to` (named `to_name`) and its credentials Secret, as
/// `linkerd multicluster link` writes them (`multicluster/cmd/link.go`): Secret
/// `cluster-credentials-<name>` of type `mirror.linkerd.io/remote-kubeconfig`, key `kubeconfig`.
pub(crate) fn link_to(from: &Cluster, to: &Cluster, to_name: &str) {
    link_with(from, to, to_name, "remotetoken");
}

/// [`link_to`], the credentials' user with `token`.
fn link_with(from: &Cluster, to: &Cluster, to_name: &str, token: &str) {
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {to_name}\n  cluster: {{server: \"https://127.0.0.1:{}\", insecure-skip-tls-verify: true}}\n\
         users:\n- name: remote\n  user: {{token: {token}}}\ncontexts:\n- name: {to_name}\n  context: {{cluster: {to_name}, user: remote}}\ncurrent-context: {to_name}\n",
        to.api_port
    );
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "mirror.linkerd.io/remote-kubeconfig",
        "metadata": {"name": format!("cluster-credentials-{to_name}"), "namespace": "linkerd-multicluster"},
        "stringData": {"kubeconfig": kubeconfig},
    });
    from.apply(&serde_json::to_string(&secret).unwrap());
    // The Link as `linkerd multicluster link --gateway=false` writes it (v1alpha3, the default
    // selectors of `multicluster/cmd/link.go`), so Linkerd's own service mirror can run on it.
    let link = json!({
        "apiVersion": "multicluster.linkerd.io/v1alpha3",
        "kind": "Link",
        "metadata": {"name": to_name, "namespace": "linkerd-multicluster"},
        "spec": {
            "targetClusterName": to_name,
            "targetClusterDomain": "cluster.local",
            "clusterCredentialsSecret": format!("cluster-credentials-{to_name}"),
            "selector": {"matchLabels": {"mirror.linkerd.io/exported": "true"}},
            "remoteDiscoverySelector": {"matchLabels": {"mirror.linkerd.io/exported": "remote-discovery"}},
            "federatedServiceSelector": {"matchLabels": {"mirror.linkerd.io/federated": "member"}},
        },
    });
    from.apply(&serde_json::to_string(&link).unwrap());
}

/// What the replay of Linkerd's service mirror needs of a cluster: an API server set up by
/// the test ([`Cluster`]) or a node of real components (the cluster set's).
pub(crate) trait Kube {
    fn kubectl(&self) -> std::process::Command;
    fn apply(&self, yaml: &str);
    fn delete(&self, kind: &str, ns: &str, name: &str);
}

impl<K: Kube + ?Sized> Kube for &K {
    fn kubectl(&self) -> std::process::Command {
        (**self).kubectl()
    }
    fn apply(&self, yaml: &str) {
        (**self).apply(yaml);
    }
    fn delete(&self, kind: &str, ns: &str, name: &str) {
        (**self).delete(kind, ns, name);
    }
}

impl Kube for Cluster {
    fn kubectl(&self) -> std::process::Command {
        Cluster::kubectl(self)
    }
    fn apply(&self, yaml: &str) {
        Cluster::apply(self, yaml);
    }
    fn delete(&self, kind: &str, ns: &str, name: &str) {
        Cluster::delete(self, kind, ns, name);
    }
}

pub(crate) fn get_json<K: Kube + ?Sized>(k: &K, args: &[&str]) -> Option<Value> {
    let out = k
        .kubectl()
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// The Services of `shop` in `k`, by name.
fn services<K: Kube + ?Sized>(k: &K) -> Vec<Value> {
    get_json(k, &["get", "services", "-n", "shop"])
        .and_then(|v| v["items"].as_array().cloned())
        .unwrap_or_default()
}

/// `svc`'s labels but Linkerd's own (`mirror.linkerd.io/…`), as Linkerd copies them.
fn copied_labels(svc: &Value) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    for (k, v) in svc["metadata"]["labels"].as_object().into_iter().flatten() {
        if !k.starts_with("mirror.linkerd.io/") {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

fn copied_annotations(svc: &Value) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    for (k, v) in svc["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if k != "kubectl.kubernetes.io/last-applied-configuration" {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

fn ports_of(svc: &Value) -> Value {
    Value::Array(
        svc["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| json!({"name": p["name"], "port": p["port"], "protocol": p["protocol"]}))
            .collect(),
    )
}

/// What Linkerd's service mirrors write in each cluster for the exported Services of both
/// (see the module's doc): `<svc>-federated` from the members, local first; gone with the last.
pub(crate) fn service_mirror<K: Kube>(set: &[(&str, &K); 2]) {
    let all: Vec<Vec<Value>> = set.iter().map(|(_, k)| services(k)).collect();
    let federated_member = |s: &Value| {
        s["metadata"]["labels"]["mirror.linkerd.io/federated"] == "member"
            && s["spec"]["clusterIP"] != "None"
            && s["metadata"]["labels"]["mirror.linkerd.io/mirrored-service"].is_null()
    };
    for (i, (_, here)) in set.iter().enumerate() {
        let (there_name, there) = (set[1 - i].0, &all[1 - i]);
        let mine = &all[i];
        let mut names: Vec<&str> = mine
            .iter()
            .chain(there.iter())
            .filter(|s| federated_member(s))
            .filter_map(|s| s["metadata"]["name"].as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        let find = |list: &[Value], name: &str| {
            list.iter()
                .find(|s| s["metadata"]["name"] == name && federated_member(s))
                .cloned()
        };
        let mut items = Vec::new();
        for name in &names {
            let (local, remote) = (find(mine, name), find(there, name));
            // Always treat the local cluster as the oldest.
            let oldest = local.as_ref().or(remote.as_ref()).unwrap();
            let mut labels = copied_labels(oldest);
            labels.insert("mirror.linkerd.io/mirrored-service".into(), "true".into());
            let mut annotations = copied_annotations(oldest);
            if remote.is_some() {
                annotations.insert(
                    "multicluster.linkerd.io/remote-discovery".into(),
                    format!("{name}@{there_name}").into(),
                );
            }
            if local.is_some() {
                annotations.insert(
                    "multicluster.linkerd.io/local-discovery".into(),
                    (*name).into(),
                );
            }
            items.push(json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": format!("{name}-federated"), "namespace": "shop", "labels": labels, "annotations": annotations},
                "spec": {"ports": ports_of(oldest)},
            }));
        }
        // The other cluster's remote-discovery exports: a mirror `<svc>-<link>` each, its labels
        // and annotations copied and its ports (`getMirrorServiceLabels`, `...Annotations`); a
        // headless one gets none.
        let remote_discovery = |s: &Value| {
            s["metadata"]["labels"]["mirror.linkerd.io/exported"] == "remote-discovery"
                && s["spec"]["clusterIP"] != "None"
                && s["metadata"]["labels"]["mirror.linkerd.io/mirrored-service"].is_null()
        };
        let mut mirrors = Vec::new();
        for svc in there.iter().filter(|s| remote_discovery(s)) {
            let name = svc["metadata"]["name"].as_str().unwrap_or_default();
            let mut labels = copied_labels(svc);
            labels.insert("mirror.linkerd.io/mirrored-service".into(), "true".into());
            labels.insert("mirror.linkerd.io/cluster-name".into(), there_name.into());
            let mut annotations = copied_annotations(svc);
            annotations.insert(
                "mirror.linkerd.io/remote-svc-fq-name".into(),
                format!("{name}.shop.svc.cluster.local").into(),
            );
            mirrors.push(format!("{name}-{there_name}"));
            items.push(json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": format!("{name}-{there_name}"), "namespace": "shop", "labels": labels, "annotations": annotations},
                "spec": {"ports": ports_of(svc)},
            }));
        }
        if !items.is_empty() {
            let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
            here.apply(&serde_json::to_string(&list).unwrap());
        }
        for s in mine {
            let name = s["metadata"]["name"].as_str().unwrap_or_default();
            if s["metadata"]["labels"]["mirror.linkerd.io/cluster-name"] == there_name
                && !mirrors.iter().any(|m| m == name)
            {
                here.delete("service", "shop", name);
            }
        }
        // The last member gone: the federated Service goes.
        for s in mine {
            let name = s["metadata"]["name"].as_str().unwrap_or_default();
            if let Some(svc) = name.strip_suffix("-federated")
                && !s["metadata"]["labels"]["mirror.linkerd.io/mirrored-service"].is_null()
                && !names.contains(&svc)
            {
                here.delete("service", "shop", name);
            }
        }
    }
}

/// The ServiceImport `name` of `k` as the MCS API promises it the same everywhere: its type,
/// ports, the carried fields, labels but the bridge's own, annotations, and `status.clusters`
/// (not its `ips`: each cluster's ClusterSetIP is its own). "none" when there is none.
fn import_of(k: &Cluster, name: &str) -> String {
    let Some(mut si) = get_json(k, &["get", "serviceimport", "-n", "shop", name]) else {
        return "none".into();
    };
    let spec = si["spec"].as_object_mut().unwrap();
    spec.remove("ips");
    spec.remove("ipFamilies");
    let mut labels = si["metadata"]["labels"].clone();
    if let Some(l) = labels.as_object_mut() {
        l.remove("app.kubernetes.io/managed-by");
    }
    format!(
        "{} labels={} annotations={} clusters={}",
        si["spec"], labels, si["metadata"]["annotations"], si["status"]["clusters"]
    )
}

/// The ServiceExport `name`'s Conflict condition in `k`: `Status/Reason`, and its message.
fn conflict(k: &Cluster, name: &str) -> (String, String) {
    let se = get_json(k, &["get", "serviceexport", "-n", "shop", name]).unwrap_or_default();
    se["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Conflict")
        .map(|c| {
            (
                format!(
                    "{}/{}",
                    c["status"].as_str().unwrap_or(""),
                    c["reason"].as_str().unwrap_or("")
                ),
                c["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_default()
}

/// A Service `name` in `shop` with `ports` (`name:port/PROTO`), headless if asked, and its
/// ServiceExport with `export_spec` (YAML flow mapping).
pub(crate) fn export(k: &Cluster, name: &str, ports: &[&str], headless: bool, export_spec: &str) {
    export_as(k, name, ports, headless, export_spec, "");
}

/// [`export`], with the ServiceExport's mode annotation `mode` unless it is empty.
fn export_as(
    k: &Cluster,
    name: &str,
    ports: &[&str],
    headless: bool,
    export_spec: &str,
    mode: &str,
) {
    let mode = if mode.is_empty() {
        String::new()
    } else {
        format!(", annotations: {{linkerd-bridge.clusterset-dns.io/mode: {mode}}}")
    };
    let ports: Vec<String> = ports
        .iter()
        .map(|p| {
            let (n, rest) = p.split_once(':').unwrap();
            let (port, proto) = rest.split_once('/').unwrap();
            format!("{{name: {n}, port: {port}, protocol: {proto}}}")
        })
        .collect();
    let cluster_ip = if headless { "clusterIP: None, " } else { "" };
    k.apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: shop}}\nspec: {{{cluster_ip}selector: {{app: {name}}}, ports: [{}]}}\n\
         ---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {{name: {name}, namespace: shop{mode}}}\nspec: {export_spec}\n",
        ports.join(", ")
    ));
}

/// What each case ends as, in both clusters: the Conflict both exports say, and a piece of the
/// import both clusters hold.
struct Case {
    name: &'static str,
    conflict: &'static str,
    import_has: &'static [&'static str],
}

const CASES: [Case; 6] = [
    Case {
        name: "names",
        conflict: "True/PortConflict",
        import_has: &[
            r#""ports":[{"name":"stcp","port":142,"protocol":"SCTP"},{"name":"tcp","port":42,"protocol":"TCP"},{"name":"udp","port":42,"protocol":"UDP"}]"#,
            r#"clusters=[{"cluster":"east"},{"cluster":"west"}]"#,
        ],
    },
    Case {
        name: "numbers",
        conflict: "True/PortConflict",
        import_has: &[
            r#""ports":[{"name":"tcp","port":42,"protocol":"TCP"}]"#,
            r#"clusters=[{"cluster":"east"},{"cluster":"west"}]"#,
        ],
    },
    Case {
        name: "kinds",
        conflict: "True/TypeConflict",
        import_has: &[
            r#""type":"ClusterSetIP""#,
            r#"clusters=[{"cluster":"east"}]"#,
        ],
    },
    Case {
        name: "labels",
        conflict: "True/LabelsConflict",
        import_has: &[
            r#"labels={"team":"a"}"#,
            r#"clusters=[{"cluster":"east"},{"cluster":"west"}]"#,
        ],
    },
    Case {
        name: "notes",
        conflict: "True/AnnotationsConflict",
        import_has: &[r#"annotations={"owner":"a"}"#],
    },
    // Exported for remote discovery (a mirror per cluster, no federated Service): each
    // cluster's import has its own export too, and the union.
    Case {
        name: "mirrors",
        conflict: "True/PortConflict",
        import_has: &[
            r#""ports":[{"name":"admin","port":9990,"protocol":"TCP"},{"name":"http","port":80,"protocol":"TCP"}]"#,
            r#"clusters=[{"cluster":"east"},{"cluster":"west"}]"#,
        ],
    },
];

/// Waits, replaying Linkerd's service mirror meanwhile, until every case holds in both
/// clusters: equal imports that contain what the case says, and its Conflict on each export.
fn settles(set: &[(&str, &Cluster); 2], bridges: &[Bridge; 2], cases: &[Case]) -> Duration {
    let start = Instant::now();
    let last = std::cell::RefCell::new(String::new());
    common::until(
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
            let mut wrong = Vec::new();
            for c in cases {
                let (e, w) = (import_of(set[0].1, c.name), import_of(set[1].1, c.name));
                if e != w || !c.import_has.iter().all(|h| e.contains(h)) {
                    wrong.push(format!("{}: east {e}\n  west {w}", c.name));
                }
                for (cluster, k) in set {
                    let (have, message) = conflict(k, c.name);
                    if have != c.conflict {
                        wrong.push(format!("{}: {cluster}'s export {have}: {message}", c.name));
                    }
                }
            }
            *last.borrow_mut() = wrong.join("\n");
            wrong.is_empty()
        },
    );
    start.elapsed()
}

/// Every cluster agrees: for each way two exports can differ, both clusters' ServiceImports are
/// equal and have the oldest export's choice, and both exports say Conflict; one export
/// withdrawn, the other's conflict clears and both imports have it alone.
#[test]
fn two_clusters_exporting_one_service_agree_and_both_say_conflict() {
    let _module = common::module(module_path!());
    let (east, west) = (
        member("east", "198.18.32.0/20"),
        member("west", "198.18.48.0/20"),
    );
    link_to(&east, &west, "west");
    link_to(&west, &east, "east");
    let bridges = [
        Bridge::start(&east, &["--resync", "5s"]),
        Bridge::start(&west, &["--resync", "5s"]),
    ];
    let set = [("east", &east), ("west", &west)];
    if hold_if_asked(&set, &bridges) {
        return;
    }
    // East exports first; west a second later (the creation times are in whole seconds).
    export(&east, "names", &["tcp:42/TCP", "udp:42/UDP"], false, "{}");
    export(&east, "numbers", &["tcp:42/TCP"], false, "{}");
    export(&east, "kinds", &["http:80/TCP"], false, "{}");
    export(
        &east,
        "labels",
        &["http:80/TCP"],
        false,
        "{exportedLabels: {team: a}}",
    );
    export(
        &east,
        "notes",
        &["http:80/TCP"],
        false,
        "{exportedAnnotations: {owner: a}}",
    );
    // Exported for remote discovery: Linkerd mirrors it, no federated Service.
    let rd = "remote-discovery";
    export_as(&east, "mirrors", &["http:80/TCP"], false, "{}", rd);
    std::thread::sleep(Duration::from_millis(1_100));
    let second = Instant::now();
    export(
        &west,
        "names",
        &["tcp:42/TCP", "stcp:142/SCTP"],
        false,
        "{}",
    );
    export(&west, "numbers", &["tcp:43/TCP"], false, "{}");
    export(&west, "kinds", &["http:80/TCP"], true, "{}");
    export(
        &west,
        "labels",
        &["http:80/TCP"],
        false,
        "{exportedLabels: {team: b}}",
    );
    export(
        &west,
        "notes",
        &["http:80/TCP"],
        false,
        "{exportedAnnotations: {owner: b}}",
    );
    let ports = ["http:80/TCP", "admin:9990/TCP"];
    export_as(&west, "mirrors", &ports, false, "{}", rd);
    settles(&set, &bridges, &CASES);
    eprintln!(
        "every case agreed in both clusters, Conflict on every export, {:.1} s after the second exports",
        second.elapsed().as_secs_f64()
    );
    // Each bridge reads the other's exports, and knows its own id, as its metrics say.
    for b in &bridges {
        let scrape = b.admin("/metrics").1;
        assert_eq!(
            common::metric_in(
                &scrape,
                r#"clusterset_dns_bridge_linked_clusters{state="read"}"#
            ),
            1.0,
            "{scrape}"
        );
        assert_eq!(
            common::metric_in(&scrape, "clusterset_dns_bridge_cluster_id_known"),
            1.0
        );
    }
    // One label write per export: each bridge labelled each of its five Services once.
    for (b, cluster) in bridges.iter().zip(["east", "west"]) {
        let log = b.log();
        for c in &CASES {
            let writes = log
                .lines()
                .filter(|l| {
                    l.contains("Service labelled for Linkerd")
                        && l.contains(&format!("name=\"{}\"", c.name))
                })
                .count();
            assert_eq!(
                writes, 1,
                "{cluster}'s {}: {writes} label writes\n{log}",
                c.name
            );
        }
    }
    // The messages say what differs, in which cluster.
    let (_, m) = conflict(&east, "numbers");
    assert!(
        m.contains("cluster west (Service shop/numbers in cluster west) has ports [tcp:43/TCP], this one [tcp:42/TCP]"),
        "{m}"
    );
    let (_, m) = conflict(&west, "kinds");
    assert!(
        m.contains("cluster east") && m.contains("is not headless, this one headless"),
        "{m}"
    );

    // West withdraws its labelled export: east's says no conflict, naming what it read, and
    // both imports are east's alone.
    west.delete("serviceexport", "shop", "labels");
    until("west's bridge to take its labels off", 20, || {
        services(&west).iter().any(|s| {
            s["metadata"]["name"] == "labels"
                && s["metadata"]["labels"]["mirror.linkerd.io/federated"].is_null()
        })
    });
    let withdrawn = [Case {
        name: "labels",
        conflict: "False/NoConflicts",
        import_has: &[r#"labels={"team":"a"}"#, r#"clusters=[{"cluster":"east"}]"#],
    }];
    let set_east = |k: &Cluster| conflict(k, "labels");
    let started = Instant::now();
    common::until(
        common::wait::Lazy(|| {
            format!(
                "east {:?}\nimports east {} west {}\neast's bridge:\n{}",
                set_east(&east),
                import_of(&east, "labels"),
                import_of(&west, "labels"),
                bridges[0].log()
            )
        }),
        30,
        || {
            service_mirror(&set);
            let (e, w) = (import_of(&east, "labels"), import_of(&west, "labels"));
            set_east(&east).0 == withdrawn[0].conflict
                && e == w
                && withdrawn[0].import_has.iter().all(|h| e.contains(h))
        },
    );
    eprintln!(
        "withdrawn: east's Conflict cleared and both imports east's alone in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let (_, m) = set_east(&east);
    assert!(
        m.contains("no other cluster exports this service (read the exports of west)"),
        "{m}"
    );
    // The other cases still hold.
    settles(&set, &bridges, &CASES[..3]);
}

/// A Link's token rotated (`linkerd multicluster link` run again, a new ServiceAccount token in
/// its credentials Secret) and the old one revoked: once the watch of the linked cluster fails,
/// the bridge reads the Secret again and reads that cluster with the new token, without a
/// restart, and sees the changes made there since.
#[test]
fn a_link_whose_token_is_rotated_is_read_with_the_new_one() {
    let _module = common::module(module_path!());
    let (east, mut west) = (
        member("east", "198.18.64.0/20"),
        member("west", "198.18.80.0/20"),
    );
    // Two ServiceAccounts of Linkerd's remote access in west, the old token's and the new's.
    west.apply(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: remote-old, namespace: linkerd-multicluster}\n---\n\
         apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: remote-new, namespace: linkerd-multicluster}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: linkerd-remote-access-tokens}\n\
         roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: linkerd-service-mirror-remote-access-default}\n\
         subjects:\n- {kind: ServiceAccount, name: remote-old, namespace: linkerd-multicluster}\n\
         - {kind: ServiceAccount, name: remote-new, namespace: linkerd-multicluster}\n",
    );
    let token = |sa: &str| {
        west.kubectl_out(&["create", "token", sa, "-n", "linkerd-multicluster"])
            .trim()
            .to_string()
    };
    let (old, new) = (token("remote-old"), token("remote-new"));
    link_with(&east, &west, "west", &old);
    let bridge = Bridge::start(&east, &["--resync", "5s"]);
    // West exports `turn` (Linkerd's label) on another port than east: east's export says so,
    // read with the old token.
    let west_turn = |west: &Cluster, port: u16| {
        west.apply(&format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: turn, namespace: shop, labels: {{mirror.linkerd.io/federated: member}}}}\n\
             spec: {{selector: {{app: turn}}, ports: [{{name: tcp, port: {port}, protocol: TCP}}]}}\n"
        ));
    };
    west_turn(&west, 43);
    export(&east, "turn", &["tcp:42/TCP"], false, "{}");
    // The Conflict east's export says, with west's exports read.
    let says = |want: &str| {
        common::until(
            common::wait::Lazy(|| {
                format!(
                    "east's export of turn to say {want}: {:?}\neast's bridge:\n{}",
                    conflict(&east, "turn"),
                    bridge.log()
                )
            }),
            30,
            || {
                let (have, message) = conflict(&east, "turn");
                have == want && !message.contains("cannot be read")
            },
        )
    };
    says("True/PortConflict");
    // The token rotated: the Secret has the new one, the old one's ServiceAccount is deleted
    // (its tokens are refused from then on), and west's API server restarts, which ends the
    // watch the old token opened.
    link_with(&east, &west, "west", &new);
    west.delete("serviceaccount", "linkerd-multicluster", "remote-old");
    west.kill_api();
    west.start_api();
    // West now exports `turn` as east does: east's export says no conflict, read with the new
    // token.
    west_turn(&west, 42);
    let took = says("False/NoConflicts");
    eprintln!(
        "west's change, made once its API server was back, seen through the new token in {:.1} s",
        took.as_secs_f64()
    );
    let log = bridge.log();
    assert!(
        log.contains("the Link's credentials were replaced"),
        "{log}"
    );
    assert_eq!(
        common::metric_in(
            &bridge.admin("/metrics").1,
            r#"clusterset_dns_bridge_linked_clusters{state="read"}"#
        ),
        1.0
    );
}

/// With `LINKERD_SET_KEEP=<minutes>` (tests/linkerd-set-up.sh), the two linked clusters and
/// their bridges are left running, without the replay of Linkerd's service mirror, for Linkerd's
/// own service mirror and the MCS conformance suite to be run against them by hand: a
/// kubeconfig with the contexts `east` and `west` is written and printed, with the commands;
/// the set goes when the stop file is removed or the minutes are over. Without it, false at once.
fn hold_if_asked(set: &[(&str, &Cluster); 2], bridges: &[Bridge; 2]) -> bool {
    let Ok(minutes) = std::env::var("LINKERD_SET_KEEP") else {
        return false;
    };
    let minutes: u64 = minutes
        .parse()
        .unwrap_or_else(|_| panic!("LINKERD_SET_KEEP={minutes:?}: give whole minutes"));
    let dir = set[0].1.dir.path();
    let kubeconfig = dir.join("linkerd-set.kubeconfig");
    let mut yaml = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (name, k) in set {
        yaml += &format!(
            "- name: {name}\n  cluster: {{server: \"https://127.0.0.1:{}\", insecure-skip-tls-verify: true}}\n",
            k.api_port
        );
    }
    yaml += "users:\n- name: admin\n  user: {token: admintoken}\ncontexts:\n";
    for (name, _) in set {
        yaml += &format!("- name: {name}\n  context: {{cluster: {name}, user: admin}}\n");
    }
    yaml += "current-context: east\n";
    std::fs::write(&kubeconfig, yaml).unwrap();
    let mut per_context = Vec::new();
    for (name, k) in set {
        let one = dir.join(format!("{name}.admin.kubeconfig"));
        std::fs::copy(k.kubeconfig("admin"), &one).unwrap();
        per_context.push((name, one));
    }
    let stop = dir.join("running");
    std::fs::write(&stop, "remove this file to tear the set down\n").unwrap();
    let kc = kubeconfig.display();
    let mut say = String::from(
        "\nThe linked set is up: two API servers, each with the linkerd-bridge (both halves, its id from\n\
         its ClusterProperty), a Link to the other and its credentials Secret in linkerd-multicluster.\n\
         Nothing replays Linkerd's service mirror here: run Linkerd's own, built from its source\n\
         (controller service-mirror), one per Link and one -local-mirror per cluster:\n",
    );
    for ((name, one), (other, _)) in per_context.iter().zip(set.iter().rev()) {
        say += &format!(
            "  HOSTNAME={name}-{other} controller service-mirror -kubeconfig {} -namespace linkerd-multicluster -enable-headless-services -metrics-addr 127.0.0.1:0 {other}\n\
             \x20 HOSTNAME={name}-local controller service-mirror -kubeconfig {} -namespace linkerd-multicluster -local-mirror -metrics-addr 127.0.0.1:0\n",
            one.display(),
            one.display()
        );
    }
    say += &format!(
        "kubectl --kubeconfig {kc} --context east|west …\n\
         the MCS conformance suite: conformance.test -kubeconfig {kc} -contexts east,west\n\
         bridge logs: {} and {}\n\
         Tear it down: rm {} (or it goes in {minutes} minutes).\n",
        bridges[0].log_path().display(),
        bridges[1].log_path().display(),
        stop.display()
    );
    eprintln!("{say}");
    let until_at = Instant::now() + Duration::from_secs(minutes * 60);
    while stop.exists() && Instant::now() < until_at {
        std::thread::sleep(Duration::from_secs(1));
    }
    true
}
