//! The real clients in front of us: stub resolvers (glibc's and musl's getaddrinfo, Go's pure and
//! cgo resolvers, Python, Node.js, Java) asking the server directly or through the forwarders
//! that front it in clusters (unbound, also with strict qname minimisation; dnsmasq as kube-dns
//! forwards stub domains; Knot Resolver in forward and stub mode; CoreDNS with a cache, and the
//! block node-local-dns writes for a kube-dns stub domain). Everything runs in a network
//! namespace the test makes, the
//! server on 127.0.0.1:53 there, each client in a mount namespace of its own with a resolv.conf
//! bind-mounted over /etc/resolv.conf, as a pod has: clusterset search domains and ndots:5.
//!
//! Each case's expected result is written here; each lookup is timed, and one that takes a
//! resolver timeout (a second or more) fails. The table of results is printed. Needs root (CI
//! runs as root); tests/run.sh installs the clients and forwarders.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::netns::Netns as Namespace;
use common::wait::{Lazy, until};
use common::{BIN, output_text as text};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The cluster set the clients ask about (namespace shop), addresses in 198.18.0.0/15.
fn fixture() -> String {
    let mut y = String::from(
        "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: web, namespace: shop}\n\
         spec: {type: ClusterSetIP, ips: [198.19.10.1], ports: [{name: http, protocol: TCP, port: 80}]}\n---\n\
         apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: dual, namespace: shop}\n\
         spec: {type: ClusterSetIP, ips: [198.19.10.2, \"fd00:198:19::2\"], ports: [{name: https, protocol: TCP, port: 443}]}\n---\n\
         apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: db, namespace: shop}\n\
         spec: {type: Headless, ports: [{name: postgres, protocol: TCP, port: 5432}]}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: db-east\n  namespace: shop\n  labels:\n\
         \x20   multicluster.kubernetes.io/service-name: db\n    multicluster.kubernetes.io/source-cluster: east\n\
         addressType: IPv4\nports: [{name: postgres, protocol: TCP, port: 5432}]\nendpoints:\n\
         - {addresses: [198.18.20.1], hostname: db-0}\n- {addresses: [198.18.20.2], hostname: db-1}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: db-eu\n  namespace: shop\n  labels:\n\
         \x20   multicluster.kubernetes.io/service-name: db\n    multicluster.kubernetes.io/source-cluster: central.eu\n\
         addressType: IPv4\nports: [{name: postgres, protocol: TCP, port: 5432}]\nendpoints:\n\
         - {addresses: [198.18.21.1], hostname: db-0}\n",
    );
    // Headless services whose A answers exceed 512 octets (40 records) and 1232 (100).
    for (name, n, net) in [("big40", 40, 30), ("big100", 100, 31)] {
        y += &format!(
            "---\napiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {{name: {name}, namespace: shop}}\n\
             spec: {{type: Headless, ports: [{{name: http, protocol: TCP, port: 80}}]}}\n---\n\
             apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-east\n  namespace: shop\n  labels:\n\
             \x20   multicluster.kubernetes.io/service-name: {name}\n    multicluster.kubernetes.io/source-cluster: east\n\
             addressType: IPv4\nports: [{{name: http, protocol: TCP, port: 80}}]\nendpoints:\n"
        );
        for i in 0..n {
            y += &format!("- {{addresses: [198.18.{net}.{i}]}}\n");
        }
    }
    y
}

fn big(net: u8, n: u8) -> BTreeSet<String> {
    (0..n).map(|i| format!("198.18.{net}.{i}")).collect()
}

/// What a case must give.
#[derive(Clone)]
enum Want {
    /// Exactly these answers (addresses, or `port:target` for SRV).
    Exactly(BTreeSet<String>),
    /// All of these; a client that never retries over TCP (musl before 1.2.4) may get only the
    /// records that fit in 512 octets, but must get some.
    AllOrTruncated(BTreeSet<String>),
    /// The name has no addresses: an error, and fast.
    Error,
}

