//! Measurements of the Kubernetes and Linkerd sources against a real kube-apiserver and etcd
//! (tests/k8s/setup.sh builds them once), run by hand, as root, one or more by name:
//!
//! ```text
//! cargo bench --bench source -- programming   # 10,000 imports / 100,000 endpoints: memory, 1,000 changes timed
//! cargo bench --bench source -- flood         # a million endpoints against the default caps
//! cargo bench --bench source -- linkerd       # 2,100 of Linkerd's Services: memory, 1,000 changes timed
//! cargo bench --bench source -- capacity      # memory and start-up at 10k, 100k and 1M endpoints
//! cargo bench --bench source -- bridge        # linkerd-bridge: 1,000 exports' memory, 1,000 more timed
//! cargo bench --bench source -- bridge-import # linkerd-bridge, both halves: 1,000 exports and 1,000 imports' memory, 1,000 mirrors timed
//! N=10000 cargo bench --bench source -- bridge-scale # linkerd-bridge at N exports (default 1,000) against the API server's floor
//! cargo bench --bench source -- local-slices  # what watching this cluster's headless slices costs: memory, CPU per event
//! ```
//!
//! `capacity` and `local-slices` run each build named in `BINS` (`name=path ...`; default: this
//! build) side by side.
//!
//! With no name it lists them and runs nothing, so `cargo bench` alone stays the lookup
//! benchmark. They use the integration tests' harness (tests/integration/common).

#[path = "source/bridge_scale.rs"]
mod bridge_scale;
#[path = "../tests/integration/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::k8s::{
    Cluster, admin_client, crd, dynamic_api, import, linkerd_rbac, rbac, writes_between,
};
use common::{
    Running, http_get, metric_value, percentile, query_a, ready, short, spawn_binary,
    spawn_program, until,
};
use hickory_proto::rr::RecordType;

/// The flags that turn the zone's caps off.
const NO_CAPS: [&str; 4] = ["--max-zone-names", "0", "--max-endpoints-per-service", "0"];

const MEASUREMENTS: [(&str, fn()); 8] = [
    ("programming", programming),
    ("flood", flood),
    ("linkerd", linkerd),
    ("capacity", capacity),
    ("bridge", bridge),
    ("bridge-import", bridge_import),
    ("bridge-scale", bridge_scale::run),
    ("local-slices", local_slices),
];

fn main() {
    // `cargo bench` passes `--bench`; every other argument names a measurement.
    let names: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if names.is_empty() {
        let all: Vec<&str> = MEASUREMENTS.iter().map(|(n, _)| *n).collect();
        println!(
            "benches/source.rs: name one or more of {} (cargo bench --bench source -- NAME)",
            all.join(", ")
        );
        return;
    }
    for name in &names {
        let Some((_, run)) = MEASUREMENTS.iter().find(|(n, _)| n == name) else {
            eprintln!("benches/source.rs: no measurement named {name:?}");
            std::process::exit(2);
        };
        println!("== {name}");
        run();
    }
}

/// `programming`: prints the programming latency over 1,000 changes (API write -> our answer changed) and the
/// server's memory holding 10,000 ServiceImports with 100,000 endpoints.
fn programming() {
    let (k, rt, imports, slices) = scale_cluster();
    // 10,000 imports (half ClusterSetIP, half headless), each with one slice of 10 endpoints.
    let started = Instant::now();
    rt.block_on(async {
        use futures::StreamExt;
        futures::stream::iter(0..10_000u32)
            .for_each_concurrent(16, |i| {
                let (imports, slices) = (imports.clone(), slices.clone());
                async move {
                    imports
                        .create(&Default::default(), &scale_import(i))
                        .await
                        .unwrap();
                    slices
                        .create(&Default::default(), &scale_slice(i, 10))
                        .await
                        .unwrap();
                }
            })
            .await;
    });
    println!(
        "created 10,000 ServiceImports and 10,000 EndpointSlices (100,000 endpoints) in {:.1?}",
        started.elapsed()
    );

    let dns_kubeconfig = k.kubeconfig("dns");
    let s = spawn_binary(&["--kubeconfig", &dns_kubeconfig]);
    let sync_started = Instant::now();
    until("ready", 300, || ready(&s));
    println!("initial sync of the server: {:.1?}", sync_started.elapsed());
    std::thread::sleep(Duration::from_secs(3));
    print_memory(&s, "10,000 imports / 100,000 endpoints");
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    assert!(query_a(s.dns, &sock, "svc0.scale.svc.clusterset.local").is_some());

    // 1,000 changes of one import's IP, each timed from the API write to our answer showing it.
    let ip = |n: u32| std::net::Ipv4Addr::new(10, 99, (n / 256) as u8, (n % 256) as u8);
    time_changes(
        &rt,
        &s,
        |n| {
            let patch = serde_json::json!({"spec": {"ips": [ip(n).to_string()]}});
            rt.block_on(imports.patch(
                "svc0",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            ))
            .unwrap();
        },
        |n| query_a(s.dns, &sock, "svc0.scale.svc.clusterset.local") == Some(ip(n)),
    );
}

