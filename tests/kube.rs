//! The Kubernetes source against a real kube-apiserver and etcd (built once by
//! tests/k8s/setup.sh) on loopback: initial sync and readiness, adds, updates and deletes of
//! imports and slices, a malformed object beside good ones, the API server killed and restarted
//! while answers continue, and both CRD versions (v1alpha1 only, then v1alpha1 + v1beta1).
//! The binary runs as a user that has only the ClusterRole from deploy/.

mod common;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Running, dig, http_get, metric, spawn_binary};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn k8s_bin() -> PathBuf {
    let setup = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/k8s/setup.sh");
    let out = Command::new("bash")
        .arg(setup)
        .stderr(Stdio::inherit())
        .output()
        .expect("tests/k8s/setup.sh runs");
    assert!(out.status.success(), "tests/k8s/setup.sh failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// etcd and kube-apiserver on loopback, with a static-token admin and a `clusterset-dns` user.
struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    etcd: Child,
    api: Option<Child>,
    etcd_port: u16,
    api_port: u16,
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
    fn start() -> Cluster {
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
            )
        };
        run(
            "openssl genrsa -out sa.key 2048 2>/dev/null && openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null",
        );
        std::fs::write(
            d.join("tokens.csv"),
            "admintoken,admin,admin,system:masters\ndnstoken,clusterset-dns,clusterset-dns\n",
        )
        .unwrap();
        let (etcd_port, peer, api_port) = (free_port(), free_port(), free_port());
        let etcd = Command::new(bin.join("etcd"))
            .args(["--data-dir", d.join("etcd").to_str().unwrap()])
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
        for (user, token) in [("admin", "admintoken"), ("dns", "dnstoken")] {
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
        };
        c.start_api();
        c
    }

    fn start_api(&mut self) {
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
                "10.96.0.0/16",
            ])
            .current_dir(d)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("apiserver.log")).unwrap())
            .spawn()
            .unwrap();
        self.api = Some(api);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.kubectl_ok(&["get", "--raw", "/readyz"]) {
            assert!(
                Instant::now() < deadline,
                "kube-apiserver not ready; see {}",
                d.join("apiserver.log").display()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn kill_api(&mut self) {
        let mut a = self.api.take().expect("API server running");
        a.kill().unwrap();
        a.wait().unwrap();
    }

    fn kubeconfig(&self, user: &str) -> String {
        self.dir
            .path()
            .join(format!("{user}.kubeconfig"))
            .to_str()
            .unwrap()
            .to_string()
    }

    fn kubectl_ok(&self, args: &[&str]) -> bool {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig("admin"))
            .args(args)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    /// `kubectl apply -f -` with `yaml`, retried briefly (a new CRD takes a moment to serve).
    fn apply(&self, yaml: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut child = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(self.kubeconfig("admin"))
                .args(["apply", "-f", "-"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(yaml.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            if out.status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "kubectl apply failed: {}\n{yaml}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn delete(&self, kind: &str, ns: &str, name: &str) {
        assert!(
            self.kubectl_ok(&["delete", kind, "-n", ns, name, "--wait=false"]),
            "delete {kind} {ns}/{name}"
        );
    }
}

fn crd(version: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/k8s/crds/serviceimports-{version}.yaml")),
    )
    .unwrap()
}

fn rbac() -> String {
    let role = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/base/rbac.yaml"),
    )
    .unwrap();
    // The deployment binds the role to its ServiceAccount; here the binary runs as a user.
    role + "\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: clusterset-dns-test-user}\n\
            roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: clusterset-dns}\nsubjects:\n- {kind: User, name: clusterset-dns, apiGroup: rbac.authorization.k8s.io}\n"
}

fn import(version: &str, ns: &str, name: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: multicluster.x-k8s.io/{version}\nkind: ServiceImport\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n"
    )
}

fn slice(ns: &str, name: &str, service: &str, cluster: &str, endpoints: &str) -> String {
    format!(
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{multicluster.kubernetes.io/service-name: {service}, multicluster.kubernetes.io/source-cluster: {cluster}}}\n\
         addressType: IPv4\nports: [{{name: http, protocol: TCP, port: 80}}]\nendpoints: {endpoints}\n"
    )
}

