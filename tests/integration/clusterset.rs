//! A real cluster set: two clusters, `east` and `west`, each a node of real components
//! ([`common::node`]) in a network namespace of its own, joined by a link with routes to each
//! other's pod CIDR (as sigs.k8s.io/mcs-api's e2e joins its two kind clusters). In each: the
//! MCS CRDs of sigs.k8s.io/mcs-api v0.5.2, the ClusterProperty naming the cluster, the MCS API's
//! own controller (sigs.k8s.io/mcs-api/controllers: the derived Service of each ClusterSetIP
//! import, its ClusterIP written into spec.ips, the imported slices relabelled for kube-proxy),
//! clusterset-dns from the Helm chart (its cluster id from the ClusterProperty, no flag) behind
//! CoreDNS, and a client pod. The export side is the test's syncer (tests/mcs/infra/syncer): no
//! implementation that exports across clusters can be built here. Nothing is written by hand
//! but the workloads and their ServiceExports; every connection is a real TCP connection from a
//! pod of one cluster to a pod of the other, through our answers. Needs root.

use crate::common;

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use common::Steps;
use common::docker::IMAGE;
use common::node::{Net, Node, join, lookups, repo, setup};
use common::percentile;
use common::until;

const EAST: Net = Net {
    name: "east",
    node_ip: "198.18.0.2",
    api_service_ip: "198.19.0.1",
    dns_service_ip: "198.19.0.10",
    pod_cidr: "198.18.64.0/24",
    service_cidr: "198.19.0.0/17",
};
const WEST: Net = Net {
    name: "west",
    node_ip: "198.18.0.3",
    api_service_ip: "198.19.128.1",
    dns_service_ip: "198.19.128.10",
    pod_cidr: "198.18.65.0/24",
    service_cidr: "198.19.128.0/17",
};

/// Our Service's fixed address in a cluster (the chart's service.clusterIP).
fn our_ip(net: &Net) -> &'static str {
    if net.name == "east" {
        "198.19.0.53"
    } else {
        "198.19.128.53"
    }
}

/// How many more services `east` exports for the withdrawal's figures (beside web and db).
const EXTRA: usize = 20;

/// One cluster's part of the set.
struct Member {
    node: Node,
}

impl Member {
    fn name(&self) -> &'static str {
        self.node.net.name
    }

    /// Runs `script` with bash in the client pod; its output, or None if it failed.
    fn client(&self, script: &str) -> Option<String> {
        let out = self
            .node
            .kubectl(&["-n", "demo", "exec", "client", "--", "bash", "-c", script]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// getaddrinfo's IPv4 addresses for `name` in the client pod (glibc, through the kubelet's
    /// resolv.conf and CoreDNS), sorted; empty when it fails.
    fn resolve(&self, name: &str) -> Vec<String> {
        let out = self
            .client(&format!("getent ahostsv4 {name}"))
            .unwrap_or_default();
        let set: BTreeSet<String> = out
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect();
        set.into_iter().collect()
    }

    /// One TCP connection from the client pod to `host` port 80 (bash's /dev/tcp, which resolves
    /// with getaddrinfo): what the backend wrote (`<pod> <cluster>`), or None.
    fn connect(&self, host: &str) -> Option<String> {
        self.client(&format!("exec 3<>/dev/tcp/{host}/80 && timeout 5 cat <&3"))
            .filter(|s| !s.is_empty())
    }

    /// The first of import `name`'s spec.ips in demo (empty while it has none).
    fn first_ip(&self, name: &str) -> String {
        self.node.k(&[
            "-n",
            "demo",
            "get",
            "serviceimport",
            name,
            "-o",
            "jsonpath={.spec.ips[0]}",
        ])
    }

    /// The pods' IPs of `selector` in demo, sorted.
    fn pod_ips(&self, selector: &str) -> Vec<String> {
        let out = self.node.k(&[
            "-n",
            "demo",
            "get",
            "pods",
            "-l",
            selector,
            "-o",
            "jsonpath={range .items[*]}{.status.podIP}{\"\\n\"}{end}",
        ]);
        let mut v: Vec<String> = out
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        v.sort();
        v
    }

    /// Every name of `names` asked of our Service from the node's namespace, in one `dig`
    /// (None when dig failed).
    fn dig_all(&self, names: &[String]) -> Option<Vec<Vec<String>>> {
        dig_all(&self.node.ns, our_ip(self.node.net), names)
    }
}

/// `dig` in network namespace `ns` at `server`, every name in one run: the sorted A addresses
/// of each, in the order of `names` (empty when it has none); None when dig failed (a timeout),
/// which is no answer at all, not an empty one.
fn dig_all(ns: &str, server: &str, names: &[String]) -> Option<Vec<Vec<String>>> {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net=/run/netns/{ns}")).args([
        "--",
        "dig",
        &format!("@{server}"),
        "+noall",
        "+answer",
        "+time=1",
        "+tries=1",
    ]);
    for n in names {
        cmd.args([n.as_str(), "A"]);
    }
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    let body = String::from_utf8_lossy(&out.stdout);
    let answers = names
        .iter()
        .map(|n| {
            let owner = format!("{n}.");
            let mut v: Vec<String> = body
                .lines()
                .filter_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (f.len() == 5 && f[0].eq_ignore_ascii_case(&owner) && f[3] == "A")
                        .then(|| f[4].to_string())
                })
                .collect();
            v.sort();
            v
        })
        .collect();
    Some(answers)
}

