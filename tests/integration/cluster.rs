//! clusterset-dns as a platform team runs it: our image, `kubectl apply -k deploy/base`, and the
//! cluster DNS forwarding clusterset.local to it, in a real single-node Kubernetes cluster.
//!
//! The cluster is made of real components only ([`common::node`]), with CoreDNS v1.15.0 as the
//! cluster DNS. The whole node lives in a network namespace the test makes, on addresses in
//! 198.18.0.0/15: the node 198.18.0.2, pods 198.18.64.0/24 on a bridge, Services
//! 198.19.0.0/16. Needs root (CI runs as root).

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::Steps;
use common::docker::IMAGE;
use common::node::{Node, SA, SINGLE, lookups, repo};
use common::output_text as text;
use common::until;
use common::wait::value;

const API_SERVICE_IP: &str = SINGLE.api_service_ip;
const DNS_SERVICE_IP: &str = SINGLE.dns_service_ip;

#[test]
fn deploy_base_in_a_real_single_node_cluster_behind_coredns() {
    let _module = common::module(module_path!());
    let mut steps = Steps::default();
    steps.next("0. a single-node cluster from real components");
    let mut node = Node::start(&SINGLE);
    node.install_crds(
        &[repo().join("tests/k8s/crds/serviceimports-v1alpha1.yaml")],
        &["serviceimports.multicluster.x-k8s.io"],
    );

    steps.next("1. deploy/base: both replicas Ready");
    // 1. kubectl apply -k deploy/base; both replicas Ready through the kubelet's own probes.
    let base = node.overlay("base", "deploy/base");
    let applied = Instant::now();
    node.k(&["apply", "-k", &base]);
    node.rollout("clusterset-dns", "deployment/clusterset-dns");
    let to_ready = applied.elapsed();
    let pods = node.our_pods();
    assert_eq!(pods.len(), 2, "{pods:?}");
    assert!(pods.iter().all(|p| p.2), "{pods:?}");
    let restarts = node.k(&[
        "-n",
        "clusterset-dns",
        "get",
        "pods",
        "-o",
        "jsonpath={.items[*].status.containerStatuses[0].restartCount}",
    ]);
    assert_eq!(restarts, "0 0", "no container restarted");
    eprintln!("kubectl apply -k deploy/base to both replicas Ready: {to_ready:.1?}");

    steps.next("2. the service account reads only its resources");
    // 2. The service account may only get, list and watch the two resources (and the
    // ClusterProperties that name the cluster, whose CRD this cluster lacks).
    let can = |verb: &str, what: &str| {
        let out = node.kubectl(&["auth", "can-i", verb, what, "--all-namespaces", "--as", SA]);
        String::from_utf8_lossy(&out.stdout).trim() == "yes"
    };
    for what in [
        "serviceimports.multicluster.x-k8s.io",
        "endpointslices.discovery.k8s.io",
    ] {
        for verb in ["get", "list", "watch"] {
            assert!(can(verb, what), "{SA} may {verb} {what}");
        }
        for verb in ["create", "update", "patch", "delete", "deletecollection"] {
            assert!(!can(verb, what), "{SA} may not {verb} {what}");
        }
    }
    for what in [
        "secrets",
        "pods",
        "services",
        "configmaps",
        "serviceexports.multicluster.x-k8s.io",
    ] {
        assert!(!can("list", what), "{SA} may not list {what}");
    }
    // Beyond what every service account holds (the default one of another namespace shows it:
    // self reviews, and in this version cluster trust bundles), exactly the three rows.
    let rows = |who: &str| -> std::collections::BTreeSet<(String, String)> {
        let list = node.k(&["auth", "can-i", "--list", "--as", who]);
        list.lines()
            .skip(1)
            .filter(|l| !l.starts_with('['))
            .filter_map(|l| {
                let resource = l.split_whitespace().next()?;
                Some((resource.to_string(), l[l.rfind('[')?..].to_string()))
            })
            .collect()
    };
    let everyone = rows("system:serviceaccount:kube-public:default");
    let ours: Vec<_> = rows(SA).difference(&everyone).cloned().collect();
    assert_eq!(
        ours,
        [
            (
                "clusterproperties.about.k8s.io".to_string(),
                "[get list watch]".to_string()
            ),
            (
                "endpointslices.discovery.k8s.io".to_string(),
                "[get list watch]".to_string()
            ),
            (
                "serviceimports.multicluster.x-k8s.io".to_string(),
                "[get list watch]".to_string()
            ),
        ],
        "{SA} holds, beyond what every service account holds"
    );

    steps.next("3. the cluster DNS forwards clusterset.local");
    // 3. The cluster DNS: deploy/forwarding/coredns rendered with the address deploy/address
    // pinned our Service to, then CoreDNS as kubeadm runs it.
    let service_ip = node.k(&[
        "-n",
        "clusterset-dns",
        "get",
        "service",
        "clusterset-dns",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    // deploy/base pinned it (deploy/address, set to the node's own address).
    assert_eq!(service_ip, node.our_address());
    node.cluster_dns(&service_ip);

    steps.next("4. a pod resolves every kind of name");
    // 4. Imported services, and a client pod with the resolv.conf the kubelet gives it.
    let objects = repo().join("tests/cluster/objects.yaml");
    node.k(&["apply", "-f", objects.to_str().unwrap()]);
    node.wait_ready("client");
    let resolv =
        String::from_utf8_lossy(&node.exec(&["cat", "/etc/resolv.conf"]).stdout).to_string();
    assert!(
        resolv.contains(&format!("nameserver {DNS_SERVICE_IP}")),
        "{resolv}"
    );
    assert!(
        resolv.contains("search demo.svc.cluster.local svc.cluster.local cluster.local"),
        "{resolv}"
    );
    assert!(resolv.contains("ndots:5"), "{resolv}");

    // The server's token is the pod's own: the API server saw its service account, as each of
    // the two pods, watch the imports.
    let getent = |args: &[&str]| {
        let mut all = vec!["getent"];
        all.extend_from_slice(args);
        let out = node.exec(&all);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    until(
        "the imports served through the cluster DNS",
        Duration::from_secs(60),
        || {
            getent(&["hosts", "web.demo.svc.clusterset.local"])
                .1
                .contains("198.19.100.10")
        },
    );
    let audit = std::fs::read_to_string(node.path("audit.log")).unwrap();
    let pod_names: Vec<String> = pods.iter().map(|p| p.0.clone()).collect();
    for pod in &pod_names {
        assert!(
            audit.lines().any(|l| {
                let e: serde_json::Value = serde_json::from_str(l).unwrap();
                e["user"]["username"] == SA
                    && e["verb"] == "watch"
                    && e["objectRef"]["resource"] == "serviceimports"
                    && e["user"]["extra"]["authentication.kubernetes.io/pod-name"][0]
                        == pod.as_str()
            }),
            "the API server saw {pod} watch serviceimports with its service account's token"
        );
    }

    // What a pod resolves, through glibc (getent) and dig with the pod's resolv.conf.
    assert_eq!(
        getent(&["hosts", "web.demo.svc.clusterset.local"])
            .1
            .split_whitespace()
            .next(),
        Some("198.19.100.10")
    );
    let headless = getent(&["ahostsv4", "db.demo.svc.clusterset.local"]).1;
    for ip in ["198.18.201.10", "198.18.201.11"] {
        assert!(headless.contains(ip), "headless: {headless}");
    }
    assert!(
        getent(&["hosts", "db-1.east.db.demo.svc.clusterset.local"])
            .1
            .starts_with("198.18.201.11"),
        "per-pod name"
    );
    assert_eq!(
        getent(&["hosts", "nope.demo.svc.clusterset.local"]).0,
        Some(2),
        "NXDOMAIN: getent says not found"
    );
    assert!(
        getent(&["hosts", "kubernetes.default"])
            .1
            .starts_with(API_SERVICE_IP),
        "cluster.local still resolves"
    );
    assert!(
        getent(&["hosts", "clusterset-dns.clusterset-dns"])
            .1
            .starts_with(&service_ip),
        "cluster.local still resolves"
    );
    let dig = |args: &[&str]| {
        let mut all = vec!["dig", "+search"];
        all.extend_from_slice(args);
        String::from_utf8_lossy(&node.exec(&all).stdout).to_string()
    };
    let srv = dig(&[
        "+short",
        "SRV",
        "_postgres._tcp.db.demo.svc.clusterset.local",
    ]);
    for target in [
        "db-0.east.db.demo.svc.clusterset.local.",
        "db-1.east.db.demo.svc.clusterset.local.",
    ] {
        assert!(
            srv.lines().any(|l| l.ends_with(&format!(" 5432 {target}"))),
            "SRV: {srv}"
        );
    }
    let srv = dig(&["+short", "SRV", "_http._tcp.web.demo.svc.clusterset.local"]);
    assert!(
        srv.trim().ends_with(" 80 web.demo.svc.clusterset.local."),
        "SRV: {srv}"
    );
    let nx = dig(&["nope.demo.svc.clusterset.local"]);
    assert!(nx.contains("status: NXDOMAIN"), "{nx}");

    // Lookup latency from the pod through the cluster DNS: a name through the search list (as
    // written, 4 dots < ndots:5), and names no cache holds (each reaches clusterset-dns).
    for (what, want) in [
        (
            "through the search list",
            "web.demo.svc.clusterset.local=198.19.100.10",
        ),
        (
            "uncached, absolute",
            "nx-%u.demo.svc.clusterset.local.=NXDOMAIN",
        ),
    ] {
        let l = lookups(&node.exec(&["lookup", "50", "10", "2", want]));
        assert_eq!(l.failed, 0, "{l:?}");
        eprintln!(
            "pod lookups {what} ({want}): {} sent, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            l.sent, l.p50, l.p99, l.max
        );
    }

    steps.next("5. a real Prometheus scrapes both pods");
    // 5. /metrics scraped through the pod IPs by a real Prometheus. Debian's Prometheus is
    // built without Kubernetes discovery ("field kubernetes_sd_configs not found"), so the
    // test plays it: the pods' IPs from the API, in a file_sd file that Prometheus watches.
    let prometheus = node.dir.join("prometheus.yml");
    let targets = node.dir.join("targets.json");
    std::fs::write(
        &prometheus,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n\
             - job_name: clusterset-dns\n  file_sd_configs:\n  - files: [{}]\n    refresh_interval: 1s\n",
            targets.display()
        ),
    )
    .unwrap();
    let dir = node.dir.clone();
    let discover = |pods: &[(String, String, bool)]| {
        let list: Vec<serde_json::Value> = pods
            .iter()
            .map(|p| {
                serde_json::json!({"targets": [format!("{}:9153", p.1)],
                    "labels": {"namespace": "clusterset-dns", "pod": p.0}})
            })
            .collect();
        let tmp = dir.join("targets.json.tmp");
        std::fs::write(&tmp, serde_json::to_string(&list).unwrap()).unwrap();
        std::fs::rename(&tmp, &targets).unwrap();
    };
    discover(&pods);
    node.spawn(
        "prometheus",
        Path::new("prometheus"),
        &[
            format!("--config.file={}", prometheus.display()),
            format!("--storage.tsdb.path={}", node.path("prometheus")),
            "--web.listen-address=127.0.0.1:9090".into(),
        ],
    );
    // Every series' value of an instant query, in the order Prometheus gives them.
    let promql_all = |q: &str| -> Vec<f64> {
        let Ok(out) = node
            .in_ns("curl")
            .args([
                "-sf",
                "http://127.0.0.1:9090/api/v1/query",
                "--data-urlencode",
            ])
            .arg(format!("query={q}"))
            .output()
        else {
            return Vec::new();
        };
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v["data"]["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["value"][1].as_str()?.parse().ok())
            .collect()
    };
    let promql = |q: &str| -> Option<f64> { promql_all(q).first().copied() };
    let scraped = |pods: &[(String, String, bool)]| {
        let ips = pods
            .iter()
            .map(|p| format!("{}:9153", p.1))
            .collect::<Vec<_>>()
            .join("|");
        promql(&format!(
            "count(up{{job=\"clusterset-dns\",instance=~\"{ips}\"}} == 1)"
        )) == Some(2.0)
            && promql("sum(coredns_dns_requests_total{job=\"clusterset-dns\"})")
                .is_some_and(|n| n > 0.0)
    };
    until(
        "Prometheus scraping both pods",
        Duration::from_secs(60),
        || scraped(&pods),
    );

    steps.next("6. a rollout and a deleted pod lose no lookup");
    // 6. A rollout, then a deleted pod, while two clients resolve at a bounded rate, 100
    // lookups a second each over 4 threads:
    // - the client, through the cluster DNS, taking in turn the ClusterSetIP name through the
    //   search list, a name no cache holds (so that each reaches a replica), and a
    //   cluster.local name;
    // - a pod whose resolv.conf names our Service itself (dnsPolicy None), as a forwarder
    //   without CoreDNS's retries would ask it: glibc gives up on a refused query at once.
    node.client_pod("direct", &service_ip);
    let stop = "/tmp/stop-lookups";
    let client = node.lookup_loop(
        "client",
        stop,
        &[
            "100",
            "300",
            "4",
            "web.demo.svc.clusterset.local=198.19.100.10",
            "nx-%u.demo.svc.clusterset.local.=NXDOMAIN",
            "kubernetes.default.svc.cluster.local=198.19.0.1",
        ],
    );
    let direct = node.lookup_loop(
        "direct",
        stop,
        &[
            "100",
            "300",
            "4",
            "web=198.19.100.10",
            "direct-%u.demo.svc.clusterset.local.=NXDOMAIN",
        ],
    );
    std::thread::sleep(Duration::from_secs(3));
    let before: Vec<String> = node.our_pods().into_iter().map(|p| p.0).collect();
    let restart = Instant::now();
    node.k(&[
        "-n",
        "clusterset-dns",
        "rollout",
        "restart",
        "deployment/clusterset-dns",
    ]);
    node.rollout("clusterset-dns", "deployment/clusterset-dns");
    until("the old pods gone", Duration::from_secs(60), || {
        let now = node.our_pods();
        now.len() == 2 && now.iter().all(|p| p.2 && !before.contains(&p.0))
    });
    let rolled = restart.elapsed();
    let victim = node.our_pods()[0].0.clone();
    let deleted = Instant::now();
    node.k(&[
        "-n",
        "clusterset-dns",
        "delete",
        "pod",
        &victim,
        "--wait=false",
    ]);
    until(
        "the deleted pod replaced and gone",
        Duration::from_secs(60),
        || {
            let now = node.our_pods();
            now.len() == 2 && now.iter().all(|p| p.2 && p.0 != victim)
        },
    );
    let replaced = deleted.elapsed();
    std::thread::sleep(Duration::from_secs(3));
    let _ = node.exec(&["touch", stop]);
    let _ = node.exec_in("direct", &["touch", stop]);
    for (what, child) in [
        ("through the cluster DNS", client),
        ("straight to our Service", direct),
    ] {
        let l = lookups(&child.wait_with_output().unwrap());
        eprintln!(
            "lookups {what} during the rollout ({rolled:.1?}) and the pod deletion ({replaced:.1?}): {} sent, {} failed, {} stalled over 1 s; p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            l.sent, l.failed, l.stalled, l.p50, l.p99, l.max
        );
        assert_eq!(
            l.failed, 0,
            "lookups {what} failed during the rollout: {:?}",
            l.errors
        );
        assert!(l.sent >= 100 * (rolled + replaced).as_secs(), "{l:?}");
    }
    // Prometheus follows the new pods.
    let pods = node.our_pods();
    discover(&pods);
    until(
        "Prometheus scraping the new pods",
        Duration::from_secs(60),
        || scraped(&pods),
    );

    steps.next("7. deploy/xdp answers through XDP on eth0");
    // 7. deploy/xdp in place of deploy/base: the kubelet runs the pods with the capabilities
    // XDP needs, and queries through the cluster DNS reach the server through the XDP program
    // on each pod's eth0 (the veth the CNI bridge made).
    let xdp = node.overlay("xdp", "deploy/xdp");
    node.k(&["apply", "-k", &xdp]);
    node.rollout("clusterset-dns", "deployment/clusterset-dns");
    until("the base's pods gone", Duration::from_secs(60), || {
        let now = node.our_pods();
        now.len() == 2 && now.iter().all(|p| p.2)
    });
    let pods = node.our_pods();
    let metrics = |ip: &str| {
        let out = node
            .in_ns("curl")
            .args(["-sf", &format!("http://{ip}:9153/metrics")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let received = |ip: &str| -> f64 {
        metrics(ip)
            .lines()
            .filter(|l| l.starts_with("clusterset_dns_xdp_received_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    for p in &pods {
        let m = metrics(&p.1);
        assert!(
            m.contains("clusterset_dns_xdp_up{interface=\"eth0\""),
            "{} serves XDP on eth0:\n{}\n{}",
            p.0,
            m.lines()
                .filter(|l| l.contains("xdp"))
                .collect::<Vec<_>>()
                .join("\n"),
            node.kubectl_text(&["-n", "clusterset-dns", "logs", &p.0])
        );
    }
    // Prometheus scrapes the XDP pods before the lookups, so the rates below see them.
    discover(&pods);
    // (Not `scraped`: these pods have answered no query yet.)
    until(
        "Prometheus scraping the XDP pods' queues",
        Duration::from_secs(60),
        || {
            let ips: Vec<String> = pods.iter().map(|p| format!("{}:9153", p.1)).collect();
            promql(&format!(
                "count(count by (instance) (clusterset_dns_xdp_up{{instance=~\"{}\"}} == 1))",
                ips.join("|")
            )) == Some(2.0)
        },
    );
    let before_each: Vec<f64> = pods.iter().map(|p| received(&p.1)).collect();
    let before: f64 = before_each.iter().sum();
    let l = lookups(&node.exec(&[
        "lookup",
        "50",
        "4",
        "2",
        "xdp-%u.demo.svc.clusterset.local.=NXDOMAIN",
        "web.demo.svc.clusterset.local=198.19.100.10",
    ]));
    assert_eq!(l.failed, 0, "lookups through XDP: {l:?}");
    let after_each: Vec<f64> = pods.iter().map(|p| received(&p.1)).collect();
    let after: f64 = after_each.iter().sum();
    let each: Vec<f64> = after_each
        .iter()
        .zip(&before_each)
        .map(|(a, b)| a - b)
        .collect();
    eprintln!(
        "deploy/xdp: {} lookups through the cluster DNS, 0 failed, p50 {:.2} ms, p99 {:.2} ms; the XDP program handed {} frames to the two pods ({each:?})",
        l.sent,
        l.p50,
        l.p99,
        after - before
    );
    // Every uncached lookup is an A and an AAAA query from CoreDNS to a replica.
    assert!(
        after - before >= l.sent as f64 / 2.0,
        "frames through XDP: {before} then {after}, for {} lookups",
        l.sent
    );
    // The XDP panel of our dashboard (the one tests/integration/monitoring.rs cannot show without --xdp)
    // shows both pods' queues and a rate of frames.
    let board = common::grafana::dashboard(&repo().join("deploy/monitoring/dashboard.json"));
    let vars = [
        ("job", "clusterset-dns"),
        ("instance", ".*"),
        ("bridge_job", "clusterset-dns-linkerd-bridge"),
        ("__rate_interval", "1m"),
    ];
    let xdp_panel: Vec<String> = common::grafana::queries(&board, &vars)
        .into_iter()
        .filter(|(title, _)| title == "XDP")
        .map(|(_, q)| q)
        .collect();
    assert_eq!(xdp_panel.len(), 2, "{xdp_panel:?}");
    for q in &xdp_panel {
        until(
            format!("the XDP panel's {q}"),
            Duration::from_secs(60),
            // One series per pod. CoreDNS's forward keeps its UDP sockets, so the lookups may
            // all have gone to one pod: the panel shows a rate when any pod's line is above 0.
            || promql_all(q).iter().any(|&v| v > 0.0),
        );
    }

    steps.next("8. helm install and upgrade lose no lookup");
    // 8. The Helm chart: `helm install` into a namespace of its own (release helm-dns, a fixed
    // Service address), then `helm upgrade` with a changed value (the TTL, so the pods roll)
    // while a pod whose resolv.conf names that Service resolves: no lookup may fail.
    let helm = |args: &[&str]| node.helm("helm-dns", args);
    let chart = repo().join("deploy/helm/clusterset-dns");
    let chart = chart.to_str().unwrap();
    let (image, tag) = IMAGE.split_once(':').unwrap();
    let (image, tag) = (
        format!("image.repository={image}"),
        format!("image.tag={tag}"),
    );
    // Not deploy/base's pinned address (the node's .53), which its Service still holds.
    let helm_ip = "198.19.0.54";
    assert_ne!(helm_ip, node.our_address());
    let service_ip = format!("service.clusterIP={helm_ip}");
    node.k(&["create", "namespace", "helm-dns"]);
    let installed = helm(&[
        "install",
        "helm-dns",
        chart,
        "--namespace",
        "helm-dns",
        "--set",
        &image,
        "--set",
        &tag,
        "--set",
        &service_ip,
        "--wait",
        "--timeout",
        "180s",
    ]);
    let helm_pods = || -> Vec<String> {
        node.k(&[
            "-n",
            "helm-dns",
            "get",
            "pods",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
        ])
        .lines()
        .map(str::to_string)
        .collect()
    };
    let before = helm_pods();
    assert_eq!(before.len(), 2, "{before:?}");
    node.client_pod("helm-client", helm_ip);
    // The TTL of the first answer: `None` until one comes. The client pod's first queries can
    // come before kube-proxy has the Service's rules on the node (seconds, with the other tests
    // busy on the same two cores): dig then says ";; communications error", or gives up
    // ("command terminated with exit code 9"), so only an answer line (`name TTL IN A addr`)
    // counts.
    let ttl = || {
        let out = node.exec_in(
            "helm-client",
            &["dig", "+noall", "+answer", "web.demo.svc.clusterset.local"],
        );
        text(&out).lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 5 && f[2] == "IN" && f[3] == "A").then(|| f[1].to_string())
        })
    };
    let first = value(
        "an answer from the chart's server",
        Duration::from_secs(60),
        ttl,
    );
    assert_eq!(
        first, "5",
        "the chart's server answers with the default TTL"
    );
    let stop = "/tmp/stop-helm-lookups";
    let lookups_during = node.lookup_loop(
        "helm-client",
        stop,
        &[
            "100",
            "300",
            "4",
            "web=198.19.100.10",
            "helm-%u.demo.svc.clusterset.local.=NXDOMAIN",
        ],
    );
    std::thread::sleep(Duration::from_secs(2));
    let upgrade = Instant::now();
    let upgraded = helm(&[
        "upgrade",
        "helm-dns",
        chart,
        "--namespace",
        "helm-dns",
        "--reuse-values",
        "--set",
        "ttl=10",
        "--wait",
        "--timeout",
        "180s",
    ]);
    until("the chart's old pods gone", Duration::from_secs(60), || {
        let now = helm_pods();
        now.len() == 2
            && now
                .iter()
                .all(|p| p.ends_with(" True") && !before.contains(p))
    });
    let rolled = upgrade.elapsed();
    until("the new TTL answered", Duration::from_secs(10), || {
        ttl().as_deref() == Some("10")
    });
    std::thread::sleep(Duration::from_secs(2));
    let _ = node.exec_in("helm-client", &["touch", stop]);
    let l = lookups(&lookups_during.wait_with_output().unwrap());
    eprintln!(
        "helm: install {installed:.1?}; upgrade (TTL 5 -> 10) {upgraded:.1?}, the old pods gone {rolled:.1?} after it began; lookups straight to the chart's Service meanwhile: {} sent, {} failed, {} stalled over 1 s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        l.sent, l.failed, l.stalled, l.p50, l.p99, l.max
    );
    assert_eq!(
        l.failed, 0,
        "lookups failed during helm upgrade: {:?}",
        l.errors
    );
    assert!(l.sent >= 100 * upgraded.as_secs(), "{l:?}");
}
