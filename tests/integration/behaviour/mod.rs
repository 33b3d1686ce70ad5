//! Every row of docs/dns-behaviour.md as a table of (query, expected answer), each run over UDP
//! and TCP with a mixed-case query name, against the server started in-process.

use crate::common;

use common::{Proto, exchange, fixture, mixed_case, query, start};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, Record, RecordType};

const Z: &str = "clusterset.local";

pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) qtype: RecordType,
    pub(crate) rcode: ResponseCode,
    /// `TYPE rdata` of each answer record (all owned by the query name); in any order here,
    /// in order in tests/integration/locality.rs.
    pub(crate) answer: &'static [&'static str],
    /// `owner TYPE rdata` of each additional record (besides OPT), in any order.
    pub(crate) additional: &'static [&'static str],
}

use RecordType::*;
use ResponseCode::{NXDomain, NoError, Refused};

mod linkerd;

pub(crate) const fn ok(
    name: &'static str,
    qtype: RecordType,
    answer: &'static [&'static str],
    additional: &'static [&'static str],
) -> Case {
    Case {
        name,
        qtype,
        rcode: NoError,
        answer,
        additional,
    }
}
const fn nodata(name: &'static str, qtype: RecordType) -> Case {
    Case {
        name,
        qtype,
        rcode: NoError,
        answer: &[],
        additional: &[],
    }
}
const fn nx(name: &'static str, qtype: RecordType) -> Case {
    Case {
        name,
        qtype,
        rcode: NXDomain,
        answer: &[],
        additional: &[],
    }
}