/// A name's answers over time: each change, with the wall-clock time it was first seen.
type History = Vec<(SystemTime, Vec<String>)>;

/// Answers of `names` from a member's own server, polled back to back in a thread: for each
/// name, every change with the wall-clock time it was first seen.
struct Watch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<History>>>,
}

impl Watch {
    /// Starts watching `names`; returns once every name has a first answer on record, so that
    /// what happens next is seen against what was answered before it.
    fn start(m: &Member, names: Vec<String>) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let first = Arc::new(AtomicBool::new(false));
        let ns = m.node.ns.clone();
        let server = our_ip(m.node.net);
        let (flag, seen_once) = (stop.clone(), first.clone());
        let thread = std::thread::spawn(move || {
            let mut seen: Vec<History> = vec![Vec::new(); names.len()];
            let start = Instant::now();
            while !flag.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(600) {
                let Some(answers) = dig_all(&ns, server, &names) else {
                    continue;
                };
                let now = SystemTime::now();
                for (h, v) in seen.iter_mut().zip(answers) {
                    if h.last().is_none_or(|(_, last)| *last != v) {
                        h.push((now, v));
                    }
                }
                seen_once.store(true, Ordering::Relaxed);
            }
            seen
        });
        until("the watch's first answers", 30, || {
            first.load(Ordering::Relaxed)
        });
        Watch {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Vec<History> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// `kubectl get --watch` in a member's namespace: each line it prints, with the wall-clock time
/// it arrived (when a watcher of the API learns of a change).
struct ApiWatch {
    child: std::process::Child,
    lines: Arc<std::sync::Mutex<Vec<(SystemTime, String)>>>,
}

impl ApiWatch {
    fn start(m: &Member, args: &[&str]) -> ApiWatch {
        use std::io::BufRead;
        let mut child = m
            .node
            .kubectl_cmd()
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = lines.clone();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                keep.lock().unwrap().push((SystemTime::now(), l));
            }
        });
        ApiWatch { child, lines }
    }

    fn finish(mut self) -> Vec<(SystemTime, String)> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::take(&mut *self.lines.lock().unwrap())
    }
}

/// A wall-clock time in a log line (RFC 3339, as the syncer and controller-runtime write it).
fn log_time(s: &str) -> SystemTime {
    humantime::parse_rfc3339_weak(s.trim_end_matches('Z'))
        .unwrap_or_else(|e| panic!("{s:?} is not a time: {e}"))
}

/// The syncer's writes so far (one JSON object per line of its log).
fn syncer_writes(east: &Member) -> Vec<serde_json::Value> {
    std::fs::read_to_string(east.node.path("syncer.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["op"].is_string())
        .collect()
}

/// `to` - `from` in milliseconds, negative when `to` came first (a log line is written when the
/// API call returns, which can be after a watcher saw its effect).
fn signed_ms(from: SystemTime, to: SystemTime) -> f64 {
    match to.duration_since(from) {
        Ok(d) => d.as_secs_f64() * 1000.0,
        Err(e) => -e.duration().as_secs_f64() * 1000.0,
    }
}

fn start_syncer(east: &mut Member, clusters: &[(&str, String)]) {
    let bin = setup("tests/mcs/setup.sh").join("bin/syncer");
    let mut args = Vec::new();
    for (name, kubeconfig) in clusters {
        args.push(format!("--cluster={name}={kubeconfig}"));
    }
    east.node.spawn("syncer", &bin, &args);
}

fn workloads(m: &Member, web: bool) {
    let cluster = m.name();
    let mut yaml = format!(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: db, namespace: demo}}\n\
         spec:\n  serviceName: db\n  replicas: 1\n  selector: {{matchLabels: {{app: db}}}}\n  template:\n    \
         metadata: {{labels: {{app: db}}}}\n    spec:\n      terminationGracePeriodSeconds: 0\n      containers:\n      \
         - {{name: db, image: clusterset-dns-test/client:1, imagePullPolicy: Never, command: [serve, '80', {cluster}], ports: [{{containerPort: 80}}]}}\n\
         ---\napiVersion: v1\nkind: Service\nmetadata: {{name: db, namespace: demo}}\n\
         spec: {{clusterIP: None, selector: {{app: db}}, ports: [{{name: http, port: 80, protocol: TCP}}]}}\n\
         ---\napiVersion: v1\nkind: Pod\nmetadata: {{name: client, namespace: demo}}\n\
         spec:\n  terminationGracePeriodSeconds: 0\n  containers:\n  \
         - {{name: client, image: clusterset-dns-test/client:1, imagePullPolicy: Never, command: [sleep, infinity]}}\n"
    );
    if web {
        yaml += &format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: demo}}\n\
             spec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    \
             metadata: {{labels: {{app: web}}}}\n    spec:\n      terminationGracePeriodSeconds: 0\n      containers:\n      \
             - {{name: web, image: clusterset-dns-test/client:1, imagePullPolicy: Never, command: [serve, '80', {cluster}], ports: [{{containerPort: 80}}]}}\n\
             ---\napiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: demo}}\n\
             spec: {{selector: {{app: web}}, ports: [{{name: http, port: 80, protocol: TCP}}]}}\n"
        );
        for i in 0..EXTRA {
            yaml += &format!(
                "---\napiVersion: v1\nkind: Service\nmetadata: {{name: s{i}, namespace: demo}}\n\
                 spec: {{clusterIP: None, selector: {{app: web}}, ports: [{{name: http, port: 80, protocol: TCP}}]}}\n"
            );
        }
    }
    m.node.apply(&yaml);
}

