//! The file source: changes, broken files and removals while serving, and unusable objects.

use crate::common;

use common::{Proto, eventually, exchange, metric, query, start};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

fn import(name: &str, ip: &str) -> String {
    format!(
        "---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {{name: {name}, namespace: shop}}\nspec: {{type: ClusterSetIP, ips: [{ip}], ports: [{{port: 80}}]}}\n"
    )
}

async fn a(dns: std::net::SocketAddr, name: &str) -> (ResponseCode, Vec<String>) {
    let r = exchange(dns, Proto::Udp, &query(name, RecordType::A, None)).await;
    (
        r.metadata.response_code,
        r.answers.iter().map(|a| a.data.to_string()).collect(),
    )
}

async fn serial(dns: std::net::SocketAddr) -> u32 {
    let r = exchange(
        dns,
        Proto::Udp,
        &query("clusterset.local", RecordType::SOA, None),
    )
    .await;
    match &r.answers[0].data {
        hickory_proto::rr::RData::SOA(s) => s.serial,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn changes_broken_files_and_removals() {
    let _module = common::module(module_path!());
    let s = start(&(import("web", "10.0.0.1") + &import("api", "10.0.0.2"))).await;
    let web = "web.shop.svc.clusterset.local";
    assert_eq!(a(s.dns, web).await.1, ["10.0.0.1"]);
    let first = serial(s.dns).await;

    // A changed object is served after the next poll, with a higher serial.
    std::fs::write(
        &s.file,
        import("web", "10.0.0.9") + &import("api", "10.0.0.2"),
    )
    .unwrap();
    assert!(
        eventually(5, || async { a(s.dns, web).await.1 == ["10.0.0.9"] }).await,
        "change not picked up"
    );
    assert!(serial(s.dns).await > first);
    assert_eq!(
        metric(
            s.admin,
            "clusterset_dns_source_reloads_total{result=\"success\"}"
        )
        .await,
        2.0
    );

    // A file that no longer parses keeps the last good zone.
    std::fs::write(&s.file, "kind: [unclosed\n  - : :\n").unwrap();
    assert!(
        eventually(5, || async {
            metric(
                s.admin,
                "clusterset_dns_source_reloads_total{result=\"failure\"}",
            )
            .await
                == 1.0
        })
        .await
    );
    assert_eq!(a(s.dns, web).await.1, ["10.0.0.9"]);
    assert_eq!(
        a(s.dns, "api.shop.svc.clusterset.local").await.1,
        ["10.0.0.2"]
    );
    let (status, _) = common::http_get(s.admin, "/ready").await.unwrap();
    assert_eq!(status, 200, "still ready while serving the last good zone");

    // An unreadable file is the same.
    std::fs::remove_file(&s.file).unwrap();
    assert!(
        eventually(5, || async {
            metric(
                s.admin,
                "clusterset_dns_source_reloads_total{result=\"failure\"}",
            )
            .await
                == 2.0
        })
        .await
    );
    assert_eq!(a(s.dns, web).await.1, ["10.0.0.9"]);

    // A removed object is gone; its namespace goes with the last service in it.
    std::fs::write(&s.file, import("api", "10.0.0.2")).unwrap();
    assert!(
        eventually(5, || async {
            a(s.dns, web).await.0 == ResponseCode::NXDomain
        })
        .await,
        "removal not picked up"
    );
    assert_eq!(
        a(s.dns, "shop.svc.clusterset.local").await.0,
        ResponseCode::NoError
    );
    std::fs::write(&s.file, "# nothing\n").unwrap();
    assert!(
        eventually(5, || async {
            a(s.dns, "shop.svc.clusterset.local").await.0 == ResponseCode::NXDomain
        })
        .await
    );
    assert_eq!(metric(s.admin, "clusterset_dns_services").await, 0.0);
    assert_eq!(metric(s.admin, "clusterset_dns_endpoints").await, 0.0);
}

#[tokio::test]
async fn unusable_objects_are_skipped_and_counted_and_the_rest_served() {
    let _module = common::module(module_path!());
    let yaml = import("good", "10.0.0.1")
        + &import("bad-ip", "10.0.0.256")
        + "---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: Not_A_Label, namespace: shop}\nspec: {type: ClusterSetIP}\n"
        + "---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: ports, namespace: shop}\nspec: {type: ClusterSetIP, ports: [{port: 0}]}\n"
        + "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: h1, namespace: shop, labels: {multicluster.kubernetes.io/service-name: hl, multicluster.kubernetes.io/source-cluster: east}}\naddressType: IPv4\nendpoints: [{addresses: [10.1.0.1], hostname: 'bad_host'}]\n"
        + "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: h2, namespace: shop, labels: {multicluster.kubernetes.io/service-name: hl, multicluster.kubernetes.io/source-cluster: east}}\naddressType: IPv4\nendpoints: [{addresses: [10.1.0.2], hostname: ok-host}]\n"
        + "---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {name: hl, namespace: shop}\nspec: {type: Headless}\n"
        // A name that fits every label limit but not the 255-octet limit: that name alone is left out.
        + &format!(
            "---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {{name: {c}, namespace: shop}}\nspec: {{type: Headless}}\n\
             ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: h3, namespace: shop, labels: {{multicluster.kubernetes.io/service-name: {c}, multicluster.kubernetes.io/source-cluster: {c}.{c}}}}}\naddressType: IPv4\nendpoints: [{{addresses: [10.1.0.3], hostname: {c}}}]\n",
            c = "c".repeat(63)
        )
        + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: unrelated, namespace: shop}\n";
    let s = start(&yaml).await;
    assert_eq!(
        a(s.dns, "good.shop.svc.clusterset.local").await.1,
        ["10.0.0.1"]
    );
    assert_eq!(
        a(s.dns, "bad-ip.shop.svc.clusterset.local").await.0,
        ResponseCode::NXDomain
    );
    assert_eq!(
        a(s.dns, "ports.shop.svc.clusterset.local").await.0,
        ResponseCode::NXDomain
    );
    assert_eq!(
        a(s.dns, "hl.shop.svc.clusterset.local").await.1,
        ["10.1.0.2"],
        "the slice with a bad hostname is skipped, the other served"
    );
    let long = format!("{c}.shop.svc.clusterset.local", c = "c".repeat(63));
    assert_eq!(
        a(s.dns, &long).await.1,
        ["10.1.0.3"],
        "the service is served without its too-long endpoint name"
    );
    assert_eq!(
        a(s.dns, "ok-host.east.hl.shop.svc.clusterset.local")
            .await
            .1,
        ["10.1.0.2"]
    );
    assert_eq!(metric(s.admin, "clusterset_dns_endpoints").await, 2.0);
    assert_eq!(metric(s.admin, "clusterset_dns_services").await, 3.0);
    let skipped = |kind: &str, reason: &str| {
        format!("clusterset_dns_skipped_objects_total{{kind=\"{kind}\",reason=\"{reason}\"}}")
    };
    assert_eq!(
        metric(s.admin, &skipped("ServiceImport", "bad_ip")).await,
        1.0
    );
    assert_eq!(
        metric(s.admin, &skipped("ServiceImport", "bad_name")).await,
        1.0
    );
    assert_eq!(
        metric(s.admin, &skipped("ServiceImport", "bad_port")).await,
        1.0
    );
    assert_eq!(
        metric(s.admin, &skipped("EndpointSlice", "bad_hostname")).await,
        1.0
    );
    assert_eq!(
        metric(s.admin, &skipped("ServiceImport", "name_too_long")).await,
        1.0
    );
}