const CASES: &[Case] = &[
    // dns-version
    ok("dns-version.clusterset.local.", TXT, &["TXT 1.0.0"], &[]),
    nodata("dns-version.clusterset.local.", A),
    // ClusterSetIP: A/AAAA from spec.ips, the other family NODATA.
    ok("web.shop.svc.clusterset.local.", A, &["A 10.0.0.1"], &[]),
    nodata("web.shop.svc.clusterset.local.", AAAA),
    ok("dual.shop.svc.clusterset.local.", A, &["A 10.0.0.2"], &[]),
    ok(
        "dual.shop.svc.clusterset.local.",
        AAAA,
        &["AAAA fd00::2"],
        &[],
    ),
    // ClusterSetIP without ips (beyond): the ready endpoint addresses.
    ok(
        "nips.shop.svc.clusterset.local.",
        A,
        &["A 10.96.0.5", "A 10.112.0.5"],
        &[],
    ),
    nodata("nips.shop.svc.clusterset.local.", AAAA),
    // Headless: union of ready endpoint addresses over all clusters (and slices without a cluster).
    ok(
        "db.data.svc.clusterset.local.",
        A,
        &["A 10.1.0.11", "A 10.1.0.12", "A 10.3.0.21", "A 10.9.0.1"],
        &[],
    ),
    nodata("db.data.svc.clusterset.local.", AAAA),
    ok(
        "anon.data.svc.clusterset.local.",
        AAAA,
        &["AAAA fd00:2::"],
        &[],
    ),
    // Headless without ready endpoints: NXDOMAIN, whatever the type.
    nx("empty.data.svc.clusterset.local.", A),
    nx("empty.data.svc.clusterset.local.", SRV),
    nx("alone.lonely.svc.clusterset.local.", A),
    // SRV at the service: one per distinct (target, port); weight floor(100/N), N before dedup.
    ok(
        "web.shop.svc.clusterset.local.",
        SRV,
        &[
            "SRV 0 25 80 web.shop.svc.clusterset.local.",
            "SRV 0 25 8080 web.shop.svc.clusterset.local.",
            "SRV 0 25 53 web.shop.svc.clusterset.local.",
        ],
        &["web.shop.svc.clusterset.local. A 10.0.0.1"],
    ),
    ok(
        "dual.shop.svc.clusterset.local.",
        SRV,
        &["SRV 0 50 443 dual.shop.svc.clusterset.local."],
        &[
            "dual.shop.svc.clusterset.local. A 10.0.0.2",
            "dual.shop.svc.clusterset.local. AAAA fd00::2",
        ],
    ),
    ok(
        "nips.shop.svc.clusterset.local.",
        SRV,
        &["SRV 0 50 6379 nips.shop.svc.clusterset.local."],
        &[
            "nips.shop.svc.clusterset.local. A 10.96.0.5",
            "nips.shop.svc.clusterset.local. A 10.112.0.5",
        ],
    ),
    ok(
        "db.data.svc.clusterset.local.",
        SRV,
        &[
            "SRV 0 33 5432 db-0.east.db.data.svc.clusterset.local.",
            "SRV 0 33 5432 db-1.east.db.data.svc.clusterset.local.",
            "SRV 0 33 5432 db-0.prod.eu.db.data.svc.clusterset.local.",
        ],
        &[
            "db-0.east.db.data.svc.clusterset.local. A 10.1.0.11",
            "db-1.east.db.data.svc.clusterset.local. A 10.1.0.12",
            "db-0.prod.eu.db.data.svc.clusterset.local. A 10.3.0.21",
        ],
    ),
    ok(
        "anon.data.svc.clusterset.local.",
        SRV,
        &["SRV 0 100 9100 10-2-0-31.west.anon.data.svc.clusterset.local."],
        &["10-2-0-31.west.anon.data.svc.clusterset.local. A 10.2.0.31"],
    ),
    // _port._proto: named ports matching name and protocol.
    ok(
        "_http._tcp.web.shop.svc.clusterset.local.",
        SRV,
        &["SRV 0 100 80 web.shop.svc.clusterset.local."],
        &["web.shop.svc.clusterset.local. A 10.0.0.1"],
    ),
    ok(
        "_dns._udp.web.shop.svc.clusterset.local.",
        SRV,
        &["SRV 0 100 53 web.shop.svc.clusterset.local."],
        &["web.shop.svc.clusterset.local. A 10.0.0.1"],
    ),
    ok(
        "_dns._tcp.web.shop.svc.clusterset.local.",
        SRV,
        &["SRV 0 100 53 web.shop.svc.clusterset.local."],
        &["web.shop.svc.clusterset.local. A 10.0.0.1"],
    ),
    ok(
        "_postgres._tcp.db.data.svc.clusterset.local.",
        SRV,
        &[
            "SRV 0 33 5432 db-0.east.db.data.svc.clusterset.local.",
            "SRV 0 33 5432 db-1.east.db.data.svc.clusterset.local.",
            "SRV 0 33 5432 db-0.prod.eu.db.data.svc.clusterset.local.",
        ],
        &[
            "db-0.east.db.data.svc.clusterset.local. A 10.1.0.11",
            "db-1.east.db.data.svc.clusterset.local. A 10.1.0.12",
            "db-0.prod.eu.db.data.svc.clusterset.local. A 10.3.0.21",
        ],
    ),
    nx("_http._udp.web.shop.svc.clusterset.local.", SRV),
    nx("_8080._tcp.web.shop.svc.clusterset.local.", SRV),
    // `_tcp.<svc>` is an empty non-terminal (`_http._tcp.<svc>` exists below it): NODATA.
    nodata("_tcp.web.shop.svc.clusterset.local.", SRV),
    nodata("_http._tcp.web.shop.svc.clusterset.local.", A),
    nodata("_http._tcp.web.shop.svc.clusterset.local.", AAAA),
    // <host>.<cluster>.<svc>: one- and two-label cluster ids (beyond), headless and ClusterSetIP.
    ok(
        "db-0.east.db.data.svc.clusterset.local.",
        A,
        &["A 10.1.0.11"],
        &[],
    ),
    ok(
        "db-0.prod.eu.db.data.svc.clusterset.local.",
        A,
        &["A 10.3.0.21"],
        &[],
    ),
    nodata("db-0.prod.eu.db.data.svc.clusterset.local.", AAAA),
    ok(
        "db-0.prod.eu.db.data.svc.clusterset.local.",
        SRV,
        &["SRV 0 100 5432 db-0.prod.eu.db.data.svc.clusterset.local."],
        &["db-0.prod.eu.db.data.svc.clusterset.local. A 10.3.0.21"],
    ),
    ok(
        "10-2-0-31.west.anon.data.svc.clusterset.local.",
        A,
        &["A 10.2.0.31"],
        &[],
    ),
    ok(
        "fd00-2--0.west.anon.data.svc.clusterset.local.",
        AAAA,
        &["AAAA fd00:2::"],
        &[],
    ),
    nodata("fd00-2--0.west.anon.data.svc.clusterset.local.", SRV),
    ok(
        "web-0.east.web.shop.svc.clusterset.local.",
        A,
        &["A 10.1.0.1"],
        &[],
    ),
    ok(
        "web-0.east.web.shop.svc.clusterset.local.",
        SRV,
        &["SRV 0 100 80 web-0.east.web.shop.svc.clusterset.local."],
        &["web-0.east.web.shop.svc.clusterset.local. A 10.1.0.1"],
    ),
    ok(
        "10-96-0-5.east.nips.shop.svc.clusterset.local.",
        A,
        &["A 10.96.0.5"],
        &[],
    ),
    nx("db-2.east.db.data.svc.clusterset.local.", A),
    nx("10-9-0-1.db.data.svc.clusterset.local.", A),
    // Empty non-terminals below a service (<cluster>.<svc>, both names of a two-label cluster
    // id, _<proto>.<svc>): NODATA, since names exist below them (RFC 8020).
    nodata("east.db.data.svc.clusterset.local.", A),
    nodata("east.db.data.svc.clusterset.local.", SRV),
    nodata("prod.eu.db.data.svc.clusterset.local.", A),
    nodata("eu.db.data.svc.clusterset.local.", A),
    nodata("eu.db.data.svc.clusterset.local.", AAAA),
    nodata("east.web.shop.svc.clusterset.local.", A),
    nodata("_tcp.db.data.svc.clusterset.local.", SRV),
    nodata("_tcp.db.data.svc.clusterset.local.", A),
    // Anything else below a service, and those with nothing below: NXDOMAIN.
    nx("west.db.data.svc.clusterset.local.", A),
    nx("x.eu.db.data.svc.clusterset.local.", A),
    nx("_udp.db.data.svc.clusterset.local.", SRV),
    nx("x._tcp.db.data.svc.clusterset.local.", SRV),
    nx("x.web.shop.svc.clusterset.local.", SRV),
    nx("missing.shop.svc.clusterset.local.", A),
    // Other types at existing names: NODATA (ANY too: no amplification).
    nodata("web.shop.svc.clusterset.local.", TXT),
    nodata("web.shop.svc.clusterset.local.", MX),
    nodata("web.shop.svc.clusterset.local.", CNAME),
    nodata("web.shop.svc.clusterset.local.", PTR),
    nodata("web.shop.svc.clusterset.local.", NS),
    nodata("web.shop.svc.clusterset.local.", SOA),
    nodata("web.shop.svc.clusterset.local.", ANY),
    nodata("db.data.svc.clusterset.local.", ANY),
    // Empty non-terminals and the apex.
    nodata("shop.svc.clusterset.local.", A),
    nodata("lonely.svc.clusterset.local.", SRV),
    nx("nosuchns.svc.clusterset.local.", A),
    nodata("svc.clusterset.local.", A),
    nodata("clusterset.local.", A),
    nodata("clusterset.local.", TXT),
    nodata("clusterset.local.", ANY),
    ok(
        "clusterset.local.",
        NS,
        &["NS ns.dns.clusterset.local."],
        &[],
    ),
    nodata("dns.clusterset.local.", A),
    nodata("ns.dns.clusterset.local.", A),
    nx("other.clusterset.local.", A),
    // Outside every served zone.
    Case {
        name: "example.com.",
        qtype: A,
        rcode: Refused,
        answer: &[],
        additional: &[],
    },
    Case {
        name: "local.",
        qtype: SOA,
        rcode: Refused,
        answer: &[],
        additional: &[],
    },
];