fn export(m: &Member, name: &str) {
    m.node.apply(&format!(
        "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {{name: {name}, namespace: demo}}\n"
    ));
}

/// Sets up one member: the CRDs, its ClusterProperty, the MCS controller, clusterset-dns from
/// the chart behind CoreDNS.
fn member_setup(m: &mut Member, mcs: &std::path::Path) {
    let node = &m.node;
    let name = node.net.name;
    node.install_crds(
        &[
            mcs.join("crds/multicluster.x-k8s.io_serviceimports.yaml"),
            mcs.join("crds/multicluster.x-k8s.io_serviceexports.yaml"),
            repo().join("deploy/crds/clusterproperty.yaml"),
        ],
        &[
            "serviceimports.multicluster.x-k8s.io",
            "serviceexports.multicluster.x-k8s.io",
            "clusterproperties.about.k8s.io",
        ],
    );
    m.node.apply(&format!(
        "apiVersion: about.k8s.io/v1alpha1\nkind: ClusterProperty\nmetadata: {{name: cluster.clusterset.k8s.io}}\nspec: {{value: {name}}}\n\
         ---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: demo}}\n"
    ));
    // The MCS controller, as the controller-manager runs: its own ClusterRole
    // (config/rbac/role.yaml), bound to the user of its own kubeconfig.
    node.k(&["apply", "-f", mcs.join("rbac/role.yaml").to_str().unwrap()]);
    m.node.apply(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: mcs-derived-service-manager}\n\
         roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: mcs-derived-service-manager}\n\
         subjects:\n- {kind: User, name: mcs-controller, apiGroup: rbac.authorization.k8s.io}\n",
    );
    let kubeconfig = node.path("mcs-controller.kubeconfig");
    m.node.spawn(
        "mcs-controller",
        &mcs.join("bin/servicecontroller"),
        &[
            format!("--kubeconfig={kubeconfig}"),
            "--metrics-addr=127.0.0.1:8085".into(),
        ],
    );
    let node = &m.node;

    // clusterset-dns from the chart, no cluster id given: it reads the ClusterProperty.
    let chart = repo().join("deploy/helm/clusterset-dns");
    let (image, tag) = IMAGE.split_once(':').unwrap();
    node.k(&["create", "namespace", "clusterset-dns"]);
    node.helm(
        "clusterset-dns",
        &[
            "install",
            "clusterset-dns",
            chart.to_str().unwrap(),
            "--namespace",
            "clusterset-dns",
            "--set",
            &format!("image.repository={image}"),
            "--set",
            &format!("image.tag={tag}"),
            "--set",
            &format!("service.clusterIP={}", our_ip(node.net)),
            "--wait",
            "--timeout",
            "180s",
        ],
    );
    // CoreDNS as the cluster DNS, forwarding clusterset.local to it.
    node.cluster_dns(our_ip(node.net));
}

