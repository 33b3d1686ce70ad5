//! The Gateway API on the ServiceImports the linkerd-bridge writes: Envoy Gateway v1.9.1 (its
//! controller and xDS server, built from the Go module proxy by tests/gateway/setup.sh) against
//! a real API server where the bridge's import half turns Linkerd-shaped Services into
//! ServiceImports and slices. For each shape the bridge writes (federated, mirrors only,
//! gateway-mode headless), the HTTPRoute users write to the import is accepted and resolved, and
//! an xDS client in an Envoy's place (tests/gateway/infra/xdsclient: go-control-plane's ADS
//! client, mutual TLS, node cluster `<namespace>/<gateway>`) reads the route's cluster with
//! exactly the addresses and port the import stands for. Then what goes wrong: a port the import
//! lacks, a member cluster leaving, the import deleted. docs/linkerd-bridge.md's route is applied as written.
//! No Envoy runs (none can be built here): this is the control plane, not traffic.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::k8s::Cluster;
use common::node::setup;
use common::{output_text, until};
use serde_json::Value;

use crate::linkerd_bridge::Bridge;
use crate::linkerd_bridge_import::{IMPORT_ARGS, import_cluster, linkerd_objects};
use crate::linkerd_source::cluster_ip;

/// Envoy Gateway's controller, run as in its image: the Kubernetes provider (leader election
/// off), its TLS files where it reads them (`/certs`), here in a directory of the test's own that
/// it runs chrooted in. Ended by PID when dropped.
struct EnvoyGateway {
    child: common::Killed,
    log: PathBuf,
    /// `envoy-gateway certgen --local`'s files: `envoy/` is what an Envoy connects with.
    certs: PathBuf,
}

impl EnvoyGateway {
    fn start(k: &Cluster, gw: &Path) -> EnvoyGateway {
        let dir = k.dir.path();
        let root = dir.join("envoy-gateway-root");
        for d in ["bin", "certs", "tmp"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let bin = root.join("bin/envoy-gateway");
        if std::fs::hard_link(gw.join("bin/envoy-gateway"), &bin).is_err() {
            std::fs::copy(gw.join("bin/envoy-gateway"), &bin).unwrap();
        }
        let home = dir.join("envoy-gateway-home");
        common::run_ok(
            Command::new(gw.join("bin/envoy-gateway"))
                .args(["certgen", "--local", "--config-home"])
                .arg(&home),
        );
        let certs = home.join("certs");
        for f in ["tls.crt", "tls.key", "ca.crt"] {
            std::fs::copy(
                certs.join("envoy-gateway").join(f),
                root.join("certs").join(f),
            )
            .unwrap();
        }
        std::fs::copy(k.kubeconfig("admin"), root.join("kubeconfig")).unwrap();
        std::fs::write(
            root.join("config.yaml"),
            "apiVersion: gateway.envoyproxy.io/v1alpha1\nkind: EnvoyGateway\n\
             gateway: {controllerName: gateway.envoyproxy.io/gatewayclass-controller}\n\
             provider:\n  type: Kubernetes\n  kubernetes:\n    leaderElection: {disable: true}\n    proxyTopologyInjector: {disabled: true}\n\
             logging: {level: {default: info}}\n",
        )
        .unwrap();
        // Its namespace, and the HMAC secret certgen makes there in a cluster.
        k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: envoy-gateway-system}\n");
        let out = k
            .kubectl()
            .args(["-n", "envoy-gateway-system", "create", "secret", "generic"])
            .arg("envoy-oidc-hmac")
            .arg(format!(
                "--from-file=hmac-secret={}",
                certs.join("envoy-oidc-hmac/hmac-secret").display()
            ))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", output_text(&out));
        let log = dir.join("envoy-gateway.log");
        let child = Command::new("chroot")
            .arg(&root)
            .args([
                "/bin/envoy-gateway",
                "server",
                "--config-path",
                "/config.yaml",
            ])
            .env("KUBECONFIG", "/kubeconfig")
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.join("envoy-gateway.stderr")).unwrap())
            .spawn()
            .unwrap();
        let eg = EnvoyGateway {
            child: common::Killed(child),
            log,
            certs,
        };
        until("Envoy Gateway ready (its probe on :8081)", 60, || {
            common::http_get_blocking(
                "127.0.0.1:8081".parse().unwrap(),
                "/readyz",
                Duration::from_secs(1),
            )
            .is_some_and(|(status, _)| status == 200)
        });
        eg
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The xDS client of tests/gateway/infra, as the Envoy of Gateway `gateway` (`ns/name`): every
/// state it printed, with when it arrived.
struct Xds {
    _child: common::Killed,
    seen: Arc<Mutex<Vec<(Instant, Clusters)>>>,
}

