//! The monitoring kit of deploy/monitoring, with the real tools: promtool checks the alerts and
//! runs their unit tests (each alert made to fire, and kept quiet); the PrometheusRule holds
//! exactly rules.yaml's groups; the ServiceMonitor, the PrometheusRule and the dashboard's
//! ConfigMap pass a real kube-apiserver's strict server-side validation against the
//! prometheus-operator's CRDs (rendered by tests/monitoring/setup.sh); the dashboard is
//! well-formed Grafana JSON. Then a real Prometheus scrapes the server running on the Kubernetes
//! source (a real API server, objects changing, queries arriving), and every panel of our
//! dashboard and every applicable panel of the three CoreDNS dashboards operators run must
//! return data. Our XDP panel needs `--xdp`: tests/integration/cluster.rs checks it on the XDP pods.

use crate::common;
use crate::common::until;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::grafana::{dashboard, panels, queries};
use common::k8s::{Cluster, crd, import, rbac, slice};
use common::prometheus::Prometheus;
use common::{http_get_blocking, output_text, query, spawn_binary};
use hickory_proto::rr::RecordType;

pub(crate) fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

pub(crate) fn yaml(path: &str) -> serde_json::Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(repo(path)).unwrap())
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn alerts_pass_promtool_and_each_fires_and_stays_quiet_in_its_unit_tests() {
    let _module = common::module(module_path!());
    let alerts = alerts_checked(
        "deploy/monitoring/rules.yaml",
        "deploy/monitoring/rules-test.yaml",
        "deploy/monitoring/prometheusrule.yaml",
    );
    assert!(alerts.len() >= 10, "{alerts:?}");
}

/// promtool checks the rules file `rules` and runs its unit tests `tests`; every alert has a
/// case where it fires and one where it stays quiet; the PrometheusRule `rule` holds the very
/// same groups. The alerts' names.
pub(crate) fn alerts_checked(rules: &str, tests: &str, rule: &str) -> BTreeSet<String> {
    for args in [["check", "rules", rules], ["test", "rules", tests]] {
        common::run_ok(Command::new("promtool").args(args).current_dir(repo("")));
    }
    let groups = yaml(rules)["groups"].clone();
    let alerts: BTreeSet<String> = groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| r["alert"].as_str().expect("alerts only").to_string())
        .collect();
    let (mut fires, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for t in yaml(tests)["tests"].as_array().unwrap() {
        for a in t["alert_rule_test"].as_array().unwrap() {
            let name = a["alertname"].as_str().unwrap().to_string();
            if a["exp_alerts"].as_array().is_some_and(|e| !e.is_empty()) {
                fires.insert(name);
            } else {
                quiet.insert(name);
            }
        }
    }
    assert_eq!(fires, alerts, "{rules}: alerts with a firing test");
    assert_eq!(quiet, alerts, "{rules}: alerts with a quiet test");
    let rule = yaml(rule);
    assert_eq!(rule["kind"], "PrometheusRule");
    assert_eq!(
        rule["spec"]["groups"], groups,
        "the PrometheusRule holds {rules}'s groups"
    );
    alerts
}

#[test]
fn the_dashboard_is_well_formed_grafana_json() {
    let _module = common::module(module_path!());
    let d = dashboard(&repo("deploy/monitoring/dashboard.json"));
    assert_eq!(d["uid"], "clusterset-dns");
    for (title, expr) in laid_out(&d, &["datasource", "job", "instance", "bridge_job"]) {
        assert!(
            expr.contains("job=~\"$job\"")
                || expr.starts_with("time()")
                || (expr.contains("clusterset_dns_bridge_")
                    && expr.contains("job=~\"$bridge_job\"")),
            "{title}: {expr} selects the job (the linkerd-bridge's panels, its job)"
        );
    }
}

