//! The contract's "Locality" section (docs/dns-behaviour.md): the server's own cluster id from
//! `--cluster-id` or the ClusterProperty `cluster.clusterset.k8s.io`, and the answers built from
//! endpoints it orders and filters, over UDP and TCP with mixed-case names, answers compared in
//! order (the own cluster's first is the point), on tests/fixtures/locality.yaml.

use std::time::Duration;

use crate::common;

use common::{Proto, exchange, fixture, metric, mixed_case, query, start, start_with};
use hickory_proto::rr::RecordType;

use RecordType::{A, AAAA, SRV};

// A case is a behaviour row (`ok`: NOERROR; no answer records: NODATA with the SOA), whose
// answer records are compared here in order.
use crate::behaviour::{Case, ok as case, rr};

/// What went wrong with each case over UDP and TCP, one line each.
async fn failures(dns: std::net::SocketAddr, cases: &[Case]) -> Vec<String> {
    let mut out = Vec::new();
    for c in cases {
        for proto in [Proto::Udp, Proto::Tcp] {
            let sent = mixed_case(c.name);
            let resp = exchange(dns, proto, &query(&sent, c.qtype, Some(1232))).await;
            let mut problems = Vec::new();
            if resp.metadata.response_code != c.rcode {
                problems.push(format!(
                    "rcode {:?}, want {:?}",
                    resp.metadata.response_code, c.rcode
                ));
            }
            let got: Vec<String> = resp.answers.iter().map(rr).collect();
            if got != c.answer {
                problems.push(format!("answer {got:?}, want {:?} in this order", c.answer));
            }
            let mut got: Vec<String> = resp
                .additionals
                .iter()
                .map(|r| format!("{} {}", r.name.to_lowercase(), rr(r)))
                .collect();
            let mut want: Vec<String> = c.additional.iter().map(|s| s.to_string()).collect();
            got.sort();
            want.sort();
            if got != want {
                problems.push(format!("additional {got:?}, want {want:?}"));
            }
            if c.answer.is_empty() && resp.authorities.len() != 1 {
                problems.push(format!("NODATA without one SOA: {:?}", resp.authorities));
            }
            if !problems.is_empty() {
                out.push(format!(
                    "{sent} {:?} over {proto:?}: {}",
                    c.qtype,
                    problems.join("; ")
                ));
            }
        }
    }
    out
}

async fn check(dns: std::net::SocketAddr, what: &str, cases: &[Case]) {
    let f = failures(dns, cases).await;
    assert!(
        f.is_empty(),
        "{what}: {} of {} failed:\n{}",
        f.len(),
        cases.len() * 2,
        f.join("\n")
    );
}

