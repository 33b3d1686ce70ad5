//! Status any MCS implementation can be watched by (deploy/monitoring/mcs), with the real tools:
//! promtool checks the alerts and runs their unit tests (each alert made to fire, and kept
//! quiet); the PrometheusRule holds rules.yaml's groups; the dashboard is well-formed. Then a real
//! kube-state-metrics (v2.20.0, tests/kube-state-metrics/setup.sh) with kube-state-metrics.yaml
//! runs, its configuration as shipped, against each of six real API servers, each holding the
//! ServiceExports and ServiceImports of other implementations on the CRDs those serve: the
//! linkerd-bridge's in `west`; in `east` those of the two-cluster test's export syncer
//! (tests/mcs/infra/syncer, on the MCS API's own CRDs, which serve two versions) next to an
//! import an implementation left behind and one as Cilium marks unusable; in `south`, on CRDs
//! that serve v1alpha1 alone, Cilium 1.18's exports; in `cilium19` and `cilium20` Cilium 1.19's
//! and 1.20's exports and imports; in `north`, on the CRDs Lighthouse pins, Lighthouse 0.15's
//! exports, its import and the ServiceImports it keeps for itself, and 0.14's and 0.19's beside
//! them. Every series is there with the labels the objects give, in each version served; a real
//! Prometheus scraping them all fires exactly the alerts the objects call for, keeps a conflict
//! firing through a change of its reasons, and drops one when its export is fixed; every
//! dashboard query returns data; the chart's and kustomize's objects pass the API server's
//! strict validation.

use crate::common;
use crate::monitoring::{alerts_checked, dry_run, laid_out, operator_crds, repo};

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::grafana::{dashboard, queries};
use common::k8s::{Cluster, free_port};
use common::node::setup;
use common::prometheus::Prometheus;
use common::{output_text, until};
use serde_json::Value;

#[test]
fn mcs_alerts_pass_promtool_and_each_fires_and_stays_quiet_in_its_unit_tests() {
    let _module = common::module(module_path!());
    let alerts = alerts_checked(
        "deploy/monitoring/mcs/rules.yaml",
        "deploy/monitoring/mcs/rules-test.yaml",
        "deploy/monitoring/mcs/prometheusrule.yaml",
    );
    assert_eq!(
        alerts,
        BTreeSet::from(
            [
                "MCSServiceExportConflict",
                "MCSServiceExportNotServing",
                "MCSServiceImportNoClusters",
                "MCSServiceImportNotReady",
            ]
            .map(String::from)
        )
    );
}

#[test]
fn the_mcs_dashboard_is_well_formed_grafana_json() {
    let _module = common::module(module_path!());
    let d = dashboard(&repo("deploy/monitoring/mcs/dashboard.json"));
    assert_eq!(d["uid"], "multicluster-services");
    assert_eq!(d["title"], "Multi-cluster services");
    for (title, expr) in laid_out(&d, &["datasource", "job", "cluster", "namespace"]) {
        // Every selector of the configuration's series takes the three variables.
        for sel in expr.split("kube_service").skip(1) {
            assert!(
                sel.contains("job=~\"$job\",cluster=~\"$cluster\",namespace=~\"$namespace\""),
                "{title}: {expr}"
            );
        }
    }
}