/// A real API server with the MCS CRDs, the server's RBAC and namespace `scale`, a runtime, and
/// its ServiceImports and EndpointSlices there.
fn scale_cluster() -> (
    Cluster,
    tokio::runtime::Runtime,
    kube::Api<kube::api::DynamicObject>,
    kube::Api<kube::api::DynamicObject>,
) {
    let k = Cluster::start();
    k.apply(&crd("v1beta1"));
    k.apply(&rbac());
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: scale}\n");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(admin_client(&k));
    let imports = dynamic_api(&client, "scale", "ServiceImport");
    let slices = dynamic_api(&client, "scale", "EndpointSlice");
    (k, rt, imports, slices)
}

/// ServiceImport `scale/svc<i>`: headless for odd `i`, else ClusterSetIP; one named port.
fn scale_import(i: u32) -> kube::api::DynamicObject {
    let spec = if i % 2 == 1 {
        serde_json::json!({"type": "Headless", "ports": [{"name": "http", "port": 80}]})
    } else {
        serde_json::json!({"type": "ClusterSetIP", "ips": [format!("10.{}.{}.{}", 100 + i / 65536, (i / 256) % 256, i % 256)], "ports": [{"name": "http", "port": 80}]})
    };
    serde_json::from_value(serde_json::json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
        "metadata": {"name": format!("svc{i}"), "namespace": "scale"},
        "spec": spec
    }))
    .unwrap()
}

/// `svc<i>`'s EndpointSlice from cluster `east`: `n` ready endpoints `pod-<e>` (at most 256).
fn scale_slice(i: u32, n: u32) -> kube::api::DynamicObject {
    let endpoints: Vec<serde_json::Value> = (0..n)
        .map(|e| serde_json::json!({"addresses": [format!("10.{}.{}.{}", (200 + e) % 256, (i / 256) % 256, i % 256)], "hostname": format!("pod-{e}"), "conditions": {"ready": true}}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("svc{i}-east"), "namespace": "scale",
                     "labels": {"multicluster.kubernetes.io/service-name": format!("svc{i}"), "multicluster.kubernetes.io/source-cluster": "east"}},
        "addressType": "IPv4", "ports": [{"name": "http", "protocol": "TCP", "port": 80}], "endpoints": endpoints
    }))
    .unwrap()
}

/// The server's VmRSS and VmHWM, printed as `what` says.
fn print_memory(s: &Running, what: &str) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.child.id())).unwrap();
    for l in status
        .lines()
        .filter(|l| l.starts_with("VmRSS") || l.starts_with("VmHWM"))
    {
        println!("server memory with {what}: {l}");
    }
}

/// 1,000 changes, each timed from `change(n)` (an API write) until `seen(n)` (our answer shows
/// it); prints their spread and the server's own programming-latency histogram.
fn time_changes(
    rt: &tokio::runtime::Runtime,
    s: &Running,
    mut change: impl FnMut(u32),
    mut seen: impl FnMut(u32) -> bool,
) {
    let mut took = Vec::with_capacity(1000);
    for n in 0..1000u32 {
        let t0 = Instant::now();
        change(n);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !seen(n) {
            assert!(Instant::now() < deadline, "change {n} not seen");
        }
        took.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    took.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "API write -> answer changed, 1000 changes: median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&took, 0.5),
        percentile(&took, 0.9),
        percentile(&took, 0.99),
        took[took.len() - 1]
    );
    let (_, metrics) = rt.block_on(http_get(s.admin, "/metrics")).unwrap();
    for l in metrics
        .lines()
        .filter(|l| l.starts_with("clusterset_dns_programming_duration_seconds"))
    {
        println!("{l}");
    }
}

