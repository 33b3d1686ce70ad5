//! Differential conformance against CoreDNS's built-in multicluster support: a real CoreDNS
//! v1.15.0 (tests/coredns/setup.sh) with `kubernetes clusterset.local { multicluster
//! clusterset.local }` and the real binary watch the same real kube-apiserver. A seeded
//! generator fills it with a varied cluster set and changes it in rounds; after each round both
//! servers answer the same query corpus (every name form × ten types × mixed case, plus names
//! that must not exist) and every difference in rcode, flags or any section must be one of the
//! intentional differences documented in docs/differences.md.
//!
//! `CLUSTERSET_DNS_DIFF_SERVICES` and `CLUSTERSET_DNS_DIFF_ROUNDS` scale it up when run by hand.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use common::coredns::CoreDns;
use common::k8s::{Cluster, crd, rbac};
use common::{dig, query, spawn_binary, tcp_exchange_blocking, udp_exchange_blocking, until};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType};

const ZONE: &str = "clusterset.local";

mod world;

use world::*;

const TYPES: [RecordType; 10] = [
    RecordType::A,
    RecordType::AAAA,
    RecordType::SRV,
    RecordType::TXT,
    RecordType::NS,
    RecordType::SOA,
    RecordType::CNAME,
    RecordType::PTR,
    RecordType::ANY,
    RecordType::MX,
];

fn dashed(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string().replace('.', "-"),
        IpAddr::V6(v6) => {
            let s = v6.to_string().replace(':', "-");
            if s.ends_with('-') { s + "0" } else { s }
        }
    }
}

fn names(world: &World) -> Vec<String> {
    let mut names = BTreeSet::new();
    for n in [
        ZONE.to_string(),
        format!("svc.{ZONE}"),
        format!("dns-version.{ZONE}"),
        format!("nope.{ZONE}"),
        format!("nope.svc.{ZONE}"),
        format!("pod.{ZONE}"),
    ] {
        names.insert(n);
    }
    for ns in NAMESPACES {
        names.insert(format!("{ns}.svc.{ZONE}"));
        names.insert(format!("nope.{ns}.svc.{ZONE}"));
    }
    for s in world.services.values() {
        let base = format!("{}.{}.svc.{ZONE}", s.name, s.ns);
        names.insert(base.clone());
        names.insert(format!("x.{base}"));
        names.insert(format!("{}.nope-ns.svc.{ZONE}", s.name));
        names.insert(format!("_nope._tcp.{base}"));
        names.insert(format!("_tcp.{base}"));
        names.insert(format!("_udp.{base}"));
        for p in &s.ports {
            if let Some(n) = &p.name {
                names.insert(format!("_{n}._{}.{base}", p.protocol.to_lowercase()));
            }
        }
        for sl in &s.slices {
            names.insert(format!("{}.{base}", sl.cluster));
            for e in &sl.endpoints {
                let host = e.hostname.clone().unwrap_or_else(|| dashed(&e.ip));
                names.insert(format!("{host}.{}.{base}", sl.cluster));
            }
        }
    }
    names.into_iter().collect()
}

