//! A real etcd and kube-apiserver on loopback (built once by tests/k8s/setup.sh), with a
//! static-token admin and a `clusterset-dns` user, for the Kubernetes-source and differential
//! tests.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub fn free_port() -> u16 {
    free_ports::<1>()[0]
}

/// `N` distinct free ports, below the kernel's ephemeral range. A port bound at 0 and let go
/// is one the kernel hands out again, to the next bind at 0 or to any outgoing connection of
/// the tests running beside: three `free_port()` calls in a row once gave etcd's peer port and
/// the API server's the same number, and kube-state-metrics once found its telemetry port
/// taken ("bind: address already in use"). Below `ip_local_port_range` the kernel never
/// chooses, so only this process's own picks could meet, and a counter keeps those apart;
/// above 20,000, clear of the fixed ports of what the tests run (Envoy Gateway's 18000-19001,
/// the kubelet's and kube-proxy's 102xx).
pub fn free_ports<const N: usize>() -> [u16; N] {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 20_000;
    let high = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .filter(|&h| h > LOW + 1_000)
        .unwrap_or(32_768);
    let span = high - LOW;
    // Apart from another test binary's picks, as far as the span allows.
    let start = std::process::id() * 997 % span;
    let mut held: Vec<TcpListener> = Vec::with_capacity(N);
    while held.len() < N {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < span, "no free port left below {high}");
        let port = LOW + (start + n) % span;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port as u16)) {
            held.push(l);
        }
    }
    std::array::from_fn(|i| held[i].local_addr().unwrap().port())
}