/// `flood`: one exporting cluster floods a million endpoints (1,000 headless services of
/// 1,000 named endpoints, about five times the default --max-zone-names) into a real API
/// server; prints the memory of a server with the default caps (watching as the flood arrives,
/// and one started after it, which lists it) against one with no caps, and checks that an
/// existing name answers throughout and the flood's first services are served.
fn flood() {
    let k = Cluster::start();
    k.apply(&crd("v1beta1"));
    k.apply(&rbac());
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: flood}\n");
    k.apply(&import(
        "v1beta1",
        "shop",
        "keep",
        "{type: ClusterSetIP, ips: [10.0.0.1], ports: [{name: http, port: 80}]}",
    ));
    let kubeconfig = k.kubeconfig("dns");
    let capped = spawn_binary(&["--kubeconfig", &kubeconfig]);
    let uncapped = spawn_binary(&[&["--kubeconfig", &kubeconfig][..], &NO_CAPS].concat());
    until("ready", 30, || ready(&capped) && ready(&uncapped));
    let mem = |s: &Running| {
        let (rss, hwm) = memory_kb(s);
        format!("VmRSS {:.1} MB, VmHWM {:.1} MB", rss / 1000.0, hwm / 1000.0)
    };
    println!(
        "before the flood: capped {}; uncapped {}",
        mem(&capped),
        mem(&uncapped)
    );

    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(admin_client(&k));
    let imports = dynamic_api(&client, "flood", "ServiceImport");
    let slices = dynamic_api(&client, "flood", "EndpointSlice");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (stop, dns) = (stop.clone(), capped.dns);
        std::thread::spawn(move || {
            let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let (mut asked, mut wrong) = (0u32, 0u32);
            let start = Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed)
                && start.elapsed() < Duration::from_secs(900)
            {
                asked += 1;
                if query_a(dns, &sock, "keep.shop.svc.clusterset.local")
                    != Some("10.0.0.1".parse().unwrap())
                {
                    wrong += 1;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            (asked, wrong)
        })
    };
    let started = Instant::now();
    rt.block_on(async {
        use futures::StreamExt;
        futures::stream::iter(0..1000u32)
            .for_each_concurrent(8, |i| {
                let (imports, slices) = (imports.clone(), slices.clone());
                async move {
                    let import: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
                        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
                        "metadata": {"name": format!("f{i:04}"), "namespace": "flood"},
                        "spec": {"type": "Headless", "ports": [{"name": "http", "port": 80}]}
                    }))
                    .unwrap();
                    let endpoints: Vec<serde_json::Value> = (0..1000u32)
                        .map(|e| serde_json::json!({"addresses": [format!("10.{}.{}.{}", 100 + i / 256, i % 256, e % 250)], "hostname": format!("h{e}")}))
                        .collect();
                    let slice: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
                        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                        "metadata": {"name": format!("f{i:04}-east"), "namespace": "flood",
                                     "labels": {"multicluster.kubernetes.io/service-name": format!("f{i:04}"), "multicluster.kubernetes.io/source-cluster": "east"}},
                        "addressType": "IPv4", "ports": [{"name": "http", "protocol": "TCP", "port": 80}], "endpoints": endpoints
                    }))
                    .unwrap();
                    imports.create(&Default::default(), &import).await.unwrap();
                    slices.create(&Default::default(), &slice).await.unwrap();
                }
            })
            .await;
    });
    println!(
        "created 1,000 ServiceImports and 1,000 EndpointSlices (1,000,000 endpoints) in {:.1?}",
        started.elapsed()
    );
    until("the uncapped server has the whole flood", 600, || {
        metric_value(&uncapped, "clusterset_dns_endpoints") >= 1_000_000.0
    });
    until("the capped server has refused the rest", 600, || {
        metric_value(
            &capped,
            "clusterset_dns_refused_services{limit=\"zone_names\"}",
        ) + metric_value(&capped, "clusterset_dns_services")
            >= 1001.0
    });
    std::thread::sleep(Duration::from_secs(3));
    let names = metric_value(&capped, "clusterset_dns_limit_used{limit=\"zone_names\"}");
    let held = metric_value(
        &capped,
        "clusterset_dns_refused_services{limit=\"zone_names\"}",
    );
    assert!(names <= 200_000.0, "{names}");
    assert_eq!(
        short(capped.dns, "h999.east.f0000.flood.svc.clusterset.local"),
        ["10.100.0.249"]
    );
    println!(
        "with the flood: capped ({names} names served, {held} services held back) {}; uncapped ({} names) {}",
        mem(&capped),
        metric_value(&uncapped, "clusterset_dns_names"),
        mem(&uncapped)
    );
    // A server started now lists the whole flood at once.
    let late = spawn_binary(&["--kubeconfig", &kubeconfig]);
    let sync = Instant::now();
    until("the late server ready", 600, || ready(&late));
    std::thread::sleep(Duration::from_secs(3));
    println!(
        "a capped server started after the flood: ready in {:.1?}, {}",
        sync.elapsed(),
        mem(&late)
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (asked, wrong) = watcher.join().unwrap();
    println!("keep.shop asked {asked} times during the flood, {wrong} wrong or unanswered");
    assert_eq!(wrong, 0);
}

