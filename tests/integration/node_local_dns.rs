//! NodeLocal DNSCache (node-local-dns) in front of clusterset-dns, as node-cache really runs it.
//!
//! node-local-dns is CoreDNS linked into node-cache, which writes the Corefile CoreDNS loads:
//! it takes the node-local-dns ConfigMap's Corefile (the upstream manifest's, after the `sed`
//! its documentation gives for iptables or IPVS mode), fills the words left to it and appends a
//! server block for each stub domain of the `kube-dns` ConfigMap. The test does exactly that,
//! by the rules of kubernetes/dns `cmd/node-cache/app/configmap.go`@9aa70b8f (`updateCorefile`,
//! `getStubDomainStr`), with the `kube-dns` ConfigMap that deploy/forwarding/node-local-dns
//! renders (the address set through deploy/address), and loads the result in CoreDNS v1.13.2,
//! the version node-cache links (the same go.mod), bound to the node's addresses in a network
//! namespace the test makes; clusterset-dns answers on the pinned address there.
//!
//! Sources, each read at the commit named:
//! - the Corefile and the `-localip` argument: kubernetes/kubernetes
//!   `cluster/addons/dns/nodelocaldns/nodelocaldns.yaml`@028f956d (the newest stored version;
//!   node-cache 1.26.4 there);
//! - the `sed` for each mode: kubernetes/website
//!   `content/en/docs/tasks/administer-cluster/nodelocaldns.md` (as the current page gives it);
//! - the plugins node-cache links: kubernetes/dns `cmd/node-cache/main.go`@9aa70b8f (its
//!   successor kubernetes-sigs/node-local-dns@c75f51da links the same and renders by the same
//!   rules, with CoreDNS v1.14.4).

use crate::common;

use std::process::Command;

use common::netns::Netns;
use common::wait::{Lazy, until};
use common::{BIN, output_text as text};

/// The node-local-dns ConfigMap's Corefile in the upstream manifest, before the `sed`.
const COREFILE_BASE: &str = "__PILLAR__DNS__DOMAIN__:53 {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    health __PILLAR__LOCAL__DNS__:8080
    }
in-addr.arpa:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    }
ip6.arpa:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    }
.:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__UPSTREAM__SERVERS__
    prometheus :9253
    }
";

/// The DaemonSet's `-localip` argument in the same manifest.
const LOCALIP_ARG: &str = "__PILLAR__LOCAL__DNS__,__PILLAR__DNS__SERVER__";

/// The plugins node-cache links (`metrics` registers as `prometheus`): a Corefile naming any
/// other (`ready`, `kubernetes`, ...) does not load in node-local-dns.
const NODE_CACHE_PLUGINS: &[&str] = &[
    "bind",
    "bufsize",
    "cache",
    "debug",
    "dns64",
    "errors",
    "forward",
    "health",
    "hosts",
    "loadbalance",
    "log",
    "loop",
    "prometheus",
    "pprof",
    "reload",
    "rewrite",
    "template",
    "timeouts",
    "trace",
    "whoami",
];

/// The node: node-local-dns's link-local address, the cluster DNS's Service address (kube-dns),
/// kube-dns-upstream's (where node-local-dns sends cluster.local), and clusterset-dns's pinned
/// address. Services in 198.19.0.0/16.
const LOCAL_DNS: &str = "169.254.20.10";
const KUBE_DNS: &str = "198.19.0.10";
const KUBE_DNS_UPSTREAM: &str = "198.19.0.11";
const OURS: &str = "198.19.0.53";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Iptables,
    Ipvs,
}

/// The documented `sed` over the manifest for `mode`, applied to the Corefile and to the
/// `-localip` argument.
fn sed(mode: Mode, text: &str) -> String {
    let t = text
        .replace("__PILLAR__LOCAL__DNS__", LOCAL_DNS)
        .replace("__PILLAR__DNS__DOMAIN__", "cluster.local");
    match mode {
        Mode::Iptables => t.replace("__PILLAR__DNS__SERVER__", KUBE_DNS),
        Mode::Ipvs => t
            .replace(",__PILLAR__DNS__SERVER__", "")
            .replace("__PILLAR__CLUSTER__DNS__", KUBE_DNS),
    }
}

