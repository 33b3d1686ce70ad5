//! A Kubernetes node from real components, in a network namespace of its own, for the tests
//! that run real clusters (tests/integration/cluster.rs, one node; tests/integration/clusterset.rs,
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

    /// The cluster DNS: deploy/forwarding/coredns's Corefile with `our_ip` (the address of our
    /// Service) in place of its example address, as its header says to do, then CoreDNS as
    /// kubeadm runs it (tests/cluster/coredns.yaml) at the node's kube-dns address.
    pub fn cluster_dns(&self, our_ip: &str) {
        let forwarding = self.dir.join("forwarding");
        std::fs::create_dir_all(&forwarding).unwrap();
        for f in ["Corefile", "kustomization.yaml"] {
            let body =
                std::fs::read_to_string(repo().join("deploy/forwarding/coredns").join(f)).unwrap();
            std::fs::write(forwarding.join(f), body.replace("10.96.0.53", our_ip)).unwrap();
        }
        self.k(&["apply", "-k", forwarding.to_str().unwrap()]);
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

    pub fn start(net: &'static Net) -> Node {
        let Net {
            name,
            node_ip,
            api_service_ip,
            dns_service_ip,
            pod_cidr,
            service_cidr,
        } = *net;
        let node_name = format!("csdns-{name}");
        let bin = super::k8s::k8s_bin();
        let images = setup("tests/cluster/images.sh");
        let host = engine();
        let built = build_image(&host);
        eprintln!("image {IMAGE} built (or found in the build cache) in {built:.1?}");
        let dir = tempfile::Builder::new()
            .prefix(&format!("csdns-{name}."))
            .tempdir()
            .unwrap()
            .keep();
        let ns = format!("csdns-{name}-{}", std::process::id());
        let out = Command::new("ip")
            .args(["netns", "add", &ns])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "making a network namespace for the cluster needs root: {}",
            text(&out)
        );
        let mut node = Node {
            net,
            ns,
            dir,
            procs: Vec::new(),
        };
        let d = node.dir.clone();
        docker(
            &host,
            &["save", "-o", &node.path("clusterset-dns.tar"), IMAGE],
        );

        // The node's network: its address on one end of a veth pair whose other end stays down
        // (this kernel has no dummy interfaces), which also takes the default route, so that
        // nothing leaves the namespace; IP forwarding and bridge netfilter, as kube-proxy needs.
        node.sh(&format!(
            "ip link set lo up && ip link add node0 type veth peer name node0-peer \
             && ip addr add {node_ip}/32 dev node0 && ip link set node0 up \
             && ip route add default dev node0 \
             && sysctl -qw net.ipv4.ip_forward=1 && sysctl -qw net.bridge.bridge-nf-call-iptables=1"
        ));
        let pki = Command::new(repo().join("tests/cluster/pki.sh"))
            .args([d.to_str().unwrap(), node_ip, api_service_ip, &node_name])
            .output()
            .unwrap();
        assert!(pki.status.success(), "tests/cluster/pki.sh: {}", text(&pki));
        let write = |name: &str, body: String| std::fs::write(d.join(name), body).unwrap();
        let p = |name: &str| d.join(name).to_string_lossy().to_string();

        // The control plane.
        node.spawn(
            "etcd",
            &bin.join("etcd"),
            &[
                format!("--data-dir={}", p("etcd")),
                "--unsafe-no-fsync".into(),
                "--listen-client-urls=http://127.0.0.1:2379".into(),
                "--advertise-client-urls=http://127.0.0.1:2379".into(),
                "--listen-peer-urls=http://127.0.0.1:2380".into(),
                "--initial-advertise-peer-urls=http://127.0.0.1:2380".into(),
                "--initial-cluster=default=http://127.0.0.1:2380".into(),
            ],
        );
        // The audit log records who watched the imported objects, as which pod.
        write(
            "audit-policy.yaml",
            format!(
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
                 - level: Metadata\n  users: [\"{SA}\"]\n\
                 - level: None\n"
            ),
        );
        node.spawn(
            "kube-apiserver",
            &bin.join("kube-apiserver"),
            &[
                "--etcd-servers=http://127.0.0.1:2379".into(),
                "--bind-address=0.0.0.0".into(),
                format!("--advertise-address={node_ip}"),
                "--secure-port=6443".into(),
                format!("--tls-cert-file={}", p("apiserver.crt")),
                format!("--tls-private-key-file={}", p("apiserver.key")),
                format!("--client-ca-file={}", p("ca.crt")),
                format!(
                    "--kubelet-client-certificate={}",
                    p("apiserver-kubelet-client.crt")
                ),
                format!("--kubelet-client-key={}", p("apiserver-kubelet-client.key")),
                format!("--kubelet-certificate-authority={}", p("ca.crt")),
                "--kubelet-preferred-address-types=InternalIP".into(),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", p("sa.pub")),
                format!("--service-account-signing-key-file={}", p("sa.key")),
                "--authorization-mode=Node,RBAC".into(),
                format!("--service-cluster-ip-range={service_cidr}"),
                format!("--audit-policy-file={}", p("audit-policy.yaml")),
                format!("--audit-log-path={}", p("audit.log")),
                // The aggregation layer, as kubeadm configures it (metrics-server).
                format!("--requestheader-client-ca-file={}", p("front-proxy-ca.crt")),
                "--requestheader-allowed-names=front-proxy-client".into(),
                "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
                "--requestheader-group-headers=X-Remote-Group".into(),
                "--requestheader-username-headers=X-Remote-User".into(),
                format!("--proxy-client-cert-file={}", p("front-proxy-client.crt")),
                format!("--proxy-client-key-file={}", p("front-proxy-client.key")),
                "--enable-aggregator-routing=true".into(),
            ],
        );
        until("kube-apiserver ready", Duration::from_secs(60), || {
            node.kubectl(&["get", "--raw", "/readyz"]).status.success()
        });
        node.spawn(
            "kube-controller-manager",
            &bin.join("kube-controller-manager"),
            &[
                format!("--kubeconfig={}", p("controller-manager.kubeconfig")),
                format!(
                    "--authentication-kubeconfig={}",
                    p("controller-manager.kubeconfig")
                ),
                format!(
                    "--authorization-kubeconfig={}",
                    p("controller-manager.kubeconfig")
                ),
                format!("--service-account-private-key-file={}", p("sa.key")),
                format!("--root-ca-file={}", p("ca.crt")),
                "--use-service-account-credentials=true".into(),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--service-cluster-ip-range={service_cidr}"),
            ],
        );
        node.spawn(
            "kube-scheduler",
            &bin.join("kube-scheduler"),
            &[
                format!("--kubeconfig={}", p("scheduler.kubeconfig")),
                format!("--authentication-kubeconfig={}", p("scheduler.kubeconfig")),
                format!("--authorization-kubeconfig={}", p("scheduler.kubeconfig")),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
            ],
        );

        // The container runtime: containerd's CRI with runc (cgroupfs; this machine has no
        // systemd), the CNI bridge, and the images imported, since nothing can be pulled. This
        // machine refuses every negative oom_score_adj, even to root (writing -998, what the
        // kubelet gives sandboxes, fails with EIO, and runc with "can't get final child's PID
        // from pipe"), so containerd keeps scores at or above its own (0), as it does rootless.
        let pause = std::fs::read_to_string(images.join("pause-tag")).unwrap();
        write(
            "containerd.toml",
            format!(
                r#"version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{sock}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:{pause}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{runc}"
"#,
                root = p("containerd/root"),
                state = p("containerd/state"),
                sock = p("containerd.sock"),
                opt = p("containerd/opt"),
                cni = p("cni"),
                runc = p("runc"),
                pause = pause.trim(),
            ),
        );
        std::fs::create_dir_all(d.join("cni")).unwrap();
        write(
            "cni/10-bridge.conflist",
            format!(
                r#"{{"cniVersion": "1.0.0", "name": "pods", "plugins": [
  {{"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {{"type": "host-local", "ranges": [[{{"subnet": "{pod_cidr}"}}]],
            "routes": [{{"dst": "0.0.0.0/0"}}], "dataDir": "{ipam}"}}}}
]}}"#,
                ipam = p("cni-ipam"),
            ),
        );
        node.spawn(
            "containerd",
            Path::new("containerd"),
            &["--config".into(), p("containerd.toml")],
        );
        until("containerd serving", Duration::from_secs(30), || {
            node.ctr(&["version"]).status.success()
        });
        for image in ["pause", "coredns", "metrics-server", "client"] {
            let tar = images.join(format!("{image}.tar"));
            let out = node.ctr(&["images", "import", tar.to_str().unwrap()]);
            assert!(out.status.success(), "ctr import {image}: {}", text(&out));
        }
        let out = node.ctr(&["images", "import", &p("clusterset-dns.tar")]);
        assert!(out.status.success(), "ctr import ours: {}", text(&out));

        // The kubelet: cgroup v1 (this machine's), cgroupfs, no eviction for the disk this
        // shared machine fills, and the cluster DNS at the kube-dns Service address. Pods
        // with dnsPolicy Default (CoreDNS) get resolv.conf, whose nameserver answers nothing.
        write("resolv.conf", format!("nameserver {node_ip}\n"));
        // The node's cgroup root in every cgroup v1 hierarchy, cpuset's given the machine's CPUs
        // and memory nodes (a new cpuset cgroup has none).
        let root = node.cgroup_root();
        node.sh(&format!(
            "for h in /sys/fs/cgroup/*/; do if [ -e \"${{h}}cgroup.procs\" ]; then mkdir -p \"${{h}}{root}\" || exit 1; fi; done; \
             c=/sys/fs/cgroup/cpuset; if [ -d $c/{root} ]; then cat $c/cpuset.cpus >$c/{root}/cpuset.cpus \
             && cat $c/cpuset.mems >$c/{root}/cpuset.mems; fi"
        ));
        write(
            "kubelet.yaml",
            format!(
                r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /{root}
containerRuntimeEndpoint: unix://{sock}
address: {node_ip}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: {dir}/kubelet-serving.crt
tlsPrivateKeyFile: {dir}/kubelet-serving.key
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {dir}/ca.crt}}
authorization: {{mode: Webhook}}
clusterDomain: cluster.local
clusterDNS: [{dns_service_ip}]
resolvConf: {dir}/resolv.conf
podLogsDir: {dir}/pod-logs
evictionHard: {{memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
"#,
                sock = p("containerd.sock"),
                dir = d.display(),
            ),
        );
        node.spawn(
            "kubelet",
            &bin.join("kubelet"),
            &[
                format!("--config={}", p("kubelet.yaml")),
                format!("--kubeconfig={}", p("kubelet.kubeconfig")),
                format!("--root-dir={}", p("kubelet")),
                format!("--hostname-override={node_name}"),
                format!("--node-ip={node_ip}"),
            ],
        );
        // kube-proxy, iptables mode, leaving the host's conntrack table size alone.
        write(
            "kube-proxy.yaml",
            format!(
                r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {{kubeconfig: {dir}/proxy.kubeconfig}}
hostnameOverride: {node_name}
clusterCIDR: {pod_cidr}
conntrack: {{maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
"#,
                dir = d.display(),
            ),
        );
        node.spawn(
            "kube-proxy",
            &bin.join("kube-proxy"),
            &[format!("--config={}", p("kube-proxy.yaml"))],
        );
        let ready = Instant::now();
        until("the node Ready", Duration::from_secs(120), || {
            let out = node.kubectl(&[
                "get",
                "node",
                &node_name,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ]);
            out.status.success() && String::from_utf8_lossy(&out.stdout) == "True"
        });
        eprintln!("node Ready in {:.1?}", ready.elapsed());
        node
    }

    /// A kustomization in the node's directory over one of deploy/'s, with our image set
    /// through `images:`, as a platform team points a base at its own registry.
    pub fn overlay(&self, name: &str, base: &str) -> String {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let up = "../".repeat(dir.components().count() - 1);
        let (image, tag) = IMAGE.split_once(':').unwrap();
        std::fs::write(
            dir.join("kustomization.yaml"),
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
                 resources:\n- {up}{}\nimages:\n- {{name: clusterset-dns, newName: {image}, newTag: {tag}}}\n",
                repo().join(base).to_str().unwrap().trim_start_matches('/')
            ),
        )
        .unwrap();
        dir.to_string_lossy().to_string()
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