/// `linkerd`: `--source linkerd` at scale: 1,000 federated Services and 100 headless mirrors of 10 hosts
/// each (2,100 Services) in a real API server, then 1,000 port changes of one federated
/// Service (as the service mirror makes when the exported service's ports change), each timed
/// from the API write to the SRV answer showing it.
fn linkerd() {
    let k = Cluster::start();
    k.apply(&linkerd_rbac());
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: scale}\n");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(admin_client(&k));
    let services = dynamic_api(&client, "scale", "Service");
    let object = |name: String,
                  labels: serde_json::Value,
                  fq: Option<String>,
                  annotations: serde_json::Value,
                  headless: bool|
     -> kube::api::DynamicObject {
        let mut labels = labels;
        labels["mirror.linkerd.io/mirrored-service"] = "true".into();
        let mut annotations = annotations;
        if let Some(fq) = fq {
            annotations["mirror.linkerd.io/remote-svc-fq-name"] = fq.into();
        }
        let mut spec =
            serde_json::json!({"ports": [{"name": "http", "protocol": "TCP", "port": 80}]});
        if headless {
            spec["clusterIP"] = "None".into();
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "scale", "labels": labels, "annotations": annotations},
            "spec": spec
        }))
        .unwrap()
    };
    let mut all = Vec::new();
    for i in 0..1000u32 {
        all.push(object(
            format!("svc{i}-federated"),
            serde_json::json!({}),
            None,
            serde_json::json!({"multicluster.linkerd.io/remote-discovery": format!("svc{i}@east,svc{i}@west")}),
            false,
        ));
    }
    for h in 0..100u32 {
        all.push(object(
            format!("db{h}-east"),
            serde_json::json!({"mirror.linkerd.io/cluster-name": "east"}),
            Some(format!("db{h}.scale.svc.cluster.local")),
            serde_json::json!({}),
            true,
        ));
        for e in 0..10u32 {
            all.push(object(
                format!("db{h}-{e}-east"),
                serde_json::json!({"mirror.linkerd.io/cluster-name": "east", "mirror.linkerd.io/headless-mirror-svc-name": format!("db{h}-east")}),
                Some(format!("db{h}-{e}.db{h}.scale.svc.cluster.local")),
                serde_json::json!({}),
                false,
            ));
        }
    }
    let started = Instant::now();
    rt.block_on(async {
        use futures::StreamExt;
        futures::stream::iter(all)
            .for_each_concurrent(16, |o| {
                let services = services.clone();
                async move {
                    services.create(&Default::default(), &o).await.unwrap();
                }
            })
            .await;
    });
    println!(
        "created 1,000 federated Services and 100 headless mirrors of 10 hosts (2,100 Services) in {:.1?}",
        started.elapsed()
    );

    let s = spawn_binary(&["--kubeconfig", &k.kubeconfig("dns"), "--source", "linkerd"]);
    let sync_started = Instant::now();
    until("ready", 300, || ready(&s));
    println!("initial sync of the server: {:.1?}", sync_started.elapsed());
    std::thread::sleep(Duration::from_secs(3));
    print_memory(&s, "2,100 of Linkerd's Services");
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    assert!(query_a(s.dns, &sock, "svc999.scale.svc.clusterset.local").is_some());
    assert!(query_a(s.dns, &sock, "db99-9.east.db99.scale.svc.clusterset.local").is_some());
    let srv_port = |sock: &std::net::UdpSocket| -> Option<u16> {
        let m = common::udp_exchange_blocking(
            sock,
            s.dns,
            &common::query(
                "_http._tcp.svc0.scale.svc.clusterset.local",
                RecordType::SRV,
                None,
            ),
        )?;
        m.answers.iter().find_map(|r| match &r.data {
            hickory_proto::rr::RData::SRV(srv) => Some(srv.port),
            _ => None,
        })
    };
    let port = |n: u32| 10_000 + n as u16;
    time_changes(
        &rt,
        &s,
        |n| {
            let patch = serde_json::json!({"spec": {"ports": [{"name": "http", "protocol": "TCP", "port": port(n)}]}});
            rt.block_on(services.patch(
                "svc0-federated",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            ))
            .unwrap();
        },
        |n| srv_port(&sock) == Some(port(n)),
    );
}

/// `capacity`: what a capacity planner sizes a deployment with, through the Kubernetes source.
/// One API server grows through three workloads: 1,000 ServiceImports (half ClusterSetIP, half
/// headless) with one EndpointSlice of 10 endpoints each (10,000 endpoints), 10,000 such imports
/// (100,000), then the same 10,000 with 100 endpoints a slice (1,000,000). At each, every build
/// in `BINS` (`name=path ...`) is started ROUNDS times (default 3), fresh and without caps, in
/// turn: the seconds from start to ready, then VmRSS and VmHWM 3 s later; the median and
/// [min-max] of each; at the largest, each build once more with the default caps. `STAGES=N` stops after the first N workloads; `HOLD=1` then keeps the API
/// server up (printing the kubeconfig to use) until the file it names exists, or for an hour,
/// for measurements by hand (a heap profiler, `malloc_stats`).
/// The builds named in `BINS` (`name=path ...`), or this one.
fn bins() -> Vec<(String, String)> {
    std::env::var("BINS")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .map(|b| {
            b.split_whitespace()
                .map(|kv| {
                    let (k, v) = kv.split_once('=').expect("BINS: name=path ...");
                    (k.to_string(), v.to_string())
                })
                .collect()
        })
        .unwrap_or_else(|| vec![("this".into(), common::BIN.into())])
}

