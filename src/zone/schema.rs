//! The KEP-1645 DNS schema as pure functions: every name a service owns in a zone, and the names
//! every zone has, rendered into [`Entry`]s. No state: the builder calls these and swaps what they
//! give into the zone; the tests call them on values.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use super::entry::Entry;
use super::render::{Answer, BodyWriter};
use crate::model::{Locality, Port, Service, ServiceType};
use crate::wire::{TYPE_A, TYPE_AAAA, TYPE_NS, TYPE_SRV, TYPE_TXT, child};

/// The MCS DNS schema version we implement (KEP-1645 specification 1.0.0).
pub const SCHEMA_VERSION: &str = "1.0.0";
const VERSION_TTL: u32 = 28800;

/// The names every served zone has.
pub fn render_apex(apex: &[u8], ttl: u32, ns_addresses: &[IpAddr]) -> Vec<Entry> {
    let mut out = Vec::new();
    let ns_name = child("ns.dns", apex).expect("zone names are checked to leave room");
    let mut w = BodyWriter::new(apex);
    w.ns(apex, &ns_name, ttl);
    w.additional();
    for ip in ns_addresses {
        w.addr(&ns_name, *ip, ttl);
    }
    out.push(Entry::new(apex, true, &[(TYPE_NS, w.finish())]));

    let version = child("dns-version", apex).expect("zone names are checked to leave room");
    let mut w = BodyWriter::new(&version);
    w.txt(&version, SCHEMA_VERSION, VERSION_TTL);
    out.push(Entry::new(&version, false, &[(TYPE_TXT, w.finish())]));

    let answers: Vec<_> = [
        addresses(&ns_name, ns_addresses.iter(), false, ttl),
        addresses(&ns_name, ns_addresses.iter(), true, ttl),
    ]
    .into_iter()
    .flatten()
    .collect();
    out.push(Entry::new(&ns_name, false, &answers));
    for ent in ["svc", "dns"] {
        out.push(Entry::empty(
            &child(ent, apex).expect("zone names are checked to leave room"),
        ));
    }
    out
}

/// An A (or, with `v6`, AAAA) answer for `owner` from the addresses of that family, if any.
fn addresses<'a>(
    owner: &[u8],
    ips: impl Iterator<Item = &'a IpAddr>,
    v6: bool,
    ttl: u32,
) -> Option<(u16, Answer)> {
    let mut w = BodyWriter::new(owner);
    for ip in ips.filter(|ip| ip.is_ipv6() == v6) {
        if !w.addr(owner, *ip, ttl) {
            break;
        }
    }
    let a = w.finish();
    (a.ancount > 0).then_some((if v6 { TYPE_AAAA } else { TYPE_A }, a))
}

/// `(port name, protocol label)` of a `_port._proto` name.
type SrvName<'a> = (&'a str, &'static str);

/// A name SRV records point at, with its addresses (for the additional section).
struct SrvTarget {
    name: Vec<u8>,
    addrs: Vec<IpAddr>,
    /// In the server's own cluster (never, without an own cluster id), or the service name
    /// itself, whose addresses were already chosen for it: kept and first under any locality.
    own: bool,
    /// Ports of SRV records at this name itself, once per address that brought them (so the
    /// count is the N of the weight rule).
    own_ports: Vec<Port>,
}

/// SRV answer at `owner` for `entries` (target index, port), weights by CoreDNS's rule:
/// `floor(100 / N)`, at least 1, N counted before de-duplication; `prefer_own`: the endpoint
/// targets outside the own cluster at priority 1.
fn srv(
    owner: &[u8],
    entries: &[(usize, &Port)],
    targets: &[SrvTarget],
    ttl: u32,
    prefer_own: bool,
) -> Option<(u16, Answer)> {
    if entries.is_empty() {
        return None;
    }
    let weight = (100 / entries.len()).max(1) as u16;
    let mut w = BodyWriter::new(owner);
    let mut seen = HashSet::new();
    let mut used = Vec::new();
    for &(t, p) in entries {
        if seen.insert((t, p.port)) {
            let priority = u16::from(prefer_own && !targets[t].own);
            if !w.srv(owner, priority, weight, p.port, &targets[t].name, ttl) {
                break;
            }
            if !used.contains(&t) {
                used.push(t);
            }
        }
    }
    w.additional();
    'glue: for t in used {
        let target = &targets[t];
        for v6 in [false, true] {
            for ip in target.addrs.iter().filter(|ip| ip.is_ipv6() == v6) {
                if !w.addr(&target.name, *ip, ttl) {
                    break 'glue;
                }
            }
        }
    }
    Some((TYPE_SRV, w.finish()))
}