/// `dig +short` lines, sorted.
fn short(dns: SocketAddr, name: &str) -> Vec<String> {
    let mut v: Vec<String> = dig(dns, &format!("+short {name}"))
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn status(dns: SocketAddr, name: &str) -> String {
    let out = dig(dns, name);
    out.split("status: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or("no answer")
        .to_string()
}

fn until(what: &str, secs: u64, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ready(s: &Running) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(http_get(s.admin, "/ready")).map(|(c, _)| c) == Some(200)
}

fn metric_value(s: &Running, series: &str) -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(metric(s.admin, series))
}

#[test]
fn kubernetes_source_against_a_real_api_server() {
    let mut k = Cluster::start();
    k.apply(&crd("v1alpha1"));
    k.apply(&rbac());
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: data}\n");
    // Present before the server starts: the initial list.
    k.apply(&(import("v1alpha1", "shop", "web", "{type: ClusterSetIP, ips: [10.0.0.1], ports: [{name: http, port: 80}]}")
        + &import("v1alpha1", "data", "db", "{type: Headless, ports: [{name: http, port: 80}]}")
        + &slice("data", "db-east", "db", "east", "[{addresses: [10.1.0.1], hostname: db-0}]")
        // The CRD schema admits this; we must skip it and serve the rest.
        + &import("v1alpha1", "shop", "bad", "{type: ClusterSetIP, ips: [10.0.0.300], ports: [{port: 80}]}")));

    let dns_kubeconfig = k.kubeconfig("dns");
    let s = spawn_binary(&["--kubeconfig", &dns_kubeconfig]);
    until("ready", 30, || ready(&s));
    assert!(s.logged("\"version\":\"v1alpha1\""), "discovered v1alpha1");
    assert_eq!(short(s.dns, "web.shop.svc.clusterset.local"), ["10.0.0.1"]);
    assert_eq!(short(s.dns, "db.data.svc.clusterset.local"), ["10.1.0.1"]);
    assert_eq!(
        short(s.dns, "db-0.east.db.data.svc.clusterset.local"),
        ["10.1.0.1"]
    );
    assert_eq!(status(s.dns, "bad.shop.svc.clusterset.local"), "NXDOMAIN");
    assert_eq!(
        metric_value(
            &s,
            "clusterset_dns_skipped_objects_total{kind=\"ServiceImport\",reason=\"bad_ip\"}"
        ),
        1.0
    );

    // Add, update and delete, of imports and slices.
    k.apply(&import(
        "v1alpha1",
        "shop",
        "web",
        "{type: ClusterSetIP, ips: [10.0.0.2], ports: [{name: http, port: 80}]}",
    ));
    until("updated import", 10, || {
        short(s.dns, "web.shop.svc.clusterset.local") == ["10.0.0.2"]
    });
    k.apply(&slice(
        "data",
        "db-west",
        "db",
        "west",
        "[{addresses: [10.2.0.1], hostname: db-1}]",
    ));
    until("added slice", 10, || {
        short(s.dns, "db.data.svc.clusterset.local") == ["10.1.0.1", "10.2.0.1"]
    });
    k.delete("endpointslice", "data", "db-east");
    until("deleted slice", 10, || {
        status(s.dns, "db-0.east.db.data.svc.clusterset.local") == "NXDOMAIN"
    });
    assert_eq!(short(s.dns, "db.data.svc.clusterset.local"), ["10.2.0.1"]);
    k.apply(&import(
        "v1alpha1",
        "shop",
        "api",
        "{type: ClusterSetIP, ips: [10.0.0.3], ports: [{port: 80}]}",
    ));
    until("added import", 10, || {
        short(s.dns, "api.shop.svc.clusterset.local") == ["10.0.0.3"]
    });
    k.delete("serviceimport", "shop", "api");
    until("deleted import", 10, || {
        status(s.dns, "api.shop.svc.clusterset.local") == "NXDOMAIN"
    });
    // A fixed bad object is served.
    k.apply(&import(
        "v1alpha1",
        "shop",
        "bad",
        "{type: ClusterSetIP, ips: [10.0.0.30], ports: [{port: 80}]}",
    ));
    until("repaired import", 10, || {
        short(s.dns, "bad.shop.svc.clusterset.local") == ["10.0.0.30"]
    });

    // The API server dies: answers go on from the last known zone; it comes back: changes flow.
    k.kill_api();
    for _ in 0..20 {
        assert_eq!(short(s.dns, "web.shop.svc.clusterset.local"), ["10.0.0.2"]);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ready(&s), "still ready while serving the last known zone");
    k.start_api();
    k.apply(&import(
        "v1alpha1",
        "shop",
        "after",
        "{type: ClusterSetIP, ips: [10.0.0.4], ports: [{port: 80}]}",
    ));
    until("change after the API server restart", 60, || {
        short(s.dns, "after.shop.svc.clusterset.local") == ["10.0.0.4"]
    });
    assert!(
        metric_value(
            &s,
            "clusterset_dns_source_errors_total{kind=\"ServiceImport\"}"
        ) >= 1.0,
        "watch failures are counted"
    );
    assert_eq!(short(s.dns, "db.data.svc.clusterset.local"), ["10.2.0.1"]);
    drop(s);

    // The CRD now serves v1beta1 too: a new start prefers it and reads objects of both versions.
    k.apply(&crd("v1beta1"));
    k.apply(&import(
        "v1beta1",
        "shop",
        "beta",
        "{type: ClusterSetIP, ips: [10.0.0.5], ports: [{port: 80}]}",
    ));
    let s = spawn_binary(&["--kubeconfig", &dns_kubeconfig]);
    until("ready with v1beta1", 30, || ready(&s));
    assert!(s.logged("\"version\":\"v1beta1\""), "discovered v1beta1");
    assert_eq!(short(s.dns, "beta.shop.svc.clusterset.local"), ["10.0.0.5"]);
    assert_eq!(short(s.dns, "web.shop.svc.clusterset.local"), ["10.0.0.2"]);
    // And the version can be forced.
    let s1 = spawn_binary(&[
        "--kubeconfig",
        &dns_kubeconfig,
        "--serviceimport-version",
        "v1alpha1",
    ]);
    until("ready with a forced v1alpha1", 30, || ready(&s1));
    assert_eq!(
        short(s1.dns, "beta.shop.svc.clusterset.local"),
        ["10.0.0.5"]
    );
    // --namespace narrows what is served.
    let s2 = spawn_binary(&["--kubeconfig", &dns_kubeconfig, "--namespace", "data"]);
    until("ready with one namespace", 30, || ready(&s2));
    assert_eq!(short(s2.dns, "db.data.svc.clusterset.local"), ["10.2.0.1"]);
    assert_eq!(status(s2.dns, "web.shop.svc.clusterset.local"), "NXDOMAIN");
}
