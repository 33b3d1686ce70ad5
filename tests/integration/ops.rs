//! Operations, with the real tools operators use: `/metrics` passes `promtool check metrics`
//! and is scraped by a real Prometheus server whose query API must report exactly the queries
//! sent; `clusterset-dns zone` prints what `dig AXFR` transfers; transfers are refused outside
//! `--allow-transfer`; `--log-queries` logs one line per query.

use crate::common;
use crate::common::until;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::prometheus::Prometheus;
use common::{
    BIN, Proto, dig, exchange, http_get, master_records, metric_in, query, spawn_binary,
    zone_command,
};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/clusterset.yaml")
}

/// A query with EDNS and the DO bit set.
fn query_do(name: &str, qtype: RecordType) -> Vec<u8> {
    let mut q = query(name, qtype, Some(1232));
    let n = q.len();
    q[n - 4] = 0x80; // the DO bit, in the OPT record's TTL flags
    q
}

/// Waits (10 s at most) for `/ready`.
async fn ready(admin: SocketAddr) {
    let ready = common::eventually(10, || async {
        http_get(admin, "/ready").await.map(|(s, _)| s) == Some(200)
    })
    .await;
    assert!(ready, "the server did not become ready");
}

fn wait_ready(admin: SocketAddr) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(ready(admin));
}

async fn send_known_queries(dns: SocketAddr) {
    for _ in 0..5 {
        let m = exchange(
            dns,
            Proto::Udp,
            &query("db.data.svc.clusterset.local", RecordType::A, None),
        )
        .await;
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    }
    for _ in 0..3 {
        let m = exchange(
            dns,
            Proto::Udp,
            &query("nope.data.svc.clusterset.local", RecordType::AAAA, None),
        )
        .await;
        assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    }
    for _ in 0..2 {
        let m = exchange(
            dns,
            Proto::Tcp,
            &query_do("db.data.svc.clusterset.local", RecordType::SRV),
        )
        .await;
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    }
    let m = exchange(
        dns,
        Proto::Udp,
        &query("example.com", RecordType::TXT, None),
    )
    .await;
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    // A type without a label of its own.
    let m = exchange(
        dns,
        Proto::Udp,
        &query("db.data.svc.clusterset.local", RecordType::CAA, None),
    )
    .await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
}

#[tokio::test]
async fn metrics_pass_promtool_and_count_what_was_sent() {
    let _module = common::module(module_path!());
    let s = spawn_binary(&["--file", example().to_str().unwrap()]);
    ready(s.admin).await;
    send_known_queries(s.dns).await;
    let (_, body) = http_get(s.admin, "/metrics").await.unwrap();

    common::promtool_check(&body);

    let server = format!("dns://{}", s.dns);
    let z = "clusterset.local.";
    let base = |zone: &str| format!("server=\"{server}\",zone=\"{zone}\",view=\"\"");
    let v = |series: String| metric_in(&body, &series);
    let req = |zone: &str, proto: &str, ty: &str| {
        v(format!(
            "coredns_dns_requests_total{{{},proto=\"{proto}\",family=\"1\",type=\"{ty}\"}}",
            base(zone)
        ))
    };
    // The process metrics every Prometheus client exports (the CoreDNS dashboards' CPU and
    // memory panels read them), for this very process.
    let started = v("process_start_time_seconds".into());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        now - 120.0 < started && started <= now + 1.0,
        "started at {started}, now {now}"
    );
    let rss = v("process_resident_memory_bytes".into());
    assert!(rss > 1e6 && rss < 1e9, "RSS {rss}");
    assert!(v("process_open_fds".into()) >= 4.0, "open fds");
    assert!(v("process_max_fds".into()) >= v("process_open_fds".into()));
    assert!(body.contains("\nprocess_cpu_seconds_total "), "CPU seconds");
    assert!(v("process_threads".into()) >= 2.0, "threads");
    assert_eq!(req(z, "udp", "A"), 5.0);
    assert_eq!(req(z, "udp", "AAAA"), 3.0);
    assert_eq!(req(z, "tcp", "SRV"), 2.0);
    assert_eq!(req(z, "udp", "other"), 1.0);
    assert_eq!(req("dropped", "udp", "TXT"), 1.0);
    let rcode = |zone: &str, rc: &str| {
        v(format!(
            "coredns_dns_responses_total{{{},rcode=\"{rc}\",plugin=\"\"}}",
            base(zone)
        ))
    };
    assert_eq!(rcode(z, "NOERROR"), 8.0);
    assert_eq!(rcode(z, "NXDOMAIN"), 3.0);
    assert_eq!(rcode("dropped", "REFUSED"), 1.0);
    assert_eq!(
        v(format!("coredns_dns_do_requests_total{{{}}}", base(z))),
        2.0
    );
    assert_eq!(
        v(format!(
            "coredns_dns_request_duration_seconds_count{{{}}}",
            base(z)
        )),
        11.0
    );
    assert_eq!(
        v(format!(
            "coredns_dns_request_duration_seconds_bucket{{{},le=\"+Inf\"}}",
            base(z)
        )),
        11.0
    );
    // Sizes: every UDP query here is under 100 bytes; the TCP answers (SRV with glue) are not.
    assert_eq!(
        v(format!(
            "coredns_dns_request_size_bytes_bucket{{{},proto=\"udp\",le=\"100\"}}",
            base(z)
        )),
        9.0
    );
    assert_eq!(
        v(format!(
            "coredns_dns_response_size_bytes_count{{{},proto=\"tcp\"}}",
            base(z)
        )),
        2.0
    );
    assert_eq!(
        v(format!(
            "coredns_dns_response_size_bytes_bucket{{{},proto=\"tcp\",le=\"100\"}}",
            base(z)
        )),
        0.0
    );
    let build = body
        .lines()
        .find(|l| l.starts_with("coredns_build_info{"))
        .expect("coredns_build_info");
    assert!(build.contains("version=\"0.1.0\""), "{build}");
    assert!(
        build.contains("revision=\"") && build.contains("goversion=\"rustc"),
        "{build}"
    );
    assert!(build.ends_with("} 1"), "{build}");
    assert_eq!(v("coredns_panics_total".into()), 0.0);
    assert_eq!(v("clusterset_dns_services".into()), 5.0);
    for family in [
        "clusterset_dns_endpoints",
        "clusterset_dns_names",
        "clusterset_dns_zone_serial",
        "clusterset_dns_zone_last_change_timestamp_seconds",
        "clusterset_dns_source_reloads_total",
        "clusterset_dns_source_last_sync_timestamp_seconds",
    ] {
        assert!(
            body.contains(&format!("# TYPE {family} ")),
            "{family} missing"
        );
    }
}