pub fn k8s_bin() -> PathBuf {
    let setup = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/k8s/setup.sh");
    let out = Command::new("bash")
        .arg(setup)
        .stderr(Stdio::inherit())
        .output()
        .expect("tests/k8s/setup.sh runs");
    assert!(out.status.success(), "tests/k8s/setup.sh failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// etcd and kube-apiserver on loopback, with a static-token admin, a `clusterset-dns` user and a
/// `linkerd-remote` user (token `remotetoken`).
pub struct Cluster {
    pub bin: PathBuf,
    pub dir: tempfile::TempDir,
    pub etcd: Child,
    pub api: Option<Child>,
    pub etcd_port: u16,
    pub api_port: u16,
    /// `--service-cluster-ip-range`: the family (or families) of the cluster's ClusterIPs.
    pub service_range: String,
    /// More flags for the API server, from its next start ([`Cluster::start_api`]).
    pub api_args: Vec<String>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(mut a) = self.api.take() {
            let _ = a.kill();
            let _ = a.wait();
        }
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
    }
}

impl Cluster {
    pub fn start() -> Cluster {
        Cluster::start_with("198.19.224.0/19")
    }

    /// A cluster whose Services get ClusterIPs from `service_range` (an IPv6 range makes an
    /// IPv6-only cluster).
    pub fn start_with(service_range: &str) -> Cluster {
        let bin = k8s_bin();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let run = |cmd: &str| {
            assert!(
                Command::new("sh")
                    .arg("-c")
                    .arg(cmd)
                    .current_dir(d)
                    .status()
                    .unwrap()
                    .success(),
                "{cmd}"
            );
        };
        run(
            "openssl genrsa -out sa.key 2048 2>/dev/null && openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null",
        );
        std::fs::write(
            d.join("tokens.csv"),
            // `linkerd-remote`: what a Link's credentials give another cluster (the remote
            // access ServiceAccount of Linkerd's multicluster extension); `kube-state-metrics`,
            // bound to what deploy/monitoring/mcs grants it (tests/integration/mcs_status.rs).
            "admintoken,admin,admin,system:masters\ndnstoken,clusterset-dns,clusterset-dns\nremotetoken,linkerd-remote,linkerd-remote\n\
             ksmtoken,kube-state-metrics,kube-state-metrics\n",
        )
        .unwrap();
        let [etcd_port, peer, api_port] = free_ports();
        let etcd = Command::new(bin.join("etcd"))
            .args(["--data-dir", d.join("etcd").to_str().unwrap()])
            // Test data: no fsync per write (a VM disk makes each one cost milliseconds).
            .arg("--unsafe-no-fsync")
            .args([
                "--listen-client-urls",
                &format!("http://127.0.0.1:{etcd_port}"),
                "--advertise-client-urls",
                &format!("http://127.0.0.1:{etcd_port}"),
            ])
            .args([
                "--listen-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
            ])
            .args([
                "--initial-cluster",
                &format!("default=http://127.0.0.1:{peer}"),
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("etcd.log")).unwrap())
            .spawn()
            .unwrap();
        for (user, token) in [
            ("admin", "admintoken"),
            ("dns", "dnstoken"),
            ("kube-state-metrics", "ksmtoken"),
        ] {
            std::fs::write(
                d.join(format!("{user}.kubeconfig")),
                format!(
                    "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster: {{server: \"https://127.0.0.1:{api_port}\", insecure-skip-tls-verify: true}}\n\
                     users:\n- name: {user}\n  user: {{token: {token}}}\ncontexts:\n- name: test\n  context: {{cluster: test, user: {user}}}\ncurrent-context: test\n"
                ),
            )
            .unwrap();
        }
        let mut c = Cluster {
            bin,
            dir,
            etcd,
            api: None,
            etcd_port,
            api_port,
            service_range: service_range.to_string(),
            api_args: Vec::new(),
        };
        c.start_api();
        c
    }

    pub fn start_api(&mut self) {
        let d = self.dir.path();
        let api = Command::new(self.bin.join("kube-apiserver"))
            .args([
                "--etcd-servers",
                &format!("http://127.0.0.1:{}", self.etcd_port),
            ])
            .args([
                "--bind-address",
                "127.0.0.1",
                "--advertise-address",
                "127.0.0.1",
                "--endpoint-reconciler-type",
                "none",
            ])
            .args([
                "--secure-port",
                &self.api_port.to_string(),
                "--cert-dir",
                d.join("certs").to_str().unwrap(),
            ])
            .args([
                "--service-account-issuer",
                "https://kubernetes.default.svc",
                "--service-account-key-file",
                "sa.pub",
                "--service-account-signing-key-file",
                "sa.key",
            ])
            .args([
                "--token-auth-file",
                "tokens.csv",
                "--authorization-mode",
                "RBAC",
                "--service-cluster-ip-range",
                &self.service_range,
            ])
            // For a set held for a hand run (tests/linkerd-set-up.sh): flags of its own, such
            // as `--disable-admission-plugins=ServiceAccount` where no controller makes
            // ServiceAccounts.
            .args(
                std::env::var("CLUSTERSET_DNS_TEST_APISERVER_ARGS")
                    .unwrap_or_default()
                    .split_whitespace(),
            )
            .args(&self.api_args)
            .current_dir(d)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("apiserver.log")).unwrap())
            .spawn()
            .unwrap();
        self.api = Some(api);
        // The directory goes with the test: a failure says what the logs said.
        let tail = |f: &str| {
            let text = std::fs::read_to_string(d.join(f)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(25)..].join("\n")
        };
        super::until(
            super::wait::Lazy(|| {
                format!(
                    "kube-apiserver ready (etcd on {}, API on {}).\n\
                     apiserver.log, last lines:\n{}\netcd.log, last lines:\n{}",
                    self.etcd_port,
                    self.api_port,
                    tail("apiserver.log"),
                    tail("etcd.log")
                )
            }),
            120,
            || self.kubectl_ok(&["get", "--raw", "/readyz"]),
        );
    }

    pub fn kill_api(&mut self) {
        let mut a = self.api.take().expect("API server running");
        a.kill().unwrap();
        a.wait().unwrap();
    }

    pub fn kubeconfig(&self, user: &str) -> String {
        self.dir
            .path()
            .join(format!("{user}.kubeconfig"))
            .to_str()
            .unwrap()
            .to_string()
    }

    /// kubectl as the admin, with a discovery cache of this cluster's own: the shared one in
    /// ~/.kube/cache is keyed by host and port, and a port reused from an earlier test's API
    /// server (other CRDs, other versions) would answer from that server's resource list.
    pub fn kubectl(&self) -> Command {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(self.kubeconfig("admin"))
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"));
        c
    }

    pub fn kubectl_ok(&self, args: &[&str]) -> bool {
        self.kubectl()
            .args(args)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    /// kubectl as admin with `args`: what it printed; a failure panics with its stderr.
    pub fn kubectl_out(&self, args: &[&str]) -> String {
        let out = self.kubectl().args(args).output().expect("kubectl runs");
        assert!(
            out.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("kubectl prints UTF-8")
    }

    /// kubectl as admin with `args`, `input` on its standard input; its stderr if it fails.
    pub fn kubectl_input(&self, args: &[&str], input: &str) -> Result<(), String> {
        let out = super::output_with_input(self.kubectl().args(args), input).expect("kubectl runs");
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// `kubectl apply -f -` with `yaml`, retried briefly (a new CRD takes a moment to serve).
    pub fn apply(&self, yaml: &str) {
        self.kubectl_retried(&["apply", "-f", "-"], yaml, |e| {
            format!("kubectl apply: {e}\n{yaml}")
        });
    }

    /// [`Cluster::apply`] server-side: for objects too large for kubectl's last-applied
    /// annotation (the Gateway API's CRDs).
    pub fn apply_server_side(&self, yaml: &str) {
        self.kubectl_retried(&["apply", "--server-side", "-f", "-"], yaml, |e| {
            format!("kubectl apply --server-side: {e}")
        });
    }

    /// `kubectl delete`, retried briefly like [`Cluster::apply`].
    pub fn delete(&self, kind: &str, ns: &str, name: &str) {
        self.kubectl_retried(&["delete", kind, "-n", ns, name, "--wait=false"], "", |e| {
            format!("delete {kind} {ns}/{name}: {e}")
        });
    }

    /// `kubectl ARGS` with `input`, retried for up to 20 s until it succeeds; a failure is
    /// `describe`d with kubectl's last error.
    fn kubectl_retried(&self, args: &[&str], input: &str, describe: impl Fn(&str) -> String) {
        let last = std::cell::RefCell::new(String::new());
        super::until(
            super::wait::Lazy(|| describe(&last.borrow())),
            20,
            || match self.kubectl_input(args, input) {
                Ok(_) => true,
                Err(e) => {
                    *last.borrow_mut() = e.to_string();
                    false
                }
            },
        );
    }
}

pub fn crd(version: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/k8s/crds/serviceimports-{version}.yaml")),
    )
    .unwrap()
}

pub fn rbac() -> String {
    let role = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/base/rbac.yaml"),
    )
    .unwrap();
    // The deployment binds the role to its ServiceAccount; here the binary runs as a user.
    role + "\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: clusterset-dns-test-user}\n\
            roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: clusterset-dns}\nsubjects:\n- {kind: User, name: clusterset-dns, apiGroup: rbac.authorization.k8s.io}\n"
}