/// `TYPE rdata`, lower-cased: names in rdata may be compressed against the mixed-case question.
pub(crate) fn rr(r: &Record) -> String {
    format!("{} {}", r.record_type(), r.data)
        .to_lowercase()
        .replacen(
            &r.record_type().to_string().to_lowercase(),
            &r.record_type().to_string(),
            1,
        )
}

fn check_soa(auth: &[Record], what: &str) {
    assert_eq!(auth.len(), 1, "{what}: one SOA in authority, got {auth:?}");
    let RData::SOA(soa) = &auth[0].data else {
        panic!("{what}: authority is not a SOA: {auth:?}")
    };
    assert_eq!(
        auth[0].name.to_lowercase().to_string(),
        format!("{Z}."),
        "{what}"
    );
    assert_eq!(auth[0].ttl, 5, "{what}: SOA TTL min(ttl, 300)");
    assert_eq!(
        soa.mname.to_lowercase().to_string(),
        format!("ns.dns.{Z}."),
        "{what}"
    );
    assert_eq!(
        soa.rname.to_lowercase().to_string(),
        format!("hostmaster.{Z}."),
        "{what}"
    );
    assert_eq!(
        (soa.refresh, soa.retry, soa.expire, soa.minimum),
        (7200, 1800, 86400, 5),
        "{what}"
    );
}