/// The own cluster is west (the fixture's ClusterProperty, `West`): every cell of the table.
const WEST: &[Case] = &[
    // Neither field: every ready endpoint, the own cluster's first; SRV priority 0, own first.
    case(
        "any.loc.svc.clusterset.local.",
        A,
        &["A 10.20.2.1", "A 10.20.2.2", "A 10.20.1.1", "A 10.20.3.1"],
        &[],
    ),
    case(
        "any.loc.svc.clusterset.local.",
        SRV,
        &[
            "SRV 0 25 80 w-0.west.any.loc.svc.clusterset.local.",
            "SRV 0 25 80 w-1.west.any.loc.svc.clusterset.local.",
            "SRV 0 25 80 e-0.east.any.loc.svc.clusterset.local.",
            "SRV 0 25 80 p-0.prod.eu.any.loc.svc.clusterset.local.",
        ],
        &[
            "w-0.west.any.loc.svc.clusterset.local. A 10.20.2.1",
            "w-1.west.any.loc.svc.clusterset.local. A 10.20.2.2",
            "e-0.east.any.loc.svc.clusterset.local. A 10.20.1.1",
            "p-0.prod.eu.any.loc.svc.clusterset.local. A 10.20.3.1",
        ],
    ),
    // Prefer*: the own cluster's addresses; SRV every target, the others at priority 1, and
    // the weight over every record the answer holds.
    case(
        "prefer.loc.svc.clusterset.local.",
        A,
        &["A 10.21.2.1", "A 10.21.2.2"],
        &[],
    ),
    case(
        "_http._tcp.prefer.loc.svc.clusterset.local.",
        SRV,
        &[
            "SRV 0 33 80 w-0.west.prefer.loc.svc.clusterset.local.",
            "SRV 0 33 80 w-1.west.prefer.loc.svc.clusterset.local.",
            "SRV 1 33 80 e-0.east.prefer.loc.svc.clusterset.local.",
        ],
        &[
            "w-0.west.prefer.loc.svc.clusterset.local. A 10.21.2.1",
            "w-1.west.prefer.loc.svc.clusterset.local. A 10.21.2.2",
            "e-0.east.prefer.loc.svc.clusterset.local. A 10.21.1.1",
        ],
    ),
    // Prefer* where the own cluster has none: every cluster's (none of them at priority 0).
    case(
        "prefer-none.loc.svc.clusterset.local.",
        A,
        &["A 10.22.1.1", "A 10.22.1.2"],
        &[],
    ),
    case(
        "prefer-none.loc.svc.clusterset.local.",
        SRV,
        &[
            "SRV 1 50 80 e-0.east.prefer-none.loc.svc.clusterset.local.",
            "SRV 1 50 80 e-1.east.prefer-none.loc.svc.clusterset.local.",
        ],
        &[
            "e-0.east.prefer-none.loc.svc.clusterset.local. A 10.22.1.1",
            "e-1.east.prefer-none.loc.svc.clusterset.local. A 10.22.1.2",
        ],
    ),
    // Local: only the own cluster's, weights over those.
    case(
        "local.loc.svc.clusterset.local.",
        A,
        &["A 10.23.2.1", "A 10.23.2.2"],
        &[],
    ),
    case(
        "local.loc.svc.clusterset.local.",
        SRV,
        &[
            "SRV 0 50 80 w-0.west.local.loc.svc.clusterset.local.",
            "SRV 0 50 80 w-1.west.local.loc.svc.clusterset.local.",
        ],
        &[
            "w-0.west.local.loc.svc.clusterset.local. A 10.23.2.1",
            "w-1.west.local.loc.svc.clusterset.local. A 10.23.2.2",
        ],
    ),
    // Local wins over trafficDistribution.
    case("both.loc.svc.clusterset.local.", A, &["A 10.25.2.1"], &[]),
    // Local with nothing in the own cluster: NODATA, the names below still answer.
    case("local-none.loc.svc.clusterset.local.", A, &[], &[]),
    case("local-none.loc.svc.clusterset.local.", SRV, &[], &[]),
    case(
        "_http._tcp.local-none.loc.svc.clusterset.local.",
        SRV,
        &[],
        &[],
    ),
    case(
        "e-0.east.local-none.loc.svc.clusterset.local.",
        A,
        &["A 10.24.1.1"],
        &[],
    ),
    // A <host>.<cluster> name gets that cluster, whatever the import asks.
    case(
        "e-0.east.local.loc.svc.clusterset.local.",
        A,
        &["A 10.23.1.1"],
        &[],
    ),
    // ClusterSetIP without ips, PreferSameZone, the own cluster with only IPv6 endpoints: the
    // queried family decides (A: every cluster's, there being no own one; AAAA: the own).
    case("nips.loc.svc.clusterset.local.", A, &["A 10.26.1.1"], &[]),
    case(
        "nips.loc.svc.clusterset.local.",
        AAAA,
        &["AAAA fd00:26:2::1"],
        &[],
    ),
    case(
        "nips.loc.svc.clusterset.local.",
        SRV,
        &["SRV 0 50 80 nips.loc.svc.clusterset.local."],
        &[
            "nips.loc.svc.clusterset.local. A 10.26.1.1",
            "nips.loc.svc.clusterset.local. AAAA fd00:26:2::1",
        ],
    ),
    // ClusterSetIP without ips, Local: its one SRV target is the service name, whose
    // addresses are the own cluster's; SRV and glue follow them.
    case(
        "nips-local.loc.svc.clusterset.local.",
        A,
        &["A 10.29.2.1"],
        &[],
    ),
    case(
        "_http._tcp.nips-local.loc.svc.clusterset.local.",
        SRV,
        &["SRV 0 100 80 nips-local.loc.svc.clusterset.local."],
        &["nips-local.loc.svc.clusterset.local. A 10.29.2.1"],
    ),
    // Answers from spec.ips are never chosen.
    case("vip.loc.svc.clusterset.local.", A, &["A 10.27.0.1"], &[]),
    case(
        "absent-vip.loc.svc.clusterset.local.",
        A,
        &["A 10.28.0.1"],
        &[],
    ),
];