/// Host label of an endpoint without `hostname`: the address with `.`/`:` as `-` (a trailing `-`
/// gets a `0`), as KEP-1645 and CoreDNS derive it.
fn derived_hostname(ip: &IpAddr) -> String {
    let mut s: String = ip
        .to_string()
        .chars()
        .map(|c| if c == '.' || c == ':' { '-' } else { c })
        .collect();
    if s.ends_with('-') {
        s.push('0');
    }
    s
}

fn push_distinct(v: &mut Vec<IpAddr>, ip: IpAddr) {
    if !v.contains(&ip) {
        v.push(ip);
    }
}

/// How the answers built from endpoints are chosen: the server's own cluster and what the
/// service asks (the contract's "Locality"). Without an own cluster id, nothing changes.
#[derive(Clone, Copy)]
struct Choice<'a> {
    own: Option<&'a str>,
    locality: Locality,
}

impl Choice<'_> {
    /// The addresses the service name answers, of one family, from `all` (each with whether
    /// it is the own cluster's): the own cluster's first; Prefer*: only the own cluster's when
    /// it has any; Local: only the own cluster's.
    fn addresses(&self, all: &[(IpAddr, bool)]) -> Vec<IpAddr> {
        if self.own.is_none() {
            return all.iter().map(|(ip, _)| *ip).collect();
        }
        let own: Vec<IpAddr> = all.iter().filter(|a| a.1).map(|a| a.0).collect();
        match self.locality {
            Locality::OwnOnly => own,
            Locality::PreferOwn if !own.is_empty() => own,
            _ => own
                .into_iter()
                .chain(all.iter().filter(|a| !a.1).map(|a| a.0))
                .collect(),
        }
    }

    /// The SRV entries answered at the service's names, from `all`: the own cluster's first;
    /// Local: only those.
    fn entries<'p>(
        &self,
        all: &[(usize, &'p Port)],
        targets: &[SrvTarget],
    ) -> Vec<(usize, &'p Port)> {
        if self.own.is_none() {
            return all.to_vec();
        }
        let own = all.iter().filter(|(t, _)| targets[*t].own).copied();
        let others = all.iter().filter(|(t, _)| !targets[*t].own).copied();
        match self.locality {
            Locality::OwnOnly => own.collect(),
            _ => own.chain(others).collect(),
        }
    }

    /// Whether targets outside the own cluster go at priority 1.
    fn prefer_own(&self) -> bool {
        self.own.is_some() && self.locality == Locality::PreferOwn
    }
}