/// Every other letter upper-cased, starting at an offset, so both servers must echo the case.
fn mixed(name: &str, offset: usize) -> String {
    name.chars()
        .enumerate()
        .map(|(i, c)| {
            if (i + offset) % 2 == 0 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

/// UDP, with up to three tries (the socket waits 500 ms for each).
fn ask(sock: &UdpSocket, server: SocketAddr, q: &[u8]) -> Option<Message> {
    (0..3).find_map(|_| udp_exchange_blocking(sock, server, q))
}

/// A response reduced to what is compared: rcode, AA, TC, the question as echoed, and each
/// section as a sorted list of normalized records (SOA serials blanked).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    rcode: ResponseCode,
    aa: bool,
    tc: bool,
    question: String,
    answers: Vec<String>,
    authority: Vec<String>,
    additional: Vec<String>,
}

fn record_text(r: &Record) -> String {
    let data = match &r.data {
        RData::SOA(soa) => format!(
            "{} {} SERIAL {} {} {} {}",
            soa.mname, soa.rname, soa.refresh, soa.retry, soa.expire, soa.minimum
        ),
        other => other.to_string(),
    };
    format!(
        "{} {} {} {}",
        r.name.to_ascii().to_lowercase(),
        r.ttl,
        r.record_type(),
        data.to_lowercase()
    )
}

fn reduce(m: &Message) -> Answer {
    let sorted = |rs: &[Record]| {
        let mut v: Vec<String> = rs
            .iter()
            .filter(|r| r.record_type() != RecordType::OPT)
            .map(record_text)
            .collect();
        v.sort();
        v
    };
    Answer {
        rcode: m.metadata.response_code,
        aa: m.metadata.authoritative,
        tc: m.metadata.truncation,
        question: m
            .queries
            .first()
            .map(|q| format!("{} {}", q.name().to_ascii(), q.query_type()))
            .unwrap_or_default(),
        answers: sorted(&m.answers),
        authority: sorted(&m.authorities),
        additional: sorted(&m.additionals),
    }
}

// ---- the servers ----

fn start_coredns(k: &Cluster) -> CoreDns {
    let kubeconfig = k.kubeconfig("admin");
    CoreDns::start(
        |port| {
            format!(
                "{ZONE}:{port} {{\n    bind 127.0.0.1\n    kubernetes {ZONE} {{\n        kubeconfig {kubeconfig} test\n        multicluster {ZONE}\n    }}\n}}\n"
            )
        },
        &format!("dns-version.{ZONE} TXT +short"),
        "\"",
        60,
    )
}

/// Applies two sentinels carrying this round's address, a ServiceImport (its `ips`) and an
/// EndpointSlice (the endpoint of a headless import), and waits until both servers answer both:
/// then each has caught up with everything applied before them on both watches (each watch
/// delivers in order). The sentinels are not in the world, so never compared.
fn converge(k: &Cluster, round: usize, servers: &[SocketAddr]) {
    let ip = format!("10.255.0.{}", round + 1);
    k.apply(&format!(
        "---\napiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {{name: sentinel, namespace: shop}}\n\
         spec: {{type: ClusterSetIP, ips: [\"{ip}\"], ports: [{{name: http, protocol: TCP, port: 80}}]}}\n\
         ---\napiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {{name: slice-sentinel, namespace: shop}}\n\
         spec: {{type: Headless, ports: [{{name: http, protocol: TCP, port: 80}}]}}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: slice-sentinel-east\n  namespace: shop\n  \
         labels: {{multicluster.kubernetes.io/service-name: slice-sentinel, multicluster.kubernetes.io/source-cluster: east}}\n\
         addressType: IPv4\nports: [{{name: http, protocol: TCP, port: 80}}]\nendpoints:\n- addresses: [\"{ip}\"]\n"
    ));
    for s in servers {
        until(format!("{s} to catch up with round {round}"), 60, || {
            ["sentinel", "slice-sentinel"]
                .iter()
                .all(|name| dig(*s, &format!("{name}.shop.svc.{ZONE} A +short")).trim() == ip)
        });
    }
}

// ---- intentional differences ----

/// The kind of service a name belongs to, for grouping differences.
fn kind(s: &Service) -> &'static str {
    if s.headless {
        if s.slices
            .iter()
            .any(|sl| sl.endpoints.iter().any(|e| e.hostname.is_some()))
        {
            "headless+hostnames"
        } else {
            "headless"
        }
    } else {
        match (
            s.ips.iter().any(IpAddr::is_ipv4),
            s.ips.iter().any(IpAddr::is_ipv6),
        ) {
            (true, true) => "clustersetip-dual",
            (true, false) => "clustersetip-v4",
            (false, true) => "clustersetip-v6",
            (false, false) => "clustersetip-no-ips",
        }
    }
}

/// The form of a (lower-case) query name in the behaviour document's terms.
fn form(world: &World, lname: &str) -> String {
    let Some(rel) = lname.strip_suffix(ZONE) else {
        return "outside".into();
    };
    let labels: Vec<&str> = rel
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
        .collect();
    let service = |ns: &str, name: &str| world.services.get(&(ns.to_string(), name.to_string()));
    match labels.as_slice() {
        [] => "apex".into(),
        ["svc"] => "svc.Z".into(),
        ["dns-version"] => "dns-version".into(),
        [ns, "svc"] => {
            if NAMESPACES.contains(ns) {
                "ns.svc.Z".into()
            } else {
                "missing-ns.svc.Z".into()
            }
        }
        [name, ns, "svc"] => match service(ns, name) {
            Some(s) => format!("svc[{}]", kind(s)),
            None => "missing-svc".into(),
        },
        [x, name, ns, "svc"] => match service(ns, name) {
            Some(s) if CLUSTERS.contains(x) => format!("cluster.svc[{}]", kind(s)),
            Some(s) => format!("other.svc[{}]", kind(s)),
            None => "x.missing-svc".into(),
        },
        [p, proto, name, ns, "svc"] if p.starts_with('_') && proto.starts_with('_') => {
            match service(ns, name) {
                Some(s)
                    if s.ports.iter().any(|pt| {
                        pt.name.as_deref() == Some(&p[1..])
                            && pt.protocol.eq_ignore_ascii_case(&proto[1..])
                    }) =>
                {
                    format!("port.svc[{}]", kind(s))
                }
                Some(s) => format!("unknown-port.svc[{}]", kind(s)),
                None => "port.missing-svc".into(),
            }
        }
        [host, cluster, name, ns, "svc"] => match service(ns, name) {
            Some(s) => {
                let ep = s
                    .slices
                    .iter()
                    .filter(|sl| sl.cluster == *cluster)
                    .flat_map(|sl| &sl.endpoints)
                    .find(|e| e.hostname.clone().unwrap_or_else(|| dashed(&e.ip)) == *host);
                let state = match ep {
                    Some(e) if e.ready == Some(false) => "not-ready",
                    Some(_) => "ready",
                    None => "missing",
                };
                format!("endpoint-{state}[{}]", kind(s))
            }
            None => "endpoint.missing-svc".into(),
        },
        _ => format!("other-{}-labels", labels.len()),
    }
}

/// The service a name belongs to (the name itself, a port name, or an endpoint below it).
fn service_of<'a>(world: &'a World, lname: &str) -> Option<&'a Service> {
    let rel = lname.strip_suffix(ZONE)?.trim_end_matches('.');
    let labels: Vec<&str> = rel.split('.').collect();
    let n = labels.len();
    if n < 3 || labels[n - 1] != "svc" {
        return None;
    }
    world
        .services
        .get(&(labels[n - 2].to_string(), labels[n - 3].to_string()))
}