/// One state the xDS client printed: every cluster's addresses.
type Clusters = BTreeMap<String, Vec<String>>;

impl Xds {
    fn start(gw: &Path, eg: &EnvoyGateway, gateway: &str) -> Xds {
        let mut child = Command::new(gw.join("bin/xdsclient"))
            .args(["--server", "127.0.0.1:18000", "--gateway", gateway])
            .arg("--certs")
            .arg(eg.certs.join("envoy"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let keep = seen.clone();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line).expect("a JSON line");
                let clusters = serde_json::from_value(v["clusters"].clone())
                    .expect("clusters: name to addresses");
                keep.lock().unwrap().push((Instant::now(), clusters));
            }
        });
        Xds {
            _child: common::Killed(child),
            seen,
        }
    }

    /// The addresses of `cluster` now (None: no such cluster).
    fn addresses(&self, cluster: &str) -> Option<Vec<String>> {
        let seen = self.seen.lock().unwrap();
        seen.last()?.1.get(cluster).cloned()
    }

    /// Waits until `cluster`'s addresses are `want` (None: no such cluster); when that state
    /// arrived.
    fn settles(&self, eg: &EnvoyGateway, cluster: &str, want: Option<&[String]>) -> Instant {
        let want = want.map(<[String]>::to_vec);
        common::wait::value(
            common::wait::Lazy(|| {
                format!(
                    "xDS cluster {cluster}: {want:?}\nlast: {:?}\nEnvoy Gateway's log:\n{}",
                    self.addresses(cluster),
                    tail(&eg.log())
                )
            }),
            30,
            || {
                let seen = self.seen.lock().unwrap();
                let (at, last) = seen.last()?;
                (last.get(cluster).cloned() == want).then_some(*at)
            },
        )
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// An HTTPRoute's conditions for its first parent, `type` to `status/reason`.
fn route_conditions(k: &Cluster, ns: &str, name: &str) -> BTreeMap<String, String> {
    let out = k
        .kubectl()
        .args(["get", "httproute", "-n", ns, name, "-o", "json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["status"]["parents"][0]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["type"].as_str().unwrap().to_string(),
                format!(
                    "{}/{}",
                    c["status"].as_str().unwrap(),
                    c["reason"].as_str().unwrap()
                ),
            )
        })
        .collect()
}

/// Waits until route `ns/name`'s conditions are exactly `want` (`Type=Status/Reason`).
fn route_settles(k: &Cluster, eg: &EnvoyGateway, ns: &str, name: &str, want: &[&str]) {
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|w| {
            let (t, s) = w.split_once('=').unwrap();
            (t.to_string(), s.to_string())
        })
        .collect();
    common::wait::value(
        common::wait::Lazy(|| {
            format!(
                "HTTPRoute {ns}/{name}: {want:?}\nlast: {:?}\nEnvoy Gateway's log:\n{}",
                route_conditions(k, ns, name),
                tail(&eg.log())
            )
        }),
        30,
        || (route_conditions(k, ns, name) == want).then_some(()),
    );
}

/// A route `ns/name` on Gateway `gateway` (of `ns`) to ServiceImport `import` at `port`.
fn route(ns: &str, name: &str, gateway: &str, import: &str, port: u16) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec:\n  parentRefs: [{{name: {gateway}}}]\n  hostnames: [{name}.example]\n  rules:\n  \
         - backendRefs: [{{group: multicluster.x-k8s.io, kind: ServiceImport, name: {import}, port: {port}}}]\n"
    )
}