/// Checks a dashboard's form: schema 39 (Grafana 10.x-12.x write it and migrate older ones on
/// load), these variables in order, unique panel ids, panels inside the grid and not
/// overlapping, each panel's data source the variable, and at least one query each with
/// unique refIds. Every query, as (panel title, expression).
pub(crate) fn laid_out(d: &serde_json::Value, vars: &[&str]) -> Vec<(String, String)> {
    assert_eq!(d["schemaVersion"], 39);
    let names: Vec<&str> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vars);
    let all = panels(d);
    let ids: BTreeSet<u64> = all.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), all.len(), "panel ids are unique");
    let mut grid = BTreeSet::new();
    let mut out = Vec::new();
    for p in &all {
        let title = p["title"].as_str().unwrap();
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_u64().unwrap(),
            g["y"].as_u64().unwrap(),
            g["w"].as_u64().unwrap(),
            g["h"].as_u64().unwrap(),
        );
        assert!(x + w <= 24 && w > 0 && h > 0, "{title}: {g}");
        // No two panels overlap.
        for cx in x..x + w {
            for cy in y..y + h {
                assert!(grid.insert((cx, cy)), "{title} overlaps another panel");
            }
        }
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}: no query");
        let refs: BTreeSet<&str> = targets
            .iter()
            .map(|t| t["refId"].as_str().unwrap())
            .collect();
        assert_eq!(refs.len(), targets.len(), "{title}: refIds unique");
        for t in targets {
            out.push((title.to_string(), t["expr"].as_str().unwrap().to_string()));
        }
    }
    out
}