/// The ready endpoint addresses of `s` of one family, as our answers would list them.
fn ready_addresses(s: &Service, v6: bool) -> BTreeSet<String> {
    s.slices
        .iter()
        .filter(|sl| sl.v6 == v6)
        .flat_map(|sl| &sl.endpoints)
        .filter(|e| e.ready != Some(false))
        .map(|e| e.ip.to_string())
        .collect()
}

fn rdata_of(records: &[String], rtype: &str) -> BTreeSet<String> {
    records
        .iter()
        .filter_map(|r| {
            let f: Vec<&str> = r.splitn(4, ' ').collect();
            (f.len() == 4 && f[2] == rtype).then(|| f[3].to_string())
        })
        .collect()
}

fn nodata(a: &Answer) -> bool {
    a.rcode == ResponseCode::NoError && a.answers.is_empty() && a.authority.len() == 1
}

fn nxdomain(a: &Answer) -> bool {
    a.rcode == ResponseCode::NXDomain && a.answers.is_empty() && a.authority.len() == 1
}

/// Which intentional difference (docs/differences.md) explains `ours` vs `theirs` for
/// `name`/`qtype`, if any. Each rule checks the exact shape of both answers (and, where ours
/// carries data, that the data is what the objects say), so a real bug is not waved through.
fn explain(
    world: &World,
    name: &str,
    qtype: RecordType,
    ours: &Answer,
    theirs: &Answer,
) -> Option<&'static str> {
    let lname = name.to_lowercase();
    let same_shape =
        ours.aa == theirs.aa && ours.tc == theirs.tc && ours.question == theirs.question;
    if !same_shape {
        return None;
    }
    // 1. The MCS DNS schema version.
    if lname == format!("dns-version.{ZONE}")
        && qtype == RecordType::TXT
        && ours.answers == [format!("dns-version.{ZONE}. 28800 TXT 1.0.0")]
        && theirs.answers.len() == 1
        && theirs.answers[0].ends_with("TXT 1.1.0")
    {
        return Some("dns-version 1.0.0");
    }
    // 2. SOA asked at a name that does not exist: NXDOMAIN (CoreDNS: NODATA for any name).
    if qtype == RecordType::SOA
        && lname != ZONE
        && nxdomain(ours)
        && nodata(theirs)
        && ours.authority == theirs.authority
    {
        return Some("SOA at a missing name is NXDOMAIN");
    }
    // 3. TXT at a name that exists: NODATA (CoreDNS: NXDOMAIN for names without TXT).
    if qtype == RecordType::TXT
        && nodata(ours)
        && nxdomain(theirs)
        && ours.authority == theirs.authority
    {
        return Some("existing name, missing type: NODATA");
    }
    // 3b. dns-version exists (it has its TXT record): other types are NODATA (CoreDNS:
    //     NXDOMAIN).
    if lname == format!("dns-version.{ZONE}")
        && qtype != RecordType::TXT
        && nodata(ours)
        && nxdomain(theirs)
        && ours.authority == theirs.authority
    {
        return Some("existing name, missing type: NODATA");
    }
    // 4. The apex NS record.
    if lname == ZONE
        && qtype == RecordType::NS
        && ours.answers == [format!("{ZONE}. 5 NS ns.dns.{ZONE}.")]
        && nodata(theirs)
    {
        return Some("apex NS");
    }
    // 5. No pod subtree in the clusterset zone.
    if lname == format!("pod.{ZONE}") && nxdomain(ours) && nodata(theirs) {
        return Some("no pod.Z");
    }
    let form = form(world, &lname);
    // 6. A/AAAA at a port name: NODATA (CoreDNS answers the service's addresses there).
    if form.starts_with("port.svc[")
        && matches!(qtype, RecordType::A | RecordType::AAAA)
        && nodata(ours)
        && theirs.rcode == ResponseCode::NoError
        && !theirs.answers.is_empty()
        && theirs
            .answers
            .iter()
            .all(|r| r.starts_with(&format!("{lname}. ")))
    {
        return Some("A/AAAA at a port name is NODATA");
    }
    let service = service_of(world, &lname)?;
    // 7. A ClusterSetIP import without ports still has its name (CoreDNS: NXDOMAIN for all).
    if !service.headless
        && service.ports.is_empty()
        && form.starts_with("svc[")
        && ours.rcode == ResponseCode::NoError
        && nxdomain(theirs)
    {
        let v6 = qtype == RecordType::AAAA;
        let expect: BTreeSet<String> = if service.ips.is_empty() {
            ready_addresses(service, v6)
        } else {
            service
                .ips
                .iter()
                .filter(|i| i.is_ipv6() == v6)
                .map(|i| i.to_string())
                .collect()
        };
        let got = match qtype {
            RecordType::A => rdata_of(&ours.answers, "A"),
            RecordType::AAAA => rdata_of(&ours.answers, "AAAA"),
            _ => BTreeSet::new(),
        };
        let want = if matches!(qtype, RecordType::A | RecordType::AAAA) {
            expect
        } else {
            BTreeSet::new()
        };
        if got == want && (got.is_empty() == ours.answers.is_empty()) {
            return Some("ClusterSetIP import without ports");
        }
    }
    // 8. beyond: a ClusterSetIP import without `ips` answers its ready endpoint addresses
    //    (CoreDNS: NODATA), and SRV for it points at the service name.
    if !service.headless
        && service.ips.is_empty()
        && theirs.rcode == ResponseCode::NoError
        && theirs.answers.is_empty()
    {
        let ok = match qtype {
            RecordType::A | RecordType::AAAA => {
                let v6 = qtype == RecordType::AAAA;
                let rtype = if v6 { "AAAA" } else { "A" };
                form.starts_with("svc[")
                    && rdata_of(&ours.answers, rtype) == ready_addresses(service, v6)
                    && !ours.answers.is_empty()
            }
            RecordType::SRV => {
                let target = format!("{}.{}.svc.{ZONE}.", service.name, service.ns);
                let srv = rdata_of(&ours.answers, "SRV");
                !srv.is_empty() && srv.iter().all(|d| d.ends_with(&format!(" {target}")))
            }
            _ => false,
        };
        if ok {
            return Some("ClusterSetIP import without ips (beyond)");
        }
    }
    // 10. An empty non-terminal below a service (`<cluster>.<svc>`, `_<proto>.<svc>`): NODATA,
    //     since names exist below it (CoreDNS: NXDOMAIN).
    let labels: Vec<&str> = lname.split('.').collect();
    if labels.len() == 4 + ZONE.split('.').count()
        && nodata(ours)
        && nxdomain(theirs)
        && ours.authority == theirs.authority
        && empty_non_terminal(service, labels[0])
    {
        return Some("empty non-terminal: NODATA");
    }
    None
}