struct Case {
    what: &'static str,
    /// `host:NAME` or `srv:NAME`.
    query: String,
    want: Want,
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn cases() -> Vec<Case> {
    let z = "shop.svc.clusterset.local";
    let c = |what, query: String, want| Case { what, query, want };
    vec![
        c(
            "ClusterSetIP, FQDN",
            format!("host:web.{z}."),
            Want::Exactly(set(&["198.19.10.1"])),
        ),
        c(
            "ClusterSetIP, search list",
            format!("host:web.{z}"),
            Want::Exactly(set(&["198.19.10.1"])),
        ),
        c(
            "ClusterSetIP, short name",
            "host:web".into(),
            Want::Exactly(set(&["198.19.10.1"])),
        ),
        c(
            "dual-stack",
            format!("host:dual.{z}."),
            Want::Exactly(set(&["198.19.10.2", "fd00:198:19::2"])),
        ),
        c(
            "headless",
            format!("host:db.{z}."),
            Want::Exactly(set(&["198.18.20.1", "198.18.20.2", "198.18.21.1"])),
        ),
        c(
            "per-pod",
            format!("host:db-1.east.db.{z}."),
            Want::Exactly(set(&["198.18.20.2"])),
        ),
        c(
            "per-pod, two-label cluster",
            format!("host:db-0.central.eu.db.{z}."),
            Want::Exactly(set(&["198.18.21.1"])),
        ),
        c(
            "SRV",
            format!("srv:db.{z}."),
            Want::Exactly(set(&[
                &format!("5432:db-0.east.db.{z}"),
                &format!("5432:db-1.east.db.{z}"),
                &format!("5432:db-0.central.eu.db.{z}"),
            ])),
        ),
        c(
            "SRV _port._proto",
            format!("srv:_http._tcp.web.{z}."),
            Want::Exactly(set(&[&format!("80:web.{z}")])),
        ),
        c(
            "SRV _port._proto, headless",
            format!("srv:_postgres._tcp.db.{z}."),
            Want::Exactly(set(&[
                &format!("5432:db-0.east.db.{z}"),
                &format!("5432:db-1.east.db.{z}"),
                &format!("5432:db-0.central.eu.db.{z}"),
            ])),
        ),
        c("NXDOMAIN", format!("host:nope.{z}."), Want::Error),
        // Through the whole search list, each name in the zone (a short name would end in a
        // query outside it, which only the cluster's own upstreams answer).
        c(
            "NXDOMAIN, search list",
            format!("host:nope.{z}"),
            Want::Error,
        ),
        c("NODATA", format!("host:_http._tcp.web.{z}."), Want::Error),
        c(
            "> 512 octets",
            format!("host:big40.{z}."),
            Want::AllOrTruncated(big(30, 40)),
        ),
        c(
            "> 1232 octets",
            format!("host:big100.{z}."),
            Want::AllOrTruncated(big(31, 100)),
        ),
    ]
}

/// A stub resolver: how to run it, and whether it has an SRV API.
struct Client {
    name: &'static str,
    argv: Vec<String>,
    env: Vec<(&'static str, &'static str)>,
    srv: bool,
    /// Never retries a truncated answer over TCP (musl before 1.2.4).
    udp_only: bool,
}

/// A forwarder in front of the server, or none, and the address it serves on.
struct Path_ {
    name: &'static str,
    address: &'static str,
    /// How an answer too big for the client's UDP size reaches it.
    truncated: Truncated,
}

#[derive(PartialEq)]
enum Truncated {
    /// With the records that fit, and TC (ours, CoreDNS's).
    Partial,
    /// Empty, with TC (unbound's, Knot Resolver's).
    Empty,
    /// Either: dnsmasq passed the records that fit in one run and an empty answer in another.
    Either,
}

const PATHS: &[Path_] = &[
    Path_ {
        name: "direct",
        address: "127.0.0.1",
        truncated: Truncated::Partial,
    },
    Path_ {
        name: "unbound",
        address: "127.0.0.2",
        truncated: Truncated::Empty,
    },
    Path_ {
        name: "unbound, qname-minimisation-strict",
        address: "127.0.0.3",
        truncated: Truncated::Empty,
    },
    Path_ {
        name: "dnsmasq (kube-dns)",
        address: "127.0.0.4",
        truncated: Truncated::Either,
    },
    Path_ {
        name: "kresd, forward",
        address: "127.0.0.5",
        truncated: Truncated::Empty,
    },
    Path_ {
        name: "kresd, stub",
        address: "127.0.0.6",
        truncated: Truncated::Empty,
    },
    Path_ {
        name: "CoreDNS, cache",
        address: "127.0.0.7",
        truncated: Truncated::Partial,
    },
    Path_ {
        name: "CoreDNS as node-local-dns (node-cache's stub-domain block)",
        address: "127.0.0.8",
        truncated: Truncated::Partial,
    },
];

fn build_clients(dir: &Path) -> Vec<Client> {
    let c = repo().join("tests/compat");
    let s = |p: PathBuf| p.to_string_lossy().to_string();
    common::run_ok(
        Command::new("gcc")
            .args(["-O2", "-Wall", "-Werror", "-o"])
            .arg(dir.join("gai-glibc"))
            .arg(c.join("gai.c")),
    );
    common::run_ok(
        Command::new("musl-gcc")
            .args(["-O2", "-Wall", "-Werror", "-static", "-o"])
            .arg(dir.join("gai-musl"))
            .arg(c.join("gai.c")),
    );
    common::run_ok(
        Command::new("go")
            .args(["build", "-o"])
            .arg(dir.join("lookup-go"))
            .arg(c.join("lookup.go"))
            .env("CGO_ENABLED", "1")
            .env("GOFLAGS", "-mod=mod")
            .current_dir(dir),
    );
    let musl =
        common::run_ok(Command::new("sh").args(["-c", "dpkg-query -W -f '${Version}' musl"]));
    let mut clients = vec![
        Client {
            name: "glibc getaddrinfo",
            argv: vec![s(dir.join("gai-glibc"))],
            env: vec![],
            srv: false,
            udp_only: false,
        },
        Client {
            name: "musl getaddrinfo",
            argv: vec![s(dir.join("gai-musl"))],
            env: vec![],
            srv: false,
            // musl retries over TCP from 1.2.4 on; Debian 12 has 1.2.3.
            udp_only: musl.starts_with("1.2.3")
                || musl.starts_with("1.2.2")
                || musl.starts_with("1.1"),
        },
        Client {
            name: "Go, netdns=go",
            argv: vec![s(dir.join("lookup-go"))],
            env: vec![("GODEBUG", "netdns=go")],
            srv: true,
            udp_only: false,
        },
        Client {
            name: "Go, netdns=cgo",
            argv: vec![s(dir.join("lookup-go"))],
            env: vec![("GODEBUG", "netdns=cgo")],
            srv: true,
            udp_only: false,
        },
        Client {
            name: "Python getaddrinfo",
            argv: vec!["python3".into(), s(c.join("lookup.py"))],
            env: vec![],
            srv: false,
            udp_only: false,
        },
        Client {
            name: "Node.js",
            argv: vec!["node".into(), s(c.join("lookup.js"))],
            env: vec![],
            srv: true,
            udp_only: false,
        },
    ];
    if Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        clients.push(Client {
            name: "Java",
            argv: vec!["java".into(), s(c.join("Lookup.java"))],
            env: vec![],
            srv: true,
            udp_only: false,
        });
    } else {
        eprintln!("no JDK here: Java left out");
    }
    clients
}

