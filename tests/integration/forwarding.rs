//! Forwarding through a real CoreDNS (built by tests/coredns/setup.sh) running exactly the
//! clusterset.local block of Corefile.example in front of the real binary, checked with `dig`:
//! positive answers, NXDOMAIN, NODATA, SRV with glue, truncation then TCP, and a negative
//! answer cached by CoreDNS for the time our SOA says.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::coredns::CoreDns;
use common::{Running, dig, http_get, metric_in, spawn_binary};

/// Runs CoreDNS with Corefile.example's block, its listen port and upstream address changed to
/// the test's loopback ones (and bound to loopback only). The quotes stay: CoreDNS reads the
/// address as the block ships it.
fn start_coredns(upstream: SocketAddr) -> CoreDns {
    common::coredns::with_clusterset_block(&format!("forward . \"{upstream}\""))
}

/// The example data plus a headless service whose A answer (40 addresses) needs more than 512
/// bytes.
fn objects(dir: &Path) -> PathBuf {
    let mut yaml = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/clusterset.yaml"),
    )
    .unwrap();
    yaml.push_str(
        "\n---\napiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\n\
         metadata: {name: big, namespace: data}\nspec: {type: Headless, ports: [{name: tcp, protocol: TCP, port: 7000}]}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata:\n  name: big-east\n  namespace: data\n  labels: {multicluster.kubernetes.io/service-name: big, multicluster.kubernetes.io/source-cluster: east}\n\
         addressType: IPv4\nports: [{name: tcp, protocol: TCP, port: 7000}]\nendpoints:\n",
    );
    for i in 1..=40 {
        yaml.push_str(&format!("- addresses: [10.9.0.{i}]\n"));
    }
    let path = dir.join("objects.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

fn answers(out: &str) -> Vec<String> {
    let mut v: Vec<String> = out
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    v.sort();
    v
}

fn nxdomain_count(ours: &Running) -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (_, body) = rt.block_on(http_get(ours.admin, "/metrics")).unwrap();
    metric_in(
        &body,
        &format!(
            "coredns_dns_responses_total{{server=\"dns://{}\",zone=\"clusterset.local.\",view=\"\",rcode=\"NXDOMAIN\",plugin=\"\"}}",
            ours.dns
        ),
    )
}

#[test]
fn a_real_coredns_forwards_clusterset_local_to_us() {
    let _module = common::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let file = objects(dir.path());
    // A longer TTL than the default, so cache countdowns are visible.
    let ours = spawn_binary(&["--file", file.to_str().unwrap(), "--ttl", "20"]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ready = rt.block_on(common::eventually(10, || async {
        http_get(ours.admin, "/ready").await.map(|(s, _)| s) == Some(200)
    }));
    assert!(ready, "clusterset-dns did not become ready");
    let core = start_coredns(ours.dns);
    let both = |args: &str| {
        (
            answers(&dig(core.addr, args)),
            answers(&dig(ours.dns, args)),
        )
    };

    // Positive answers, as we give them.
    let (via, direct) = both("db.data.svc.clusterset.local A +noall +answer");
    assert_eq!(via.len(), 3, "{via:?}");
    assert_eq!(via, direct);
    let (via, direct) = both("workers.batch.svc.clusterset.local AAAA +noall +answer");
    assert_eq!(
        via,
        ["workers.batch.svc.clusterset.local. 20 IN AAAA fd00:2::31"]
    );
    assert_eq!(via, direct);

    // SRV with its glue in the additional section.
    let out = dig(core.addr, "_postgres._tcp.db.data.svc.clusterset.local SRV");
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(out.contains("ANSWER: 3,"), "{out}");
    assert!(out.contains(";; ADDITIONAL SECTION:"), "{out}");
    assert!(
        out.contains("db-0.east.db.data.svc.clusterset.local. 20 IN A 10.1.0.11")
            || answers(&out)
                .contains(&"db-0.east.db.data.svc.clusterset.local. 20 IN A 10.1.0.11".to_string()),
        "{out}"
    );

    // NODATA: the name exists, the type does not; SOA in the authority section.
    let out = dig(core.addr, "cache.shop.svc.clusterset.local AAAA");
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(out.contains("ANSWER: 0,"), "{out}");
    assert!(out.contains("AUTHORITY: 1,"), "{out}");

    // Truncation, then the full answer over TCP.
    let out = dig(core.addr, "big.data.svc.clusterset.local A +noedns +ignore");
    assert!(out.contains(" tc"), "no TC over UDP without EDNS:\n{out}");
    let out = dig(core.addr, "big.data.svc.clusterset.local A +noedns");
    assert!(out.contains("ANSWER: 40,"), "{out}");
    let (via, direct) = both("big.data.svc.clusterset.local A +tcp +noall +answer");
    assert_eq!(via.len(), 40);
    assert_eq!(via, direct);

    // NXDOMAIN, cached by CoreDNS for the TTL of our SOA (min(--ttl, 300) = 20 s).
    let before = nxdomain_count(&ours);
    let out = dig(core.addr, "nope.data.svc.clusterset.local A");
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    let soa_ttl = |out: &str| -> u32 {
        out.lines()
            .find(|l| l.contains("\tSOA\t") || l.split_whitespace().nth(3) == Some("SOA"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no SOA in:\n{out}"))
    };
    assert_eq!(soa_ttl(&out), 20, "{out}");
    std::thread::sleep(Duration::from_millis(2100));
    let again = dig(core.addr, "nope.data.svc.clusterset.local A");
    assert!(again.contains("status: NXDOMAIN"), "{again}");
    let cached = soa_ttl(&again);
    assert!(
        (15..=18).contains(&cached),
        "cached SOA TTL {cached}:\n{again}"
    );
    // Only the first one reached us.
    assert_eq!(nxdomain_count(&ours) - before, 1.0);

    // REFUSED names stay out: CoreDNS is not asked for them (its block is clusterset.local).
    let out = dig(core.addr, "example.com A");
    assert!(out.contains("status: REFUSED"), "{out}");
}
