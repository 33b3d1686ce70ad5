//! A Kubernetes node from real components, in a network namespace of its own, for the tests
//! that run real clusters (tests/integration/cluster.rs, one node; tests/integration/clusterset/,
//! two clusters of one node each, joined by a link).
//!
//! Every process is real: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet
//! and kube-proxy (iptables mode) from the pinned k8s.io/kubernetes module (tests/k8s/setup.sh);
//! containerd and runc from Debian's docker.io; Debian's CNI plugins (bridge, host-local,
//! loopback). Since no registry can be reached, the images are made here
//! (tests/cluster/images.sh, and the Dockerfile built on the tests' Docker engine) and imported
//! into containerd. Each node's addresses are its [`Net`], all in 198.18.0.0/15. Needs root.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::docker::{IMAGE, build_image, docker, engine};
use super::output_text as text;
use super::wait::until;

mod start;

/// One node's (and so one cluster's) name and addresses.
pub struct Net {
    /// The cluster's name, also the node's (`csdns-<name>`) and its cgroup root's.
    pub name: &'static str,
    pub node_ip: &'static str,
    /// The `kubernetes` Service's address: the first of `service_cidr`.
    pub api_service_ip: &'static str,
    /// The kube-dns Service's address, the kubelet's clusterDNS.
    pub dns_service_ip: &'static str,
    pub pod_cidr: &'static str,
    pub service_cidr: &'static str,
}

/// The service account deploy/base runs as, whose requests the API server's audit log records.
pub const SA: &str = "system:serviceaccount:clusterset-dns:clusterset-dns";