/// What `--source mcs,linkerd` reads, bound to the user the binary runs as: deploy/linkerd's
/// ClusterRole with deploy/base's rules added, as the chart renders it for
/// `source.read={mcs,linkerd}`.
pub fn linkerd_rbac() -> String {
    let role = |dir: &str| -> serde_json::Value {
        super::yaml_objects(&super::kustomize(dir))
            .into_iter()
            .find(|o| o["kind"] == "ClusterRole")
            .unwrap_or_else(|| panic!("{dir} has a ClusterRole"))
    };
    let mut both = role("deploy/linkerd");
    let base = role("deploy/base");
    let rules = both["rules"].as_array_mut().unwrap();
    for rule in base["rules"].as_array().unwrap() {
        if !rules.contains(rule) {
            rules.push(rule.clone());
        }
    }
    // YAML, as the binding that follows: kubectl reads a stream that starts with JSON as JSON.
    serde_yaml_ng::to_string(&both).unwrap()
        + "\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: clusterset-dns-test-user}\n\
            roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: clusterset-dns}\nsubjects:\n- {kind: User, name: clusterset-dns, apiGroup: rbac.authorization.k8s.io}\n"
}

pub fn import(version: &str, ns: &str, name: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: multicluster.x-k8s.io/{version}\nkind: ServiceImport\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n"
    )
}

