//! The cluster set's members and the tools the test watches them with: the two networks, a
//! member (a node, its server, its clients), answers polled over time ([`Watch`]), the API
//! watched ([`ApiWatch`]), the syncer's log, and each member's set-up.

#[allow(unused_imports)]
use super::*;

pub(crate) const EAST: Net = Net {
    name: "east",
    node_ip: "198.18.0.2",
    api_service_ip: "198.19.0.1",
    dns_service_ip: "198.19.0.10",
    pod_cidr: "198.18.64.0/24",
    service_cidr: "198.19.0.0/17",
};
pub(crate) const WEST: Net = Net {
    name: "west",
    node_ip: "198.18.0.3",
    api_service_ip: "198.19.128.1",
    dns_service_ip: "198.19.128.10",
    pod_cidr: "198.18.65.0/24",
    service_cidr: "198.19.128.0/17",
};

/// Our Service's fixed address in a cluster (the chart's service.clusterIP).
pub(crate) fn our_ip(net: &Net) -> &'static str {
    if net.name == "east" {
        "198.19.0.53"
    } else {
        "198.19.128.53"
    }
}

/// How many more services `east` exports for the withdrawal's figures (beside web and db).
pub(crate) const EXTRA: usize = 20;

/// One cluster's part of the set.
pub(crate) struct Member {
    pub(crate) node: Node,
}