/// Without an own cluster id nothing changes: slice order (by name), priority 0, everything.
const NO_OWN: &[Case] = &[
    case(
        "any.loc.svc.clusterset.local.",
        A,
        &["A 10.20.1.1", "A 10.20.3.1", "A 10.20.2.1", "A 10.20.2.2"],
        &[],
    ),
    case(
        "_http._tcp.prefer.loc.svc.clusterset.local.",
        SRV,
        &[
            "SRV 0 33 80 e-0.east.prefer.loc.svc.clusterset.local.",
            "SRV 0 33 80 w-0.west.prefer.loc.svc.clusterset.local.",
            "SRV 0 33 80 w-1.west.prefer.loc.svc.clusterset.local.",
        ],
        &[
            "w-0.west.prefer.loc.svc.clusterset.local. A 10.21.2.1",
            "w-1.west.prefer.loc.svc.clusterset.local. A 10.21.2.2",
            "e-0.east.prefer.loc.svc.clusterset.local. A 10.21.1.1",
        ],
    ),
    case(
        "local.loc.svc.clusterset.local.",
        A,
        &["A 10.23.1.1", "A 10.23.2.1", "A 10.23.2.2"],
        &[],
    ),
    case(
        "local-none.loc.svc.clusterset.local.",
        A,
        &["A 10.24.1.1"],
        &[],
    ),
    case(
        "nips.loc.svc.clusterset.local.",
        AAAA,
        &["AAAA fd00:26:1::1", "AAAA fd00:26:2::1"],
        &[],
    ),
    case(
        "_http._tcp.nips-local.loc.svc.clusterset.local.",
        SRV,
        &["SRV 0 50 80 nips-local.loc.svc.clusterset.local."],
        &[
            "nips-local.loc.svc.clusterset.local. A 10.29.1.1",
            "nips-local.loc.svc.clusterset.local. A 10.29.2.1",
        ],
    ),
];

/// The own cluster is east (`--cluster-id East`, winning over the property's west).
const EAST: &[Case] = &[
    case(
        "any.loc.svc.clusterset.local.",
        A,
        &["A 10.20.1.1", "A 10.20.3.1", "A 10.20.2.1", "A 10.20.2.2"],
        &[],
    ),
    case("local.loc.svc.clusterset.local.", A, &["A 10.23.1.1"], &[]),
    case(
        "local-none.loc.svc.clusterset.local.",
        A,
        &["A 10.24.1.1"],
        &[],
    ),
    case(
        "prefer.loc.svc.clusterset.local.",
        SRV,
        &[
            "SRV 0 33 80 e-0.east.prefer.loc.svc.clusterset.local.",
            "SRV 1 33 80 w-0.west.prefer.loc.svc.clusterset.local.",
            "SRV 1 33 80 w-1.west.prefer.loc.svc.clusterset.local.",
        ],
        &[
            "w-0.west.prefer.loc.svc.clusterset.local. A 10.21.2.1",
            "w-1.west.prefer.loc.svc.clusterset.local. A 10.21.2.2",
            "e-0.east.prefer.loc.svc.clusterset.local. A 10.21.1.1",
        ],
    ),
    // east has IPv4 and IPv6 endpoints of nips: its own, each family.
    case(
        "nips.loc.svc.clusterset.local.",
        AAAA,
        &["AAAA fd00:26:1::1"],
        &[],
    ),
];

/// The own cluster is the two-label prod.eu.
const PROD_EU: &[Case] = &[
    case(
        "any.loc.svc.clusterset.local.",
        A,
        &["A 10.20.3.1", "A 10.20.1.1", "A 10.20.2.1", "A 10.20.2.2"],
        &[],
    ),
    case("local.loc.svc.clusterset.local.", A, &[], &[]),
    case(
        "prefer.loc.svc.clusterset.local.",
        A,
        &["A 10.21.1.1", "A 10.21.2.1", "A 10.21.2.2"],
        &[],
    ),
];