#[test]
fn a_real_cluster_set_of_two_clusters_with_the_mcs_controller() {
    let _module = common::module(module_path!());
    let mut steps = Steps::default();

    steps.next("0. two clusters from real components, joined");
    let mcs = setup("tests/mcs/setup.sh");
    // Built once before the nodes start in parallel, which would otherwise both build them.
    let _ = setup("tests/cluster/images.sh");
    let (east, west) = std::thread::scope(|s| {
        let e = s.spawn(|| Node::start(&EAST));
        let w = s.spawn(|| Node::start(&WEST));
        (e.join(), w.join())
    });
    let (Ok(east), Ok(west)) = (east, west) else {
        panic!("a node did not start (its panic is above)");
    };
    join(&east, &west);
    let mut east = Member { node: east };
    let mut west = Member { node: west };
    // Each node reaches the other's API server over the link.
    for (from, to) in [(&east, &west), (&west, &east)] {
        from.node.sh(&format!(
            "timeout 5 bash -c 'exec 3<>/dev/tcp/{}/6443'",
            to.node.net.node_ip
        ));
    }

    steps.next("1. in each: the MCS CRDs, the ClusterProperty, the MCS controller, clusterset-dns behind CoreDNS");
    member_setup(&mut east, &mcs);
    member_setup(&mut west, &mcs);
    for m in [&east, &west] {
        until(
            format!("{}'s server knows its own cluster", m.name()),
            Duration::from_secs(30),
            || {
                let out = m
                    .node
                    .in_ns("curl")
                    .args(["-s", &format!("http://{}:9153/metrics", our_ip(m.node.net))])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout).contains(&format!(
                    "clusterset_dns_cluster_info{{cluster_id=\"{}\"}} 1",
                    m.name()
                ))
            },
        );
    }

    steps.next("2. the export syncer, the workloads, a client pod in each");
    let clusters = [
        ("east", east.node.path("admin.kubeconfig")),
        ("west", west.node.path("admin.kubeconfig")),
    ];
    start_syncer(&mut east, &clusters);
    workloads(&east, true);
    workloads(&west, false);
    for m in [&east, &west] {
        m.node.rollout("demo", "statefulset/db");
        m.node.wait_ready("client");
    }
    east.node.rollout("demo", "deployment/web");
    let east_web = east.pod_ips("app=web");
    assert_eq!(east_web.len(), 2, "{east_web:?}");

    steps.next("3a. ClusterSetIP across clusters: east exports web, west connects to it by name");
    let name = "web.demo.svc.clusterset.local";
    let watch = Watch::start(&west, vec![name.to_string()]);
    let imports = ApiWatch::start(
        &west,
        &[
            "-n",
            "demo",
            "get",
            "serviceimports",
            "--watch",
            "-o",
            "jsonpath={.metadata.name} {.spec.ips}{\"\\n\"}",
        ],
    );
    let exported = Instant::now();
    let exported_at = SystemTime::now();
    export(&east, "web");
    let mut first = None;
    until(
        "a connection from west to web",
        Duration::from_secs(120),
        || {
            first = west.connect(name);
            first.is_some()
        },
    );
    let connected = exported.elapsed();

    steps.next("3b. west's spec.ips is the ClusterIP of the Service west's controller derived");
    let ip = derived_ips(&west);
    until(
        "west's pod resolves web to west's spec.ips",
        Duration::from_secs(30),
        || west.resolve(name) == [ip.clone()],
    );

    steps.next("3c. each of east's backends is reached from west");
    every_backend_reached(&west, &east, name);
    let history = watch.finish().remove(0);
    export_chain(
        &east,
        imports.finish(),
        &history,
        exported_at,
        &ip,
        connected,
    );

    steps.next("4. headless across clusters: the union, and db-0.east from west");
    export(&east, "db");
    export(&west, "db");
    let db = "db.demo.svc.clusterset.local";
    let east_db = east.pod_ips("app=db");
    let west_db = west.pod_ips("app=db");
    let mut union: Vec<String> = east_db.iter().chain(&west_db).cloned().collect();
    union.sort();
    until(
        "west resolves db to both clusters' pods",
        Duration::from_secs(60),
        || west.resolve(db) == union,
    );
    until(
        "east resolves the same union",
        Duration::from_secs(30),
        || east.resolve(db) == union,
    );
    let host = "db-0.east.db.demo.svc.clusterset.local";
    assert_eq!(west.resolve(host), east_db);
    assert_eq!(west.connect(host).as_deref(), Some("db-0 east"));
    assert_eq!(
        west.connect("db-0.west.db.demo.svc.clusterset.local")
            .as_deref(),
        Some("db-0 west")
    );

    steps.next("5. locality for real: PreferClose answers west's own, east's when west has none");
    let stop = "/tmp/stop-locality";
    let loop_ = west
        .node
        .lookup_loop("client", stop, &["20", "300", "2", &format!("{db}=ANY")]);
    let ours = Watch::start(&west, vec![db.to_string()]);
    let patched = Instant::now();
    let patched_at = SystemTime::now();
    for m in [&east, &west] {
        m.node.k(&[
            "-n",
            "demo",
            "patch",
            "service",
            "db",
            "--type=merge",
            "-p",
            "{\"spec\":{\"trafficDistribution\":\"PreferClose\"}}",
        ]);
    }
    until(
        "west answers west's db only",
        Duration::from_secs(60),
        || west.resolve(db) == west_db,
    );
    let own = patched.elapsed();
    until("east answers east's own", Duration::from_secs(30), || {
        east.resolve(db) == east_db
    });
    let scaled = Instant::now();
    let scaled_at = SystemTime::now();
    west.node
        .k(&["-n", "demo", "scale", "statefulset", "db", "--replicas=0"]);
    until(
        "west answers east's db when it has none",
        Duration::from_secs(90),
        || west.resolve(db) == east_db,
    );
    let to_east = scaled.elapsed();
    let back = Instant::now();
    let back_at = SystemTime::now();
    west.node
        .k(&["-n", "demo", "scale", "statefulset", "db", "--replicas=1"]);
    west.node.rollout("demo", "statefulset/db");
    let west_db_before = west_db;
    let west_db = west.pod_ips("app=db");
    until(
        "west answers its own db again",
        Duration::from_secs(90),
        || west.resolve(db) == west_db,
    );
    let to_west = back.elapsed();
    let _ = west.node.exec_in("client", &["touch", stop]);
    let l = lookups(&loop_.wait_with_output().unwrap());
    // Our part of each switch: from the syncer's write in west that made it (the import's
    // trafficDistribution, then west's slice copy) to our server's answer changing.
    let history = ours.finish().remove(0);
    let writes = syncer_writes(&east);
    let west_write = |kind: &str, name: &str, after: SystemTime| -> SystemTime {
        writes
            .iter()
            .filter(|w| w["cluster"] == "west" && w["kind"] == kind && w["op"] == "update")
            .filter(|w| w["name"].as_str().unwrap().starts_with(name))
            .map(|w| log_time(w["time"].as_str().unwrap()))
            .filter(|t| *t >= after)
            .min()
            .unwrap_or_else(|| panic!("the syncer updated {kind} {name}* in west: {writes:?}"))
    };
    let answered = |want: &[String], after: SystemTime| -> SystemTime {
        history
            .iter()
            .find(|(t, v)| *t >= after && v == want)
            .map(|(t, _)| *t)
            .unwrap_or_else(|| panic!("our answer {want:?} after the change: {history:?}"))
    };
    let import_updated = west_write("ServiceImport", "db", patched_at);
    let emptied = west_write("EndpointSlice", "imported-west-db-", scaled_at);
    let refilled = west_write("EndpointSlice", "imported-west-db-", back_at);
    eprintln!(
        "locality through a pod's getaddrinfo (CoreDNS caches for our TTL, 5 s): PreferClose patched -> west's own {own:.1?}; \
         west scaled to 0 -> east's {to_east:.1?}; back to 1 -> west's own {to_west:.1?} (includes the pod's start). \
         Our part, the syncer's write in west -> our answer changed: import's trafficDistribution {:.0} ms, \
         west's slice emptied {:.0} ms, refilled {:.0} ms. Lookups of {db} throughout: {} sent, {} failed, p50 {:.2} ms, p99 {:.2} ms",
        signed_ms(import_updated, answered(&west_db_before, import_updated)),
        signed_ms(emptied, answered(&east_db, emptied)),
        signed_ms(refilled, answered(&west_db, refilled)),
        l.sent,
        l.failed,
        l.p50,
        l.p99
    );
    assert_eq!(
        l.failed, 0,
        "lookups failed during the switches: {:?}",
        l.errors
    );
    assert!(l.sent > 0);

    steps.next("6. the same answers as CoreDNS's multicluster plugin on west's real objects");
    for i in 0..EXTRA {
        export(&east, &format!("s{i}"));
    }
    let extra: Vec<String> = (0..EXTRA)
        .map(|i| format!("s{i}.demo.svc.clusterset.local"))
        .collect();
    until(
        "west answers every extra service",
        Duration::from_secs(120),
        || {
            west.dig_all(&extra)
                .is_some_and(|a| a.iter().all(|v| *v == east_web))
        },
    );
    // CoreDNS v1.15.0 as mcs-api's e2e runs it (`multicluster clusterset.local`, reading the
    // v1alpha1 ServiceImports of the same API server), beside ours, in west's namespace.
    let corefile = west.node.path("Corefile.multicluster");
    std::fs::write(
        &corefile,
        format!(
            "clusterset.local:1053 {{\n    bind 127.0.0.1\n    kubernetes clusterset.local {{\n        kubeconfig {} test\n        multicluster clusterset.local\n    }}\n}}\n",
            west.node.path("admin.kubeconfig")
        ),
    )
    .unwrap();
    west.node.spawn(
        "coredns-multicluster",
        &common::coredns::binary(),
        &["-conf".into(), corefile],
    );
    let ask = |server: &str, port: &str, name: &str, qtype: &str| -> (String, BTreeSet<String>) {
        let out = west
            .node
            .in_ns("dig")
            .args([
                &format!("@{server}"),
                "-p",
                port,
                "+norec",
                "+time=1",
                "+tries=1",
                name,
                qtype,
            ])
            .output()
            .unwrap();
        let body = String::from_utf8_lossy(&out.stdout).to_string();
        let status = body
            .split("status: ")
            .nth(1)
            .and_then(|s| s.split(',').next())
            .unwrap_or("no answer")
            .to_string();
        let section: BTreeSet<String> = body
            .split(";; ANSWER SECTION:\n")
            .nth(1)
            .map(|a| a.split("\n\n").next().unwrap_or(""))
            .unwrap_or("")
            .lines()
            .map(|l| {
                // Owner, type and data; not the TTL, nor an SRV's priority and weight.
                let f: Vec<&str> = l.split_whitespace().collect();
                let data = if f[3] == "SRV" {
                    f[6..].join(" ")
                } else {
                    f[4..].join(" ")
                };
                format!("{} {} {data}", f[0].to_ascii_lowercase(), f[3])
            })
            .collect();
        (status, section)
    };
    let theirs = |name: &str, qtype: &str| ask("127.0.0.1", "1053", name, qtype);
    let ours = |name: &str, qtype: &str| ask(our_ip(&WEST), "53", name, qtype);
    until("CoreDNS answers web", Duration::from_secs(60), || {
        theirs(name, "A").1.len() == 1
    });
    let same = [
        (name, "A"),
        ("_http._tcp.web.demo.svc.clusterset.local", "SRV"),
        ("s0.demo.svc.clusterset.local", "A"),
        ("db-0.east.db.demo.svc.clusterset.local", "A"),
        ("db-0.west.db.demo.svc.clusterset.local", "A"),
        ("nothing.demo.svc.clusterset.local", "A"),
    ];
    for (n, t) in same {
        assert_eq!(ours(n, t), theirs(n, t), "{n} {t}: ours, then CoreDNS's");
    }
    // docs/differences.md row 11 (beyond): with PreferClose, ours is west's own pods only;
    // CoreDNS has no locality and answers both clusters'.
    let (ours_status, ours_db) = ours(db, "A");
    let (their_status, their_db) = theirs(db, "A");
    assert_eq!(
        (ours_status.as_str(), their_status.as_str()),
        ("NOERROR", "NOERROR")
    );
    let addresses = |set: &BTreeSet<String>| -> Vec<String> {
        set.iter()
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
            .collect()
    };
    assert_eq!(addresses(&ours_db), west_db, "ours: west's own");
    let mut both: Vec<String> = east_db.iter().chain(&west_db).cloned().collect();
    both.sort();
    assert_eq!(addresses(&their_db), both, "CoreDNS: both clusters'");

    steps.next("7. an export changed keeps west's spec.ips; an export withdrawn goes");
    // A port added to web's Service in east: the syncer updates every cluster's import, and
    // west's keeps the spec.ips its controller wrote.
    east.node.k(&[
        "-n",
        "demo",
        "patch",
        "service",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/ports/-","value":{"name":"admin","port":8080,"protocol":"TCP","targetPort":80}}]"#,
    ]);
    let admin = "_admin._tcp.web.demo.svc.clusterset.local";
    until("our SRV of the new port", Duration::from_secs(30), || {
        ours(admin, "SRV").1.iter().any(|l| l.contains("8080"))
    });
    assert_eq!(
        west.first_ip("web"),
        ip,
        "west's spec.ips kept through the syncer's update"
    );
    assert_eq!(ours(name, "A").1.len(), 1);
    // The export of the last extra service withdrawn in east: its import goes from every cluster.
    let last = format!("s{}", EXTRA - 1);
    east.node
        .k(&["-n", "demo", "delete", "serviceexport", &last]);
    until(
        "the withdrawn export's name gone from west",
        Duration::from_secs(30),
        || ours(&format!("{last}.demo.svc.clusterset.local"), "A").0 == "NXDOMAIN",
    );
    until("its import gone from west", Duration::from_secs(30), || {
        !west
            .node
            .kubectl(&["-n", "demo", "get", "serviceimport", &last])
            .status
            .success()
    });

    west.node.kill("coredns-multicluster");

    steps.next("8. a cluster leaves: west drops east's addresses");
    let mut names = extra;
    names.pop();
    let watch = Watch::start(&west, names.clone());
    east.node.kill("syncer");
    // The syncer again, without east (its log starts anew): what came from east goes from west.
    start_syncer(&mut east, &clusters[1..]);
    until(
        "west's answers without east",
        Duration::from_secs(60),
        || {
            west.dig_all(&names)
                .is_some_and(|a| a.iter().all(|v| v.is_empty()))
        },
    );
    std::thread::sleep(Duration::from_millis(500));
    let history = watch.finish();
    let writes = syncer_writes(&east);
    let mut took = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let svc = name.split('.').next().unwrap();
        let deleted = writes
            .iter()
            .filter(|w| {
                w["cluster"] == "west" && w["kind"] == "EndpointSlice" && w["op"] == "delete"
            })
            .filter(|w| {
                w["name"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("imported-east-{svc}-"))
            })
            .map(|w| log_time(w["time"].as_str().unwrap()))
            .min()
            .unwrap_or_else(|| panic!("the syncer deleted {svc}'s slice from west: {writes:?}"));
        let changed = history[i]
            .iter()
            .find(|(_, v)| {
                v.iter()
                    .all(|a| !east_web.contains(a) && !east_db.contains(a))
            })
            .map(|(t, _)| *t)
            .unwrap_or_else(|| panic!("{name}'s answer dropped east's: {:?}", history[i]));
        took.push(signed_ms(deleted, changed));
        // Never an answer with east's addresses after the change.
        let after = history[i].iter().skip_while(|(t, _)| *t < changed);
        for (_, v) in after {
            assert!(
                v.iter()
                    .all(|a| !east_web.contains(a) && !east_db.contains(a)),
                "{name} answered east's address after it left: {v:?}"
            );
        }
    }
    took.sort_by(|a, b| a.partial_cmp(b).unwrap());
    eprintln!(
        "a cluster leaves: slice deleted from west (the syncer's log line, when the API call returned) -> west's answer without east, \
         {} services: p50 {:.0} ms, p99 {:.0} ms, min {:.0} ms, max {:.0} ms (dig polling back to back)",
        took.len(),
        percentile(&took, 0.5),
        percentile(&took, 0.99),
        took[0],
        took[took.len() - 1]
    );
    // web came only from east: its import, and so its name, are gone from west.
    until("web gone from west", Duration::from_secs(60), || {
        west.dig_all(&[name.to_string()])
            .is_some_and(|a| a[0].is_empty())
    });

    steps.next("9. scale-out: metrics-server and the chart's HPA take west's server from 2 replicas to 3 and back, losing no lookup");
    scale_out(&west);
}