/// node-cache's `updateCorefile`: `base` is the ConfigMap's Corefile, `localip` the `-localip`
/// argument, `stub_domains` the `kube-dns` ConfigMap's `stubDomains` if it has any, and no
/// `upstreamNameservers` (so `/etc/resolv.conf`); the cluster DNS address is kube-dns-upstream's.
fn node_cache_render(base: &str, localip: &str, stub_domains: Option<&str>) -> String {
    let local_ips = localip.replace(',', " ");
    // ValidateNodeLocalCacheConfig: a stub domain's servers must be addresses (or ip:port);
    // node-cache keeps its old Corefile otherwise.
    let stubs: std::collections::BTreeMap<String, Vec<String>> = stub_domains
        .map(|s| serde_json::from_str(s).expect("stubDomains is JSON"))
        .unwrap_or_default();
    for servers in stubs.values() {
        for s in servers {
            assert!(
                s.parse::<std::net::IpAddr>().is_ok() || s.parse::<std::net::SocketAddr>().is_ok(),
                "node-cache refuses the stub domain server {s}"
            );
        }
    }
    // getStubDomainStr's template, for each stub domain.
    let mut stub_blocks = String::new();
    for (domain, servers) in &stubs {
        stub_blocks += &format!(
            "\n{domain}:53 {{\n    errors\n    cache 30\n    bind {local_ips}\n    forward . {}\n}}\n",
            servers.join(" ")
        );
    }
    let mut c = base.replace("__PILLAR__UPSTREAM__SERVERS__", "/etc/resolv.conf");
    c = c.replace("__PILLAR__CLUSTER__DNS__", KUBE_DNS_UPSTREAM);
    c = c.replace("__PILLAR__LOCAL__DNS__", &local_ips);
    c = c.replace("__PILLAR__DNS__SERVER__", "");
    c + &stub_blocks
}

/// The plugins a Corefile names: the first word of each line inside a server block.
fn plugins_of(corefile: &str) -> std::collections::BTreeSet<String> {
    let mut depth = 0;
    let mut out = std::collections::BTreeSet::new();
    for line in corefile.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if depth == 1 && line != "}" {
            out.insert(line.split_whitespace().next().unwrap().to_string());
        }
        depth += line.matches('{').count();
        depth -= line.matches('}').count();
    }
    out
}

/// The `kube-dns` ConfigMap's stubDomains that deploy/forwarding/node-local-dns renders with
/// deploy/address set to [`OURS`].
fn shipped_stub_domains() -> String {
    let rendered = common::kustomize_at("deploy/forwarding/node-local-dns", OURS);
    let objs = common::yaml_objects(&rendered);
    assert_eq!(objs.len(), 1, "{rendered}");
    assert_eq!(objs[0]["metadata"]["name"], "kube-dns");
    objs[0]["data"]["stubDomains"].as_str().unwrap().to_string()
}

/// The zone: a ClusterSetIP service, and a headless one whose A answer (60 addresses) needs
/// more than 512 octets.
fn zone() -> String {
    let mut y = String::from(
        "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\n\
         spec: {type: ClusterSetIP, ips: [198.19.10.1], ports: [{name: http, protocol: TCP, port: 80}]}\n---\n\
         apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: big, namespace: shop}\n\
         spec: {type: Headless, ports: [{name: http, protocol: TCP, port: 80}]}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: big-east\n  namespace: shop\n  labels:\n\
         \x20   multicluster.kubernetes.io/service-name: big\n    multicluster.kubernetes.io/source-cluster: east\n\
         addressType: IPv4\nports: [{name: http, protocol: TCP, port: 80}]\nendpoints:\n",
    );
    for i in 0..60 {
        y += &format!("- {{addresses: [198.18.40.{i}]}}\n");
    }
    y
}