fn capacity() {
    let bins = bins();
    let rounds: usize = std::env::var("ROUNDS").map_or(3, |r| r.parse().expect("ROUNDS: a count"));
    let (k, rt, imports, slices) = scale_cluster();
    let kubeconfig = k.kubeconfig("dns");
    // (imports, endpoints per import): each stage adds imports or replaces the slices.
    let stages: [(u32, u32); 3] = [(1_000, 10), (10_000, 10), (10_000, 100)];
    let upto: usize = std::env::var("STAGES").map_or(3, |n| n.parse().expect("STAGES: a count"));
    let mut have = (0u32, 10u32);
    for (count, per) in stages.into_iter().take(upto) {
        let started = Instant::now();
        rt.block_on(async {
            use futures::StreamExt;
            futures::stream::iter(0..count)
                .for_each_concurrent(16, |i| {
                    let (imports, slices) = (imports.clone(), slices.clone());
                    let fresh = i >= have.0;
                    let object = scale_slice(i, per);
                    async move {
                        if fresh {
                            imports
                                .create(&Default::default(), &scale_import(i))
                                .await
                                .unwrap();
                            slices.create(&Default::default(), &object).await.unwrap();
                        } else {
                            let patch = serde_json::json!({"endpoints": object.data["endpoints"]});
                            slices
                                .patch(
                                    &format!("svc{i}-east"),
                                    &kube::api::PatchParams::default(),
                                    &kube::api::Patch::Merge(&patch),
                                )
                                .await
                                .unwrap();
                        }
                    }
                })
                .await;
        });
        if have != (count, per) {
            println!(
                "{count} imports of {per} endpoints ({} endpoints) written in {:.1?}",
                count * per,
                started.elapsed()
            );
        }
        have = (count, per);
        for (name, bin) in &bins {
            let mut runs: Vec<(f64, f64, f64)> = Vec::new();
            for _ in 0..rounds {
                let start = Instant::now();
                let s = spawn_program(
                    bin,
                    &[&["--kubeconfig", &kubeconfig][..], &NO_CAPS].concat(),
                );
                until("ready", 900, || ready(&s));
                let to_ready = start.elapsed().as_secs_f64();
                std::thread::sleep(Duration::from_secs(3));
                assert_eq!(
                    metric_value(&s, "clusterset_dns_endpoints"),
                    f64::from(count * per),
                    "every endpoint is served"
                );
                let (rss, hwm) = memory_kb(&s);
                runs.push((to_ready, rss / 1000.0, hwm / 1000.0));
            }
            let [t, rss, hwm] = spreads(&runs);
            println!(
                "{count} imports x {per} endpoints, {name}: ready {:.2} s [{:.2}-{:.2}], VmRSS {:.1} MB [{:.1}-{:.1}], VmHWM {:.1} MB [{:.1}-{:.1}]",
                t.0, t.1, t.2, rss.0, rss.1, rss.2, hwm.0, hwm.1, hwm.2
            );
        }
    }
    // At the largest workload, the default caps: the most a server holds unless told otherwise.
    if upto >= stages.len() {
        for (name, bin) in &bins {
            let s = spawn_program(bin, &["--kubeconfig", &kubeconfig]);
            until("ready", 900, || ready(&s));
            std::thread::sleep(Duration::from_secs(3));
            let (rss, hwm) = memory_kb(&s);
            println!(
                "default caps, {name}: {} names and {} endpoints served, {} services held back: VmRSS {:.1} MB, VmHWM {:.1} MB",
                metric_value(&s, "clusterset_dns_names"),
                metric_value(&s, "clusterset_dns_endpoints"),
                metric_value(&s, "clusterset_dns_refused_services{limit=\"zone_names\"}"),
                rss / 1000.0,
                hwm / 1000.0
            );
        }
    }
    if std::env::var("HOLD").is_ok_and(|h| h == "1") {
        let done = std::env::temp_dir().join(format!("capacity-done-{}", std::process::id()));
        println!(
            "holding the API server: --kubeconfig {kubeconfig}; touch {} to end",
            done.display()
        );
        let until = Instant::now() + Duration::from_secs(3600);
        while !done.exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

/// `local-slices`: what watching this cluster's headless Services' slices (for Lighthouse's
/// Globalnet slices of this cluster) costs a server that serves the MCS API: 1,000 imports of
/// 10 endpoints beside `N` (default 10,000) headless Services' slices of 10 endpoints, none of
/// them imported; each build of `BINS` started `ROUNDS` times (default 3), as cluster west,
/// without a Lighthouse Globalnet slice and then with one: time to ready, memory once ready;
/// then 1,000 changes of those slices (one at a time) and the server's CPU time over them, per
/// change.
fn local_slices() {
    let n: u32 = std::env::var("N").map_or(10_000, |n| n.parse().expect("N: a count"));
    let rounds: usize = std::env::var("ROUNDS").map_or(3, |r| r.parse().expect("ROUNDS: a count"));
    let (k, rt, imports, slices) = scale_cluster();
    let kubeconfig = k.kubeconfig("dns");
    let headless = |i: u32, round: u32| -> kube::api::DynamicObject {
        let endpoints: Vec<serde_json::Value> = (0..10u32)
            .map(|e| serde_json::json!({"addresses": [format!("10.{}.{}.{}", 64 + (e + round) % 64, (i / 256) % 256, i % 256)], "hostname": format!("pod-{e}"), "conditions": {"ready": true}}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("hl{i}-abcde"), "namespace": "scale",
                         "labels": {"kubernetes.io/service-name": format!("hl{i}"), "service.kubernetes.io/headless": "",
                                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
            "addressType": "IPv4", "ports": [{"name": "http", "protocol": "TCP", "port": 80}], "endpoints": endpoints
        }))
        .unwrap()
    };
    let started = Instant::now();
    rt.block_on(async {
        use futures::StreamExt;
        futures::stream::iter(0..1000u32.max(n))
            .for_each_concurrent(16, |i| {
                let (imports, slices) = (imports.clone(), slices.clone());
                let local = headless(i, 0);
                async move {
                    if i < 1000 {
                        imports
                            .create(&Default::default(), &scale_import(i))
                            .await
                            .unwrap();
                        slices
                            .create(&Default::default(), &scale_slice(i, 10))
                            .await
                            .unwrap();
                    }
                    if i < n {
                        slices.create(&Default::default(), &local).await.unwrap();
                    }
                }
            })
            .await;
    });
    println!(
        "1,000 imports of 10 endpoints and {n} headless Services' slices of 10 written in {:.1?}",
        started.elapsed()
    );
    let mut generation = 0u32;
    // First with no Lighthouse Globalnet slice (this cluster's own slices are then not
    // watched), then with one of this cluster, west's.
    for stage in ["no Globalnet slice", "one Globalnet slice of this cluster"] {
        if stage != "no Globalnet slice" {
            let lighthouse: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": "svc1-west", "namespace": "scale",
                             "labels": {"multicluster.kubernetes.io/service-name": "svc1", "multicluster.kubernetes.io/source-cluster": "west",
                                        "lighthouse.submariner.io/is-headless": "true"},
                             "annotations": {"lighthouse.submariner.io/globalnet-enabled": "true"}},
                "addressType": "IPv4", "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
                "endpoints": [{"addresses": ["10.250.0.1"], "hostname": "pod-0"}]
            }))
            .unwrap();
            rt.block_on(slices.create(&Default::default(), &lighthouse))
                .unwrap();
        }
        for (name, bin) in bins() {
            let mut runs: Vec<(f64, f64, f64)> = Vec::new();
            for round in 0..rounds {
                let start = Instant::now();
                let s = spawn_program(&bin, &["--kubeconfig", &kubeconfig, "--cluster-id", "west"]);
                until("ready", 900, || ready(&s));
                let to_ready = start.elapsed().as_secs_f64();
                std::thread::sleep(Duration::from_secs(3));
                let (rss, hwm) = memory_kb(&s);
                runs.push((to_ready, rss / 1000.0, hwm / 1000.0));
                if round + 1 < rounds {
                    continue;
                }
                let watched = metric_value(
                    &s,
                    "clusterset_dns_source_objects{kind=\"LocalEndpointSlice\"}",
                );
                // 1,000 changes of the headless slices, written one after another; the server's CPU
                // time from the first to 2 s after the last (its events all handled by then).
                let cpu = || cpu_seconds_of(s.child.id());
                // Each measurement writes addresses no earlier one wrote: every patch changes.
                generation += 1;
                let (before, t0) = (cpu(), Instant::now());
                rt.block_on(async {
                    for c in 0..1000u32 {
                        let i = c % n.max(1);
                        let patch = serde_json::json!({"endpoints": headless(i, generation * 8 + c / n.max(1)).data["endpoints"]});
                        slices
                            .patch(&format!("hl{i}-abcde"), &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
                            .await
                            .unwrap();
                    }
                });
                let wrote = t0.elapsed();
                std::thread::sleep(Duration::from_secs(2));
                let used = cpu() - before;
                println!(
                    "{name}, {stage}: {watched} headless slices watched; 1,000 changes written in {:.1?}: server CPU {:.3} s, {:.1} us a change",
                    wrote,
                    used,
                    used * 1e6 / 1000.0
                );
            }
            let [t, rss, hwm] = spreads(&runs);
            println!(
                "{name}, {stage}: ready {:.2} s [{:.2}-{:.2}], VmRSS {:.1} MB [{:.1}-{:.1}], VmHWM {:.1} MB [{:.1}-{:.1}] ({rounds} starts)",
                t.0, t.1, t.2, rss.0, rss.1, rss.2, hwm.0, hwm.1, hwm.2
            );
        }
    }
}