/// Every name `service` owns in the zone at `apex`, `own` being the server's own cluster id if
/// it knows one. `skip` hears about names that cannot exist (too long for DNS).
pub fn render_service(
    service: &Service,
    apex: &[u8],
    ttl: u32,
    own: Option<&str>,
    skip: &mut dyn FnMut(String),
) -> Vec<Entry> {
    let key = &service.key;
    let Some(sname) = child(&format!("{}.{}.svc", key.name, key.namespace), apex) else {
        skip(format!(
            "{}.{}.svc.{} is longer than 255 octets",
            key.name,
            key.namespace,
            crate::wire::name_text(apex)
        ));
        return Vec::new();
    };

    // Targets: index 0 is the service name itself, then one per endpoint name.
    let mut targets = vec![SrvTarget {
        name: sname.clone(),
        addrs: Vec::new(),
        own: true,
        own_ports: Vec::new(),
    }];
    let mut by_name: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut headless_entries: Vec<(usize, &Port)> = Vec::new();
    // Every distinct ready address, with whether the own cluster has it.
    let mut endpoint_addrs: Vec<(IpAddr, bool)> = Vec::new();
    for slice in &service.slices {
        let in_own = own.is_some() && slice.cluster.as_deref() == own;
        for ep in &slice.endpoints {
            for ip in &ep.addresses {
                match endpoint_addrs.iter_mut().find(|(a, _)| a == ip) {
                    Some(seen) => seen.1 |= in_own,
                    None => endpoint_addrs.push((*ip, in_own)),
                }
                let Some(cluster) = &slice.cluster else {
                    continue;
                };
                let host = ep.hostname.clone().unwrap_or_else(|| derived_hostname(ip));
                let Some(name) = child(&format!("{host}.{cluster}"), &sname) else {
                    skip(format!(
                        "endpoint name {host}.{cluster}.{} is longer than 255 octets",
                        crate::wire::name_text(&sname)
                    ));
                    continue;
                };
                let t = *by_name.entry(name.clone()).or_insert_with(|| {
                    targets.push(SrvTarget {
                        name,
                        addrs: Vec::new(),
                        own: in_own,
                        own_ports: Vec::new(),
                    });
                    targets.len() - 1
                });
                push_distinct(&mut targets[t].addrs, *ip);
                targets[t].own_ports.extend(slice.ports.iter().cloned());
                headless_entries.extend(slice.ports.iter().map(|p| (t, p)));
            }
        }
    }

    if service.kind == ServiceType::Headless && endpoint_addrs.is_empty() {
        // No ready endpoints: the service has no names at all (NXDOMAIN), as in CoreDNS.
        return Vec::new();
    }
    // Answers from `spec.ips` are never chosen by locality; those built from endpoints are
    // (headless, or ClusterSetIP without clusterset IPs, Submariner's default).
    let from_ips = service.kind == ServiceType::ClusterSetIp && !service.ips.is_empty();
    let choice = Choice {
        own: if from_ips { None } else { own },
        locality: service.locality,
    };
    type Marked = Vec<(IpAddr, bool)>;
    let (v4, v6): (Marked, Marked) = if from_ips {
        let mut v = Vec::new();
        for ip in &service.ips {
            push_distinct(&mut v, *ip);
        }
        v.into_iter()
            .map(|ip| (ip, false))
            .partition(|(ip, _)| ip.is_ipv4())
    } else {
        endpoint_addrs.into_iter().partition(|(ip, _)| ip.is_ipv4())
    };
    let (v4, v6) = (choice.addresses(&v4), choice.addresses(&v6));
    targets[0].addrs = v4.iter().chain(&v6).copied().collect();
    // A ClusterSetIP import answered from endpoints (no clusterset IPs: Submariner's shape)
    // whose port not every exporting cluster's slice lists: that port's SRV leads to the
    // endpoints of the clusters that list it, with their port (KEP-1645: traffic to a port
    // goes only to the constituent services that expose it), not to the service's name, whose
    // addresses are every cluster's. A port every cluster lists keeps the name.
    let endpoints = targets.len() - 1;
    let exported_by_some: Vec<(SrvName, Vec<(usize, &Port)>)> =
        if service.kind == ServiceType::ClusterSetIp && !from_ips {
            group(&headless_entries)
                .into_iter()
                .filter(|(_, at)| {
                    let mut with: Vec<usize> = at.iter().map(|(t, _)| *t).collect();
                    with.sort_unstable();
                    with.dedup();
                    with.len() < endpoints
                })
                .collect()
        } else {
            Vec::new()
        };
    let all_entries: Vec<(usize, &Port)> = match service.kind {
        ServiceType::ClusterSetIp => targets[0]
            .addrs
            .iter()
            .flat_map(|_| service.ports.iter().map(|p| (0, p)))
            .collect(),
        ServiceType::Headless => headless_entries,
    };
    let entries = choice.entries(&all_entries, &targets);
    let prefer_own = choice.prefer_own();

    let mut out = Vec::new();
    let answers: Vec<_> = [
        addresses(&sname, v4.iter(), false, ttl),
        addresses(&sname, v6.iter(), true, ttl),
        srv(&sname, &entries, &targets, ttl, prefer_own),
    ]
    .into_iter()
    .flatten()
    .collect();
    out.push(Entry::new(&sname, false, &answers));

    // `_<port>._<proto>.<svc>`: named ports only, matched by name and protocol. The names are
    // those of every entry; what each answers is chosen as the service name's SRV is (so under
    // Local a name whose targets are all elsewhere answers NODATA, not NXDOMAIN).
    fn group<'p>(entries: &[(usize, &'p Port)]) -> Vec<(SrvName<'p>, Vec<(usize, &'p Port)>)> {
        let mut groups: Vec<(SrvName, Vec<(usize, &Port)>)> = Vec::new();
        for &(t, p) in entries {
            let Some(name) = p.name.as_deref() else {
                continue;
            };
            let k = (name, p.protocol.label());
            match groups.iter_mut().find(|(g, _)| *g == k) {
                Some((_, v)) => v.push((t, p)),
                None => groups.push((k, vec![(t, p)])),
            }
        }
        groups
    }
    let mut groups = group(&all_entries);
    for (k, at_endpoints) in exported_by_some {
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => *v = at_endpoints,
            None => groups.push((k, at_endpoints)),
        }
    }
    for ((port, proto), group) in groups {
        let Some(name) = child(&format!("_{port}._{proto}"), &sname) else {
            skip(format!(
                "_{port}._{proto}.{} is longer than 255 octets",
                crate::wire::name_text(&sname)
            ));
            continue;
        };
        let chosen = choice.entries(&group, &targets);
        let answers: Vec<_> = srv(&name, &chosen, &targets, ttl, prefer_own)
            .into_iter()
            .collect();
        out.push(Entry::new(&name, false, &answers));
    }

    // `<host>.<cluster>.<svc>`: the endpoint's own addresses and ports.
    for (t, target) in targets.iter().enumerate().skip(1) {
        let ports: Vec<(usize, &Port)> = target.own_ports.iter().map(|p| (t, p)).collect();
        let answers: Vec<_> = [
            addresses(&target.name, target.addrs.iter(), false, ttl),
            addresses(&target.name, target.addrs.iter(), true, ttl),
            srv(&target.name, &ports, &targets, ttl, false),
        ]
        .into_iter()
        .flatten()
        .collect();
        out.push(Entry::new(&target.name, false, &answers));
    }

    // Empty non-terminals: every name between the service's and one of its names below it
    // (`_<proto>.<svc>`, `<cluster>.<svc>`, and `eu.<svc>` of a two-label cluster id
    // `central.eu`) exists without records, so it answers NODATA, not NXDOMAIN, which says
    // that nothing exists below (RFC 8020) and stops qname-minimising resolvers there.
    let owned: HashSet<Vec<u8>> = out.iter().map(|e| e.name().to_vec()).collect();
    let mut empty: Vec<Vec<u8>> = Vec::new();
    for e in &out {
        let mut name = e.name();
        while name.len() > sname.len() {
            name = &name[1 + name[0] as usize..];
            if name.len() <= sname.len() || owned.contains(name) || empty.iter().any(|n| n == name)
            {
                continue;
            }
            empty.push(name.to_vec());
        }
    }
    out.extend(empty.iter().map(|n| Entry::empty(n)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, ObjectKind, Protocol, ServiceKey, Slice};
    use crate::wire::wire_name;

    const APEX: &str = "clusterset.local";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn http() -> Port {
        Port {
            name: Some("http".into()),
            protocol: Protocol::Tcp,
            port: 80,
        }
    }

    fn service(kind: ServiceType, ips: &[&str], slices: Vec<Slice>) -> Service {
        Service {
            locality: crate::model::Locality::Any,
            slices_absent: false,
            key: ServiceKey {
                namespace: "shop".into(),
                name: "web".into(),
            },
            origin: ObjectKind::ServiceImport,
            kind,
            ips: ips.iter().map(|s| ip(s)).collect(),
            ports: vec![http()],
            slices,
        }
    }

    fn slice(cluster: &str, endpoints: &[(&str, Option<&str>)]) -> Slice {
        Slice {
            name: format!("web-{cluster}"),
            cluster: Some(cluster.into()),
            ports: vec![http()],
            endpoints: endpoints
                .iter()
                .map(|(a, h)| Endpoint {
                    addresses: vec![ip(a)],
                    hostname: h.map(str::to_string),
                })
                .collect(),
        }
    }

    fn render(service: &Service) -> (Vec<Entry>, Vec<String>) {
        let mut skipped = Vec::new();
        let entries = render_service(service, &wire_name(APEX).unwrap(), 5, None, &mut |why| {
            skipped.push(why);
        });
        (entries, skipped)
    }

    /// The records of type `qtype` at `name` (below `svc.clusterset.local`), as hickory-proto
    /// reads them back.
    fn records(entries: &[Entry], name: &str, qtype: u16) -> Vec<String> {
        let wire = wire_name(&format!("{name}.svc.{APEX}")).unwrap();
        let Some(entry) = entries.iter().find(|e| e.name() == wire.as_slice()) else {
            panic!("no name {name}")
        };
        super::super::testing::records(entry, qtype)
    }

    fn names(entries: &[Entry]) -> Vec<String> {
        let mut v: Vec<String> = entries
            .iter()
            .map(|e| crate::wire::name_text(e.name()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_clustersetip_service_answers_its_ips_and_its_named_ports() {
        let s = service(ServiceType::ClusterSetIp, &["10.0.0.1", "fd00::1"], vec![]);
        let (entries, skipped) = render(&s);
        assert!(skipped.is_empty());
        assert_eq!(
            names(&entries),
            [
                "_http._tcp.web.shop.svc.clusterset.local.",
                "_tcp.web.shop.svc.clusterset.local.",
                "web.shop.svc.clusterset.local.",
            ]
        );
        assert_eq!(records(&entries, "web.shop", TYPE_A), ["A 10.0.0.1"]);
        assert_eq!(records(&entries, "web.shop", TYPE_AAAA), ["AAAA fd00::1"]);
        // One SRV per (target, port): the service name, weight 100/N with N = address x port.
        assert_eq!(
            records(&entries, "_http._tcp.web.shop", TYPE_SRV),
            [
                "SRV 0 50 80 web.shop.svc.clusterset.local.",
                "A 10.0.0.1",
                "AAAA fd00::1"
            ]
        );
        assert!(records(&entries, "_tcp.web.shop", TYPE_SRV).is_empty());
    }

    #[test]
    fn a_headless_service_answers_every_endpoint_and_names_each_per_cluster() {
        let s = service(
            ServiceType::Headless,
            &[],
            vec![
                slice("east", &[("10.1.0.1", Some("db-0")), ("10.1.0.2", None)]),
                slice("central.eu", &[("10.2.0.1", Some("db-0"))]),
            ],
        );
        let (entries, _) = render(&s);
        assert_eq!(
            records(&entries, "web.shop", TYPE_A),
            ["A 10.1.0.1", "A 10.1.0.2", "A 10.2.0.1"]
        );
        assert_eq!(
            records(&entries, "db-0.central.eu.web.shop", TYPE_A),
            ["A 10.2.0.1"]
        );
        assert_eq!(
            records(&entries, "10-1-0-2.east.web.shop", TYPE_A),
            ["A 10.1.0.2"]
        );
        assert_eq!(
            records(&entries, "web.shop", TYPE_SRV)[..3],
            [
                "SRV 0 33 80 db-0.east.web.shop.svc.clusterset.local.",
                "SRV 0 33 80 10-1-0-2.east.web.shop.svc.clusterset.local.",
                "SRV 0 33 80 db-0.central.eu.web.shop.svc.clusterset.local.",
            ]
        );
        // The names between the service and its endpoints exist without records (RFC 8020).
        for ent in ["east.web.shop", "eu.web.shop", "central.eu.web.shop"] {
            let wire = wire_name(&format!("{ent}.svc.{APEX}")).unwrap();
            let e = entries.iter().find(|e| e.name() == wire.as_slice());
            assert_eq!(e.map(|e| e.types().count()), Some(0), "{ent}");
        }
    }

    /// A ClusterSetIP import without clusterset IPs (Submariner's, answered from each cluster's
    /// endpoint, its service's address): a port only one cluster's slice lists leads only there;
    /// a port every cluster lists, and the bare name, keep the service's name.
    #[test]
    fn an_import_answered_from_endpoints_sends_a_port_only_where_it_is_exported() {
        let grpc = Port {
            name: Some("grpc".into()),
            protocol: Protocol::Tcp,
            port: 9090,
        };
        let mut east = slice("east", &[("10.1.0.1", None)]);
        east.ports.push(grpc.clone());
        let west = slice("west", &[("10.2.0.1", None)]);
        let mut s = service(ServiceType::ClusterSetIp, &[], vec![east, west]);
        s.ports.push(grpc);
        let (entries, _) = render(&s);
        assert_eq!(
            records(&entries, "_grpc._tcp.web.shop", TYPE_SRV),
            [
                "SRV 0 100 9090 10-1-0-1.east.web.shop.svc.clusterset.local.",
                "A 10.1.0.1"
            ]
        );
        assert_eq!(
            records(&entries, "_http._tcp.web.shop", TYPE_SRV),
            [
                "SRV 0 50 80 web.shop.svc.clusterset.local.",
                "A 10.1.0.1",
                "A 10.2.0.1"
            ]
        );
        assert_eq!(
            records(&entries, "web.shop", TYPE_SRV),
            [
                "SRV 0 25 80 web.shop.svc.clusterset.local.",
                "SRV 0 25 9090 web.shop.svc.clusterset.local.",
                "A 10.1.0.1",
                "A 10.2.0.1"
            ]
        );
    }

    #[test]
    fn a_headless_service_without_ready_endpoints_has_no_names() {
        let (entries, _) = render(&service(ServiceType::Headless, &[], vec![]));
        assert!(entries.is_empty());
        // A ClusterSetIP service without ips answers its endpoints instead.
        let s = service(
            ServiceType::ClusterSetIp,
            &[],
            vec![slice("east", &[("10.1.0.1", None)])],
        );
        assert_eq!(records(&render(&s).0, "web.shop", TYPE_A), ["A 10.1.0.1"]);
    }

    #[test]
    fn names_too_long_for_dns_are_skipped_and_said() {
        let long = "h".repeat(63);
        let mut s = service(
            ServiceType::Headless,
            &[],
            vec![slice(
                &long,
                &[("10.1.0.1", Some(&long)), ("10.1.0.2", Some("ok"))],
            )],
        );
        s.key.name = "n".repeat(63);
        s.key.namespace = "s".repeat(50);
        let (entries, skipped) = render(&s);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(
            skipped[0].starts_with(&format!("endpoint name {long}.{long}.")),
            "{skipped:?}"
        );
        assert!(
            skipped[0].ends_with("is longer than 255 octets"),
            "{skipped:?}"
        );
        // The service name still answers both addresses; the endpoint that fits has its name.
        let svc = format!("{}.{}", s.key.name, s.key.namespace);
        assert_eq!(
            records(&entries, &svc, TYPE_A),
            ["A 10.1.0.1", "A 10.1.0.2"]
        );
        assert_eq!(
            records(&entries, &format!("ok.{long}.{svc}"), TYPE_A),
            ["A 10.1.0.2"]
        );
        // A service whose own name cannot exist has no names at all.
        s.key.namespace = "s".repeat(63);
        s.key.name = "n".repeat(63);
        let long_zone = format!("{}.{}", "z".repeat(63), "z".repeat(60));
        let mut skipped = Vec::new();
        let entries = render_service(&s, &wire_name(&long_zone).unwrap(), 5, None, &mut |why| {
            skipped.push(why);
        });
        assert!(entries.is_empty());
        assert_eq!(skipped.len(), 1, "{skipped:?}");
    }

    #[test]
    fn derived_hostnames() {
        let d = |s: &str| derived_hostname(&s.parse().unwrap());
        assert_eq!(d("10.1.2.3"), "10-1-2-3");
        assert_eq!(d("2001:db8::"), "2001-db8--0");
        assert_eq!(d("2001:db8::1"), "2001-db8--1");
    }
}