impl Member {
    pub(crate) fn name(&self) -> &'static str {
        self.node.net.name
    }

    /// Runs `script` with bash in the client pod; its output, or None if it failed.
    pub(crate) fn client(&self, script: &str) -> Option<String> {
        let out = self
            .node
            .kubectl(&["-n", "demo", "exec", "client", "--", "bash", "-c", script]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// getaddrinfo's IPv4 addresses for `name` in the client pod (glibc, through the kubelet's
    /// resolv.conf and CoreDNS), sorted; empty when it fails.
    pub(crate) fn resolve(&self, name: &str) -> Vec<String> {
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
    pub(crate) fn connect(&self, host: &str) -> Option<String> {
        self.connect_to(host, 80)
    }

    /// [`Self::connect`] to `port`.
    pub(crate) fn connect_to(&self, host: &str, port: u16) -> Option<String> {
        self.client(&format!(
            "exec 3<>/dev/tcp/{host}/{port} && timeout 5 cat <&3"
        ))
        .filter(|s| !s.is_empty())
    }

    /// The first of import `name`'s spec.ips in demo (empty while it has none).
    pub(crate) fn first_ip(&self, name: &str) -> String {
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
    pub(crate) fn pod_ips(&self, selector: &str) -> Vec<String> {
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
    pub(crate) fn dig_all(&self, names: &[String]) -> Option<Vec<Vec<String>>> {
        dig_all(&self.node.ns, our_ip(self.node.net), names)
    }
}

/// `dig` in network namespace `ns` at `server`, every name in one run: the sorted A addresses
/// of each, in the order of `names` (empty when it has none); None when dig failed (a timeout),
/// which is no answer at all, not an empty one.
pub(crate) fn dig_all(ns: &str, server: &str, names: &[String]) -> Option<Vec<Vec<String>>> {
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
pub(crate) type History = Vec<(SystemTime, Vec<String>)>;

/// Answers of `names` from a member's own server, polled back to back in a thread: for each
/// name, every change with the wall-clock time it was first seen.
pub(crate) struct Watch {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) thread: Option<std::thread::JoinHandle<Vec<History>>>,
}

impl Watch {
    /// Starts watching `names`; returns once every name has a first answer on record, so that
    /// what happens next is seen against what was answered before it.
    pub(crate) fn start(m: &Member, names: Vec<String>) -> Watch {
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

    pub(crate) fn finish(mut self) -> Vec<History> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// `kubectl get --watch` in a member's namespace: each line it prints, with the wall-clock time
/// it arrived (when a watcher of the API learns of a change).
pub(crate) struct ApiWatch {
    pub(crate) child: std::process::Child,
    pub(crate) lines: Arc<std::sync::Mutex<Vec<(SystemTime, String)>>>,
}

impl ApiWatch {
    pub(crate) fn start(m: &Member, args: &[&str]) -> ApiWatch {
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

    pub(crate) fn finish(mut self) -> Vec<(SystemTime, String)> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::take(&mut *self.lines.lock().unwrap())
    }
}

/// A wall-clock time in a log line (RFC 3339, as the syncer and controller-runtime write it).
pub(crate) fn log_time(s: &str) -> SystemTime {
    humantime::parse_rfc3339_weak(s.trim_end_matches('Z'))
        .unwrap_or_else(|e| panic!("{s:?} is not a time: {e}"))
}

/// The syncer's writes so far (one JSON object per line of its log).
pub(crate) fn syncer_writes(east: &Member) -> Vec<serde_json::Value> {
    std::fs::read_to_string(east.node.path("syncer.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["op"].is_string())
        .collect()
}

/// `to` - `from` in milliseconds, negative when `to` came first (a log line is written when the
/// API call returns, which can be after a watcher saw its effect).
pub(crate) fn signed_ms(from: SystemTime, to: SystemTime) -> f64 {
    match to.duration_since(from) {
        Ok(d) => d.as_secs_f64() * 1000.0,
        Err(e) => -e.duration().as_secs_f64() * 1000.0,
    }
}

pub(crate) fn start_syncer(east: &mut Member, clusters: &[(&str, String)]) {
    let bin = setup("tests/mcs/setup.sh").join("bin/syncer");
    let mut args = Vec::new();
    for (name, kubeconfig) in clusters {
        args.push(format!("--cluster={name}={kubeconfig}"));
    }
    east.node.spawn("syncer", &bin, &args);
}

pub(crate) fn workloads(m: &Member, web: bool) {
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

pub(crate) fn export(m: &Member, name: &str) {
    m.node.apply(&format!(
        "apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {{name: {name}, namespace: demo}}\n"
    ));
}

/// Sets up one member: the CRDs, its ClusterProperty, the MCS controller, clusterset-dns from
/// the chart behind CoreDNS.
pub(crate) fn member_setup(m: &mut Member, mcs: &std::path::Path) {
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
         ---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: demo}}\n\
         ---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: linkerd-multicluster}}\n"
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
    // In east, the chart's linkerd-bridge too, export half only (east has no Linkerd Links to
    // import from): a ServiceExport there also gets Linkerd's label and the bridge's
    // conditions, as in a Linkerd cluster that exports.
    let bridge = [
        "linkerdBridge.enabled=true",
        "linkerdBridge.import.enabled=false",
    ];
    install_chart(node, if name == "east" { &bridge } else { &[] });
}

/// The two clusters from real components, started side by side and joined (each node reaches
/// the other's API server over the link).
pub(crate) fn start_pair() -> (Member, Member) {
    // Built once before the nodes start in parallel, which would otherwise both build them.
    let _ = setup("tests/cluster/images.sh");
    let _ = common::docker::build_image(&common::docker::engine());
    let (east, west) = std::thread::scope(|s| {
        let e = s.spawn(|| Node::start(&EAST));
        let w = s.spawn(|| Node::start(&WEST));
        (e.join(), w.join())
    });
    let (Ok(east), Ok(west)) = (east, west) else {
        panic!("a node did not start (its panic is above)");
    };
    join(&east, &west);
    for (from, to) in [(&east, &west), (&west, &east)] {
        from.sh(&format!(
            "timeout 5 bash -c 'exec 3<>/dev/tcp/{}/6443'",
            to.net.node_ip
        ));
    }
    (Member { node: east }, Member { node: west })
}

/// clusterset-dns from the chart (this build's image, at [`our_ip`]), with `sets` (`--set`,
/// the bridge's one replica among them when it is enabled), behind CoreDNS as the cluster DNS,
/// which forwards clusterset.local to it.
pub(crate) fn install_chart(node: &Node, sets: &[&str]) {
    let chart = repo().join("deploy/helm/clusterset-dns");
    let (image, tag) = IMAGE.split_once(':').unwrap();
    node.k(&["create", "namespace", "clusterset-dns"]);
    let mut all = vec![
        format!("image.repository={image}"),
        format!("image.tag={tag}"),
        format!("service.clusterIP={}", our_ip(node.net)),
        "linkerdBridge.replicaCount=1".into(),
    ];
    all.extend(sets.iter().map(|s| s.to_string()));
    let mut args = vec![
        "install",
        "clusterset-dns",
        chart.to_str().unwrap(),
        "--namespace",
        "clusterset-dns",
        "--wait",
        "--timeout",
        "180s",
    ];
    for s in &all {
        args.extend(["--set", s]);
    }
    node.helm("clusterset-dns", &args);
    node.cluster_dns(our_ip(node.net));
}

/// With `CLUSTERSET_KEEP=<minutes>` (tests/clusterset-up.sh), the cluster set is left running
/// for a person to use: a kubeconfig with one context per cluster is written and printed with
/// how to use it and how to tear it down; the test then waits until the stop file is removed
/// or the minutes are over, and returns true, so the caller stops there and the nodes are torn
/// down as after any run. Without it, returns false at once.
pub(crate) fn hold_if_asked(east: &Member, west: &Member, probe: &str) -> bool {
    let Ok(minutes) = std::env::var("CLUSTERSET_KEEP") else {
        return false;
    };
    let minutes: u64 = minutes
        .parse()
        .unwrap_or_else(|_| panic!("CLUSTERSET_KEEP={minutes:?}: give whole minutes"));
    let kubeconfig = east.node.path("clusterset.kubeconfig");
    let mut yaml = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for m in [east, west] {
        yaml += &format!(
            "- name: {n}\n  cluster: {{server: \"https://{ip}:6443\", certificate-authority: {ca}}}\n",
            n = m.name(),
            ip = m.node.net.node_ip,
            ca = m.node.path("ca.crt"),
        );
    }
    yaml += "users:\n";
    for m in [east, west] {
        yaml += &format!(
            "- name: {n}-admin\n  user: {{client-certificate: {c}, client-key: {k}}}\n",
            n = m.name(),
            c = m.node.path("admin.crt"),
            k = m.node.path("admin.key"),
        );
    }
    yaml += "contexts:\n";
    for m in [east, west] {
        yaml += &format!(
            "- name: {n}\n  context: {{cluster: {n}, user: {n}-admin}}\n",
            n = m.name()
        );
    }
    yaml += "current-context: east\n";
    std::fs::write(&kubeconfig, yaml).unwrap();
    // Both API servers answer with it from east's network namespace (the link joins them).
    for m in [east, west] {
        let out = east
            .node
            .in_ns("kubectl")
            .args([
                "--kubeconfig",
                &kubeconfig,
                "--context",
                m.name(),
                "get",
                "nodes",
                "-o",
                "name",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "context {}: {}",
            m.name(),
            common::output_text(&out)
        );
    }
    // And east's cluster DNS answers a clusterset.local name, as the printed dig will.
    let web = [probe.to_string()];
    let answers = dig_all(&east.node.ns, east.node.net.dns_service_ip, &web);
    assert!(
        matches!(answers.as_deref(), Some([a]) if !a.is_empty()),
        "dig of {web:?} from east's namespace at its cluster DNS: {answers:?}"
    );
    let stop = east.node.path("running");
    std::fs::write(&stop, "remove this file to tear the cluster set down\n").unwrap();
    eprintln!(
        "\nThe cluster set is up, for at most {minutes} min.\n\
         kubeconfig (contexts east and west): {kubeconfig}\n\
         Use it from east's network namespace, where both API servers and both clusters' DNS answer:\n  \
         nsenter --net=/run/netns/{ns} -- kubectl --kubeconfig {kubeconfig} --context west -n demo get serviceimports\n  \
         nsenter --net=/run/netns/{ns} -- dig @{east_dns} {probe}\n\
         A shell there: nsenter --net=/run/netns/{ns} -- bash (then KUBECONFIG={kubeconfig}).\n\
         Tear it down: rm {stop}  (the test then stops every process it started and removes the namespaces)\n",
        ns = east.node.ns,
        east_dns = east.node.net.dns_service_ip,
    );
    let until = std::time::Instant::now() + Duration::from_secs(minutes * 60);
    while std::path::Path::new(&stop).exists() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_secs(1));
    }
    eprintln!("tearing the cluster set down");
    true
}