/// Of runs of (time to ready, VmRSS, VmHWM): each one's median, least and most.
fn spreads(runs: &[(f64, f64, f64)]) -> [(f64, f64, f64); 3] {
    let spread = |f: fn(&(f64, f64, f64)) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    [spread(|r| r.0), spread(|r| r.1), spread(|r| r.2)]
}

/// Process `pid`'s CPU time in seconds.
fn cpu_seconds_of(pid: u32) -> f64 {
    // Its threads' time on a CPU as the scheduler counts it, in nanoseconds (`stat` counts in
    // 10 ms ticks, too coarse for a thousand events).
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let ns: u64 = tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    ns as f64 / 1e9
}

/// The server's VmRSS and VmHWM in kB.
fn memory_kb(s: &Running) -> (f64, f64) {
    memory_kb_of(s.child.id())
}

/// Process `pid`'s VmRSS and VmHWM in kB.
fn memory_kb_of(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb = |key: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

/// `bridge`: `clusterset-dns linkerd-bridge` (the export half) with 1,000 ServiceExports of
/// 1,000 Services: the time until all are labelled and Ready, the bridge's memory then, and
/// 1,000 more exports created one at a time, each timed from its creation until its Service
/// has Linkerd's label and the export `Ready=True` (read from the API server every 2 ms).
fn bridge() {
    let k = Cluster::start();
    let crd = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/crds/multicluster.x-k8s.io_serviceexports.yaml"
    );
    k.apply(&std::fs::read_to_string(crd).unwrap());
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: scale}\n");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(admin_client(&k));
    let resource = kube::discovery::ApiResource {
        group: "multicluster.x-k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "multicluster.x-k8s.io/v1beta1".into(),
        kind: "ServiceExport".into(),
        plural: "serviceexports".into(),
    };
    let exports: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), "scale", &resource);
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(client.clone(), "scale");
    let service = |i: u32| -> k8s_openapi::api::core::v1::Service {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("svc{i}"), "namespace": "scale"},
            "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80}]}
        }))
        .unwrap()
    };
    let export = |i: u32| -> kube::api::DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
            "metadata": {"name": format!("svc{i}"), "namespace": "scale"}
        }))
        .unwrap()
    };
    rt.block_on(async {
        use futures::StreamExt;
        futures::stream::iter(0..2000u32)
            .for_each_concurrent(16, |i| {
                let (services, exports) = (services.clone(), exports.clone());
                let (s, e) = (service(i), export(i));
                async move {
                    services.create(&Default::default(), &s).await.unwrap();
                    if i < 1000 {
                        exports.create(&Default::default(), &e).await.unwrap();
                    }
                }
            })
            .await;
    });
    let admin: std::net::SocketAddr = format!("127.0.0.1:{}", common::k8s::free_port())
        .parse()
        .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_clusterset-dns"))
        .args(["linkerd-bridge", "--halves", "export"])
        .args(["--kubeconfig", &k.kubeconfig("admin")])
        .args([
            "--admin-listen",
            &admin.to_string(),
            "--lease-namespace",
            "scale",
        ])
        .args(["--log-level", "warn"])
        .spawn()
        .unwrap();
    let labelled = || {
        let lp = kube::api::ListParams::default().labels("mirror.linkerd.io/federated=member");
        rt.block_on(services.list_metadata(&lp))
            .unwrap()
            .items
            .len()
    };
    let started = Instant::now();
    until("1,000 Services labelled", 600, || labelled() == 1000);
    let ready = |i: u32| {
        let Ok(e) = rt.block_on(exports.get(&format!("svc{i}"))) else {
            return false;
        };
        e.data["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    };
    until("1,000 exports Ready", 600, || (0..1000).all(ready));
    println!(
        "linkerd-bridge: 1,000 exports labelled and Ready {:.1?} after start",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_secs(3));
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    for l in status
        .lines()
        .filter(|l| l.starts_with("VmRSS") || l.starts_with("VmHWM"))
    {
        println!("bridge memory with 1,000 exports of 2,000 Services: {l}");
    }
    let mut took = Vec::with_capacity(1000);
    for i in 1000..2000u32 {
        let t0 = Instant::now();
        rt.block_on(exports.create(&Default::default(), &export(i)))
            .unwrap();
        let deadline = t0 + Duration::from_secs(10);
        loop {
            let svc = rt.block_on(services.get(&format!("svc{i}"))).unwrap();
            let has = svc
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("mirror.linkerd.io/federated"));
            if has.is_some_and(|v| v == "member") && ready(i) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "export svc{i} not labelled and Ready in 10 s"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        took.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    took.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "ServiceExport created -> Service labelled and Ready=True, 1000 exports: median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&took, 0.5),
        percentile(&took, 0.9),
        percentile(&took, 0.99),
        took[took.len() - 1]
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// `bridge-import`: `clusterset-dns linkerd-bridge` with both halves, 1,000 ServiceExports of
/// 1,000 Services and 1,000 of Linkerd's mirrors (one Link): the time until all exports are
/// labelled and all imports written, the bridge's memory then, and the time from each of 1,000
/// more mirrors, created one at a time, to its ServiceImport and slice.
fn bridge_import() {
    let k = Cluster::start();
    for crd in [
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/crds/multicluster.x-k8s.io_serviceexports.yaml"
        ),
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/crds/multicluster.x-k8s.io_serviceimports.yaml"
        ),
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/k8s/crds/linkerd-links.yaml"
        ),
    ] {
        k.apply(&std::fs::read_to_string(crd).unwrap());
    }
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: scale}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: linkerd-multicluster}\n");
    until("the CRDs served", 60, || {
        k.kubectl_ok(&["get", "serviceimports,serviceexports,links", "-A"])
    });
    k.apply("apiVersion: multicluster.linkerd.io/v1alpha3\nkind: Link\nmetadata: {name: east, namespace: linkerd-multicluster}\nspec: {targetClusterName: east}\n");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(admin_client(&k));
    let resource = |kind: &str, plural: &str| kube::discovery::ApiResource {
        group: "multicluster.x-k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "multicluster.x-k8s.io/v1beta1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    let exports: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        client.clone(),
        "scale",
        &resource("ServiceExport", "serviceexports"),
    );
    let imports: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        client.clone(),
        "scale",
        &resource("ServiceImport", "serviceimports"),
    );
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(client.clone(), "scale");
    let slices: kube::Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        kube::Api::namespaced(client.clone(), "scale");
    // A service of this cluster (exported), or Link east's mirror of remote service `m{i}`, in
    // the shape Linkerd's service mirror writes (see tests/integration/linkerd_source.rs).
    let service = |i: u32| -> k8s_openapi::api::core::v1::Service {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("svc{i}"), "namespace": "scale"},
            "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80}]}
        }))
        .unwrap()
    };
    let mirror = |i: u32| -> k8s_openapi::api::core::v1::Service {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {
                "name": format!("m{i}-east"), "namespace": "scale",
                "labels": {"mirror.linkerd.io/mirrored-service": "true", "mirror.linkerd.io/cluster-name": "east"},
                "annotations": {"mirror.linkerd.io/remote-svc-fq-name": format!("m{i}.scale.svc.cluster.local")}
            },
            "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80}]}
        }))
        .unwrap()
    };
    let export = |i: u32| -> kube::api::DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
            "metadata": {"name": format!("svc{i}"), "namespace": "scale"}
        }))
        .unwrap()
    };
    rt.block_on(async {
        use futures::StreamExt;
        futures::stream::iter(0..1000u32)
            .for_each_concurrent(16, |i| {
                let (services, exports) = (services.clone(), exports.clone());
                let (s, m, e) = (service(i), mirror(i), export(i));
                async move {
                    services.create(&Default::default(), &s).await.unwrap();
                    services.create(&Default::default(), &m).await.unwrap();
                    exports.create(&Default::default(), &e).await.unwrap();
                }
            })
            .await;
    });
    let admin: std::net::SocketAddr = format!("127.0.0.1:{}", common::k8s::free_port())
        .parse()
        .unwrap();
    let writes_before = k.writes();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_clusterset-dns"))
        .args(["linkerd-bridge", "--halves", "export,import"])
        .args(["--kubeconfig", &k.kubeconfig("admin")])
        .args([
            "--admin-listen",
            &admin.to_string(),
            "--lease-namespace",
            "scale",
        ])
        .args(["--log-level", "warn"])
        .spawn()
        .unwrap();
    let started = Instant::now();
    let count = |lp: kube::api::ListParams, what: &str| match what {
        "labelled" => rt
            .block_on(services.list_metadata(&lp))
            .unwrap()
            .items
            .len(),
        "imports" => rt.block_on(imports.list_metadata(&lp)).unwrap().items.len(),
        _ => rt.block_on(slices.list_metadata(&lp)).unwrap().items.len(),
    };
    until(
        "1,000 Services labelled, 1,000 imports with their slices",
        600,
        || {
            count(
                kube::api::ListParams::default().labels("mirror.linkerd.io/federated=member"),
                "labelled",
            ) == 1000
                && count(kube::api::ListParams::default(), "imports") == 1000
                && count(
                    kube::api::ListParams::default().labels(
                        "endpointslice.kubernetes.io/managed-by=linkerd-bridge.clusterset-dns.io",
                    ),
                    "slices",
                ) == 1000
        },
    );
    println!(
        "linkerd-bridge (both halves): 1,000 exports labelled and 1,000 imports written {:.1?} after start",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_secs(3));
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    for l in status
        .lines()
        .filter(|l| l.starts_with("VmRSS") || l.starts_with("VmHWM"))
    {
        println!("bridge memory with 1,000 exports and 1,000 imports (3,000 Services): {l}");
    }
    let converged = k.writes();
    // At least: per export a label and a status (2,000); per import the ServiceImport, its
    // status and a slice (3,000); the Lease and Events besides.
    println!(
        "API writes from start to 3 s after converging (the minimum: 2,000 for the exports, 3,000 for the imports, and Events): {}",
        writes_between(&writes_before, &converged, &[]).1
    );
    let mut took = Vec::with_capacity(1000);
    for i in 1000..2000u32 {
        let t0 = Instant::now();
        rt.block_on(services.create(&Default::default(), &mirror(i)))
            .unwrap();
        let deadline = t0 + Duration::from_secs(10);
        let lp = kube::api::ListParams::default()
            .labels(&format!("multicluster.kubernetes.io/service-name=m{i}"));
        loop {
            let written = rt
                .block_on(imports.get_opt(&format!("m{i}")))
                .unwrap()
                .is_some()
                && !rt
                    .block_on(slices.list_metadata(&lp))
                    .unwrap()
                    .items
                    .is_empty();
            if written {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "mirror m{i}-east not imported in 10 s"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        took.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    std::thread::sleep(Duration::from_secs(3));
    println!(
        "API writes for 1,000 mirrors, theirs included (the minimum: 1,000 mirrors, 3,000 for their imports): {}",
        writes_between(&converged, &k.writes(), &[]).1
    );
    took.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "mirror Service created -> ServiceImport and EndpointSlice, 1000 mirrors: median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&took, 0.5),
        percentile(&took, 0.9),
        percentile(&took, 0.99),
        took[took.len() - 1]
    );
    let _ = child.kill();
    let _ = child.wait();
}
