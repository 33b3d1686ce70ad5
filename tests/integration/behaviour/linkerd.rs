//! The Linkerd rows of docs/dns-behaviour.md (`--source linkerd`), run as the other rows are.

#[allow(unused_imports)]
use super::*;

/// The Linkerd rows of docs/dns-behaviour.md, on examples/linkerd.yaml (two Links, east and
/// west) with `--source mcs,linkerd`, plus a ServiceImport and a federated Service that claim
/// the same name, and a federated Service whose annotations name nothing.
const LINKERD_CASES: &[Case] = &[
    // A federated Service: its ClusterIPs by family, SRV from its ports, as an import.
    ok(
        "web.shop.svc.clusterset.local.",
        A,
        &["A 198.19.10.10"],
        &[],
    ),
    ok(
        "web.shop.svc.clusterset.local.",
        AAAA,
        &["AAAA fd00:10::10"],
        &[],
    ),
    ok(
        "web.shop.svc.clusterset.local.",
        SRV,
        &[
            "SRV 0 25 80 web.shop.svc.clusterset.local.",
            "SRV 0 25 9090 web.shop.svc.clusterset.local.",
        ],
        &[
            "web.shop.svc.clusterset.local. A 198.19.10.10",
            "web.shop.svc.clusterset.local. AAAA fd00:10::10",
        ],
    ),
    ok(
        "_grpc._tcp.web.shop.svc.clusterset.local.",
        SRV,
        &["SRV 0 50 9090 web.shop.svc.clusterset.local."],
        &[
            "web.shop.svc.clusterset.local. A 198.19.10.10",
            "web.shop.svc.clusterset.local. AAAA fd00:10::10",
        ],
    ),
    nodata("_grpc._tcp.web.shop.svc.clusterset.local.", A),
    nx("_grpc._udp.web.shop.svc.clusterset.local.", SRV),
    // Headless mirrors: every host of every Link; each host by name under its cluster.
    ok(
        "db.data.svc.clusterset.local.",
        A,
        &[
            "A 198.19.20.1",
            "A 198.19.20.2",
            "A 198.19.20.3",
            "A 198.19.20.11",
        ],
        &[],
    ),
    nodata("db.data.svc.clusterset.local.", AAAA),
    ok(
        "db.data.svc.clusterset.local.",
        SRV,
        &[
            "SRV 0 25 5432 db-0.east.db.data.svc.clusterset.local.",
            "SRV 0 25 5432 db-1.east.db.data.svc.clusterset.local.",
            "SRV 0 25 5432 db-2.east.db.data.svc.clusterset.local.",
            "SRV 0 25 5432 db-0.west.db.data.svc.clusterset.local.",
        ],
        &[
            "db-0.east.db.data.svc.clusterset.local. A 198.19.20.1",
            "db-1.east.db.data.svc.clusterset.local. A 198.19.20.2",
            "db-2.east.db.data.svc.clusterset.local. A 198.19.20.3",
            "db-0.west.db.data.svc.clusterset.local. A 198.19.20.11",
        ],
    ),
    ok(
        "db-1.east.db.data.svc.clusterset.local.",
        A,
        &["A 198.19.20.2"],
        &[],
    ),
    ok(
        "db-0.west.db.data.svc.clusterset.local.",
        A,
        &["A 198.19.20.11"],
        &[],
    ),
    ok(
        "db-0.west.db.data.svc.clusterset.local.",
        SRV,
        &["SRV 0 100 5432 db-0.west.db.data.svc.clusterset.local."],
        &["db-0.west.db.data.svc.clusterset.local. A 198.19.20.11"],
    ),
    nodata("east.db.data.svc.clusterset.local.", A),
    nx("db-1.west.db.data.svc.clusterset.local.", A),
    // Mirrors are not answered without --linkerd-mirrors, and object names never become names.
    nx("api.shop.svc.clusterset.local.", A),
    nx("web-federated.shop.svc.clusterset.local.", A),
    nx("web-east.shop.svc.clusterset.local.", A),
    nx("db-0-east.data.svc.clusterset.local.", A),
    nx("db-east.data.svc.clusterset.local.", A),
    // A federated Service that names nothing is skipped.
    nx("lost.shop.svc.clusterset.local.", A),
    // A ServiceImport and a federated Service give cart: the ServiceImport is served.
    ok(
        "cart.shop.svc.clusterset.local.",
        A,
        &["A 198.19.30.1"],
        &[],
    ),
    nodata("cart.shop.svc.clusterset.local.", AAAA),
    nodata("shop.svc.clusterset.local.", A),
    nodata("data.svc.clusterset.local.", A),
];

/// With --linkerd-mirrors: a service with mirrors and no federated Service answers them all.
const LINKERD_MIRROR_CASES: &[Case] = &[
    ok(
        "api.shop.svc.clusterset.local.",
        A,
        &["A 198.19.10.21", "A 198.19.10.22"],
        &[],
    ),
    ok(
        "_http._tcp.api.shop.svc.clusterset.local.",
        SRV,
        &["SRV 0 50 8080 api.shop.svc.clusterset.local."],
        &[
            "api.shop.svc.clusterset.local. A 198.19.10.21",
            "api.shop.svc.clusterset.local. A 198.19.10.22",
        ],
    ),
    // The federated Service still wins over web's mirrors.
    ok(
        "web.shop.svc.clusterset.local.",
        A,
        &["A 198.19.10.10"],
        &[],
    ),
    nx("web-east.shop.svc.clusterset.local.", A),
];

const LINKERD_EXTRA: &str = "
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: cart, namespace: shop}
spec: {type: ClusterSetIP, ips: [198.19.30.1], ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata:
  name: cart-federated
  namespace: shop
  labels: {mirror.linkerd.io/mirrored-service: 'true'}
  annotations: {multicluster.linkerd.io/remote-discovery: cart@east}
spec: {clusterIP: 198.19.30.2, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata:
  name: lost-federated
  namespace: shop
  labels: {mirror.linkerd.io/mirrored-service: 'true'}
  annotations: {multicluster.linkerd.io/remote-discovery: ''}
spec: {clusterIP: 198.19.30.3, ports: [{name: http, port: 80}]}
";

async fn start_linkerd(mirrors: bool) -> common::Server {
    let objects = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/linkerd.yaml"),
    )
    .unwrap()
        + LINKERD_EXTRA;
    common::start_with(&objects, |c| {
        c.source.selection = clusterset_dns::source::Selection {
            mcs: true,
            linkerd: Some(clusterset_dns::source::linkerd::Config {
                mirrors,
                ..Default::default()
            }),
            cluster_id: None,
        };
    })
    .await
}

#[tokio::test]
async fn every_linkerd_row_over_udp_and_tcp() {
    let _module = common::module(module_path!());
    let server = start_linkerd(false).await;
    let mut failed = failures(server.dns, LINKERD_CASES).await;
    let mirrors = start_linkerd(true).await;
    failed.extend(failures(mirrors.dns, LINKERD_MIRROR_CASES).await);
    assert!(
        failed.is_empty(),
        "{} of {} cases failed:\n{}",
        failed.len(),
        (LINKERD_CASES.len() + LINKERD_MIRROR_CASES.len()) * 2,
        failed.join("\n")
    );
    // The conflict and the federated Service that names nothing are counted, once each.
    for (reason, n) in [("conflict", 1.0), ("no_members", 1.0)] {
        let series =
            format!("clusterset_dns_skipped_objects_total{{kind=\"Service\",reason=\"{reason}\"}}");
        assert_eq!(common::metric(server.admin, &series).await, n, "{series}");
    }
}
