//! Bringing a node up: its namespace and addresses, etcd and the control plane with their
//! certificates and kubeconfigs, containerd with the images imported, the kubelet, kube-proxy
//! and the CNI, until the node is Ready.

#[allow(unused_imports)]
use super::*;

impl Node {
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
        let bin = super::super::k8s::k8s_bin();
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
}