/// The prometheus-operator's CRDs (ServiceMonitor, PrometheusRule), as tests/monitoring/setup.sh
/// renders them into `tools`, installed and established.
pub(crate) fn operator_crds(k: &Cluster, tools: &Path) {
    for crd in ["servicemonitors", "prometheusrules"] {
        let file = tools.join(format!("crds/monitoring.coreos.com_{crd}.yaml"));
        k.apply(&std::fs::read_to_string(file).unwrap());
        let out = k
            .kubectl()
            .args(["wait", "--for=condition=Established", "--timeout=30s"])
            .arg(format!("crd/{crd}.monitoring.coreos.com"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", output_text(&out));
    }
}

/// `yaml` through the API server's strict server-side validation, written nowhere.
pub(crate) fn dry_run(k: &Cluster, yaml: &str) -> Result<(), String> {
    k.kubectl_input(
        &[
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-o",
            "name",
            "-f",
            "-",
        ],
        yaml,
    )
}

/// Panels of CoreDNS's plugins and Go runtime that a Rust authoritative server has no part in.
fn not_applicable(expr: &str) -> bool {
    [
        "coredns_cache_",
        "coredns_forward_",
        "coredns_proxy_",
        "coredns_plugin_enabled",
        "go_goroutines",
        "go_",
    ]
    .iter()
    .any(|m| expr.contains(m))
}

/// Queries the server over UDP and TCP (several types, NXDOMAIN, the DO bit) and changes an
/// EndpointSlice now and then, until `stop` or 3 minutes.
fn traffic(dns: SocketAddr, k: &Cluster, stop: &AtomicBool) {
    let names = [
        ("web.shop.svc.clusterset.local", RecordType::A),
        ("web.shop.svc.clusterset.local", RecordType::AAAA),
        ("_http._tcp.db.data.svc.clusterset.local", RecordType::SRV),
        ("nope.shop.svc.clusterset.local", RecordType::A),
        ("db.data.svc.clusterset.local", RecordType::A),
    ];
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let started = Instant::now();
    let mut i = 0u32;
    while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(180) {
        for (n, (name, t)) in names.iter().enumerate() {
            let mut q = query(name, *t, Some(1232));
            if n == 0 {
                let len = q.len();
                q[len - 4] = 0x80; // DO
            }
            let _ = common::udp_exchange_blocking(&sock, dns, &q);
            if i % 4 == 0 {
                let _ = common::tcp_exchange_blocking(dns, &q);
            }
        }
        if i % 20 == 0 {
            // A new address every few seconds: events, zone changes, programming latency.
            k.apply(&slice(
                "data",
                "db-east",
                "db",
                "east",
                &format!(
                    "[{{addresses: [10.1.{}.{}], hostname: db-0}}]",
                    i / 20 / 250 % 250,
                    i / 20 % 250 + 1
                ),
            ));
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_panel_shows_data_and_the_operator_objects_validate() {
    let _module = common::module(module_path!());
    let tools = common::monitoring_tools();
    let k = Arc::new(Cluster::start());
    k.apply(&crd("v1alpha1"));
    k.apply(&rbac());
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: data}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: clusterset-dns}\n");
    k.apply(
        &(import(
            "v1alpha1",
            "shop",
            "web",
            "{type: ClusterSetIP, ips: [10.0.0.1, fd00::1], ports: [{name: http, port: 80}]}",
        ) + &import(
            "v1alpha1",
            "data",
            "db",
            "{type: Headless, ports: [{name: http, port: 80}]}",
        ) + &slice(
            "data",
            "db-east",
            "db",
            "east",
            "[{addresses: [10.1.0.1], hostname: db-0}]",
        )
            // Skipped (the CRD admits it), and an address no client may be sent to.
            + &import(
                "v1alpha1",
                "shop",
                "bad",
                "{type: ClusterSetIP, ips: [10.0.0.300], ports: [{port: 80}]}",
            )
            + &slice(
                "data",
                "db-west",
                "db",
                "west",
                "[{addresses: [100.100.100.200, 10.2.0.1], hostname: db-1}]",
            )),
    );

    // The prometheus-operator's CRDs, then our objects through strict server-side validation.
    operator_crds(&k, &tools);
    let dry_run = |yaml: &str| dry_run(&k, yaml);
    let rendered = common::kustomize("deploy/monitoring");
    let kinds: Vec<String> = common::yaml_objects(&rendered)
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "ConfigMap",
            "PrometheusRule",
            "ServiceMonitor",
            "ServiceMonitor"
        ]
    );
    dry_run(&rendered).unwrap_or_else(|e| panic!("deploy/monitoring: {e}"));
    // The Helm chart's, with its ServiceMonitor and PrometheusRule, the same way.
    let home = tempfile::tempdir().unwrap();
    let out = common::helm(home.path())
        .args(["template", "clusterset-dns", "deploy/helm/clusterset-dns"])
        .args(["--namespace", "clusterset-dns"])
        .args(["--set", "prometheus.monitor.enabled=true"])
        .args(["--set", "prometheus.rules.enabled=true"])
        .args(["--set", "prometheus.service.enabled=true"])
        // An address inside the test API server's Service range (the chart pins 10.96.0.53).
        .args(["--set", "service.clusterIP=198.19.224.53"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    let chart = String::from_utf8(out.stdout).unwrap();
    let kinds: BTreeSet<String> = common::yaml_objects(&chart)
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_string())
        .collect();
    assert!(
        kinds.contains("ServiceMonitor") && kinds.contains("PrometheusRule"),
        "{kinds:?}"
    );
    dry_run(&chart).unwrap_or_else(|e| panic!("the chart with its monitoring: {e}"));
    // The validation is real: a misspelt field and a wrong type are refused.
    let monitor = std::fs::read_to_string(repo("deploy/monitoring/servicemonitor.yaml")).unwrap();
    let typo = monitor.replace("  - port: metrics", "  - prot: metrics");
    let e = dry_run(&typo).expect_err("a misspelt field is refused");
    assert!(e.contains("prot"), "{e}");
    let wrong = monitor.replace("interval: 15s", "interval: fifteen");
    assert!(dry_run(&wrong).is_err(), "an interval that is no duration");

    // The server on the Kubernetes source, scraped as three operators' setups name the job:
    // kube-prometheus-stack's (coredns), the CoreDNS mixin's (kube-dns) and ours.
    let s = spawn_binary(&["--kubeconfig", &k.kubeconfig("dns")]);
    until("the server to become ready", 30, || {
        http_get_blocking(s.admin, "/ready", Duration::from_secs(1)).map(|r| r.0) == Some(200)
    });
    let target = s.admin.to_string();
    // The linkerd-bridge, both halves, with an export and one of Linkerd's mirrors to import,
    // scraped as deploy/monitoring's ServiceMonitor names its job.
    let crds = crate::linkerd_bridge::CRDS;
    k.apply(
        &std::fs::read_to_string(format!("{crds}/multicluster.x-k8s.io_serviceexports.yaml"))
            .unwrap(),
    );
    k.apply(&std::fs::read_to_string(repo("tests/k8s/crds/linkerd-links.yaml")).unwrap());
    k.apply(&crate::linkerd_bridge::bridge_rbac());
    k.apply(
        "apiVersion: v1\nkind: Service\nmetadata: {name: api, namespace: shop}\nspec: {ports: [{name: http, port: 80}]}\n\
         ---\napiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceExport\nmetadata: {name: api, namespace: shop}\n\
         ---\napiVersion: multicluster.linkerd.io/v1alpha3\nkind: Link\nmetadata: {name: east, namespace: shop}\nspec: {targetClusterName: east}\n\
         ---\napiVersion: v1\nkind: Service\nmetadata: {name: cart-east, namespace: shop, labels: {mirror.linkerd.io/mirrored-service: 'true', mirror.linkerd.io/cluster-name: east}, annotations: {mirror.linkerd.io/remote-svc-fq-name: cart.shop.svc.cluster.local}}\nspec: {ports: [{name: http, port: 80}]}\n",
    );
    let bridge = crate::linkerd_bridge::Bridge::start(&k, &[]);
    until("the bridge to write the import", 30, || {
        bridge
            .admin("/metrics")
            .1
            .contains("clusterset_dns_bridge_managed{kind=\"ServiceImport\"} 1")
    });
    let job = |name: &str, target: &str| {
        format!(
            "  - job_name: {name}\n    static_configs:\n      - targets: ['{target}']\n        labels: {{cluster: test, pod: clusterset-dns-0}}\n"
        )
    };
    let prom = Prometheus::with_scrape_configs(
        &(job("coredns", &target)
            + &job("kube-dns", &target)
            + &job("clusterset-dns", &target)
            + &job("clusterset-dns-linkerd-bridge", &bridge.admin.to_string())),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (k, stop, dns) = (k.clone(), stop.clone(), s.dns);
        std::thread::spawn(move || traffic(dns, &k, &stop))
    };
    assert_eq!(
        prom.wait_for("count(up == 1)", 4.0).await,
        Some(4.0),
        "Prometheus scrapes the four jobs"
    );

    let ours = dashboard(&repo("deploy/monitoring/dashboard.json"));
    // Unchanged copies of what operators run (see the folder's README for their sources).
    let reference = repo("tests/monitoring/coredns-dashboards");
    /// A dashboard's name, its JSON and its variables' values.
    type Board<'a> = (&'a str, serde_json::Value, Vec<(&'a str, &'a str)>);
    let boards: Vec<Board> = vec![
        (
            "kube-prometheus-stack k8s-coredns",
            dashboard(&reference.join("kps-k8s-coredns.json")),
            vec![
                ("job", "coredns"),
                ("cluster", "test"),
                ("instance", &target),
            ],
        ),
        (
            "coredns-mixin",
            dashboard(&reference.join("mixin-website-coredns.json")),
            vec![("instance", "clusterset-dns-0")],
        ),
        (
            "dotdc k8s-system-coredns",
            dashboard(&reference.join("dotdc-k8s-system-coredns.json")),
            vec![
                ("job", "clusterset-dns"),
                ("cluster", "test"),
                ("instance", &target),
                ("protocol", "udp"),
                ("__rate_interval", "1m"),
            ],
        ),
        (
            "clusterset-dns (ours)",
            ours,
            vec![
                ("job", "clusterset-dns"),
                ("instance", ".*"),
                ("bridge_job", "clusterset-dns-linkerd-bridge"),
                ("__rate_interval", "1m"),
            ],
        ),
    ];
    let mut empty = Vec::new();
    for (board, d, vars) in &boards {
        let (mut data, mut na, mut none) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for (title, expr) in queries(d, vars) {
            // Ours: the XDP panel needs --xdp (tests/integration/cluster.rs checks it on the XDP pods).
            if not_applicable(&expr) || expr.contains("clusterset_dns_xdp_") {
                na.insert(title);
                continue;
            }
            if common::eventually(60, || prom.has_data(&expr)).await {
                data.insert(title);
            } else {
                none.insert(title.clone());
                empty.push(format!("{board}: {title}: {expr}"));
            }
        }
        // A panel shows data if all its applicable queries do.
        let data: BTreeSet<_> = data.difference(&none).cloned().collect();
        let na: BTreeSet<_> = na
            .difference(&data)
            .filter(|t| !none.contains(*t))
            .cloned()
            .collect();
        eprintln!(
            "{board}: {} panels with data, {} not applicable ({}), {} empty",
            data.len(),
            na.len(),
            na.iter().cloned().collect::<Vec<_>>().join(", "),
            none.len()
        );
    }
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    assert!(
        empty.is_empty(),
        "queries without data:\n{}",
        empty.join("\n")
    );
}