/// Asks every case over UDP and TCP, with a mixed-case name; what went wrong, one line a case.
async fn failures(dns: std::net::SocketAddr, cases: &[Case]) -> Vec<String> {
    let mut failures = Vec::new();
    for case in cases {
        for proto in [Proto::Udp, Proto::Tcp] {
            let sent = mixed_case(case.name);
            let what = format!("{sent} {:?} over {proto:?}", case.qtype);
            let resp = exchange(dns, proto, &query(&sent, case.qtype, Some(1232))).await;
            let mut problems = Vec::new();
            if resp.metadata.response_code != case.rcode {
                problems.push(format!(
                    "rcode {:?}, want {:?}",
                    resp.metadata.response_code, case.rcode
                ));
            }
            let in_zone = case.rcode != Refused;
            if resp.metadata.authoritative != in_zone {
                problems.push(format!("AA {}", resp.metadata.authoritative));
            }
            if resp.metadata.recursion_available || resp.metadata.truncation {
                problems.push("RA or TC set".into());
            }
            if !resp.metadata.recursion_desired {
                problems.push("RD not copied".into());
            }
            // The question is echoed exactly as sent.
            if resp.queries.len() != 1 || resp.queries[0].name().to_string() != sent {
                problems.push(format!("question {:?}", resp.queries));
            }
            if resp.edns.as_ref().map(|e| e.max_payload()) != Some(1232) {
                problems.push(format!("OPT {:?}", resp.edns));
            }
            let mut got: Vec<String> = resp.answers.iter().map(rr).collect();
            let mut want: Vec<String> = case.answer.iter().map(|s| s.to_string()).collect();
            got.sort();
            want.sort();
            if got != want {
                problems.push(format!("answer {got:?}, want {want:?}"));
            }
            for r in &resp.answers {
                // Owners keep the client's spelling (0x20).
                if r.name.to_string() != sent {
                    problems.push(format!("owner {} is not {sent}", r.name));
                }
                let ttl = if r.record_type() == TXT { 28800 } else { 5 };
                if r.ttl != ttl {
                    problems.push(format!("TTL {} of {}, want {ttl}", r.ttl, rr(r)));
                }
            }
            let mut got: Vec<String> = resp
                .additionals
                .iter()
                .map(|r| format!("{} {}", r.name.to_lowercase(), rr(r)))
                .collect();
            let mut want: Vec<String> = case.additional.iter().map(|s| s.to_string()).collect();
            got.sort();
            want.sort();
            if got != want {
                problems.push(format!("additional {got:?}, want {want:?}"));
            }
            let negative = case.answer.is_empty() && in_zone;
            if negative {
                check_soa(&resp.authorities, &what);
            } else if !resp.authorities.is_empty() {
                problems.push(format!("authority {:?}", resp.authorities));
            }
            if !problems.is_empty() {
                failures.push(format!("{what}: {}", problems.join("; ")));
            }
        }
    }
    failures
}