/// The YAML docs/linkerd-bridge.md's route to an import applies: its Gateway, policy and route.
fn readme_route() -> String {
    let doc = std::fs::read_to_string(common::node::repo().join("docs/linkerd-bridge.md")).unwrap();
    let walk = &doc[doc.find("## Gateway API routes to ServiceImports").unwrap()..];
    let walk = &walk[..walk.find("\n## ").unwrap_or(walk.len())];
    let start = walk.rfind("<<'YAML'\n").expect("the walk applies YAML") + "<<'YAML'\n".len();
    let len = walk[start..].find("\nYAML\n").unwrap();
    walk[start..start + len + 1].to_string()
}

const ACCEPTED: &str = "Accepted=True/Accepted";
const RESOLVED: &str = "ResolvedRefs=True/ResolvedRefs";

#[test]
fn an_httproute_to_each_serviceimport_shape_resolves_in_envoy_gateway() {
    let _module = common::module(module_path!());
    let gw = setup("tests/gateway/setup.sh");
    let k = import_cluster("198.19.224.0/19");
    for entry in std::fs::read_dir(gw.join("crds")).unwrap() {
        k.apply_server_side(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    until("the Gateway API served", 30, || {
        k.kubectl_ok(&["get", "httproutes,gateways,backendtrafficpolicies", "-A"])
    });

    // Linkerd's objects (web federated from east and west with a local member, api mirrored
    // from both, db a gateway-mode headless export with two hosts from east), and the bridge's
    // import half writing their imports. The local member has a pod listening on 8080, in the
    // slice the endpointslice controller writes for it (the Service's labels copied).
    linkerd_objects(&k);
    let pod = "198.19.250.7";
    k.apply(&format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: web-p1, namespace: shop, labels: {{kubernetes.io/service-name: web, \
         endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io, mirror.linkerd.io/federated: member}}}}\n\
         addressType: IPv4\nports: [{{name: http, port: 8080, protocol: TCP}}]\nendpoints: [{{addresses: ['{pod}'], conditions: {{ready: true}}}}]\n"
    ));
    let bridge = Bridge::start(&k, &IMPORT_ARGS);
    let web_ip = cluster_ip(&k, "shop", "web-federated");
    let api = [
        cluster_ip(&k, "shop", "api-east"),
        cluster_ip(&k, "shop", "api-west"),
    ];
    let db = [
        cluster_ip(&k, "data", "db-0-east"),
        cluster_ip(&k, "data", "db-1-east"),
    ];
    until(
        "the bridge's imports of web (with its ips), api and db",
        30,
        || {
            let ips = k
                .kubectl()
                .args([
                    "get",
                    "serviceimport",
                    "-n",
                    "shop",
                    "web",
                    "-o",
                    "jsonpath={.spec.ips}",
                ])
                .output()
                .unwrap();
            String::from_utf8_lossy(&ips.stdout).contains(&web_ip)
                && k.kubectl_ok(&["get", "serviceimport", "-n", "shop", "api"])
                && k.kubectl_ok(&["get", "serviceimport", "-n", "data", "db"])
        },
    );
    let port80 = |ips: &[String]| -> Vec<String> {
        let mut v: Vec<String> = ips.iter().map(|ip| format!("{ip}:80")).collect();
        v.sort();
        v
    };

    let eg = EnvoyGateway::start(&k, &gw);
    k.apply(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: eg}\n\
         spec: {controllerName: gateway.envoyproxy.io/gatewayclass-controller}\n\
         ---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: back, namespace: data}\n\
         spec: {gatewayClassName: eg, listeners: [{name: http, protocol: HTTP, port: 80}]}\n",
    );

    // 1. Envoy Gateway's defaults (the documented route without its BackendTrafficPolicy): an
    // import routes to its slices, a federated one to its members' pods.
    let readme = readme_route();
    let without_policy: String = readme
        .split("---\n")
        .filter(|doc| !doc.contains("kind: BackendTrafficPolicy"))
        .collect::<Vec<_>>()
        .join("---\n");
    assert_ne!(
        without_policy, readme,
        "the documented route sets routingType"
    );
    k.apply(&without_policy);
    k.apply(&(route("shop", "api", "front", "api", 80) + &route("data", "db", "back", "db", 80)));
    let front = Xds::start(&gw, &eg, "shop/front");
    let back = Xds::start(&gw, &eg, "data/back");
    route_settles(&k, &eg, "shop", "web", &[ACCEPTED, RESOLVED]);
    route_settles(&k, &eg, "shop", "api", &[ACCEPTED, RESOLVED]);
    route_settles(&k, &eg, "data", "db", &[ACCEPTED, RESOLVED]);
    front.settles(&eg, "httproute/shop/api/rule/0", Some(&port80(&api)));
    back.settles(&eg, "httproute/data/db/rule/0", Some(&port80(&db)));
    let pods = [format!("{pod}:8080")];
    front.settles(&eg, "httproute/shop/web/rule/0", Some(&pods));

    // Without its members' pods (the slice gone), a federated import has no slices, so no
    // endpoints.
    k.delete("endpointslice", "shop", "web-p1");
    route_settles(
        &k,
        &eg,
        "shop",
        "web",
        &[
            ACCEPTED,
            RESOLVED,
            "BackendsAvailable=False/EndpointsNotFound",
        ],
    );
    front.settles(&eg, "httproute/shop/web/rule/0", None);
    eprintln!(
        "default routing: web {:?}, api {:?}, db {:?}",
        route_conditions(&k, "shop", "web"),
        front.addresses("httproute/shop/api/rule/0"),
        back.addresses("httproute/data/db/rule/0")
    );

    // 2. The documented route as written: routingType Service sends the federated import to its
    // ClusterSetIP, and leaves imports without ips on their slices.
    k.apply(&readme);
    route_settles(&k, &eg, "shop", "web", &[ACCEPTED, RESOLVED]);
    front.settles(
        &eg,
        "httproute/shop/web/rule/0",
        Some(&port80(std::slice::from_ref(&web_ip))),
    );
    front.settles(&eg, "httproute/shop/api/rule/0", Some(&port80(&api)));
    for (what, xds, ns, name) in [
        ("federated", &front, "shop", "web"),
        ("mirrors only", &front, "shop", "api"),
        ("gateway-mode headless", &back, "data", "db"),
    ] {
        eprintln!(
            "{what}: HTTPRoute {ns}/{name} {:?}; xDS cluster httproute/{ns}/{name}/rule/0 = {:?}",
            route_conditions(&k, ns, name),
            xds.addresses(&format!("httproute/{ns}/{name}/rule/0"))
        );
    }

    // 3. A port the import lacks.
    k.apply(&route("shop", "api-8080", "front", "api", 8080));
    route_settles(
        &k,
        &eg,
        "shop",
        "api-8080",
        &[ACCEPTED, "ResolvedRefs=False/PortNotFound"],
    );

    // 4. A member cluster leaves (west's mirror of api goes): its address leaves the assignment.
    let gone = Instant::now();
    k.delete("service", "shop", "api-west");
    let at = front.settles(&eg, "httproute/shop/api/rule/0", Some(&port80(&api[..1])));
    eprintln!(
        "west's mirror deleted -> its address out of the xDS assignment: {:.0} ms",
        at.saturating_duration_since(gone).as_secs_f64() * 1000.0
    );

    // 5. The export goes everywhere (east's mirror too): the bridge deletes the import, the
    // route's backend is not found and its cluster goes.
    k.delete("service", "shop", "api-east");
    route_settles(
        &k,
        &eg,
        "shop",
        "api",
        &[ACCEPTED, "ResolvedRefs=False/BackendNotFound"],
    );
    front.settles(&eg, "httproute/shop/api/rule/0", None);
    // The others are as they were.
    front.settles(&eg, "httproute/shop/web/rule/0", Some(&port80(&[web_ip])));
    back.settles(&eg, "httproute/data/db/rule/0", Some(&port80(&db)));
    drop((front, back));
    let mut eg = eg;
    assert!(
        eg.child.0.try_wait().unwrap().is_none(),
        "Envoy Gateway exited:\n{}",
        tail(&eg.log())
    );
    drop(bridge);
}
