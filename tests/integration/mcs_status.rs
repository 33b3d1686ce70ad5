//! Status any MCS implementation can be watched by (deploy/monitoring/mcs), with the real tools:
//! promtool checks the alerts and runs their unit tests (each alert made to fire, and kept
//! quiet); the PrometheusRule holds rules.yaml's groups; the dashboard is well-formed. Then a real
//! kube-state-metrics (v2.20.0, tests/kube-state-metrics/setup.sh) with kube-state-metrics.yaml
//! runs against each of two real API servers, each holding the ServiceExports and
//! ServiceImports of another implementation: the linkerd-bridge's in `west`, and in `east` those
//! of the two-cluster test's export syncer (tests/mcs/infra/syncer, on the MCS API's own CRDs)
//! next to an import an implementation left behind. Every series is there with the labels the
//! objects give; a real Prometheus scraping both fires exactly the alerts the objects call for
//! and drops one when its export is fixed; every dashboard query returns data; the chart's and
//! kustomize's objects pass the API server's strict validation.

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
                "MCSServiceExportNotReady",
                "MCSServiceExportNotValid",
                "MCSServiceImportNoClusters",
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

/// kube-state-metrics with deploy/monitoring/mcs's configuration at the CRDs' `version`, as
/// the operations guide says to change it, as user kube-state-metrics (bound to
/// deploy/monitoring/mcs/clusterrole.yaml and nothing else); its metrics address.
fn kube_state_metrics(k: &Cluster, version: &str) -> (common::Killed, SocketAddr) {
    let bin = setup("tests/kube-state-metrics/setup.sh").join("bin/kube-state-metrics");
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = std::fs::read_to_string(repo("deploy/monitoring/mcs/kube-state-metrics.yaml"))
        .unwrap()
        .replace("version: v1beta1,", &format!("version: {version},"));
    let file = k.dir.path().join("kube-state-metrics.yaml");
    std::fs::write(&file, config).unwrap();
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
/// `name{labels sorted} value`, without the `customresource_*` labels every series carries.
fn series_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if !line.starts_with("kube_service") {
            continue;
        }
        let (name, rest) = line.split_once('{').expect("labelled series");
        let (labels, value) = rest.rsplit_once("} ").unwrap();
        // Written as Go writes a float (1.764925430e+09); here as a number, 1764925430.
        let value: f64 = value.parse().unwrap();
        let mut kept: Vec<&str> = labels
            .split(",")
            .filter(|l| !l.starts_with("customresource_"))
            .collect();
        kept.sort();
        out.insert(format!("{name}{{{}}} {value}", kept.join(",")));
    }
    out
}

/// One series as [`series_in`] writes it.
fn series(name: &str, labels: &[(&str, &Value)], value: f64) -> String {
    let mut labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    labels.sort();
    format!("{name}{{{}}} {value}", labels.join(","))
}

/// The series the MCS objects in `k` call for, by the configuration's rules, in the form of
/// [`series_in`]: from the objects themselves, whoever wrote them.
fn series_of(k: &Cluster) -> BTreeSet<String> {
    let list = |kind: &str| -> Vec<Value> {
        let out = k
            .kubectl()
            .args(["get", kind, "-A", "-o", "json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", output_text(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["items"]
            .as_array()
            .unwrap()
            .clone()
    };
    let mut out = BTreeSet::new();
    for (kind, prefix) in [
        ("serviceexport", "kube_serviceexport"),
        ("serviceimport", "kube_serviceimport"),
    ] {
        for o in list(&format!("{kind}s.v1beta1.multicluster.x-k8s.io")) {
            let m = &o["metadata"];
            let mut who = vec![("namespace", &m["namespace"]), (kind, &m["name"])];
            if kind == "serviceimport" {
                who.push(("type", &o["spec"]["type"]));
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
    out
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
            s.contains("kube_serviceexport_status_condition{condition=\"Conflict\",namespace=\"shop\",reason=\"PortConflict\",serviceexport=\"web\",status=\"True\"} 1")
            && s.contains("kube_serviceexport_status_condition{condition=\"Valid\",namespace=\"shop\",reason=\"InvalidServiceType\",serviceexport=\"late\",status=\"False\"} 0")
            && s.contains("kube_serviceimport_status_cluster{namespace=\"shop\",serviceimport=\"cart\",source_cluster=\"east\",type=\"ClusterSetIP\"} 1")
        },
    );
    until("the syncer's import of api", 60, || {
        series_of(&east).contains("kube_serviceimport_status_cluster{namespace=\"shop\",serviceimport=\"api\",source_cluster=\"east\",type=\"ClusterSetIP\"} 1")
    });

    // kube-state-metrics in each cluster: exactly the series the objects call for. east's reads
    // v1alpha1, as where the CRDs serve only that (Cilium's, Submariner's): the same layout, the
    // same series.
    let (_ksm_west, west_metrics) = kube_state_metrics(&west, "v1beta1");
    let (_ksm_east, east_metrics) = kube_state_metrics(&east, "v1alpha1");
    for (name, k, metrics) in [("west", &west, west_metrics), ("east", &east, east_metrics)] {
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
        &(job("west", west_metrics) + &job("east", east_metrics)),
        Some(&rules.replace("for: 5m", "for: 5s")),
    );
    let want: BTreeSet<(String, String, String)> = [
        ("MCSServiceExportConflict", "west", "shop/web"),
        ("MCSServiceExportNotValid", "west", "shop/late"),
        ("MCSServiceExportNotValid", "east", "shop/api"),
        ("MCSServiceImportNoClusters", "east", "shop/old"),
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

    // Fixed, late's export turns valid, and its alert ends; the others go on.
    west.apply(
        "apiVersion: v1\nkind: Service\nmetadata: {name: late, namespace: shop}\nspec: {type: ClusterIP, externalName: null, ports: [{name: http, protocol: TCP, port: 80}]}\n",
    );
    let mut left = want.clone();
    left.remove(&(
        "MCSServiceExportNotValid".into(),
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