/// Whether `<first>.<svc>` has names below it but none of its own: the cluster label of a
/// ready endpoint, or the protocol label of a named port the service answers SRV for.
fn empty_non_terminal(service: &Service, first: &str) -> bool {
    let ready = |sl: &Slice| sl.endpoints.iter().any(|e| e.ready != Some(false));
    let any_ready = service.slices.iter().any(ready);
    if service.headless && !any_ready {
        return false; // the service has no names at all
    }
    match first.strip_prefix('_') {
        Some(proto) => {
            let named = |p: &Port| p.name.is_some() && p.protocol.eq_ignore_ascii_case(proto);
            if service.headless {
                service
                    .slices
                    .iter()
                    .any(|sl| ready(sl) && sl.ports.iter().any(named))
            } else {
                (!service.ips.is_empty() || any_ready) && service.ports.iter().any(named)
            }
        }
        None => service
            .slices
            .iter()
            .any(|sl| sl.cluster == first && ready(sl)),
    }
}

#[derive(Default)]
struct Tally {
    compared: usize,
    /// Truncated over UDP by both servers, then compared over TCP.
    truncated: usize,
    equal: usize,
    explained: BTreeMap<&'static str, usize>,
    unexplained: Vec<String>,
    /// Unexplained differences by (form, type, our rcode, CoreDNS's rcode, sections differing).
    groups: BTreeMap<String, (usize, String)>,
}