const INFO_WEST: &str = "clusterset_dns_cluster_info{cluster_id=\"west\"}";

#[tokio::test]
async fn the_own_cluster_from_the_clusterproperty_orders_and_filters_endpoint_answers() {
    let _module = common::module(module_path!());
    let server = start(&fixture("locality.yaml")).await;
    check(server.dns, "own cluster west (ClusterProperty)", WEST).await;
    assert_eq!(metric(server.admin, INFO_WEST).await, 1.0);
    // An import whose implementation publishes no slices, and that has none: counted once.
    assert_eq!(
        metric(
            server.admin,
            "clusterset_dns_skipped_objects_total{kind=\"ServiceImport\",reason=\"no_endpoint_slices\"}"
        )
        .await,
        1.0
    );
}

#[tokio::test]
async fn without_an_own_cluster_nothing_changes() {
    let _module = common::module(module_path!());
    let objects = fixture("locality.yaml").replacen(
        "metadata: {name: cluster.clusterset.k8s.io}",
        "metadata: {name: not-the-cluster-id}",
        1,
    );
    let server = start(&objects).await;
    check(server.dns, "no own cluster", NO_OWN).await;
    let (_, body) = common::http_get(server.admin, "/metrics").await.unwrap();
    assert!(
        !body.contains("clusterset_dns_cluster_info{"),
        "no cluster_info series without an own cluster"
    );
}

#[tokio::test]
async fn the_flag_wins_over_the_clusterproperty_and_two_label_ids_work() {
    let _module = common::module(module_path!());
    let with_flag = |id: &'static str| {
        move |c: &mut clusterset_dns::Config| c.source.selection.cluster_id = Some(id.into())
    };
    let server = start_with(&fixture("locality.yaml"), with_flag("east")).await;
    check(
        server.dns,
        "--cluster-id east over the property's west",
        EAST,
    )
    .await;
    assert_eq!(
        metric(
            server.admin,
            "clusterset_dns_cluster_info{cluster_id=\"east\"}"
        )
        .await,
        1.0
    );
    assert_eq!(metric(server.admin, INFO_WEST).await, 0.0);
    drop(server);
    let server = start_with(&fixture("locality.yaml"), with_flag("prod.eu")).await;
    check(server.dns, "--cluster-id prod.eu", PROD_EU).await;
}