/// kube-state-metrics with deploy/monitoring/mcs's configuration as it ships, as user
/// kube-state-metrics (bound to deploy/monitoring/mcs/clusterrole.yaml and nothing else); its
/// metrics address.
fn kube_state_metrics(k: &Cluster) -> (common::Killed, SocketAddr) {
    let bin = setup("tests/kube-state-metrics/setup.sh").join("bin/kube-state-metrics");
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let file = repo("deploy/monitoring/mcs/kube-state-metrics.yaml");
    let child = Command::new(bin)
        .args(["--kubeconfig", &k.kubeconfig("kube-state-metrics")])
        .arg("--custom-resource-state-only")
        .arg(format!(
            "--custom-resource-state-config-file={}",
            file.display()
        ))
        .args(["--host", "127.0.0.1", "--port", &metrics.port().to_string()])
        .args(["--telemetry-host", "127.0.0.1"])
        .args(["--telemetry-port", &free_port().to_string()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(k.dir.path().join("kube-state-metrics.log")).unwrap())
        .spawn()
        .unwrap();
    (common::Killed(child), metrics)
}

/// The ClusterRole kube-state-metrics is given, bound to its user.
fn ksm_rbac() -> String {
    std::fs::read_to_string(repo("deploy/monitoring/mcs/clusterrole.yaml")).unwrap()
        + "\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: kube-state-metrics-test}\n\
           roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kube-state-metrics-multicluster-services}\n\
           subjects:\n- {kind: User, name: kube-state-metrics, apiGroup: rbac.authorization.k8s.io}\n"
}

/// The series of the configuration in kube-state-metrics' exposition `text`, each as
/// `name{labels sorted} value`, without the `customresource_group` and `_kind` labels every series
/// carries.
fn series_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if !line.starts_with("kube_service") {
            continue;
        }
        let (name, rest) = line.split_once('{').expect("labelled series");
        let (labels, value) = rest
            .rsplit_once("} ")
            .unwrap_or_else(|| panic!("not a series: {line}"));
        // Written as Go writes a float (1.764925430e+09); here as a number, 1764925430.
        let value: f64 = value.parse().unwrap();
        // An empty label is no label, to Prometheus; of kube-state-metrics' own, the version
        // read is kept.
        // Split between labels, not inside a value (a reason may join several by commas).
        let mut pairs = Vec::new();
        let (mut start, mut quoted, mut escaped) = (0, false, false);
        for (i, c) in labels.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => quoted = !quoted,
                ',' if !quoted => {
                    pairs.push(&labels[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        pairs.push(&labels[start..]);
        let mut kept: Vec<&str> = pairs
            .into_iter()
            .filter(|l| {
                (!l.starts_with("customresource_") || l.starts_with("customresource_version="))
                    && !l.ends_with("=\"\"")
            })
            .collect();
        kept.sort();
        out.insert(format!("{name}{{{}}} {value}", kept.join(",")));
    }
    out
}

/// One series as [`series_in`] writes it.
fn series(name: &str, labels: &[(&str, &Value)], value: f64) -> String {
    // An empty label is no label (Lighthouse's empty reasons).
    let mut labels: Vec<String> = labels
        .iter()
        .filter(|(_, v)| v.as_str() != Some(""))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    labels.sort();
    format!("{name}{{{}}} {value}", labels.join(","))
}

/// The series the MCS objects in `k` call for, by the configuration's rules, in the form of
/// [`series_in`]: from the objects themselves, whoever wrote them, once in each version their
/// CRD serves.
fn series_of(k: &Cluster) -> BTreeSet<String> {
    let get = |what: &str| -> Value {
        let out = k
            .kubectl()
            .arg("get")
            .args(what.split_whitespace())
            .args(["-o", "json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", output_text(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let mut out = BTreeSet::new();
    for (kind, prefix) in [
        ("serviceexport", "kube_serviceexport"),
        ("serviceimport", "kube_serviceimport"),
    ] {
        let crd = get(&format!(
            "customresourcedefinition/{kind}s.multicluster.x-k8s.io"
        ));
        let served = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["served"] == true)
            .map(|v| v["name"].as_str().unwrap().to_string());
        for version in served {
            let read_as = Value::from(version.clone());
            let mut listed = get(&format!("{kind}s.{version}.multicluster.x-k8s.io -A"));
            let listed = listed["items"].take();
            for o in listed.as_array().unwrap() {
                let m = &o["metadata"];
                let mut who = vec![
                    ("namespace", &m["namespace"]),
                    (kind, &m["name"]),
                    ("customresource_version", &read_as),
                ];
                if kind == "serviceimport" {
                    who.push(("type", &o["spec"]["type"]));
                    let own = &m["labels"]["lighthouse.submariner.io/sourceNamespace"];
                    if own.is_string() {
                        who.push(("label_lighthouse_source_namespace", own));
                    }
                    let own = &m["annotations"]["lighthouse.submariner.io/sourceNamespace"];
                    if own.is_string() {
                        who.push(("annotation_lighthouse_source_namespace", own));
                    }
                }
                let created: k8s_openapi::jiff::Timestamp =
                    m["creationTimestamp"].as_str().unwrap().parse().unwrap();
                out.insert(series(
                    &format!("{prefix}_created"),
                    &who,
                    created.as_second() as f64,
                ));
                for c in o["status"]["conditions"].as_array().into_iter().flatten() {
                    let mut labels = who.clone();
                    labels.extend([
                        ("condition", &c["type"]),
                        ("status", &c["status"]),
                        ("reason", &c["reason"]),
                    ]);
                    let value = f64::from(u8::from(c["status"] == "True"));
                    out.insert(series(
                        &format!("{prefix}_status_condition"),
                        &labels,
                        value,
                    ));
                }
                for c in o["status"]["clusters"].as_array().into_iter().flatten() {
                    let mut labels = who.clone();
                    labels.push(("source_cluster", &c["cluster"]));
                    out.insert(series(&format!("{prefix}_status_cluster"), &labels, 1.0));
                }
            }
        }
    }
    out
}

/// Writes `status` (JSON) on `kind`/`name` in `ns` of `k`, as an implementation does.
fn set_status(k: &Cluster, kind: &str, ns: &str, name: &str, status: &str) {
    let out = k
        .kubectl()
        .args([
            "-n",
            ns,
            "patch",
            kind,
            name,
            "--subresource=status",
            "--type=merge",
        ])
        .arg("-p")
        .arg(format!("{{\"status\": {status}}}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{kind} {ns}/{name}: {}",
        output_text(&out)
    );
}

/// Conditions as an implementation writes them: `(type, status, reason)`.
fn conditions(cs: &[(&str, &str, &str)]) -> String {
    let c: Vec<String> = cs
        .iter()
        .map(|(t, s, r)| {
            format!(
                "{{\"type\": \"{t}\", \"status\": \"{s}\", \"reason\": \"{r}\", \"message\": \"as written\", \"lastTransitionTime\": \"2026-12-01T00:00:00Z\"}}"
            )
        })
        .collect();
    format!("[{}]", c.join(", "))
}

/// The `(alertname, cluster, object)` of every alert of `state` in Prometheus.
async fn alerts(prom: &Prometheus, state: &str) -> BTreeSet<(String, String, String)> {
    let q = format!("ALERTS{{alertstate=\"{state}\"}}");
    let mut out = BTreeSet::new();
    for r in prom.results(&q).await.unwrap_or_default() {
        let m = &r["metric"];
        let object = m["serviceexport"]
            .as_str()
            .or(m["serviceimport"].as_str())
            .unwrap_or("");
        out.insert((
            m["alertname"].as_str().unwrap().to_string(),
            m["cluster"].as_str().unwrap_or("").to_string(),
            format!("{}/{object}", m["namespace"].as_str().unwrap_or("")),
        ));
    }
    out
}

/// Waits up to a minute until the alerts firing in Prometheus are exactly `want`.
async fn firing_settles(prom: &Prometheus, want: &BTreeSet<(String, String, String)>, what: &str) {
    let mut firing = BTreeSet::new();
    for _ in 0..60 {
        firing = alerts(prom, "firing").await;
        if &firing == want {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(&firing, want, "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_state_metrics_exports_both_implementations_status_and_the_alerts_and_dashboard_work()
{
    let _module = common::module(module_path!());
    let crds = crate::linkerd_bridge::CRDS;
    let read = |p: String| std::fs::read_to_string(p).unwrap();

    // west: the linkerd-bridge, both halves, on deploy/crds. web is exported here and mirrored
    // from east with another port (a conflict); late is an ExternalName Service (not valid);
    // cart is only mirrored from east.
    let west = Cluster::start();
    for crd in ["serviceexports", "serviceimports"] {
        west.apply(&read(format!("{crds}/multicluster.x-k8s.io_{crd}.yaml")));
    }
    west.apply(&read(
        repo("tests/k8s/crds/linkerd-links.yaml")
            .display()
            .to_string(),
    ));
    west.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n");
    west.apply(&crate::linkerd_bridge::bridge_rbac());
    west.apply(&ksm_rbac());
    let mirror = |name: &str, port: u16| {
        format!(
            "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}-east\n  namespace: shop\n  \
             labels: {{mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east}}\n  \
             annotations: {{mirror.linkerd.io/remote-svc-fq-name: {name}.shop.svc.cluster.local}}\n\
             spec: {{ports: [{{name: http, protocol: TCP, port: {port}}}]}}\n"
        )
    };
    west.apply(
        &("apiVersion: multicluster.linkerd.io/v1alpha3\nkind: Link\nmetadata: {name: east, namespace: shop}\nspec: {targetClusterName: east}\n\
           ---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec: {ports: [{name: http, protocol: TCP, port: 80}]}\n\
           ---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {name: web, namespace: shop}\n\
           ---\napiVersion: v1\nkind: Service\nmetadata: {name: late, namespace: shop}\nspec: {type: ExternalName, externalName: db.example.org}\n\
           ---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {name: late, namespace: shop}\n"
            .to_string()
            + &mirror("web", 8080)
            + &mirror("cart", 80)),
    );
    let _bridge = crate::linkerd_bridge::Bridge::start(&west, &["--cluster-id", "west"]);

    // east: the MCS API's own CRDs (v0.5.2) and the export syncer; api is exported, with a
    // Service's EndpointSlice to copy; old is an import that an implementation no longer there
    // left with no status.
    let mcs = setup("tests/mcs/setup.sh");
    let east = Cluster::start();
    for crd in ["serviceexports", "serviceimports"] {
        east.apply(&read(
            mcs.join(format!("crds/multicluster.x-k8s.io_{crd}.yaml"))
                .display()
                .to_string(),
        ));
    }
    east.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n");
    east.apply(&ksm_rbac());
    east.apply(
        "apiVersion: v1\nkind: Service\nmetadata: {name: api, namespace: shop}\nspec: {ports: [{name: http, protocol: TCP, port: 80}]}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: api-1, namespace: shop, labels: {kubernetes.io/service-name: api}}\n\
         addressType: IPv4\nendpoints: [{addresses: [198.18.4.1], conditions: {ready: true}}]\nports: [{name: http, protocol: TCP, port: 80}]\n\
         ---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {name: api, namespace: shop}\n\
         ---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: old, namespace: shop}\n\
         spec: {type: ClusterSetIP, ports: [{name: http, protocol: TCP, port: 80}]}\n",
    );
    let _syncer = common::Killed(
        Command::new(mcs.join("bin/syncer"))
            .arg(format!("--cluster=east={}", east.kubeconfig("admin")))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(east.dir.path().join("syncer.log")).unwrap())
            .spawn()
            .unwrap(),
    );

    // Each implementation's objects as the test knows they must turn out.
    until(
        "the bridge's conflict on web, and cart's import",
        60,
        || {
            let s = series_of(&west);
            s.contains("kube_serviceexport_status_condition{condition=\"Conflict\",customresource_version=\"v1beta1\",namespace=\"shop\",reason=\"PortConflict\",serviceexport=\"web\",status=\"True\"} 1")
            && s.contains("kube_serviceexport_status_condition{condition=\"Valid\",customresource_version=\"v1beta1\",namespace=\"shop\",reason=\"InvalidServiceType\",serviceexport=\"late\",status=\"False\"} 0")
            && s.contains("kube_serviceimport_status_cluster{customresource_version=\"v1beta1\",namespace=\"shop\",serviceimport=\"cart\",source_cluster=\"east\",type=\"ClusterSetIP\"} 1")
        },
    );
    until("the syncer's import of api", 60, || {
        series_of(&east).contains("kube_serviceimport_status_cluster{customresource_version=\"v1beta1\",namespace=\"shop\",serviceimport=\"api\",source_cluster=\"east\",type=\"ClusterSetIP\"} 1")
    });

    // east also holds an import as Cilium 1.19 and later write one that names a cluster but
    // cannot be used here (serviceimport_controller.go@f5eb641b: Ready False,
    // IPFamilyNotSupported).
    east.apply(
        "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: v6, namespace: shop}\n\
         spec: {type: ClusterSetIP, ports: [{name: http, protocol: TCP, port: 80}]}\n",
    );
    set_status(
        &east,
        "serviceimport",
        "shop",
        "v6",
        &format!(
            "{{\"clusters\": [{{\"cluster\": \"south\"}}], \"conditions\": {}}}",
            conditions(&[("Ready", "False", "IPFamilyNotSupported")])
        ),
    );

    // A cluster whose MCS CRDs are those of the MCS API at `version`, fetched by
    // tests/mcs/setup.sh, with kube-state-metrics' role and the `namespaces`.
    let cluster_at = |version: &str, namespaces: &[&str]| {
        let k = Cluster::start();
        for crd in ["serviceexports", "serviceimports"] {
            k.apply(&read(
                // The module's own version's are in crds/.
                mcs.join(match version {
                    "v0.5.2" => format!("crds/multicluster.x-k8s.io_{crd}.yaml"),
                    _ => format!("crds-{version}/multicluster.x-k8s.io_{crd}.yaml"),
                })
                .display()
                .to_string(),
            ));
        }
        k.apply(&ksm_rbac());
        for ns in namespaces {
            k.apply(&format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"
            ));
        }
        k
    };
    let v1alpha1 = "apiVersion: multicluster.x-k8s.io/v1alpha1";

    // south: CRDs that serve v1alpha1 alone (the MCS API's v0.3.0, as Cilium 1.18 serves
    // them), with objects as Cilium 1.18 writes them (serviceimport_controller.go@c4898256:
    // api valid and in conflict, Ready False with reason Ready; ext an ExternalName Service's;
    // web clean).
    let south = cluster_at("v0.3.0", &["shop"]);
    south.apply(&format!(
        "{v1alpha1}\nkind: ServiceExport\nmetadata: {{name: api, namespace: shop}}\n---\n\
         {v1alpha1}\nkind: ServiceExport\nmetadata: {{name: ext, namespace: shop}}\n---\n\
         {v1alpha1}\nkind: ServiceExport\nmetadata: {{name: web, namespace: shop}}\n---\n\
         {v1alpha1}\nkind: ServiceImport\nmetadata: {{name: web, namespace: shop}}\n\
         spec: {{type: ClusterSetIP, ports: [{{name: http, protocol: TCP, port: 80}}]}}\n"
    ));
    for (name, cs) in [
        (
            "api",
            vec![
                ("Valid", "True", "Valid"),
                ("Conflict", "True", "Conflict"),
                ("Ready", "False", "Ready"),
            ],
        ),
        ("ext", vec![("Valid", "False", "ServiceType")]),
        (
            "web",
            vec![("Valid", "True", "Valid"), ("Ready", "True", "Ready")],
        ),
    ] {
        set_status(
            &south,
            "serviceexport",
            "shop",
            name,
            &format!("{{\"conditions\": {}}}", conditions(&cs)),
        );
    }
    set_status(
        &south,
        "serviceimport",
        "shop",
        "web",
        "{\"clusters\": [{\"cluster\": \"south\"}, {\"cluster\": \"north\"}]}",
    );

    // north: Submariner Lighthouse 0.15 on the MCS API's v0.1.0 CRDs, the version it pins
    // (pkg/agent/controller@17efac8): Valid True with an empty reason; readiness as Synced (web
    // synced; api failing to export, its message the error); db synced and in a ports conflict;
    // the cluster set's import of web in the service's namespace, and the ServiceImports it
    // keeps for itself: a per-cluster record in its namespace, labelled sourceNamespace, and
    // the broker's aggregate, annotated so, neither naming a cluster.
    let north = cluster_at(
        "v0.1.0",
        &["shop", "submariner-operator", "submariner-k8s-broker"],
    );
    north.apply(&format!(
        "{v1alpha1}\nkind: ServiceExport\nmetadata: {{name: web, namespace: shop}}\n---\n\
         {v1alpha1}\nkind: ServiceExport\nmetadata: {{name: api, namespace: shop}}\n---\n\
         {v1alpha1}\nkind: ServiceExport\nmetadata: {{name: db, namespace: shop}}\n---\n\
         {v1alpha1}\nkind: ServiceImport\nmetadata: {{name: web, namespace: shop}}\n\
         spec: {{type: ClusterSetIP, ports: [{{name: http, protocol: TCP, port: 80}}]}}\n---\n\
         {v1alpha1}\nkind: ServiceImport\nmetadata:\n  name: web-shop-north\n  namespace: submariner-operator\n  \
         labels: {{multicluster.kubernetes.io/service-name: web, lighthouse.submariner.io/sourceNamespace: shop, multicluster.kubernetes.io/source-cluster: north}}\n\
         spec: {{type: ClusterSetIP, ports: [{{name: http, protocol: TCP, port: 80}}]}}\n---\n\
         {v1alpha1}\nkind: ServiceImport\nmetadata:\n  name: web-shop\n  namespace: submariner-k8s-broker\n  \
         annotations: {{multicluster.kubernetes.io/service-name: web, lighthouse.submariner.io/sourceNamespace: shop}}\n\
         spec: {{type: ClusterSetIP, ports: [{{name: http, protocol: TCP, port: 80}}]}}\n"
    ));
    for (name, cs) in [
        ("web", vec![("Valid", "True", ""), ("Synced", "True", "")]),
        (
            "api",
            vec![("Valid", "True", ""), ("Synced", "False", "ExportFailed")],
        ),
        (
            "db",
            vec![
                ("Valid", "True", ""),
                ("Synced", "True", ""),
                ("Conflict", "True", "ConflictingPorts"),
            ],
        ),
    ] {
        set_status(
            &north,
            "serviceexport",
            "shop",
            name,
            &format!("{{\"conditions\": {}}}", conditions(&cs)),
        );
    }
    set_status(
        &north,
        "serviceimport",
        "shop",
        "web",
        "{\"clusters\": [{\"cluster\": \"north\"}]}",
    );

    // north also holds Lighthouse's objects before 0.15 and from 0.16 (same CRDs: every release
    // pins the MCS API's v0.1.0), each in a namespace of its own. lh14 as v0.14.9 writes them
    // (pkg/agent/controller/agent.go@437a4c2): Valid and Synced, no Conflict, and only its
    // per-cluster records <svc>-<ns>-<cluster> in its namespace, labelled with their source,
    // one with a cluster and one without. lh19 as devel@9d3c39e (0.19) writes them
    // (pkg/agent/controller/service_export_client.go): Ready for Synced, one Conflict whose
    // reasons are joined by commas, False with an empty reason once clear.
    north.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: lh14}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: lh19}\n");
    let exports = |ns: &str, names: &[&str]| -> String {
        names
            .iter()
            .map(|n| format!("---\n{v1alpha1}\nkind: ServiceExport\nmetadata: {{name: {n}, namespace: {ns}}}\n"))
            .collect()
    };
    north.apply(&format!(
        "{}{}---\n{v1alpha1}\nkind: ServiceImport\nmetadata: {{name: web, namespace: lh19}}\n\
         spec: {{type: ClusterSetIP, ports: [{{name: http, protocol: TCP, port: 80}}]}}\n---\n\
         {v1alpha1}\nkind: ServiceImport\nmetadata:\n  name: web-lh14-north\n  namespace: submariner-operator\n  \
         labels: {{lighthouse.submariner.io/sourceName: web, lighthouse.submariner.io/sourceNamespace: lh14, lighthouse.submariner.io/sourceCluster: north}}\n  \
         annotations: {{origin-name: web, origin-namespace: lh14}}\n\
         spec: {{type: ClusterSetIP, ips: [198.19.142.7], ports: [{{name: http, protocol: TCP, port: 80}}]}}\n---\n\
         {v1alpha1}\nkind: ServiceImport\nmetadata:\n  name: web-lh14-south\n  namespace: submariner-operator\n  \
         labels: {{lighthouse.submariner.io/sourceName: web, lighthouse.submariner.io/sourceNamespace: lh14, lighthouse.submariner.io/sourceCluster: south}}\n  \
         annotations: {{origin-name: web, origin-namespace: lh14}}\n\
         spec: {{type: ClusterSetIP, ips: [198.19.142.8], ports: [{{name: http, protocol: TCP, port: 80}}]}}\n",
        exports("lh14", &["web", "api"]),
        exports("lh19", &["web", "api", "db", "ok"]),
    ));
    set_status(
        &north,
        "serviceimport",
        "submariner-operator",
        "web-lh14-north",
        "{\"clusters\": [{\"cluster\": \"north\"}]}",
    );
    set_status(
        &north,
        "serviceimport",
        "lh19",
        "web",
        "{\"clusters\": [{\"cluster\": \"north\"}, {\"cluster\": \"south\"}]}",
    );
    for (ns, name, cs) in [
        (
            "lh14",
            "web",
            vec![("Valid", "True", ""), ("Synced", "True", "")],
        ),
        (
            "lh14",
            "api",
            vec![("Valid", "True", ""), ("Synced", "False", "AwaitingSync")],
        ),
        (
            "lh19",
            "web",
            vec![("Valid", "True", ""), ("Ready", "True", "")],
        ),
        (
            "lh19",
            "api",
            vec![("Valid", "True", ""), ("Ready", "False", "AwaitingExport")],
        ),
        (
            "lh19",
            "db",
            vec![
                ("Valid", "True", ""),
                ("Ready", "True", ""),
                (
                    "Conflict",
                    "True",
                    "ConflictingPorts,ConflictingSessionAffinity",
                ),
            ],
        ),
        (
            "lh19",
            "ok",
            vec![
                ("Valid", "True", ""),
                ("Ready", "True", ""),
                ("Conflict", "False", ""),
            ],
        ),
    ] {
        set_status(
            &north,
            "serviceexport",
            ns,
            name,
            &format!("{{\"conditions\": {}}}", conditions(&cs)),
        );
    }

    // cilium19: the CRDs Cilium 1.19.3's operator installs (the MCS API at the pseudo-version
    // its go.mod pins: v1alpha1 alone, with ServiceImport conditions), objects as
    // serviceimport_controller.go@f5eb641b writes them: api valid, ready and in a ports
    // conflict (its first reason); ext not valid, Ready False/Pending with it; web clean;
    // imports ready, unusable (IPFamilyNotSupported) and pending with no cluster yet.
    let cilium19 = cluster_at("v0.3.1-0.20260224125735-0f775a3eff97", &["shop"]);
    // cilium20: Cilium 1.20.0's, on the MCS API's v0.5.2 CRDs (both versions served), as
    // serviceimport_controller.go@450c5314 writes them: api clean; ns not valid in a namespace
    // that is not global, its import not ready for the same reason.
    let cilium20 = cluster_at("v0.5.2", &["shop"]);
    for (k, version) in [(&cilium19, "v1alpha1"), (&cilium20, "v1beta1")] {
        let api = format!("apiVersion: multicluster.x-k8s.io/{version}");
        let import = |name: &str| {
            format!(
                "---\n{api}\nkind: ServiceImport\nmetadata: {{name: {name}, namespace: shop}}\n\
                 spec: {{type: ClusterSetIP, ports: [{{name: http, protocol: TCP, port: 80}}]}}\n"
            )
        };
        let export = |name: &str| {
            format!(
                "---\n{api}\nkind: ServiceExport\nmetadata: {{name: {name}, namespace: shop}}\n"
            )
        };
        let names: &[&str] = if version == "v1alpha1" {
            &["api", "ext", "web"]
        } else {
            &["api", "ns"]
        };
        let imports: &[&str] = if version == "v1alpha1" {
            &["web", "v6", "gone"]
        } else {
            &["api", "ns"]
        };
        k.apply(
            &(names.iter().map(|n| export(n)).collect::<String>()
                + &imports.iter().map(|n| import(n)).collect::<String>()),
        );
    }
    let valid_ready = [("Valid", "True", "Valid"), ("Ready", "True", "Ready")];
    for (k, name, cs) in [
        (
            &cilium19,
            "api",
            vec![
                valid_ready[0],
                valid_ready[1],
                ("Conflict", "True", "PortConflict"),
            ],
        ),
        (
            &cilium19,
            "ext",
            vec![
                ("Valid", "False", "InvalidServiceType"),
                ("Ready", "False", "Pending"),
            ],
        ),
        (
            &cilium19,
            "web",
            vec![
                valid_ready[0],
                valid_ready[1],
                ("Conflict", "False", "NoConflicts"),
            ],
        ),
        (
            &cilium20,
            "api",
            vec![
                valid_ready[0],
                valid_ready[1],
                ("Conflict", "False", "NoConflicts"),
            ],
        ),
        (
            &cilium20,
            "ns",
            vec![
                ("Valid", "False", "NamespaceNotGlobal"),
                ("Ready", "False", "Pending"),
            ],
        ),
    ] {
        let status = format!("{{\"conditions\": {}}}", conditions(&cs));
        set_status(k, "serviceexport", "shop", name, &status);
    }
    for (k, name, clusters, ready) in [
        (
            &cilium19,
            "web",
            "[{\"cluster\": \"cilium19\"}]",
            ("Ready", "True", "Ready"),
        ),
        (
            &cilium19,
            "v6",
            "[{\"cluster\": \"south\"}]",
            ("Ready", "False", "IPFamilyNotSupported"),
        ),
        (&cilium19, "gone", "[]", ("Ready", "False", "Pending")),
        (
            &cilium20,
            "api",
            "[{\"cluster\": \"cilium20\"}]",
            ("Ready", "True", "Ready"),
        ),
        (
            &cilium20,
            "ns",
            "[{\"cluster\": \"cilium20\"}]",
            ("Ready", "False", "NamespaceNotGlobal"),
        ),
    ] {
        let status = format!(
            "{{\"clusters\": {clusters}, \"conditions\": {}}}",
            conditions(&[ready])
        );
        set_status(k, "serviceimport", "shop", name, &status);
    }

    // kube-state-metrics in each cluster, its configuration as shipped: exactly the series the
    // objects call for, in every version the CRDs serve (both in west and east, v1alpha1
    // alone in south).
    let (_ksm_west, west_metrics) = kube_state_metrics(&west);
    let (_ksm_east, east_metrics) = kube_state_metrics(&east);
    let (_ksm_south, south_metrics) = kube_state_metrics(&south);
    let (_ksm_north, north_metrics) = kube_state_metrics(&north);
    let (_ksm_cilium19, cilium19_metrics) = kube_state_metrics(&cilium19);
    let (_ksm_cilium20, cilium20_metrics) = kube_state_metrics(&cilium20);
    for (name, k, metrics) in [
        ("west", &west, west_metrics),
        ("east", &east, east_metrics),
        ("south", &south, south_metrics),
        ("north", &north, north_metrics),
        ("cilium19", &cilium19, cilium19_metrics),
        ("cilium20", &cilium20, cilium20_metrics),
    ] {
        let scrape = || {
            common::http_get_blocking(metrics, "/metrics", Duration::from_secs(2))
                .map(|(_, body)| series_in(&body))
                .unwrap_or_default()
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while scrape() != series_of(k) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(500));
        }
        let got = scrape();
        let log = std::fs::read_to_string(k.dir.path().join("kube-state-metrics.log"));
        assert_eq!(
            got,
            series_of(k),
            "kube-state-metrics in {name} (its log: {})",
            log.unwrap_or_default()
        );
        eprintln!(
            "kube-state-metrics, {name}:\n  {}",
            Vec::from_iter(got).join("\n  ")
        );
    }

    // Prometheus scrapes both, as one Prometheus of a cluster set labels them, and evaluates
    // rules.yaml. Their `for` is 5 minutes (promtool's cases hold them to it); here 5 seconds,
    // the only change, so that they fire within the test.
    let rules = read(
        repo("deploy/monitoring/mcs/rules.yaml")
            .display()
            .to_string(),
    );
    assert_eq!(rules.matches("for: 5m").count(), 4);
    let job = |cluster: &str, target: SocketAddr| {
        format!(
            "  - job_name: kube-state-metrics-{cluster}\n    static_configs:\n      - targets: ['{target}']\n        labels: {{cluster: {cluster}}}\n    \
             relabel_configs: [{{target_label: job, replacement: kube-state-metrics}}]\n"
        )
    };
    let prom = Prometheus::with_rules(
        &(job("west", west_metrics)
            + &job("east", east_metrics)
            + &job("south", south_metrics)
            + &job("north", north_metrics)
            + &job("cilium19", cilium19_metrics)
            + &job("cilium20", cilium20_metrics)),
        Some(&rules.replace("for: 5m", "for: 5s")),
    );
    // Each object once, whichever versions list it: west's CRDs serve two, so kube-state-metrics
    // writes each export twice, and the rules' `max without (customresource_version)` counts it once.
    assert_eq!(
        prom.wait_for(
            "count(max without (customresource_version) (kube_serviceexport_created{cluster=\"west\"}))",
            2.0
        )
        .await,
        Some(2.0),
        "west's two exports, once each"
    );
    assert_eq!(
        prom.value("count(kube_serviceexport_created{cluster=\"west\"})")
            .await,
        Some(4.0),
        "west's CRDs serve both versions, and both are read"
    );
    // The bridge's conflict on web and its export of an ExternalName Service; the syncer's
    // export with no condition, its import left behind and Cilium's unusable import in east;
    // in south Cilium 1.18's conflict (Ready False, not paged twice) and its invalid export; in
    // north Lighthouse's export that is not synced and its conflict, while its own records,
    // which name no cluster, are not paged.
    let want: BTreeSet<(String, String, String)> = [
        ("MCSServiceExportConflict", "west", "shop/web"),
        ("MCSServiceExportNotServing", "west", "shop/late"),
        ("MCSServiceExportNotServing", "east", "shop/api"),
        ("MCSServiceImportNoClusters", "east", "shop/old"),
        ("MCSServiceImportNotReady", "east", "shop/v6"),
        ("MCSServiceExportConflict", "south", "shop/api"),
        ("MCSServiceExportNotServing", "south", "shop/ext"),
        ("MCSServiceExportNotServing", "north", "shop/api"),
        ("MCSServiceExportConflict", "north", "shop/db"),
        ("MCSServiceExportNotServing", "north", "lh14/api"),
        ("MCSServiceExportNotServing", "north", "lh19/api"),
        ("MCSServiceExportConflict", "north", "lh19/db"),
        ("MCSServiceExportConflict", "cilium19", "shop/api"),
        ("MCSServiceExportNotServing", "cilium19", "shop/ext"),
        ("MCSServiceImportNotReady", "cilium19", "shop/v6"),
        ("MCSServiceImportNoClusters", "cilium19", "shop/gone"),
        ("MCSServiceExportNotServing", "cilium20", "shop/ns"),
        ("MCSServiceImportNotReady", "cilium20", "shop/ns"),
    ]
    .into_iter()
    .map(|(a, c, o)| (a.into(), c.into(), o.into()))
    .collect();
    firing_settles(&prom, &want, "the alerts the objects call for").await;
    eprintln!("firing in Prometheus: {want:?}");

    // Every dashboard query returns data.
    let d = dashboard(&repo("deploy/monitoring/mcs/dashboard.json"));
    let vars = [
        ("job", "kube-state-metrics"),
        ("cluster", ".*"),
        ("namespace", ".*"),
    ];
    let mut empty = Vec::new();
    for (title, expr) in queries(&d, &vars) {
        if !common::eventually(30, || prom.has_data(&expr)).await {
            empty.push(format!("{title}: {expr}"));
        }
    }
    assert!(
        empty.is_empty(),
        "queries without data:\n{}",
        empty.join("\n")
    );

    // A conflict whose reasons change while it lasts (Lighthouse from 0.19 joins them in the
    // order it found them) is the same alert: it stays firing, its `for` not started again
    // (which would show it pending for 5 s).
    let db = (
        "MCSServiceExportConflict".to_string(),
        "north".to_string(),
        "lh19/db".to_string(),
    );
    set_status(
        &north,
        "serviceexport",
        "lh19",
        "db",
        &format!(
            "{{\"conditions\": {}}}",
            conditions(&[
                ("Valid", "True", ""),
                ("Ready", "True", ""),
                (
                    "Conflict",
                    "True",
                    "ConflictingSessionAffinity,ConflictingPorts"
                ),
            ])
        ),
    );
    let reordered = "kube_serviceexport_status_condition{cluster=\"north\",reason=\"ConflictingSessionAffinity,ConflictingPorts\"}";
    assert!(
        common::eventually(30, || prom.has_data(reordered)).await,
        "the new reason scraped"
    );
    for _ in 0..16 {
        assert!(
            !alerts(&prom, "pending").await.contains(&db),
            "{db:?} pending again"
        );
        assert!(
            alerts(&prom, "firing").await.contains(&db),
            "{db:?} not firing"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Fixed, late's export turns valid, and its alert ends; the others go on.
    west.apply(
        "apiVersion: v1\nkind: Service\nmetadata: {name: late, namespace: shop}\nspec: {type: ClusterIP, externalName: null, ports: [{name: http, protocol: TCP, port: 80}]}\n",
    );
    let mut left = want.clone();
    left.remove(&(
        "MCSServiceExportNotServing".into(),
        "west".into(),
        "shop/late".into(),
    ));
    firing_settles(&prom, &left, "the alerts once late is fixed").await;

    // The kit for the prometheus-operator, and the chart's, pass strict validation.
    operator_crds(&west, &common::monitoring_tools());
    west.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: monitoring}\n");
    let kit = common::kustomize("deploy/monitoring/mcs");
    dry_run(&west, &kit).unwrap_or_else(|e| panic!("deploy/monitoring/mcs: {e}"));
    let home = tempfile::tempdir().unwrap();
    let out = common::helm(home.path())
        .args(["template", "clusterset-dns", "deploy/helm/clusterset-dns"])
        .args(["--namespace", "clusterset-dns"])
        .args(["--set", "monitoring.mcsState.enabled=true"])
        // An address inside the test API server's Service range (the chart pins 10.96.0.53).
        .args(["--set", "service.clusterIP=198.19.224.53"])
        .args(["--set", "monitoring.mcsState.namespace=monitoring"])
        .args([
            "--set",
            "monitoring.mcsState.serviceAccount.name=kube-state-metrics",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    let chart = String::from_utf8(out.stdout).unwrap();
    west.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: clusterset-dns}\n");
    dry_run(&west, &chart).unwrap_or_else(|e| panic!("the chart with mcsState: {e}"));
}