/// Starts the forwarders of [`PATHS`] in `ns`, each forwarding clusterset.local to 127.0.0.1.
fn start_forwarders(ns: &mut Namespace) {
    let d = ns.dir.path().to_path_buf();
    let w = |name: &str, body: String| {
        let p = d.join(name);
        std::fs::write(&p, body).unwrap();
        p.to_string_lossy().to_string()
    };
    for (conf, address, strict) in [
        ("unbound.conf", "127.0.0.2", "no"),
        ("unbound-strict.conf", "127.0.0.3", "yes"),
    ] {
        let f = w(
            conf,
            format!(
                "server:\n  interface: {address}\n  port: 53\n  access-control: 127.0.0.0/8 allow\n  username: \"\"\n  chroot: \"\"\n\
                 \x20 directory: \"{d}\"\n  pidfile: \"\"\n  use-syslog: no\n  logfile: \"\"\n  do-daemonize: no\n\
                 \x20 module-config: \"iterator\"\n  qname-minimisation: yes\n  qname-minimisation-strict: {strict}\n\
                 \x20 do-not-query-localhost: no\n  domain-insecure: \"clusterset.local.\"\n  do-ip6: no\n\
                 stub-zone:\n  name: \"clusterset.local.\"\n  stub-addr: 127.0.0.1@53\n",
                d = d.display()
            ),
        );
        ns.spawn(
            if strict == "yes" {
                "unbound-strict"
            } else {
                "unbound"
            },
            &["unbound".into(), "-d".into(), "-c".into(), f],
        );
    }
    // kube-dns's dnsmasq flags, with our server as the stub domain's.
    ns.spawn(
        "dnsmasq",
        &[
            "dnsmasq",
            "-k",
            "--no-resolv",
            "--no-hosts",
            "--cache-size=1000",
            "--no-negcache",
            "--dns-loop-detect",
            "--log-facility=-",
            "--bind-interfaces",
            "--listen-address=127.0.0.4",
            "--port=53",
            "--server=/clusterset.local/127.0.0.1#53",
            "--user=root",
            "--pid-file=",
        ]
        .map(String::from),
    );
    for (name, address, policy) in [
        ("kresd-forward", "127.0.0.5", "FORWARD"),
        ("kresd-stub", "127.0.0.6", "STUB"),
    ] {
        let rundir = d.join(name);
        std::fs::create_dir_all(&rundir).unwrap();
        let f = w(
            &format!("{name}.lua"),
            format!(
                "net.listen('{address}', 53, {{ kind = 'dns' }})\ncache.size = 10 * MB\n\
                 trust_anchors.set_insecure({{'clusterset.local.'}})\n\
                 policy.add(policy.suffix(policy.{policy}({{'127.0.0.1@53'}}), {{todname('clusterset.local.')}}))\n"
            ),
        );
        ns.spawn(
            name,
            &[
                "kresd".into(),
                "-n".into(),
                "-c".into(),
                f,
                rundir.to_string_lossy().to_string(),
            ],
        );
    }
    let coredns = common::coredns::binary().to_string_lossy().to_string();
    // Corefile.example's block, and the block node-cache writes for the kube-dns stub domain
    // (kubernetes/dns cmd/node-cache/app/configmap.go@9aa70b8f, `stubDomainBlock`: the
    // client's protocol, as ours).
    let f = w(
        "Corefile",
        common::coredns::clusterset_block()
            .replacen("{\n", "{\n    bind 127.0.0.7\n", 1)
            .replace("\"10.96.0.53\"", "127.0.0.1")
            + "\nclusterset.local:53 {\n    errors\n    cache 30\n    bind 127.0.0.8\n    forward . 127.0.0.1\n}\n",
    );
    ns.spawn("coredns", &[coredns, "-conf".into(), f]);
}