/// The single-node cluster of tests/integration/cluster.rs.
pub const SINGLE: Net = Net {
    name: "node",
    node_ip: "198.18.0.2",
    api_service_ip: "198.19.0.1",
    dns_service_ip: "198.19.0.10",
    pod_cidr: "198.18.64.0/24",
    service_cidr: "198.19.0.0/16",
};

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs one of the set-up scripts and returns what it printed (a path).
pub fn setup(script: &str) -> PathBuf {
    let out = Command::new(repo().join(script))
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{script} runs: {e}"));
    assert!(out.status.success(), "{script} failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The node: every process of the cluster, run in the network namespace `ns`, with its state and
/// logs under `dir`. Dropping it ends them by PID (and the pods' containers through containerd),
/// unmounts what they left mounted, and deletes the namespace.
pub struct Node {
    pub net: &'static Net,
    pub ns: String,
    pub dir: PathBuf,
    procs: Vec<(&'static str, Child)>,
}

impl Drop for Node {
    fn drop(&mut self) {
        // The kubelet first, so that nothing restarts the pods, then the pods' containers and
        // sandboxes through containerd (their shims then exit), then the rest, newest first.
        self.kill("kubelet");
        let mut netns = Vec::new();
        if self.procs.iter().any(|(n, _)| *n == "containerd") {
            // The pods' network namespaces, which the CRI made under /run/netns and would
            // remove only when the kubelet stops each sandbox.
            let ids = self.ctr(&["containers", "ls", "-q"]);
            for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
                let info = self.ctr(&["containers", "info", id]);
                let Ok(v) = serde_json::from_slice::<serde_json::Value>(&info.stdout) else {
                    continue;
                };
                for ns in v["Spec"]["linux"]["namespaces"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    if let Some(path) = ns["path"].as_str() {
                        if ns["type"] == "network" && path.contains("/netns/cni-") {
                            netns.push(path.rsplit('/').next().unwrap().to_string());
                        }
                    }
                }
            }
            netns.sort();
            netns.dedup();
            let tasks = self.ctr(&["tasks", "ls", "-q"]);
            let tasks = String::from_utf8_lossy(&tasks.stdout).to_string();
            for id in tasks.split_whitespace() {
                self.ctr(&["tasks", "kill", "--all", "--signal", "SIGKILL", id]);
            }
            for id in tasks.split_whitespace() {
                for _ in 0..50 {
                    // Deleted, or already gone (its shim removed it when it exited).
                    let out = self.ctr(&["tasks", "delete", "--force", id]);
                    if out.status.success()
                        || String::from_utf8_lossy(&out.stderr).contains("not found")
                    {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        for ns in netns {
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        }
        while let Some((_, mut child)) = self.procs.pop() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Whatever the kubelet and containerd left mounted under the node's directory.
        let d = self.dir.to_string_lossy().to_string();
        if let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") {
            let mut mounts: Vec<&str> = info
                .lines()
                .filter_map(|l| l.split(' ').nth(4))
                .filter(|m| m.starts_with(&d))
                .collect();
            mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
            for m in mounts {
                let _ = Command::new("umount").args(["-l", m]).output();
            }
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
        // The kubelet's pod cgroups, now empty, and the node's cgroup root.
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "for c in /sys/fs/cgroup/*/{}; do find \"$c\" -depth -type d -exec rmdir {{}} + ; done 2>/dev/null",
                self.cgroup_root()
            ))
            .output();
        if std::thread::panicking() {
            eprintln!(
                "the cluster's state and logs are kept in {}",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Node {
    /// The node's cgroup root (the kubelet's cgroupRoot), one per node so that two kubelets on
    /// this machine never manage each other's pods.
    fn cgroup_root(&self) -> String {
        format!("csdns-{}", self.net.name)
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().to_string()
    }

    /// `program` in the node's network namespace only: `ip netns exec` would also give it a
    /// mount namespace of its own, with a fresh /sys that hides the cgroup mounts from the
    /// kubelet and the kubelet's volume mounts from containerd.
    pub fn in_ns(&self, program: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/run/netns/{}", self.ns))
            .arg("--")
            .arg(program);
        c
    }

    pub fn sh(&self, script: &str) -> String {
        let out = self.in_ns("sh").args(["-c", script]).output().unwrap();
        assert!(out.status.success(), "{script}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    pub fn ctr(&self, args: &[&str]) -> Output {
        Command::new("ctr")
            .args([
                "--address",
                &self.path("containerd.sock"),
                "--namespace",
                "k8s.io",
            ])
            .args(args)
            .output()
            .unwrap()
    }

    pub fn spawn(&mut self, name: &'static str, program: &Path, args: &[String]) {
        let log = std::fs::File::create(self.path(&format!("{name}.log"))).unwrap();
        let child = self
            .in_ns(program.to_str().unwrap())
            .args(args)
            .current_dir(&self.dir)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        self.procs.push((name, child));
    }

    pub fn kill(&mut self, name: &str) {
        if let Some(i) = self.procs.iter().position(|(n, _)| *n == name) {
            let (_, mut child) = self.procs.remove(i);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn log_tail(&self, name: &str) -> String {
        let log = std::fs::read_to_string(self.path(&format!("{name}.log"))).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    pub fn kubectl_cmd(&self) -> Command {
        let mut c = self.in_ns("kubectl");
        c.args(["--kubeconfig", &self.path("admin.kubeconfig")]);
        c
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_cmd().args(args).output().unwrap()
    }

    /// kubectl that must succeed; returns its standard output.
    pub fn k(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    pub fn rollout(&self, ns: &str, what: &str) -> Duration {
        let start = Instant::now();
        let out = self.kubectl(&["-n", ns, "rollout", "status", what, "--timeout=180s"]);
        assert!(
            out.status.success(),
            "rollout of {what}: {}\n{}\n{}",
            text(&out),
            self.kubectl_text(&["-n", ns, "get", "pods,events", "-o", "wide"]),
            self.log_tail("kubelet")
        );
        start.elapsed()
    }

    /// Applies the CRD manifests `files` and waits until each CRD of `names` is established.
    pub fn install_crds(&self, files: &[PathBuf], names: &[&str]) {
        for f in files {
            self.k(&["apply", "-f", f.to_str().unwrap()]);
        }
        let mut args = vec!["wait", "--for=condition=established", "--timeout=60s"];
        let crds: Vec<String> = names.iter().map(|n| format!("crd/{n}")).collect();
        args.extend(crds.iter().map(String::as_str));
        self.k(&args);
    }

    /// `kubectl apply --server-side` of `yaml`, which must succeed.
    pub fn apply(&self, yaml: &str) {
        let out = super::output_with_input(
            self.kubectl_cmd()
                .args(["apply", "--server-side", "-f", "-"]),
            yaml,
        )
        .expect("kubectl runs");
        assert!(
            out.status.success(),
            "kubectl apply in {}: {}\n{yaml}",
            self.net.name,
            text(&out)
        );
    }

    /// The cluster DNS: deploy/forwarding/coredns rendered with deploy/address set to `our_ip`
    /// (the pinned address of our Service), then CoreDNS as kubeadm runs it
    /// (tests/cluster/coredns.yaml) at the node's kube-dns address.
    pub fn cluster_dns(&self, our_ip: &str) {
        self.apply(&super::kustomize_at("deploy/forwarding/coredns", our_ip));
        let coredns = std::fs::read_to_string(repo().join("tests/cluster/coredns.yaml")).unwrap();
        self.apply(&coredns.replace(
            &format!("clusterIP: {}", SINGLE.dns_service_ip),
            &format!("clusterIP: {}", self.net.dns_service_ip),
        ));
        self.rollout("kube-system", "deployment/coredns");
    }

    /// helm (tests/monitoring/setup.sh's) against the node's API server, with its state under
    /// the node's directory; it must succeed (a failure shows the pods and events of `ns`).
    /// Returns how long it took.
    pub fn helm(&self, ns: &str, args: &[&str]) -> Duration {
        let helm = super::monitoring_tools().join("bin/helm");
        let start = Instant::now();
        let out = self
            .in_ns(helm.to_str().unwrap())
            .env("HELM_CACHE_HOME", self.dir.join("helm/cache"))
            .env("HELM_CONFIG_HOME", self.dir.join("helm/config"))
            .env("HELM_DATA_HOME", self.dir.join("helm/data"))
            .env("KUBECONFIG", self.path("admin.kubeconfig"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "helm {args:?}: {}\n{}",
            text(&out),
            self.kubectl_text(&["-n", ns, "get", "pods,events", "-o", "wide"])
        );
        start.elapsed()
    }

    pub fn kubectl_text(&self, args: &[&str]) -> String {
        text(&self.kubectl(args))
    }

    /// A kustomization in the node's directory over one of deploy/'s, with our image set
    /// through `images:`, as a platform team points a base at its own registry.
    pub fn overlay(&self, name: &str, base: &str) -> String {
        // deploy/, with the node's own pinned address for our Service (deploy/address).
        let deploy = self.dir.join("deploy");
        if !deploy.exists() {
            super::deploy_copy_at(&deploy, &self.our_address());
        }
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let (image, tag) = IMAGE.split_once(':').unwrap();
        let base = base
            .strip_prefix("deploy/")
            .expect("a directory of deploy/");
        std::fs::write(
            dir.join("kustomization.yaml"),
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
                 resources:\n- ../deploy/{base}\nimages:\n- {{name: clusterset-dns, newName: {image}, newTag: {tag}}}\n"
            ),
        )
        .unwrap();
        dir.to_string_lossy().to_string()
    }

    /// The address deploy/address pins our Service to on this node: `.53` of its Service
    /// range's first /24.
    pub fn our_address(&self) -> String {
        let net: std::net::Ipv4Addr = self
            .net
            .service_cidr
            .split_once('/')
            .unwrap()
            .0
            .parse()
            .unwrap();
        let [a, b, c, _] = net.octets();
        format!("{a}.{b}.{c}.53")
    }

    pub fn exec(&self, args: &[&str]) -> Output {
        self.exec_in("client", args)
    }

    pub fn exec_in(&self, pod: &str, args: &[&str]) -> Output {
        let mut all = vec!["-n", "demo", "exec", pod, "--"];
        all.extend_from_slice(args);
        self.kubectl(&all)
    }

    /// A client pod `name` in namespace demo whose resolv.conf names only `nameserver` (dnsPolicy
    /// None), as a forwarder without CoreDNS's retries would ask it; returns once it is Ready.
    pub fn client_pod(&self, name: &str, nameserver: &str) {
        let file = self.dir.join(format!("{name}.yaml"));
        std::fs::write(
            &file,
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: demo}}\nspec:\n\
                 \x20 terminationGracePeriodSeconds: 0\n  dnsPolicy: None\n\
                 \x20 dnsConfig: {{nameservers: [{nameserver}], searches: [demo.svc.clusterset.local]}}\n\
                 \x20 containers:\n  - {{name: client, image: clusterset-dns-test/client:1, imagePullPolicy: IfNotPresent, command: [sleep, infinity]}}\n"
            ),
        )
        .unwrap();
        self.k(&["apply", "-f", file.to_str().unwrap()]);
        self.wait_ready(name);
    }

    /// Waits (120 s at most) until pod `name` in namespace demo is Ready.
    pub fn wait_ready(&self, name: &str) {
        self.k(&[
            "-n",
            "demo",
            "wait",
            &format!("pod/{name}"),
            "--for=condition=Ready",
            "--timeout=120s",
        ]);
    }

    /// tests/cluster/lookup.c in `pod`, in the background, until `stop` exists in that pod.
    pub fn lookup_loop(&self, pod: &str, stop: &str, args: &[&str]) -> Child {
        let _ = self.exec_in(pod, &["rm", "-f", stop]);
        self.kubectl_cmd()
            .args(["-n", "demo", "exec", pod, "--", "env"])
            .arg(format!("STOP_FILE={stop}"))
            .arg("lookup")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    pub fn our_pods(&self) -> Vec<(String, String, bool)> {
        let out = self.k(&[
            "-n",
            "clusterset-dns",
            "get",
            "pods",
            "-l",
            "app=clusterset-dns",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.status.conditions[?(@.type==\"Ready\")].status} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
        ]);
        out.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                (f.len() >= 3).then(|| {
                    (
                        f[0].to_string(),
                        f[1].to_string(),
                        f[2] == "True" && f.get(3).is_none_or(|t| t.is_empty()),
                    )
                })
            })
            .collect()
    }
}

/// Joins two nodes as mcs-api's e2e joins its two kind clusters: a link of their own (a veth
/// pair, one end in each node's namespace) and, on each node, routes to the other node and, through
/// it, to the other's pod CIDR. Service CIDRs stay each cluster's own.
pub fn join(a: &Node, b: &Node) {
    let tag = std::process::id() % 100_000;
    let (la, lb) = (format!("csl{tag}a"), format!("csl{tag}b"));
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ip link add {la} type veth peer name {lb} && ip link set {la} netns {} && ip link set {lb} netns {}",
            a.ns, b.ns
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "joining the nodes: {}", text(&out));
    for (n, link, other) in [(a, &la, b), (b, &lb, a)] {
        n.sh(&format!(
            "ip link set {link} up && ip route add {ip}/32 dev {link} \
             && ip route add {pods} via {ip} dev {link} onlink",
            ip = other.net.node_ip,
            pods = other.net.pod_cidr,
        ));
    }
}

/// What tests/cluster/lookup.c printed.
#[derive(Debug)]
pub struct Lookups {
    pub sent: u64,
    pub failed: u64,
    pub stalled: u64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub errors: Vec<String>,
}

pub fn lookups(out: &Output) -> Lookups {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("lookup's report ({e}): {}", text(out)));
    Lookups {
        sent: v["sent"].as_u64().unwrap(),
        failed: v["failed"].as_u64().unwrap(),
        stalled: v["stalled"].as_u64().unwrap(),
        p50: v["p50_ms"].as_f64().unwrap(),
        p99: v["p99_ms"].as_f64().unwrap(),
        max: v["max_ms"].as_f64().unwrap(),
        errors: v["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap().to_string())
            .collect(),
    }
}