#[tokio::test]
async fn a_real_prometheus_scrapes_the_counts() {
    let _module = common::module(module_path!());
    let s = spawn_binary(&["--file", example().to_str().unwrap()]);
    let prom = Prometheus::start(s.admin);
    assert_eq!(
        prom.wait_for("up{job=\"clusterset-dns\"}", 1.0).await,
        Some(1.0),
        "Prometheus never scraped the admin port"
    );
    ready(s.admin).await;
    send_known_queries(s.dns).await;
    let z = "zone=\"clusterset.local.\"";
    for (promql, want) in [
        (format!("sum(coredns_dns_requests_total{{{z}}})"), 11.0),
        (
            format!("sum(coredns_dns_requests_total{{{z},type=\"A\",proto=\"udp\"}})"),
            5.0,
        ),
        (
            format!("sum(coredns_dns_requests_total{{{z},type=\"SRV\",proto=\"tcp\"}})"),
            2.0,
        ),
        (
            format!("sum(coredns_dns_responses_total{{{z},rcode=\"NXDOMAIN\"}})"),
            3.0,
        ),
        (
            "sum(coredns_dns_responses_total{zone=\"dropped\",rcode=\"REFUSED\"})".into(),
            1.0,
        ),
        (
            format!("sum(coredns_dns_request_duration_seconds_count{{{z}}})"),
            11.0,
        ),
        (
            format!("sum(coredns_dns_response_size_bytes_count{{{z}}})"),
            11.0,
        ),
        (format!("sum(coredns_dns_do_requests_total{{{z}}})"), 2.0),
        ("clusterset_dns_services".into(), 5.0),
        ("count(coredns_build_info)".into(), 1.0),
    ] {
        assert_eq!(prom.wait_for(&promql, want).await, Some(want), "{promql}");
    }
    // A histogram quantile over the scraped buckets is a number (dashboards plot it).
    let p99 = prom
        .value(
            "histogram_quantile(0.99, sum by (le) (coredns_dns_request_duration_seconds_bucket))",
        )
        .await
        .expect("a p99");
    assert!(p99 > 0.0 && p99 <= 8.192, "p99 {p99}");
}