pub fn slice(ns: &str, name: &str, service: &str, cluster: &str, endpoints: &str) -> String {
    format!(
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{multicluster.kubernetes.io/service-name: {service}, multicluster.kubernetes.io/source-cluster: {cluster}}}\n\
         addressType: IPv4\nports: [{{name: http, protocol: TCP, port: 80}}]\nendpoints: {endpoints}\n"
    )
}

/// The MCS API's `kind` (`plural`) at v1beta1, for kube's dynamic `Api`.
pub fn mcs_resource(kind: &str, plural: &str) -> kube::discovery::ApiResource {
    kube::discovery::ApiResource {
        group: "multicluster.x-k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "multicluster.x-k8s.io/v1beta1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Link `link`'s mirror of `svc` in `ns` serving `port`, as Linkerd's service mirror writes it
/// (linkerd2 `version-2.20`, ../shared/docs/object-shapes.md): `<svc>-<link>`.
pub fn linkerd_mirror(
    ns: &str,
    svc: &str,
    link: &str,
    port: u16,
) -> k8s_openapi::api::core::v1::Service {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": format!("{svc}-{link}"), "namespace": ns,
            "labels": {"mirror.linkerd.io/mirrored-service": "true", "mirror.linkerd.io/cluster-name": link},
            "annotations": {
                "mirror.linkerd.io/remote-svc-fq-name": format!("{svc}.{ns}.svc.cluster.local"),
                "mirror.linkerd.io/remote-resource-version": "1"
            }
        },
        "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": port, "targetPort": 8080}]}
    }))
    .unwrap()
}

pub async fn admin_client(k: &Cluster) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(k.kubeconfig("admin")).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

pub fn dynamic_api(
    client: &kube::Client,
    ns: &str,
    kind: &str,
) -> kube::Api<kube::api::DynamicObject> {
    use clusterset_dns::model::ObjectKind;
    use clusterset_dns::source::kube::api_resource;
    use clusterset_dns::source::object::Kind;
    use clusterset_dns::source::{linkerd, mcs};
    let ar = match kind {
        "ServiceImport" => api_resource(
            ObjectKind::ServiceImport,
            &mcs::Imports::RESOURCE,
            "v1beta1",
        ),
        "Service" => api_resource(ObjectKind::Service, &linkerd::Services::RESOURCE, "v1"),
        _ => api_resource(ObjectKind::EndpointSlice, &mcs::Slices::RESOURCE, "v1"),
    };
    kube::Api::namespaced_with(client.clone(), ns, &ar)
}

impl Cluster {
    /// The API server's writes since it started, by (verb, resource), from its own
    /// `apiserver_request_total`: POST, PUT, PATCH (and server-side APPLY), DELETE,
    /// DELETECOLLECTION.
    pub fn writes(&self) -> std::collections::BTreeMap<(String, String), u64> {
        let out = self
            .kubectl()
            .args(["get", "--raw", "/metrics"])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let label = |l: &str, key: &str| -> Option<String> {
            Some(
                l.split(&format!("{key}=\""))
                    .nth(1)?
                    .split('"')
                    .next()?
                    .to_string(),
            )
        };
        let mut by = std::collections::BTreeMap::new();
        for l in text
            .lines()
            .filter(|l| l.starts_with("apiserver_request_total{"))
        {
            let (Some(verb), Some(resource), Some(n)) = (
                label(l, "verb"),
                label(l, "resource"),
                l.rsplit(' ').next().and_then(|n| n.parse::<f64>().ok()),
            ) else {
                continue;
            };
            let verb = verb.to_ascii_lowercase();
            if [
                "post",
                "put",
                "patch",
                "apply",
                "delete",
                "deletecollection",
            ]
            .contains(&verb.as_str())
            {
                *by.entry((verb, resource)).or_insert(0) += n as u64;
            }
        }
        by
    }