/// A bad value is skipped like any bad object, and the server then has no own cluster; a file
/// edit changes the id without a restart, and removing the property turns locality off.
#[tokio::test]
async fn the_clusterproperty_changes_at_runtime_and_a_bad_one_is_skipped() {
    let _module = common::module(module_path!());
    let server = start(&fixture("locality.yaml")).await;
    check(server.dns, "west at start", WEST).await;
    let edit = |from: &str, to: &str| {
        let text = fixture("locality.yaml").replacen(from, to, 1);
        std::fs::write(&server.file, text).unwrap();
    };
    // To east: every answer follows.
    edit("spec: {value: West}", "spec: {value: east}");
    assert!(
        common::eventually(10, || async { failures(server.dns, EAST).await.is_empty() }).await,
        "east after the edit: {:?}",
        failures(server.dns, EAST).await
    );
    assert_eq!(metric(server.admin, INFO_WEST).await, 0.0);
    // A value that is not a cluster id: skipped and counted, and no own cluster.
    edit("spec: {value: West}", "spec: {value: 'not.a.cluster.id'}");
    let bad =
        "clusterset_dns_skipped_objects_total{kind=\"ClusterProperty\",reason=\"bad_cluster\"}";
    assert!(
        common::eventually(10, || async { metric(server.admin, bad).await >= 1.0 }).await,
        "the bad ClusterProperty is counted"
    );
    assert!(
        common::eventually(10, || async {
            failures(server.dns, NO_OWN).await.is_empty()
        })
        .await,
        "no own cluster with a bad value: {:?}",
        failures(server.dns, NO_OWN).await
    );
    // Back to west, then the property removed: locality off again.
    edit("spec: {value: West}", "spec: {value: West}");
    assert!(common::eventually(10, || async { failures(server.dns, WEST).await.is_empty() }).await);
    edit(
        "kind: ClusterProperty\nmetadata: {name: cluster.clusterset.k8s.io}",
        "kind: ClusterProperty\nmetadata: {name: gone.example}",
    );
    assert!(
        common::eventually(10, || async {
            failures(server.dns, NO_OWN).await.is_empty()
        })
        .await,
        "no own cluster once the property is gone: {:?}",
        failures(server.dns, NO_OWN).await
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(metric(server.admin, INFO_WEST).await, 0.0);
}

/// Partial UDP answers keep the first records: the own cluster's.
#[tokio::test]
async fn truncated_udp_answers_keep_the_own_clusters_records() {
    let _module = common::module(module_path!());
    // 60 endpoints in east, then 3 in west (the own cluster): by slice name east comes first.
    let mut objects = String::from(
        "apiVersion: about.k8s.io/v1alpha1\nkind: ClusterProperty\nmetadata: {name: cluster.clusterset.k8s.io}\nspec: {value: west}\n---\n\
         apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: big, namespace: loc}\nspec: {type: Headless, ports: [{name: http, port: 80}]}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: big-a-east, namespace: loc, labels: {multicluster.kubernetes.io/service-name: big, multicluster.kubernetes.io/source-cluster: east}}\naddressType: IPv4\nports: [{name: http, port: 80}]\nendpoints:\n",
    );
    for i in 1..=60 {
        objects.push_str(&format!(
            "- addresses: ['10.30.1.{i}']\n  hostname: e-{i}\n"
        ));
    }
    objects.push_str("---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: big-b-west, namespace: loc, labels: {multicluster.kubernetes.io/service-name: big, multicluster.kubernetes.io/source-cluster: west}}\naddressType: IPv4\nports: [{name: http, port: 80}]\nendpoints:\n");
    for i in 1..=3 {
        objects.push_str(&format!(
            "- addresses: ['10.30.2.{i}']\n  hostname: w-{i}\n"
        ));
    }
    let server = start(&objects).await;
    // SRV without EDNS: 512 octets hold a few records; TC is set and the first are west's.
    let resp = exchange(
        server.dns,
        Proto::Udp,
        &query("_http._tcp.big.loc.svc.clusterset.local.", SRV, None),
    )
    .await;
    assert!(resp.metadata.truncation, "a partial answer");
    let targets: Vec<String> = resp.answers.iter().map(rr).collect();
    assert!(targets.len() >= 3, "{targets:?}");
    for (i, t) in targets.iter().take(3).enumerate() {
        assert!(
            t.ends_with(&format!(" w-{}.west.big.loc.svc.clusterset.local.", i + 1)),
            "{targets:?}"
        );
    }
    let a = exchange(
        server.dns,
        Proto::Udp,
        &query("big.loc.svc.clusterset.local.", A, None),
    )
    .await;
    let first: Vec<String> = a.answers.iter().take(3).map(rr).collect();
    assert_eq!(first, ["A 10.30.2.1", "A 10.30.2.2", "A 10.30.2.3"]);
}

/// `clusterset-dns zone` prints the answers as served: the priorities the own cluster gives,
/// and under Local only the own cluster's records at the service name.
#[test]
fn the_zone_dump_shows_the_answers_as_served() {
    let _module = common::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("objects.yaml");
    std::fs::write(&file, fixture("locality.yaml")).unwrap();
    let (ok, text, err) = common::zone_command(&["--file", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let lines = common::master_records(&text);
    for want in [
        "_http._tcp.prefer.loc.svc.clusterset.local. 5 IN SRV 0 33 80 w-0.west.prefer.loc.svc.clusterset.local.",
        "_http._tcp.prefer.loc.svc.clusterset.local. 5 IN SRV 1 33 80 e-0.east.prefer.loc.svc.clusterset.local.",
        "local.loc.svc.clusterset.local. 5 IN A 10.23.2.1",
    ] {
        assert!(lines.iter().any(|l| l == want), "missing {want}\n{text}");
    }
    // Local: east's address is not at the service name, only at its own name.
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("local.loc.svc.clusterset.local.") && l.ends_with("10.23.1.1")),
        "{text}"
    );
    assert!(lines.iter().any(
        |l| l.starts_with("e-0.east.local.loc.svc.clusterset.local.") && l.ends_with("10.23.1.1")
    ));
}