/// West's `spec.ips` for `web`: its own, written by west's controller from the derived Service
/// it made (the test never writes spec.ips), inside west's Service CIDR.
fn derived_ips(west: &Member) -> String {
    // The import's address is west's own, written by west's controller from the derived
    // Service it made: the test never writes spec.ips.
    until(
        "west's controller writes spec.ips",
        Duration::from_secs(60),
        || !west.first_ip("web").is_empty(),
    );
    let ip = west.first_ip("web");
    let derived = west.node.k(&[
        "-n",
        "demo",
        "get",
        "serviceimport",
        "web",
        "-o",
        "jsonpath={.metadata.annotations.multicluster\\.kubernetes\\.io/derived-service}",
    ]);
    assert!(derived.starts_with("derived-"), "{derived:?}");
    assert_eq!(
        west.node.k(&[
            "-n",
            "demo",
            "get",
            "service",
            &derived,
            "-o",
            "jsonpath={.spec.clusterIP}"
        ]),
        ip,
        "spec.ips is the derived Service's ClusterIP"
    );
    assert!(
        WEST.service_cidr
            .parse::<ipnet::Ipv4Net>()
            .unwrap()
            .contains(&ip.parse::<std::net::Ipv4Addr>().unwrap()),
        "west's Service CIDR (198.19.128.0/17): {ip}"
    );
    ip
}