#[test]
fn real_clients_resolve_every_case_directly_and_through_every_forwarder() {
    let _module = common::module(module_path!());
    let mut ns = Namespace::new("csdns-compat");
    let d = ns.dir.path().to_path_buf();
    let zone = d.join("clusterset.yaml");
    std::fs::write(&zone, fixture()).unwrap();
    ns.spawn(
        "clusterset-dns",
        &[
            BIN,
            "--file",
            zone.to_str().unwrap(),
            "--listen",
            "127.0.0.1:53",
            "--admin-listen",
            "127.0.0.1:9153",
        ]
        .map(String::from),
    );
    until(
        Lazy(|| format!("the server to answer: {}", ns.log("clusterset-dns"))),
        10,
        || {
            ns.dig("127.0.0.1", "+short web.shop.svc.clusterset.local")
                .contains("198.19.10.1")
        },
    );
    start_forwarders(&mut ns);
    for p in PATHS {
        until(
            Lazy(|| {
                format!(
                    "{} on {} to answer: {}",
                    p.name,
                    p.address,
                    ns.procs
                        .iter()
                        .map(|(n, _)| format!("--- {n}\n{}", ns.log(n)))
                        .collect::<String>()
                )
            }),
            20,
            || {
                ns.dig(p.address, "+short web.shop.svc.clusterset.local")
                    .contains("198.19.10.1")
            },
        );
    }
    let clients = build_clients(&d);
    let cases = cases();

    // results[(path, client)] = per case (ms, outcome)
    let mut failures = Vec::new();
    let mut table: BTreeMap<(usize, usize), Vec<String>> = BTreeMap::new();
    for (pi, p) in PATHS.iter().enumerate() {
        let resolv = d.join(format!("resolv-{pi}.conf"));
        std::fs::write(
            &resolv,
            format!("nameserver {}\nsearch shop.svc.clusterset.local svc.clusterset.local clusterset.local\noptions ndots:5\n", p.address),
        )
        .unwrap();
        for (ci, client) in clients.iter().enumerate() {
            let mine: Vec<&Case> = cases
                .iter()
                .filter(|c| client.srv || c.query.starts_with("host:"))
                .collect();
            let mut argv = client.argv.clone();
            argv.extend(mine.iter().map(|c| c.query.clone()));
            let out = ns.run_with_resolv(&resolv, &client.env, &argv);
            let stdout = String::from_utf8_lossy(&out.stdout).to_string();
            let lines: Vec<&str> = stdout.lines().collect();
            assert_eq!(
                lines.len(),
                mine.len(),
                "{} via {}: {}",
                client.name,
                p.name,
                text(&out)
            );
            let mut row = Vec::new();
            for (case, line) in mine.iter().zip(lines) {
                let mut f = line.splitn(2, '\t');
                let ms: f64 = f.next().unwrap().parse().unwrap();
                let answer = f.next().unwrap_or("");
                // Addresses in one spelling (Java writes IPv6 uncompressed).
                let got: BTreeSet<String> = answer
                    .split_whitespace()
                    .map(|s| {
                        s.parse::<std::net::IpAddr>()
                            .map_or(s.to_lowercase(), |ip| ip.to_string())
                    })
                    .collect();
                let error = answer.starts_with("error");
                let ok = ms < 1000.0
                    && match &case.want {
                        Want::Exactly(w) => !error && &got == w,
                        // A client that never retries over TCP gets the records that fit where
                        // the path passes a partial answer on, and a fast "no such name" where a
                        // forwarder sends an empty truncated one (its behaviour, not ours).
                        Want::AllOrTruncated(_)
                            if client.udp_only && p.truncated == Truncated::Empty =>
                        {
                            error
                        }
                        Want::AllOrTruncated(_)
                            if client.udp_only && p.truncated == Truncated::Either && error =>
                        {
                            true
                        }
                        Want::AllOrTruncated(w) => {
                            !error
                                && (&got == w
                                    || (client.udp_only && !got.is_empty() && got.is_subset(w)))
                        }
                        Want::Error => error,
                    };
                let shown = if error {
                    answer.to_string()
                } else if got.len() > 3 {
                    format!("{} answers", got.len())
                } else {
                    got.iter().cloned().collect::<Vec<_>>().join(" ")
                };
                row.push(format!(
                    "{}: {} ({ms:.1} ms){}",
                    case.what,
                    shown,
                    if ok { "" } else { "  <-- WRONG" }
                ));
                if !ok {
                    failures.push(format!(
                        "{} via {}: {} ({}): {answer} in {ms:.1} ms",
                        client.name, p.name, case.what, case.query
                    ));
                }
            }
            table.insert((pi, ci), row);
        }
    }
    for ((pi, ci), row) in &table {
        eprintln!("{} via {}:", clients[*ci].name, PATHS[*pi].name);
        for r in row {
            eprintln!("    {r}");
        }
    }
    assert!(
        failures.is_empty(),
        "{} wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