/// A node's network: node-local-dns's addresses (the link-local one,
/// and in iptables mode the cluster DNS's Service address too), and clusterset-dns on the
/// pinned address, answering.
fn node(mode: Mode) -> Netns {
    let mut ns = Netns::new("csdns-nodelocal");
    // node-cache puts them on a dummy interface (`nodelocaldns`); this machine's kernel has no
    // dummy driver, and for binding and answering the loopback interface is the same.
    let mut addrs = vec![LOCAL_DNS];
    if mode == Mode::Iptables {
        addrs.push(KUBE_DNS);
    }
    for a in addrs {
        ns.must(&["ip", "addr", "add", &format!("{a}/32"), "dev", "lo"]);
    }
    ns.must(&["ip", "addr", "add", &format!("{OURS}/32"), "dev", "lo"]);
    let zone_file = ns.dir.path().join("zone.yaml");
    std::fs::write(&zone_file, zone()).unwrap();
    ns.spawn(
        "clusterset-dns",
        &[
            BIN,
            "--file",
            zone_file.to_str().unwrap(),
            "--listen",
            &format!("{OURS}:53"),
            "--admin-listen",
            "127.0.0.1:9153",
        ]
        .map(String::from),
    );
    until(
        Lazy(|| format!("clusterset-dns to answer: {}", ns.log("clusterset-dns"))),
        10,
        || {
            ns.dig(OURS, "+short web.shop.svc.clusterset.local")
                .contains("198.19.10.1")
        },
    );
    ns
}