/// Connects from west to `name` until each of east's `web` pods has answered (40 tries).
fn every_backend_reached(west: &Member, east: &Member, name: &str) {
    let east_pods: BTreeSet<String> = east
        .node
        .k(&[
            "-n",
            "demo",
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .split_whitespace()
        .map(|p| format!("{p} east"))
        .collect();
    let mut reached = BTreeSet::new();
    for _ in 0..40 {
        if let Some(who) = west.connect(name) {
            reached.insert(who);
        }
        if reached == east_pods {
            break;
        }
    }
    assert_eq!(
        reached, east_pods,
        "each of east's backends reached from west"
    );
}

/// Prints the chain from east's export to our answer in west: the syncer's writes into west (its
/// log), the controller's spec.ips (seen by a watch of west's API, `ips_lines`: the controller's
/// own log has whole seconds), and our part, from spec.ips seen to our server answering with
/// them (`history`).
fn export_chain(
    east: &Member,
    ips_lines: Vec<(SystemTime, String)>,
    history: &History,
    exported_at: SystemTime,
    ip: &str,
    connected: Duration,
) {
    let writes = syncer_writes(east);
    let import_written = writes
        .iter()
        .filter(|w| w["cluster"] == "west" && w["kind"] == "ServiceImport" && w["op"] == "create")
        .filter(|w| w["name"] == "web")
        .map(|w| log_time(w["time"].as_str().unwrap()))
        .min()
        .expect("the syncer made web's import in west");
    let slice_written = writes
        .iter()
        .filter(|w| w["cluster"] == "west" && w["kind"] == "EndpointSlice" && w["op"] == "create")
        .filter(|w| {
            w["name"]
                .as_str()
                .unwrap()
                .starts_with("imported-east-web-")
        })
        .map(|w| log_time(w["time"].as_str().unwrap()))
        .min()
        .expect("the syncer copied web's slice into west");
    let ips_seen = ips_lines
        .into_iter()
        .find(|(_, l)| l.starts_with("web ") && l.contains(ip))
        .map(|(t, _)| t)
        .expect("a watch of west's API saw web's spec.ips");
    let first_answer = history
        .iter()
        .find(|(_, v)| !v.is_empty())
        .map(|(t, _)| *t)
        .expect("an answer seen");
    let ip_answer = history
        .iter()
        .find(|(_, v)| *v == [ip.to_string()])
        .map(|(t, _)| *t)
        .expect("the spec.ips answer seen");
    eprintln!(
        "ClusterSetIP across clusters: export created -> first connection from west {connected:.1?}; \
         export -> the syncer's import in west {:.0} ms, its slice copy {:.0} ms; \
         export -> west's controller's spec.ips seen by a watch of west's API {:.0} ms; \
         our part, spec.ips seen -> our first answer with them {:.0} ms (first answer of any kind {:.0} ms after the export); \
         answers seen in order {:?}",
        signed_ms(exported_at, import_written),
        signed_ms(exported_at, slice_written),
        signed_ms(exported_at, ips_seen),
        signed_ms(ips_seen, ip_answer),
        signed_ms(exported_at, first_answer),
        history.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>()
    );
}

/// metrics-server v0.8.0 (its own manifests, the test overlay its e2e runs: the kubelets'
/// serving certificates are not checked), then the chart's HPA on CPU, then a bounded load
/// straight at our Service: the Deployment goes from 2 replicas to 3 and, after the load, back
/// to 2, while a client resolves through CoreDNS throughout.
fn scale_out(west: &Member) {
    let node = &west.node;
    let ms = setup("tests/metrics-server/setup.sh");
    let dir = node.dir.join("metrics-server");
    std::fs::create_dir_all(&dir).unwrap();
    let up = "../".repeat(dir.components().count() - 1);
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {up}{}\n\
             images:\n- {{name: gcr.io/k8s-staging-metrics-server/metrics-server, newName: registry.k8s.io/metrics-server/metrics-server, newTag: v0.8.0}}\n",
            ms.join("manifests/overlays/test").to_str().unwrap().trim_start_matches('/')
        ),
    )
    .unwrap();
    node.k(&["apply", "-k", dir.to_str().unwrap()]);
    node.rollout("kube-system", "deployment/metrics-server");
    let metrics_ready = Instant::now();
    until("pod metrics of our pods", Duration::from_secs(180), || {
        let out = node.kubectl(&[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/namespaces/clusterset-dns/pods",
        ]);
        out.status.success()
            && serde_json::from_slice::<serde_json::Value>(&out.stdout)
                .is_ok_and(|v| v["items"].as_array().is_some_and(|i| i.len() == 2))
    });
    eprintln!(
        "metrics-server: our pods' metrics served {:.1?} after its rollout",
        metrics_ready.elapsed()
    );

    let chart = repo().join("deploy/helm/clusterset-dns");
    node.helm(
        "clusterset-dns",
        &[
            "upgrade",
            "clusterset-dns",
            chart.to_str().unwrap(),
            "--namespace",
            "clusterset-dns",
            "--reuse-values",
            "--set",
            "hpa.enabled=true",
            "--set",
            "hpa.minReplicas=2",
            "--set",
            "hpa.maxReplicas=3",
            // A target this low, so that a load one client pod can make moves it.
            "--set",
            "hpa.metrics[0].type=Resource",
            "--set",
            "hpa.metrics[0].resource.name=cpu",
            "--set",
            "hpa.metrics[0].resource.target.type=AverageValue",
            "--set",
            "hpa.metrics[0].resource.target.averageValue=3m",
            "--set",
            "hpa.behavior.scaleDown.stabilizationWindowSeconds=15",
            "--wait",
            "--timeout",
            "180s",
        ],
    );
    let replicas = || -> (u64, u64) {
        let out = node.k(&[
            "-n",
            "clusterset-dns",
            "get",
            "deployment",
            "clusterset-dns",
            "-o",
            "jsonpath={.spec.replicas} {.status.readyReplicas}",
        ]);
        let mut f = out.split(' ').map(|v| v.parse().unwrap_or(0));
        (f.next().unwrap_or(0), f.next().unwrap_or(0))
    };
    until("the HPA holds 2 replicas", Duration::from_secs(120), || {
        replicas() == (2, 2)
    });
    // A pod for the load, asking our Service straight (no CoreDNS between).
    node.client_pod("load", our_ip(node.net));
    let db = "db.demo.svc.clusterset.local";
    let (stop_client, stop_load) = ("/tmp/stop-scale", "/tmp/stop-load");
    let client = node.lookup_loop(
        "client",
        stop_client,
        &["20", "600", "2", &format!("{db}=ANY")],
    );
    let started = Instant::now();
    let load = node.lookup_loop(
        "load",
        stop_load,
        &["4000", "300", "4", &format!("{db}=ANY")],
    );
    until(
        "3 replicas Ready under the load",
        Duration::from_secs(240),
        || replicas() == (3, 3),
    );
    let up = started.elapsed();
    let _ = node.exec_in("load", &["touch", stop_load]);
    let load = lookups(&load.wait_with_output().unwrap());
    let stopped = Instant::now();
    until(
        "back to 2 replicas after the load",
        Duration::from_secs(300),
        || {
            replicas() == (2, 2)
                && node
                    .k(&["-n", "clusterset-dns", "get", "pods", "-o", "name"])
                    .lines()
                    .count()
                    == 2
        },
    );
    let down = stopped.elapsed();
    std::thread::sleep(Duration::from_secs(3));
    let _ = node.exec_in("client", &["touch", stop_client]);
    let client = lookups(&client.wait_with_output().unwrap());
    eprintln!(
        "scale-out: load ({} lookups at up to 4,000/s, {} failed) -> 3 replicas Ready {up:.1?}; load stopped -> 2 replicas {down:.1?}; \
         a client through CoreDNS throughout: {} sent, {} failed, {} stalled over 1 s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        load.sent,
        load.failed,
        client.sent,
        client.failed,
        client.stalled,
        client.p50,
        client.p99,
        client.max
    );
    assert_eq!(
        client.failed, 0,
        "lookups failed while scaling: {:?}",
        client.errors
    );
    assert_eq!(
        load.failed, 0,
        "the load's lookups failed: {:?}",
        load.errors
    );
}
