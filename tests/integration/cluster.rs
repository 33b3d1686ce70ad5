//! clusterset-dns as a platform team runs it: our image, `kubectl apply -k deploy/base`, and the
//! cluster DNS forwarding clusterset.local to it, in a real single-node Kubernetes cluster.
//!
//! The cluster is made of real components only: etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler, kubelet and kube-proxy (iptables mode) from the pinned k8s.io/kubernetes
//! module (tests/k8s/setup.sh); containerd and runc from Debian's docker.io; Debian's CNI plugins
//! (bridge, host-local, loopback); CoreDNS v1.15.0 as the cluster DNS. Since no registry can be
//! reached, the images are made here (tests/cluster/images.sh, and the Dockerfile built on the
//! tests' Docker engine) and imported into containerd. The whole node lives in a network
//! namespace the test makes, on addresses in 198.18.0.0/15: the node 198.18.0.2, pods
//! 198.18.64.0/24 on a bridge, Services 198.19.0.0/16. Needs root (CI runs as root).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::docker::{IMAGE, build_image, docker, engine};
use common::output_text as text;

const NODE_IP: &str = "198.18.0.2";
const API_SERVICE_IP: &str = "198.19.0.1";
const DNS_SERVICE_IP: &str = "198.19.0.10";
const POD_CIDR: &str = "198.18.64.0/24";
const SERVICE_CIDR: &str = "198.19.0.0/16";
const SA: &str = "system:serviceaccount:clusterset-dns:clusterset-dns";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs one of the set-up scripts and returns what it printed (a path).
fn setup(script: &str) -> PathBuf {
    let out = Command::new(repo().join(script))
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{script} runs: {e}"));
    assert!(out.status.success(), "{script} failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    start.elapsed()
}

/// The node: every process of the cluster, run in the network namespace `ns`, with its state and
/// logs under `dir`. Dropping it ends them by PID (and the pods' containers through containerd),
/// unmounts what they left mounted, and deletes the namespace.
struct Node {
    ns: String,
    dir: PathBuf,
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
                    if self
                        .ctr(&["tasks", "delete", "--force", id])
                        .status
                        .success()
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
        // The kubelet's pod cgroups, now empty.
        let _ = Command::new("sh")
            .arg("-c")
            .arg("for c in /sys/fs/cgroup/*/kubepods; do find \"$c\" -depth -type d -exec rmdir {} + ; done 2>/dev/null")
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
    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().to_string()
    }

    /// `program` in the node's network namespace only: `ip netns exec` would also give it a
    /// mount namespace of its own, with a fresh /sys that hides the cgroup mounts from the
    /// kubelet and the kubelet's volume mounts from containerd.
    fn in_ns(&self, program: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/run/netns/{}", self.ns))
            .arg("--")
            .arg(program);
        c
    }

    fn sh(&self, script: &str) -> String {
        let out = self.in_ns("sh").args(["-c", script]).output().unwrap();
        assert!(out.status.success(), "{script}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    fn ctr(&self, args: &[&str]) -> Output {
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

    fn spawn(&mut self, name: &'static str, program: &Path, args: &[String]) {
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

    fn kill(&mut self, name: &str) {
        if let Some(i) = self.procs.iter().position(|(n, _)| *n == name) {
            let (_, mut child) = self.procs.remove(i);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log_tail(&self, name: &str) -> String {
        let log = std::fs::read_to_string(self.path(&format!("{name}.log"))).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    fn kubectl_cmd(&self) -> Command {
        let mut c = self.in_ns("kubectl");
        c.args(["--kubeconfig", &self.path("admin.kubeconfig")]);
        c
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_cmd().args(args).output().unwrap()
    }

    /// kubectl that must succeed; returns its standard output.
    fn k(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn rollout(&self, ns: &str, what: &str) -> Duration {
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

    fn kubectl_text(&self, args: &[&str]) -> String {
        text(&self.kubectl(args))
    }

    fn start() -> Node {
        let bin = common::k8s::k8s_bin();
        let images = setup("tests/cluster/images.sh");
        let host = engine();
        let built = build_image(&host);
        eprintln!("image {IMAGE} built (or found in the build cache) in {built:.1?}");
        let dir = tempfile::Builder::new()
            .prefix("csdns-cluster.")
            .tempdir()
            .unwrap()
            .keep();
        let ns = format!("csdns-cluster-{}", std::process::id());
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
             && ip addr add {NODE_IP}/32 dev node0 && ip link set node0 up \
             && ip route add default dev node0 \
             && sysctl -qw net.ipv4.ip_forward=1 && sysctl -qw net.bridge.bridge-nf-call-iptables=1"
        ));
        let pki = Command::new(repo().join("tests/cluster/pki.sh"))
            .args([d.to_str().unwrap(), NODE_IP, API_SERVICE_IP])
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
                format!("--advertise-address={NODE_IP}"),
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
                format!("--service-cluster-ip-range={SERVICE_CIDR}"),
                format!("--audit-policy-file={}", p("audit-policy.yaml")),
                format!("--audit-log-path={}", p("audit.log")),
            ],
        );
        wait_until("kube-apiserver ready", Duration::from_secs(60), || {
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
                format!("--service-cluster-ip-range={SERVICE_CIDR}"),
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
"#,
                root = p("containerd/root"),
                state = p("containerd/state"),
                sock = p("containerd.sock"),
                opt = p("containerd/opt"),
                cni = p("cni"),
                pause = pause.trim(),
            ),
        );
        std::fs::create_dir_all(d.join("cni")).unwrap();
        write(
            "cni/10-bridge.conflist",
            format!(
                r#"{{"cniVersion": "1.0.0", "name": "pods", "plugins": [
  {{"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {{"type": "host-local", "ranges": [[{{"subnet": "{POD_CIDR}"}}]],
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
        wait_until("containerd serving", Duration::from_secs(30), || {
            node.ctr(&["version"]).status.success()
        });
        for image in ["pause", "coredns", "client"] {
            let tar = images.join(format!("{image}.tar"));
            let out = node.ctr(&["images", "import", tar.to_str().unwrap()]);
            assert!(out.status.success(), "ctr import {image}: {}", text(&out));
        }
        let out = node.ctr(&["images", "import", &p("clusterset-dns.tar")]);
        assert!(out.status.success(), "ctr import ours: {}", text(&out));

        // The kubelet: cgroup v1 (this machine's), cgroupfs, no eviction for the disk this
        // shared machine fills, and the cluster DNS at the kube-dns Service address. Pods
        // with dnsPolicy Default (CoreDNS) get resolv.conf, whose nameserver answers nothing.
        write("resolv.conf", format!("nameserver {NODE_IP}\n"));
        write(
            "kubelet.yaml",
            format!(
                r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://{sock}
address: {NODE_IP}
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
clusterDNS: [{DNS_SERVICE_IP}]
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
                "--hostname-override=csdns-node".into(),
                format!("--node-ip={NODE_IP}"),
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
hostnameOverride: csdns-node
clusterCIDR: {POD_CIDR}
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
        wait_until("the node Ready", Duration::from_secs(120), || {
            let out = node.kubectl(&[
                "get",
                "node",
                "csdns-node",
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
    fn overlay(&self, name: &str, base: &str) -> String {
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

    fn exec(&self, args: &[&str]) -> Output {
        self.exec_in("client", args)
    }

    fn exec_in(&self, pod: &str, args: &[&str]) -> Output {
        let mut all = vec!["-n", "demo", "exec", pod, "--"];
        all.extend_from_slice(args);
        self.kubectl(&all)
    }

    /// A client pod `name` in namespace demo whose resolv.conf names only `nameserver` (dnsPolicy
    /// None), as a forwarder without CoreDNS's retries would ask it; returns once it is Ready.
    fn client_pod(&self, name: &str, nameserver: &str) {
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
    fn lookup_loop(&self, pod: &str, stop: &str, args: &[&str]) -> Child {
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

    fn our_pods(&self) -> Vec<(String, String, bool)> {
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

/// What tests/cluster/lookup.c printed.
#[derive(Debug)]
struct Lookups {
    sent: u64,
    failed: u64,
    stalled: u64,
    p50: f64,
    p99: f64,
    max: f64,
    errors: Vec<String>,
}

fn lookups(out: &Output) -> Lookups {
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

/// The test's named steps: each is announced with the time the one before took, and a failure
/// names the step it happened in.
#[derive(Default)]
struct Steps {
    current: Option<(&'static str, Instant)>,
}

impl Steps {
    fn next(&mut self, name: &'static str) {
        self.finish();
        eprintln!("step {name}");
        self.current = Some((name, Instant::now()));
    }

    fn finish(&mut self) {
        if let Some((name, started)) = self.current.take() {
            eprintln!("step {name}: done in {:.1?}", started.elapsed());
        }
    }
}

impl Drop for Steps {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some((name, _)) = &self.current {
                eprintln!("FAILED in step {name}");
            }
        } else {
            self.finish();
        }
    }
}

#[test]
fn deploy_base_in_a_real_single_node_cluster_behind_coredns() {
    let _module = common::module(module_path!());
    let mut steps = Steps::default();
    steps.next("0. a single-node cluster from real components");
    let mut node = Node::start();
    let crds = repo().join("tests/k8s/crds/serviceimports-v1alpha1.yaml");
    node.k(&["apply", "-f", crds.to_str().unwrap()]);
    node.k(&[
        "wait",
        "--for=condition=established",
        "crd/serviceimports.multicluster.x-k8s.io",
        "--timeout=60s",
    ]);

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
    // 3. The cluster DNS: deploy/forwarding/coredns's Corefile with our Service's address, as
    // its header says to do, then CoreDNS as kubeadm runs it.
    let service_ip = node.k(&[
        "-n",
        "clusterset-dns",
        "get",
        "service",
        "clusterset-dns",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    let forwarding = node.dir.join("forwarding");
    std::fs::create_dir_all(&forwarding).unwrap();
    for f in ["Corefile", "kustomization.yaml"] {
        let body =
            std::fs::read_to_string(repo().join("deploy/forwarding/coredns").join(f)).unwrap();
        std::fs::write(forwarding.join(f), body.replace("10.96.0.53", &service_ip)).unwrap();
    }
    node.k(&["apply", "-k", forwarding.to_str().unwrap()]);
    let coredns = repo().join("tests/cluster/coredns.yaml");
    node.k(&["apply", "-f", coredns.to_str().unwrap()]);
    node.rollout("kube-system", "deployment/coredns");

    steps.next("4. a pod resolves every kind of name");
    // 4. Imported services, and a client pod with the resolv.conf the kubelet gives it.
    let objects = repo().join("tests/cluster/objects.yaml");
    node.k(&["apply", "-f", objects.to_str().unwrap()]);
    node.k(&[
        "-n",
        "demo",
        "wait",
        "pod/client",
        "--for=condition=Ready",
        "--timeout=120s",
    ]);
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
    wait_until(
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
    wait_until(
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
    wait_until("the old pods gone", Duration::from_secs(60), || {
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
    wait_until(
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
    wait_until(
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
    wait_until("the base's pods gone", Duration::from_secs(60), || {
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
    wait_until(
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
        ("__rate_interval", "1m"),
    ];
    let xdp_panel: Vec<String> = common::grafana::queries(&board, &vars)
        .into_iter()
        .filter(|(title, _)| title == "XDP")
        .map(|(_, q)| q)
        .collect();
    assert_eq!(xdp_panel.len(), 2, "{xdp_panel:?}");
    for q in &xdp_panel {
        wait_until(
            &format!("the XDP panel's {q}"),
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
    let helm_bin = common::monitoring_tools().join("bin/helm");
    let helm = |args: &[&str]| -> Duration {
        let start = Instant::now();
        let out = node
            .in_ns(helm_bin.to_str().unwrap())
            .env("HELM_CACHE_HOME", node.dir.join("helm/cache"))
            .env("HELM_CONFIG_HOME", node.dir.join("helm/config"))
            .env("HELM_DATA_HOME", node.dir.join("helm/data"))
            .env("KUBECONFIG", node.path("admin.kubeconfig"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "helm {args:?}: {}\n{}",
            text(&out),
            node.kubectl_text(&["-n", "helm-dns", "get", "pods,events", "-o", "wide"])
        );
        start.elapsed()
    };
    let chart = repo().join("deploy/helm/clusterset-dns");
    let chart = chart.to_str().unwrap();
    let (image, tag) = IMAGE.split_once(':').unwrap();
    let (image, tag) = (
        format!("image.repository={image}"),
        format!("image.tag={tag}"),
    );
    let helm_ip = "198.19.0.53";
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
    let ttl = |want: &str| {
        let out = node.exec_in(
            "helm-client",
            &["dig", "+noall", "+answer", "web.demo.svc.clusterset.local"],
        );
        text(&out).split_whitespace().nth(1) == Some(want)
    };
    assert!(ttl("5"), "the chart's server answers with the default TTL");
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
    wait_until("the chart's old pods gone", Duration::from_secs(60), || {
        let now = helm_pods();
        now.len() == 2
            && now
                .iter()
                .all(|p| p.ends_with(" True") && !before.contains(p))
    });
    let rolled = upgrade.elapsed();
    wait_until("the new TTL answered", Duration::from_secs(10), || {
        ttl("10")
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