    /// Compacts etcd up to its current revision, so that watches resuming from before it get
    /// 410 Gone.
    pub fn compact(&self) {
        let revision = etcd_post(self, "/v3/kv/range", r#"{"key":"AA==","range_end":"AA=="}"#)
            ["header"]["revision"]
            .as_str()
            .unwrap()
            .to_string();
        // Without -f: a revision compacted already (nothing was written since the last
        // compaction) is an error body, and fine.
        let out = Command::new("curl")
            .args([
                "-s",
                "-X",
                "POST",
                &format!("http://127.0.0.1:{}/v3/kv/compaction", self.etcd_port),
                "-d",
                &format!(r#"{{"revision":"{revision}","physical":true}}"#),
            ])
            .output()
            .unwrap();
        let body = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && (!body.contains("error") || body.contains("compacted")),
            "etcd compaction: {body}"
        );
    }
}

/// The writes between two readings of [`Cluster::writes`] but those to `skip` resources: the
/// total, and `verb resource=n` words.
pub fn writes_between(
    before: &std::collections::BTreeMap<(String, String), u64>,
    after: &std::collections::BTreeMap<(String, String), u64>,
    skip: &[&str],
) -> (u64, String) {
    let mut total = 0;
    let mut words = Vec::new();
    for ((verb, resource), n) in after {
        let d = n.saturating_sub(
            before
                .get(&(verb.clone(), resource.clone()))
                .copied()
                .unwrap_or(0),
        );
        if d > 0 && !skip.contains(&resource.as_str()) {
            total += d;
            words.push(format!("{verb} {resource}={d}"));
        }
    }
    (total, words.join(", "))
}

/// A TCP proxy in front of the API server that can drop, stall and refuse connections.
pub struct Proxy {
    pub addr: SocketAddr,
    stalled: std::sync::Arc<std::sync::atomic::AtomicBool>,
    refusing: std::sync::Arc<std::sync::atomic::AtomicBool>,
    conns: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Proxy {
    pub fn start(upstream: SocketAddr) -> Proxy {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stalled = Arc::new(AtomicBool::new(false));
        let refusing = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let (st, rf, cs) = (stalled.clone(), refusing.clone(), conns.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if rf.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = std::net::TcpStream::connect(upstream) else {
                    continue;
                };
                cs.lock()
                    .unwrap()
                    .extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let st = st.clone();
                    std::thread::spawn(move || {
                        use std::io::{Read, Write};
                        let mut buf = [0u8; 16384];
                        loop {
                            let n = match from.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            while st.load(Ordering::SeqCst) {
                                std::thread::sleep(Duration::from_millis(20));
                            }
                            if to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Proxy {
            addr,
            stalled,
            refusing,
            conns,
        }
    }

    pub fn drop_all(&self) {
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }

    pub fn stall(&self, on: bool) {
        self.stalled.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn refuse(&self, on: bool) {
        self.refusing.store(on, std::sync::atomic::Ordering::SeqCst);
    }
}

/// etcd's current revision, through its JSON gateway.
pub fn etcd_post(k: &Cluster, path: &str, body: &str) -> serde_json::Value {
    let out = super::run_ok(Command::new("curl").args([
        "-sf",
        "-X",
        "POST",
        &format!("http://127.0.0.1:{}{path}", k.etcd_port),
        "-d",
        body,
    ]));
    serde_json::from_str(&out).unwrap()
}

/// `kubectl proxy` for one of the cluster's users (plain HTTP on loopback, forwarding to the API
/// server with that user's credentials), behind an HTTP front that can answer every request with
/// an API error status instead: the API server failing with 5xx, as it does when etcd is down
/// or the server is overloaded.
pub struct ApiErrors {
    /// Where clients connect, over plain HTTP.
    pub addr: SocketAddr,
    kubectl: Child,
    /// The status to answer with; 0 forwards.
    status: std::sync::Arc<std::sync::atomic::AtomicU16>,
    served: std::sync::Arc<std::sync::atomic::AtomicU64>,
    conns: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Drop for ApiErrors {
    fn drop(&mut self) {
        let _ = self.kubectl.kill();
        let _ = self.kubectl.wait();
    }
}

impl ApiErrors {
    pub fn start(k: &Cluster, user: &str) -> ApiErrors {
        use std::io::{BufRead, BufReader, Read, Write};
        use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
        use std::sync::{Arc, Mutex};
        let mut kubectl = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(k.kubeconfig(user))
            .args(["proxy", "--address=127.0.0.1", "--port=0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl runs");
        let mut line = String::new();
        BufReader::new(kubectl.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "Starting to serve on 127.0.0.1:PORT"
        let upstream: SocketAddr = line
            .trim()
            .rsplit(' ')
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("kubectl proxy said {line:?}"));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let status = Arc::new(AtomicU16::new(0));
        let served = Arc::new(AtomicU64::new(0));
        let conns: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let (st, sv, cs) = (status.clone(), served.clone(), conns.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { continue };
                let (st, sv, cs) = (st.clone(), sv.clone(), cs.clone());
                std::thread::spawn(move || {
                    // The request head, which decides what happens to the connection.
                    let mut head = Vec::new();
                    let mut buf = [0u8; 16384];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match client.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let code = st.load(Ordering::SeqCst);
                    if code != 0 {
                        let (reason, text) = match code {
                            503 => ("ServiceUnavailable", "Service Unavailable"),
                            _ => ("InternalError", "Internal Server Error"),
                        };
                        let body = format!(
                            r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"injected by the test","reason":"{reason}","code":{code}}}"#
                        );
                        let _ = write!(
                            client,
                            "HTTP/1.1 {code} {text}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        sv.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                    let Ok(mut server) = std::net::TcpStream::connect(upstream) else {
                        return;
                    };
                    if server.write_all(&head).is_err() {
                        return;
                    }
                    cs.lock()
                        .unwrap()
                        .extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
                    let (mut up, mut down) =
                        (server.try_clone().unwrap(), client.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut down, &mut up);
                        let _ = up.shutdown(std::net::Shutdown::Both);
                    });
                    let _ = std::io::copy(&mut server, &mut client);
                    let _ = client.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        ApiErrors {
            addr,
            kubectl,
            status,
            served,
            conns,
        }
    }

    /// A kubeconfig (in the cluster's folder) that reaches the API server through this front.
    pub fn kubeconfig(&self, k: &Cluster) -> String {
        let path = k.dir.path().join("api-errors.kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: p, cluster: {{server: 'http://{}'}}}}]\n\
                 users: [{{name: p, user: {{}}}}]\ncontexts: [{{name: p, context: {{cluster: p, user: p}}}}]\ncurrent-context: p\n",
                self.addr
            ),
        )
        .unwrap();
        path.to_str().unwrap().to_string()
    }

    /// From now on every request gets `code` (0: forwarded again). Open connections, such as
    /// watches, are cut, so the client must make new requests.
    pub fn fail_with(&self, code: u16) {
        self.status.store(code, std::sync::atomic::Ordering::SeqCst);
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Error responses sent so far.
    pub fn served(&self) -> u64 {
        self.served.load(std::sync::atomic::Ordering::SeqCst)
    }
}