#[test]
fn zone_command_prints_what_axfr_transfers() {
    let _module = common::module(module_path!());
    let (ok, text, err) = zone_command(&["--file", example().to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(text.starts_with("; zone clusterset.local. serial "));
    let printed = master_records(&text);
    assert!(printed[0].starts_with("clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. SERIAL 7200 1800 86400 5"), "{}", printed[0]);
    for line in [
        "clusterset.local. 5 IN NS ns.dns.clusterset.local.",
        "dns-version.clusterset.local. 28800 IN TXT \"1.0.0\"",
        "db.data.svc.clusterset.local. 5 IN A 10.1.0.11",
        "_postgres._tcp.db.data.svc.clusterset.local. 5 IN SRV 0 33 5432 db-0.east.db.data.svc.clusterset.local.",
        "workers.batch.svc.clusterset.local. 5 IN AAAA fd00:2::31",
    ] {
        assert!(printed.iter().any(|l| l == line), "missing {line}\n{text}");
    }

    let s = spawn_binary(&[
        "--file",
        example().to_str().unwrap(),
        "--allow-transfer",
        "127.0.0.0/8",
    ]);
    wait_ready(s.admin);
    let axfr = dig(s.dns, "AXFR clusterset.local");
    let mut transferred = master_records(&axfr);
    assert!(axfr.contains("XFR size"), "{axfr}");
    // AXFR ends with the SOA again.
    assert_eq!(transferred.last(), transferred.first());
    transferred.pop();
    assert_eq!(transferred, printed, "zone output and AXFR differ");
    // Every record printed is what a plain query for it answers.
    let a = dig(s.dns, "db.data.svc.clusterset.local A +noall +answer");
    let mut want: Vec<String> = printed
        .iter()
        .filter(|l| l.starts_with("db.data.svc.clusterset.local. 5 IN A "))
        .cloned()
        .collect();
    let mut got = master_records(&a);
    want.sort();
    got.sort();
    assert_eq!(got, want);
}

#[test]
fn zone_command_errors_are_one_clear_line() {
    let _module = common::module(module_path!());
    let (ok, text, err) = zone_command(&["--file", "/nonexistent/objects.yaml"]);
    assert!(!ok);
    assert!(text.is_empty());
    assert!(
        err.trim_end().ends_with(
            "cannot read /nonexistent/objects.yaml: No such file or directory (os error 2)"
        ),
        "{err}"
    );
    let (ok, _, err) = zone_command(&["--file", "x", "--zone", "bad..zone"]);
    assert!(!ok);
    assert!(err.contains("bad..zone"), "{err}");
}

#[test]
fn transfers_are_refused_outside_allow_transfer() {
    let _module = common::module(module_path!());
    // No --allow-transfer: refused, over TCP and UDP.
    let s = spawn_binary(&["--file", example().to_str().unwrap()]);
    wait_ready(s.admin);
    let out = dig(s.dns, "AXFR clusterset.local");
    assert!(out.contains("Transfer failed"), "{out}");
    assert!(!out.contains("IN\tSOA"), "{out}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (qtype, proto) in [
        (RecordType::AXFR, Proto::Udp),
        (RecordType::IXFR, Proto::Udp),
        (RecordType::IXFR, Proto::Tcp),
    ] {
        let m = rt.block_on(exchange(
            s.dns,
            proto,
            &query("clusterset.local", qtype, None),
        ));
        assert_eq!(
            m.metadata.response_code,
            ResponseCode::Refused,
            "{qtype} {proto:?}"
        );
        assert!(m.answers.is_empty());
    }
    drop(s);

    // Allowed elsewhere only: still refused.
    let s = spawn_binary(&[
        "--file",
        example().to_str().unwrap(),
        "--allow-transfer",
        "10.0.0.0/8,::1",
    ]);
    let out = dig(s.dns, "AXFR clusterset.local");
    assert!(out.contains("Transfer failed"), "{out}");
    drop(s);

    // Allowed: AXFR of the apex only; a name inside the zone is refused.
    let s = spawn_binary(&[
        "--file",
        example().to_str().unwrap(),
        "--allow-transfer",
        "127.0.0.1",
    ]);
    wait_ready(s.admin);
    let out = dig(s.dns, "AXFR clusterset.local");
    assert!(out.contains("XFR size"), "{out}");
    let out = dig(s.dns, "AXFR shop.svc.clusterset.local");
    assert!(out.contains("Transfer failed"), "{out}");
    // IXFR gets the whole zone (RFC 1995 §4).
    let out = dig(s.dns, "IXFR=1 clusterset.local");
    assert!(out.contains("XFR size"), "{out}");

    // A bad CIDR is a start-up error naming it.
    let out = Command::new(BIN)
        .args(["--file", "x", "--allow-transfer", "10.0.0.0/40"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("10.0.0.0/40") && err.contains("0-32"), "{err}");
}

#[test]
fn large_zone_transfers_in_several_messages() {
    let _module = common::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.yaml");
    let mut yaml = String::new();
    for i in 0..1500 {
        yaml.push_str(&format!(
            "---\napiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\n\
             metadata: {{name: svc-{i}, namespace: ns-{}}}\n\
             spec: {{type: ClusterSetIP, ips: [10.{}.{}.{}], ports: [{{name: http, protocol: TCP, port: 80}}]}}\n",
            i % 7,
            i / 65536,
            (i / 256) % 256,
            i % 256
        ));
    }
    std::fs::write(&file, yaml).unwrap();
    let (ok, text, err) = zone_command(&["--file", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let printed = master_records(&text);
    let s = spawn_binary(&[
        "--file",
        file.to_str().unwrap(),
        "--allow-transfer",
        "127.0.0.1",
    ]);
    wait_ready(s.admin);
    let axfr = dig(s.dns, "AXFR clusterset.local");
    let messages: usize = axfr
        .lines()
        .find_map(|l| l.split("messages ").nth(1))
        .and_then(|m| m.split(',').next())
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no XFR size line: {}",
                &axfr[axfr.len().saturating_sub(400)..]
            )
        });
    assert!(messages > 1, "{messages} messages");
    let mut transferred = master_records(&axfr);
    transferred.pop();
    assert_eq!(transferred.len(), printed.len());
    assert_eq!(transferred, printed);
    // 1500 services: A + SRV + _http._tcp SRV each.
    assert_eq!(
        printed.iter().filter(|l| l.contains(" IN A ")).count(),
        1500
    );
}

#[test]
fn log_queries_logs_one_line_per_query() {
    let _module = common::module(module_path!());
    let s = spawn_binary(&["--file", example().to_str().unwrap(), "--log-queries"]);
    wait_ready(s.admin);
    dig(s.dns, "Db.Data.svc.clusterset.local A");
    dig(s.dns, "nope.data.svc.clusterset.local AAAA +tcp");
    let query_lines = || -> Vec<serde_json::Value> {
        s.log
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["target"] == "clusterset_dns::query")
            .collect()
    };
    until("two query lines", 5, || query_lines().len() >= 2);
    let lines = query_lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let f = &lines[0]["fields"];
    assert_eq!(lines[0]["level"], "INFO");
    assert_eq!(f["name"], "Db.Data.svc.clusterset.local.");
    assert_eq!(f["qtype"], "A");
    assert_eq!(f["rcode"], "NOERROR");
    assert_eq!(f["proto"], "udp");
    assert!(f["client"].as_str().unwrap().starts_with("127.0.0.1:"));
    assert!(f["size"].as_u64().unwrap() > 12);
    assert!(f["duration_us"].is_u64());
    let f = &lines[1]["fields"];
    assert_eq!(f["rcode"], "NXDOMAIN");
    assert_eq!(f["proto"], "tcp");
    assert_eq!(f["qtype"], "AAAA");

    // Without the flag (and at info), no query lines at all.
    let quiet = spawn_binary(&["--file", example().to_str().unwrap()]);
    dig(quiet.dns, "db.data.svc.clusterset.local A");
    // A query is logged (or not) before it is answered; a reload logged after the answer came
    // back orders after any query line, so once it is in, a query line would be too.
    quiet.signal("HUP");
    until("the reload after the query to be logged", 10, || {
        quiet.logged("\"message\":\"reloaded\"")
    });
    assert!(!quiet.logged("clusterset_dns::query"));
    // The start-up line carries the effective configuration.
    assert!(quiet.logged("\"message\":\"starting\""));
    assert!(quiet.logged("udp_workers"));
}

/// The trust boundary through the file source and the flags, as a user runs them: the zone
/// subcommand, AXFR and plain queries (UDP and TCP) agree on what is refused.
#[test]
fn refused_addresses_and_excluded_namespaces_agree_in_zone_axfr_and_answers() {
    let _module = common::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("objects.yaml");
    let import = |ns: &str, name: &str, kind: &str, ips: &str| {
        format!(
            "---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{type: {kind}, ips: {ips}, ports: [{{name: http, port: 80}}]}}\n"
        )
    };
    let slice = |name: &str, family: &str, endpoints: &str| {
        format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {name}, namespace: shop, labels: {{multicluster.kubernetes.io/service-name: db, multicluster.kubernetes.io/source-cluster: east}}}}\naddressType: {family}\nendpoints: {endpoints}\n"
        )
    };
    let yaml = import(
        "shop",
        "web",
        "ClusterSetIP",
        "[169.254.169.254, 198.18.0.10]",
    ) + &import(
        "shop",
        "six",
        "ClusterSetIP",
        "['fe80::1', 'fd00:ec2::254']",
    ) + &import(
        "shop",
        "any",
        "ClusterSetIP",
        "['0.0.0.0', '::ffff:127.0.0.1']",
    ) + &import("shop", "near", "ClusterSetIP", "[198.19.0.7, 198.18.5.5]")
        + &import("shop", "far", "ClusterSetIP", "[203.0.113.5, 198.18.2.2]")
        + &import("shop", "db", "Headless", "[]")
        + &slice(
            "db-v4",
            "IPv4",
            "[{addresses: [255.255.255.255], hostname: a}, {addresses: [224.0.0.251], hostname: b}, {addresses: [100.100.100.200], hostname: c}, {addresses: [198.18.1.4], hostname: d}]",
        )
        + &slice(
            "db-v6",
            "IPv6",
            "[{addresses: ['::1'], hostname: e}, {addresses: ['ff02::fb'], hostname: f}, {addresses: ['fd00::9'], hostname: g}]",
        )
        + &import("kube-system", "dns", "ClusterSetIP", "[198.18.0.53]");
    std::fs::write(&file, yaml).unwrap();
    // Beyond the fixed classes: refuse the node network 198.19.0.0/16, answer only 198.18/15 and
    // fd00::/8.
    let flags = [
        "--file",
        file.to_str().unwrap(),
        "--deny-cidr",
        "198.19.0.0/16",
        "--allow-cidr",
        "198.18.0.0/15,fd00::/8",
    ];
    let (ok, text, err) = zone_command(&flags);
    assert!(ok, "{err}");
    let printed = master_records(&text);
    let mut args = flags.to_vec();
    args.extend(["--allow-transfer", "127.0.0.0/8"]);
    let s = spawn_binary(&args);
    wait_ready(s.admin);
    let mut transferred = master_records(&dig(s.dns, "AXFR clusterset.local"));
    transferred.pop();
    assert_eq!(transferred, printed, "zone output and AXFR differ");
    let addresses: Vec<&str> = printed
        .iter()
        .filter(|l| l.contains(" IN A ") || l.contains(" IN AAAA "))
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(
        addresses,
        [
            "198.18.1.4",
            "fd00::9",
            "198.18.1.4",
            "fd00::9",
            "198.18.2.2",
            "198.18.5.5",
            "198.18.0.10"
        ],
        "{text}"
    );
    assert!(!text.contains("kube-system"), "{text}");
    for tcp in ["", "+tcp"] {
        let ask = |q: &str| dig(s.dns, &format!("{tcp} +short {q}"));
        assert_eq!(ask("web.shop.svc.clusterset.local"), "198.18.0.10\n");
        assert_eq!(ask("near.shop.svc.clusterset.local"), "198.18.5.5\n");
        assert_eq!(ask("six.shop.svc.clusterset.local AAAA"), "");
        assert_eq!(ask("db.shop.svc.clusterset.local"), "198.18.1.4\n");
        assert_eq!(ask("db.shop.svc.clusterset.local AAAA"), "fd00::9\n");
        assert!(
            dig(s.dns, &format!("{tcp} c.east.db.shop.svc.clusterset.local")).contains("NXDOMAIN")
        );
        assert!(
            dig(
                s.dns,
                &format!("{tcp} dns.kube-system.svc.clusterset.local")
            )
            .contains("NXDOMAIN")
        );
    }
    // One log line and one count for each refused address, by reason.
    let (_, body) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(common::http_get(s.admin, "/metrics"))
        .unwrap();
    for (kind, reason, n) in [
        ("ServiceImport", "link_local", 2.0),
        ("ServiceImport", "metadata", 1.0),
        ("ServiceImport", "unspecified", 1.0),
        ("ServiceImport", "loopback", 1.0),
        ("ServiceImport", "denied", 1.0),
        ("ServiceImport", "not_allowed", 1.0),
        ("EndpointSlice", "broadcast", 1.0),
        ("EndpointSlice", "multicast", 2.0),
        ("EndpointSlice", "metadata", 1.0),
        ("EndpointSlice", "loopback", 1.0),
    ] {
        let series = format!(
            "clusterset_dns_refused_addresses_total{{kind=\"{kind}\",reason=\"{reason}\"}}"
        );
        assert_eq!(metric_in(&body, &series), n, "{series}");
    }
    let refused: Vec<String> = s
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("refused address"))
        .cloned()
        .collect();
    assert_eq!(refused.len(), 12, "{refused:#?}");
    for l in &refused {
        eprintln!(
            "{}",
            serde_json::from_str::<serde_json::Value>(l).unwrap()["fields"]["message"]
        );
    }
}