/// Serves `fixture` and asks every case over UDP and TCP; fails naming each wrong answer.
async fn assert_cases(fixture_name: &str, cases: &[Case]) {
    let server = start(&fixture(fixture_name)).await;
    let failures = failures(server.dns, cases).await;
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len() * 2,
        failures.join("\n")
    );
}

#[tokio::test]
async fn every_behaviour_row_over_udp_and_tcp() {
    let _module = common::module(module_path!());
    assert_cases("behaviour.yaml", CASES).await;
}

/// What the implementations users run leave in a cluster (tests/fixtures/implementations.yaml):
/// the mcs-api controller's derived Service and relabelled slices, Cilium's own `spec.ips`
/// without remote slices, its mirrored local slices and its mesh slices (which hold only
/// what the exporting cluster sends); Lighthouse's import without clusterset IPs whose clusters export different ports,
/// and the records it keeps for itself. The derived Services and the records are never served.
const IMPLEMENTATION_CASES: &[Case] = &[
    ok(
        "web.mcsapi.svc.clusterset.local.",
        A,
        &["A 198.19.140.17"],
        &[],
    ),
    ok(
        "_http._tcp.web.mcsapi.svc.clusterset.local.",
        SRV,
        &["SRV 0 100 80 web.mcsapi.svc.clusterset.local."],
        &["web.mcsapi.svc.clusterset.local. A 198.19.140.17"],
    ),
    ok(
        "198-18-64-7.east.web.mcsapi.svc.clusterset.local.",
        A,
        &["A 198.18.64.7"],
        &[],
    ),
    nx("derived-gbn1t3iv2r.mcsapi.svc.clusterset.local.", A),
    ok(
        "api.cilium.svc.clusterset.local.",
        A,
        &["A 198.19.141.9"],
        &[],
    ),
    nodata("api.cilium.svc.clusterset.local.", AAAA),
    ok(
        "_grpc._tcp.api.cilium.svc.clusterset.local.",
        SRV,
        &["SRV 0 100 9090 api.cilium.svc.clusterset.local."],
        &["api.cilium.svc.clusterset.local. A 198.19.141.9"],
    ),
    ok(
        "198-18-65-21.west.api.cilium.svc.clusterset.local.",
        A,
        &["A 198.18.65.21"],
        &[],
    ),
    nx("derived-5u0ql2c1f8.cilium.svc.clusterset.local.", A),
    ok(
        "kv.cilium.svc.clusterset.local.",
        A,
        &["A 198.18.64.31", "A 198.18.65.31"],
        &[],
    ),
    ok(
        "kv.cilium.svc.clusterset.local.",
        SRV,
        &[
            "SRV 0 50 2379 kv-0.east.kv.cilium.svc.clusterset.local.",
            "SRV 0 50 2379 kv-0.west.kv.cilium.svc.clusterset.local.",
        ],
        &[
            "kv-0.east.kv.cilium.svc.clusterset.local. A 198.18.64.31",
            "kv-0.west.kv.cilium.svc.clusterset.local. A 198.18.65.31",
        ],
    ),
    ok(
        "kv-0.west.kv.cilium.svc.clusterset.local.",
        A,
        &["A 198.18.65.31"],
        &[],
    ),
    // Neither ready nor serving in east: Cilium does not send it, so no name.
    nx("kv-1.east.kv.cilium.svc.clusterset.local.", A),
    // Lighthouse 0.15, clusterset IPs off: every cluster's Service address.
    ok(
        "web.lighthouse.svc.clusterset.local.",
        A,
        &["A 198.18.66.10", "A 198.18.67.10"],
        &[],
    ),
    // A port every cluster exports keeps the service's name ...
    ok(
        "_http._tcp.web.lighthouse.svc.clusterset.local.",
        SRV,
        &["SRV 0 50 80 web.lighthouse.svc.clusterset.local."],
        &[
            "web.lighthouse.svc.clusterset.local. A 198.18.66.10",
            "web.lighthouse.svc.clusterset.local. A 198.18.67.10",
        ],
    ),
    // ... one only east exports leads only to east.
    ok(
        "_metrics._tcp.web.lighthouse.svc.clusterset.local.",
        SRV,
        &["SRV 0 100 9090 198-18-66-10.east.web.lighthouse.svc.clusterset.local."],
        &["198-18-66-10.east.web.lighthouse.svc.clusterset.local. A 198.18.66.10"],
    ),
    // Its own records, 0.15's and before: not services.
    nx(
        "web-lighthouse-west.submariner-operator.svc.clusterset.local.",
        A,
    ),
    nx(
        "web-lighthouse-east.submariner-operator.svc.clusterset.local.",
        A,
    ),
    // Lighthouse with Globalnet, in a server that does not know its own cluster: every
    // cluster's slice as written.
    ok(
        "db.lighthouse.svc.clusterset.local.",
        A,
        &["A 198.19.200.5", "A 198.19.201.5"],
        &[],
    ),
    ok(
        "db-0.west.db.lighthouse.svc.clusterset.local.",
        A,
        &["A 198.19.200.5"],
        &[],
    ),
];