/// How many queries clusterset-dns has answered, from its metrics.
fn answered(ns: &Netns) -> f64 {
    let body = ns.must(&["curl", "-sf", "http://127.0.0.1:9153/metrics"]);
    body.lines()
        .filter(|l| l.starts_with("coredns_dns_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// CoreDNS v1.13.2 on `corefile` in `ns`, as node-local-dns runs it.
fn start_node_cache(ns: &mut Netns, corefile: &str) {
    std::fs::write(ns.dir.path().join("Corefile"), corefile).unwrap();
    let coredns = common::coredns::binary_at("v1.13.2");
    ns.spawn(
        "node-local-dns",
        &[
            coredns.to_string_lossy().to_string(),
            "-conf".into(),
            "Corefile".into(),
        ],
    );
}

fn rendered(mode: Mode, stub: Option<&str>) -> String {
    let c = node_cache_render(&sed(mode, COREFILE_BASE), &sed(mode, LOCALIP_ARG), stub);
    assert!(!c.contains("__PILLAR__"), "a word left unfilled:\n{c}");
    let unknown: Vec<String> = plugins_of(&c)
        .into_iter()
        .filter(|p| !NODE_CACHE_PLUGINS.contains(&p.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "plugins node-cache does not link: {unknown:?}\n{c}"
    );
    c
}

/// With the kube-dns stub domain deploy/forwarding/node-local-dns ships, node-local-dns answers
/// clusterset.local from clusterset-dns on every address it listens on, in both modes, over UDP
/// and, for an answer too big for UDP, over TCP after TC; its health endpoint (the line the
/// earlier recipe broke) answers.
#[test]
fn node_local_dns_with_the_shipped_stub_domain_answers_in_iptables_and_ipvs_mode() {
    let _module = common::module(module_path!());
    let stub = shipped_stub_domains();
    for mode in [Mode::Iptables, Mode::Ipvs] {
        let corefile = rendered(mode, Some(&stub));
        // node-cache's own block, bound to its own addresses, forwarding to the pinned address.
        let bind = match mode {
            Mode::Iptables => format!("    bind {LOCAL_DNS} {KUBE_DNS}\n"),
            Mode::Ipvs => format!("    bind {LOCAL_DNS}\n"),
        };
        assert!(
            corefile.contains(&format!(
                "clusterset.local:53 {{\n    errors\n    cache 30\n{bind}    forward . {OURS}\n}}"
            )),
            "{mode:?}:\n{corefile}"
        );
        assert!(
            corefile.contains(&format!("health {LOCAL_DNS}:8080")),
            "{mode:?}:\n{corefile}"
        );
        let mut ns = node(mode);
        start_node_cache(&mut ns, &corefile);
        let listening: &[&str] = match mode {
            Mode::Iptables => &[LOCAL_DNS, KUBE_DNS],
            Mode::Ipvs => &[LOCAL_DNS],
        };
        until(
            Lazy(|| {
                format!(
                    "node-local-dns ({mode:?}) to answer; Corefile:\n{corefile}\nlog:\n{}",
                    ns.log("node-local-dns")
                )
            }),
            20,
            || {
                ns.dig(LOCAL_DNS, "+short web.shop.svc.clusterset.local")
                    .contains("198.19.10.1")
            },
        );
        for at in listening {
            let out = ns.dig(at, "web.shop.svc.clusterset.local A");
            assert!(out.contains("status: NOERROR"), "{mode:?} at {at}:\n{out}");
            assert!(
                out.lines().any(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f.len() == 5
                        && f[0] == "web.shop.svc.clusterset.local."
                        && f[3] == "A"
                        && f[4] == "198.19.10.1"
                }),
                "{mode:?} at {at}:\n{out}"
            );
            let out = ns.dig(at, "+short dns-version.clusterset.local TXT");
            assert!(
                out.contains('"'),
                "{mode:?} at {at}: no dns-version TXT:\n{out}"
            );
            // Truncated over UDP without EDNS, then the whole answer over TCP, forwarded over
            // TCP (the forward plugin keeps the client's protocol).
            let out = ns.dig(at, "big.shop.svc.clusterset.local A +noedns +ignore");
            assert!(out.contains(" tc"), "{mode:?} at {at}: no TC:\n{out}");
            let out = ns.dig(at, "big.shop.svc.clusterset.local A +tcp");
            assert!(
                out.contains("ANSWER: 60,"),
                "{mode:?} at {at} over TCP:\n{out}"
            );
            let out = ns.dig(at, "big.shop.svc.clusterset.local A +noedns");
            assert!(
                out.contains("ANSWER: 60,"),
                "{mode:?} at {at}: dig's retry over TCP:\n{out}"
            );
        }
        if mode == Mode::Ipvs {
            // In IPVS mode the cluster DNS's address is not node-local-dns's (kube-proxy's
            // interface holds it): no block binds it, and cluster.local is forwarded to it.
            assert!(
                corefile
                    .lines()
                    .filter(|l| l.trim_start().starts_with("bind "))
                    .all(|l| l.trim() == format!("bind {LOCAL_DNS}")),
                "{corefile}"
            );
            assert!(
                corefile.contains(&format!("forward . {KUBE_DNS} {{")),
                "{corefile}"
            );
        }
        let health = ns.must(&["curl", "-s", &format!("http://{LOCAL_DNS}:8080/health")]);
        assert_eq!(health.trim(), "OK", "{mode:?}");
        // A name the zone does not have: NXDOMAIN with clusterset-dns's own SOA, which tells
        // that the path works and the name is what is missing.
        let out = ns.dig(LOCAL_DNS, "nope.shop.svc.clusterset.local A");
        assert!(out.contains("status: NXDOMAIN"), "{out}");
        assert!(out.contains(OUR_SOA), "{out}");
        if mode == Mode::Iptables {
            // clusterset-dns gone (no ready endpoint behind the address): node-local-dns
            // answers SERVFAIL, at once or after its forward's timeouts.
            let (_, mut ours) = ns.procs.remove(0);
            let _ = ours.kill();
            let _ = ours.wait();
            let out = ns.dig(LOCAL_DNS, "+time=10 other.shop.svc.clusterset.local A");
            assert!(out.contains("status: SERVFAIL"), "{out}");
        }
    }
}

/// clusterset-dns's SOA, as dig prints its names.
const OUR_SOA: &str = "ns.dns.clusterset.local. hostmaster.clusterset.local.";

/// Without the stub domain, node-local-dns sends clusterset.local to the node's own resolvers
/// (the `.:53` block's /etc/resolv.conf): clusterset-dns is never asked and pods get no answer
/// from it. The stub domain (or a block) is needed, not a short-cut.
#[test]
fn node_local_dns_without_the_stub_domain_never_asks_clusterset_dns() {
    let _module = common::module(module_path!());
    let corefile = rendered(Mode::Iptables, None);
    assert!(!corefile.contains("clusterset.local"), "{corefile}");
    let mut ns = node(Mode::Iptables);
    // The node's resolver: one that knows nothing of clusterset.local, as a cloud's does
    // (dnsmasq answering NXDOMAIN for the zone), over a resolv.conf bind-mounted for CoreDNS.
    ns.must(&["ip", "addr", "add", "198.18.53.1/32", "dev", "lo"]);
    ns.spawn(
        "node-resolver",
        &[
            "dnsmasq",
            "-k",
            "--no-resolv",
            "--no-hosts",
            "--bind-interfaces",
            "--listen-address=198.18.53.1",
            "--address=/clusterset.local/",
            "--user=root",
            "--pid-file=",
            "--log-facility=-",
        ]
        .map(String::from),
    );
    let resolv = ns.dir.path().join("node-resolv.conf");
    std::fs::write(&resolv, "nameserver 198.18.53.1\n").unwrap();
    std::fs::write(ns.dir.path().join("Corefile"), &corefile).unwrap();
    let coredns = common::coredns::binary_at("v1.13.2");
    let dir = ns.dir.path().to_path_buf();
    ns.spawn(
        "node-local-dns",
        &[
            "sh".into(),
            "-c".into(),
            "mount --bind \"$0\" /etc/resolv.conf && cd \"$1\" && exec \"$2\" -conf Corefile"
                .into(),
            resolv.to_string_lossy().to_string(),
            dir.to_string_lossy().to_string(),
            coredns.to_string_lossy().to_string(),
        ],
    );
    until(
        Lazy(|| format!("node-local-dns to answer: {}", ns.log("node-local-dns"))),
        20,
        || {
            ns.dig(LOCAL_DNS, "web.shop.svc.clusterset.local A")
                .contains("status: NXDOMAIN")
        },
    );
    let before = answered(&ns);
    let out = ns.dig(LOCAL_DNS, "web.shop.svc.clusterset.local A");
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    assert!(!out.contains("198.19.10.1"), "{out}");
    // Not clusterset-dns's NXDOMAIN: its SOA is missing (the node's resolver gave none here; a
    // cloud's gives its own), which is how a pod tells this case from a name that is missing.
    assert!(!out.contains(OUR_SOA), "{out}");
    assert_eq!(answered(&ns), before, "clusterset-dns was asked");
}

/// A clusterset.local block added to the node-local-dns Corefile beside the stub domain (the two
/// recipes together, as shipped until 2026-12) makes a Corefile CoreDNS refuses: node-local-dns
/// stops at its next start. What ships is the stub domain alone.
#[test]
fn a_block_beside_the_stub_domain_is_refused_by_coredns() {
    let _module = common::module(module_path!());
    let stub = shipped_stub_domains();
    let with_block = COREFILE_BASE.to_string()
        + &format!(
            "clusterset.local:53 {{\n    errors\n    cache 30\n    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__\n    forward . {OURS}\n}}\n"
        );
    let corefile = node_cache_render(
        &sed(Mode::Iptables, &with_block),
        &sed(Mode::Iptables, LOCALIP_ARG),
        Some(&stub),
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Corefile"), &corefile).unwrap();
    let mut child = Command::new(common::coredns::binary_at("v1.13.2"))
        .args(["-conf", "Corefile"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("CoreDNS started on a Corefile with clusterset.local twice:\n{corefile}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let out = child.wait_with_output().unwrap();
    assert!(!status.success());
    let said = text(&out);
    assert!(said.contains("already defined"), "{said}");
}
