//! Imported data is not trusted, through the Kubernetes source on a real API server: refused
//! addresses and an excluded namespace, then a flood of names past the zone's budget, refused
//! and then served as room frees, while existing names keep answering.

use crate::common;

use std::time::{Duration, Instant};

use crate::kube_source::{cluster, status};
use common::k8s::{import, rbac, slice};
use common::{Steps, metric_value, query_a, ready, short, spawn_binary, until};

/// The VmRSS of a process, in MB.
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kb / 1000.0
}

/// `n` endpoints with hostnames `h0…`, addresses 10.`a`.x.y.
fn endpoints(n: usize, a: u8) -> String {
    let list: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "{{addresses: [10.{a}.{}.{}], hostname: h{i}}}",
                i / 250,
                i % 250
            )
        })
        .collect();
    format!("[{}]", list.join(", "))
}

#[test]
fn imported_data_is_not_trusted_and_a_flood_is_refused_then_converges() {
    let _module = common::module(module_path!());
    let mut steps = Steps::default();
    let k = cluster("v1alpha1", rbac(), &["shop", "flood", "kube-system"]);
    k.apply(&(import("v1alpha1", "shop", "keep", "{type: ClusterSetIP, ips: [10.0.0.1], ports: [{name: http, port: 80}]}")
        + &import("v1alpha1", "shop", "meta", "{type: ClusterSetIP, ips: [169.254.169.254, 10.0.0.2], ports: [{name: http, port: 80}]}")
        + &import("v1alpha1", "shop", "lo", "{type: ClusterSetIP, ips: ['::ffff:127.0.0.1', 'fd00::5'], ports: [{name: http, port: 80}]}")
        + &import("v1alpha1", "shop", "db", "{type: Headless, ports: [{name: http, port: 80}]}")
        + &slice("shop", "db-east", "db", "east", "[{addresses: [100.100.100.200], hostname: a}, {addresses: [10.1.0.2], hostname: b}]")
        + &import("v1alpha1", "kube-system", "dns", "{type: ClusterSetIP, ips: [10.0.0.3], ports: [{name: dns, port: 53}]}")));
    steps.next("1. a budget of 1,000 names and 300 endpoints a service");
    // A cap of 1,000 names and 300 endpoints a service; the flood below brings about three
    // times as many names.
    let s = spawn_binary(&[
        "--kubeconfig",
        &k.kubeconfig("dns"),
        "--max-zone-names",
        "1000",
        "--max-endpoints-per-service",
        "300",
    ]);
    until("ready", 30, || ready(&s));

    steps.next("2. the trust boundary");
    // The trust boundary: refused addresses dropped alone, the excluded namespace not served.
    assert_eq!(short(s.dns, "meta.shop.svc.clusterset.local"), ["10.0.0.2"]);
    assert_eq!(
        short(s.dns, "lo.shop.svc.clusterset.local AAAA"),
        ["fd00::5"]
    );
    assert_eq!(short(s.dns, "db.shop.svc.clusterset.local"), ["10.1.0.2"]);
    assert_eq!(
        status(s.dns, "a.east.db.shop.svc.clusterset.local"),
        "NXDOMAIN"
    );
    assert_eq!(
        status(s.dns, "dns.kube-system.svc.clusterset.local"),
        "NXDOMAIN"
    );
    for (kind, reason, n) in [
        ("ServiceImport", "link_local", 1.0),
        ("ServiceImport", "loopback", 1.0),
        ("EndpointSlice", "metadata", 1.0),
    ] {
        let series = format!(
            "clusterset_dns_refused_addresses_total{{kind=\"{kind}\",reason=\"{reason}\"}}"
        );
        assert_eq!(metric_value(&s, &series), n, "{series}");
    }
    assert!(s.logged(
        "refused address: ServiceImport shop/meta spec.ips[0] 169.254.169.254 refused (link_local)"
    ));
    // Logged once: an unrelated change to the object does not log it again.
    k.apply(&import(
        "v1alpha1",
        "shop",
        "meta",
        "{type: ClusterSetIP, ips: [169.254.169.254, 10.0.0.2], ports: [{name: web, port: 8080}]}",
    ));
    until("changed port", 10, || {
        status(s.dns, "_web._tcp.meta.shop.svc.clusterset.local") == "NOERROR"
    });
    assert_eq!(
        metric_value(
            &s,
            "clusterset_dns_refused_addresses_total{kind=\"ServiceImport\",reason=\"link_local\"}"
        ),
        1.0
    );

    steps.next("3. the flood, while the existing names keep answering");
    // The flood: 12 headless services of 250 named endpoints (252 names each with the SRV
    // name, 3,024 in all),
    // and one of 400 endpoints, over the per-service cap. Meanwhile the existing names are
    // asked for every 20 ms and must answer throughout.
    let pid = s.child.id();
    let before = rss_mb(pid);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (stop, dns) = (stop.clone(), s.dns);
        std::thread::spawn(move || {
            let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let (mut asked, mut wrong) = (0, Vec::new());
            let start = Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed)
                && start.elapsed() < Duration::from_secs(120)
            {
                for (name, ip) in [
                    ("keep.shop.svc.clusterset.local", "10.0.0.1"),
                    ("b.east.db.shop.svc.clusterset.local", "10.1.0.2"),
                ] {
                    asked += 1;
                    let got = query_a(dns, &sock, name);
                    if got != Some(ip.parse().unwrap()) {
                        wrong.push(format!("{name}: {got:?}"));
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (asked, wrong)
        })
    };
    let mut flood = String::new();
    for i in 0..12u8 {
        let name = format!("f{i:02}");
        flood += &import(
            "v1alpha1",
            "flood",
            &name,
            "{type: Headless, ports: [{name: http, port: 80}]}",
        );
        flood += &slice(
            "flood",
            &format!("{name}-east"),
            &name,
            "east",
            &endpoints(250, 100 + i),
        );
    }
    flood += &import(
        "v1alpha1",
        "flood",
        "huge",
        "{type: Headless, ports: [{name: http, port: 80}]}",
    );
    flood += &slice("flood", "huge-east", "huge", "east", &endpoints(400, 200));
    k.apply(&flood);
    until("the flood refused", 60, || {
        metric_value(&s, "clusterset_dns_refused_services{limit=\"zone_names\"}") >= 8.0
            && metric_value(
                &s,
                "clusterset_dns_refused_services{limit=\"endpoints_per_service\"}",
            ) == 1.0
    });
    let used = metric_value(&s, "clusterset_dns_limit_used{limit=\"zone_names\"}");
    assert!(used <= 1000.0, "the zone holds {used} names");
    assert_eq!(
        metric_value(&s, "clusterset_dns_limit{limit=\"zone_names\"}"),
        1000.0
    );
    assert_eq!(
        metric_value(
            &s,
            "clusterset_dns_refused_updates_total{limit=\"endpoints_per_service\"}"
        ),
        1.0
    );
    assert_eq!(status(s.dns, "huge.flood.svc.clusterset.local"), "NXDOMAIN");
    steps.next("4. the first by name are served, the rest wait");
    // The first by name are served, the rest wait.
    assert_eq!(
        short(s.dns, "h7.east.f00.flood.svc.clusterset.local"),
        ["10.100.0.7"]
    );
    assert_eq!(status(s.dns, "f11.flood.svc.clusterset.local"), "NXDOMAIN");
    assert!(s.logged("more than --max-endpoints-per-service 300"));
    assert!(
        s.logged("flood/f11 needs 254 names"),
        "{:?}",
        s.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("needs"))
            .collect::<Vec<_>>()
    );
    let at_cap = rss_mb(pid);

    steps.next("5. the flood goes: the refused are served");
    // The flood goes away but for two services that were refused: they are served.
    for i in 0..10u8 {
        k.delete("serviceimport", "flood", &format!("f{i:02}"));
        k.delete("endpointslice", "flood", &format!("f{i:02}-east"));
    }
    until("the refused services served", 60, || {
        short(s.dns, "h249.east.f11.flood.svc.clusterset.local") == ["10.111.0.249"]
            && short(s.dns, "h0.east.f10.flood.svc.clusterset.local") == ["10.110.0.0"]
    });
    until("nothing held back for room", 10, || {
        metric_value(&s, "clusterset_dns_refused_services{limit=\"zone_names\"}") == 0.0
    });
    steps.next("6. the service over the cap is served once smaller");
    // The one over the per-service cap is served once it has fewer endpoints.
    k.apply(&slice(
        "flood",
        "huge-east",
        "huge",
        "east",
        &endpoints(20, 200),
    ));
    until("the shrunk service served", 30, || {
        short(s.dns, "h3.east.huge.flood.svc.clusterset.local") == ["10.200.0.3"]
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (asked, wrong) = watcher.join().unwrap();
    assert!(asked > 50, "asked {asked}");
    assert!(
        wrong.is_empty(),
        "{} of {asked} wrong: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    eprintln!(
        "flood of 3,024 names + a 400-endpoint service at --max-zone-names 1000: RSS {before:.1} MB before, {at_cap:.1} MB at the cap; {asked} queries for existing names during it, all answered"
    );
}