#[tokio::test]
async fn every_implementations_shape_answers_over_udp_and_tcp() {
    let _module = common::module(module_path!());
    assert_cases("implementations.yaml", IMPLEMENTATION_CASES).await;
}

/// Lighthouse with Globalnet, answered in its own cluster west: west's pods by the addresses
/// west's own slice gives them (its global ones are not routable in west), east's by their
/// global ones.
const GLOBALNET_WEST_CASES: &[Case] = &[
    ok(
        "db.lighthouse.svc.clusterset.local.",
        A,
        &["A 198.18.68.5", "A 198.19.201.5"],
        &[],
    ),
    ok(
        "db-0.west.db.lighthouse.svc.clusterset.local.",
        A,
        &["A 198.18.68.5"],
        &[],
    ),
    ok(
        "db-0.east.db.lighthouse.svc.clusterset.local.",
        A,
        &["A 198.19.201.5"],
        &[],
    ),
    // Not ready in west's own slice: not served.
    nx("db-1.west.db.lighthouse.svc.clusterset.local.", A),
    ok(
        "_sql._tcp.db.lighthouse.svc.clusterset.local.",
        SRV,
        &[
            "SRV 0 50 5432 db-0.east.db.lighthouse.svc.clusterset.local.",
            "SRV 0 50 5432 db-0.west.db.lighthouse.svc.clusterset.local.",
        ],
        &[
            "db-0.east.db.lighthouse.svc.clusterset.local. A 198.19.201.5",
            "db-0.west.db.lighthouse.svc.clusterset.local. A 198.18.68.5",
        ],
    ),
];

#[tokio::test]
async fn lighthouse_globalnet_is_answered_in_its_own_cluster_from_that_clusters_slices() {
    let _module = common::module(module_path!());
    let server = common::start_with(&fixture("implementations.yaml"), |cfg| {
        cfg.source.selection.cluster_id = Some("west".into());
    })
    .await;
    let failures = failures(server.dns, GLOBALNET_WEST_CASES).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The UDP fast path and the TCP path must answer alike to the byte, over every row (none of
/// them needs truncation at 1232 bytes).
#[tokio::test]
async fn udp_fast_path_and_tcp_answer_byte_for_byte_alike() {
    let _module = common::module(module_path!());
    let server = start(&fixture("behaviour.yaml")).await;
    for case in CASES {
        for edns in [None, Some(1232)] {
            let q = query(&mixed_case(case.name), case.qtype, edns);
            let wait = std::time::Duration::from_secs(3);
            let udp = common::exchange_raw(server.dns, Proto::Udp, &q, wait)
                .await
                .expect("UDP answer");
            let tcp = common::exchange_raw(server.dns, Proto::Tcp, &q, wait)
                .await
                .expect("TCP answer");
            assert_eq!(
                udp, tcp,
                "{} {:?} with EDNS {edns:?}",
                case.name, case.qtype
            );
        }
    }
}