fn compare_round(
    world: &World,
    round: usize,
    ours: SocketAddr,
    theirs: SocketAddr,
    tally: &mut Tally,
) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    for (i, name) in names(world).iter().enumerate() {
        for qtype in TYPES {
            let spelled = mixed(name, i + round);
            // RD set, as stub resolvers send it, and EDNS with 1232 bytes; the same bytes go
            // to both servers.
            let q = query(&spelled, qtype, Some(1232));
            let (Some(a), Some(b)) = (ask(&sock, ours, &q), ask(&sock, theirs, &q)) else {
                tally.unexplained.push(format!(
                    "round {round}: {spelled} {qtype}: no answer from one server"
                ));
                continue;
            };
            tally.compared += 1;
            let (mut a, mut b) = (reduce(&a), reduce(&b));
            if a.tc && b.tc {
                // Both truncated over UDP, each with the records that fit (which ones depends on
                // each server's order): compare the full answers over TCP, as clients retry.
                let (Some(x), Some(y)) = (
                    tcp_exchange_blocking(ours, &q),
                    tcp_exchange_blocking(theirs, &q),
                ) else {
                    tally
                        .unexplained
                        .push(format!("round {round}: {spelled} {qtype}: no TCP answer"));
                    continue;
                };
                a = reduce(&x);
                b = reduce(&y);
                tally.truncated += 1;
            }
            if a == b {
                tally.equal += 1;
            } else if let Some(why) = explain(world, name, qtype, &a, &b) {
                *tally.explained.entry(why).or_default() += 1;
            } else {
                let mut sections = Vec::new();
                for (what, same) in [
                    ("flags", (a.aa, a.tc) == (b.aa, b.tc)),
                    ("question", a.question == b.question),
                    ("answer", a.answers == b.answers),
                    ("authority", a.authority == b.authority),
                    ("additional", a.additional == b.additional),
                ] {
                    if !same {
                        sections.push(what);
                    }
                }
                let key = format!(
                    "{} {qtype} ours={:?} coredns={:?} differ={sections:?}",
                    form(world, &name.to_lowercase()),
                    a.rcode,
                    b.rcode
                );
                let example =
                    format!("round {round}: {spelled} {qtype}\n  ours:    {a:?}\n  coredns: {b:?}");
                let g = tally.groups.entry(key).or_insert((0, example.clone()));
                g.0 += 1;
                tally.unexplained.push(example);
            }
        }
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn same_answers_as_coredns_multicluster() {
    let _module = common::module(module_path!());
    let services = env_usize("CLUSTERSET_DNS_DIFF_SERVICES", 50);
    let rounds = env_usize("CLUSTERSET_DNS_DIFF_ROUNDS", 3);
    let k = Cluster::start();
    k.apply(&crd("v1alpha1"));
    k.apply(&rbac());
    for ns in NAMESPACES {
        k.apply(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"
        ));
    }
    let mut world = World::new(0x5eed_2026);
    world.add(services);
    let all: String = world.services.values().map(yaml).collect();
    k.apply(&all);

    let ours = spawn_binary(&["--kubeconfig", &k.kubeconfig("dns")]);
    until("clusterset-dns to become ready", 60, || {
        common::ready(&ours)
    });
    let coredns = start_coredns(&k);
    let servers = [ours.dns, coredns.addr];

    let mut tally = Tally::default();
    for round in 0..=rounds {
        if round > 0 {
            let gone = world.churn(services / 5, services / 10);
            for s in &gone {
                delete(&k, s);
            }
            world.add(services / 10);
            let all: String = world.services.values().map(yaml).collect();
            k.apply(&all);
        }
        converge(&k, round, &servers);
        compare_round(&world, round, ours.dns, coredns.addr, &mut tally);
    }
    eprintln!(
        "differential: {} queries compared over {} rounds ({} services at the end; {} truncated over UDP by both and compared over TCP): {} equal, explained {:?}, {} unexplained",
        tally.compared,
        rounds + 1,
        world.services.len(),
        tally.truncated,
        tally.equal,
        tally.explained,
        tally.unexplained.len()
    );
    for (g, (n, example)) in &tally.groups {
        eprintln!("{n:6} {g}\n{example}");
    }
    assert!(
        tally.compared >= 10_000 || services < 50,
        "only {} queries compared",
        tally.compared
    );
    assert!(
        tally.unexplained.is_empty(),
        "{} unexplained differences",
        tally.unexplained.len()
    );
}
