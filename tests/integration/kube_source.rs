//! The Kubernetes source against a real kube-apiserver and etcd (built once by
//! tests/k8s/setup.sh) on loopback: initial sync and readiness, adds, updates and deletes of
//! imports and slices, a malformed object beside good ones, the API server killed and restarted
//! while answers continue, and both CRD versions (v1alpha1 only, then v1alpha1 + v1beta1).
//! The binary runs as a user that has only the ClusterRole from deploy/. The measurements at
//! scale are `benches/source.rs`.

use crate::common;

use std::net::SocketAddr;

use std::process::Command;
use std::time::{Duration, Instant};

use common::k8s::{ApiErrors, Cluster, Proxy, crd, import, rbac, slice};
use common::{Steps, dig, metric_value, query_a, ready, short, spawn_binary, until};

pub(crate) fn status(dns: SocketAddr, name: &str) -> String {
    let out = dig(dns, name);
    out.split("status: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or("no answer")
        .to_string()
}

#[test]
fn kubernetes_source_against_a_real_api_server() {
    let _module = common::module(module_path!());
    let mut steps = Steps::default();
    let mut k = cluster("v1alpha1", rbac(), &["shop", "data"]);
    steps.next("1. the initial list");
    // Present before the server starts: the initial list.
    k.apply(&(import("v1alpha1", "shop", "web", "{type: ClusterSetIP, ips: [10.0.0.1], ports: [{name: http, port: 80}]}")
        + &import("v1alpha1", "data", "db", "{type: Headless, ports: [{name: http, port: 80}]}")
        + &slice("data", "db-east", "db", "east", "[{addresses: [10.1.0.1], hostname: db-0}]")
        // The CRD schema admits this; we must skip it and serve the rest.
        + &import("v1alpha1", "shop", "bad", "{type: ClusterSetIP, ips: [10.0.0.300], ports: [{port: 80}]}")));

    let dns_kubeconfig = k.kubeconfig("dns");
    let s = spawn_binary(&["--kubeconfig", &dns_kubeconfig]);
    until("ready", 30, || ready(&s));
    assert!(s.logged("\"version\":\"v1alpha1\""), "discovered v1alpha1");
    assert_eq!(short(s.dns, "web.shop.svc.clusterset.local"), ["10.0.0.1"]);
    assert_eq!(short(s.dns, "db.data.svc.clusterset.local"), ["10.1.0.1"]);
    assert_eq!(
        short(s.dns, "db-0.east.db.data.svc.clusterset.local"),
        ["10.1.0.1"]
    );
    assert_eq!(status(s.dns, "bad.shop.svc.clusterset.local"), "NXDOMAIN");
    assert_eq!(
        metric_value(
            &s,
            "clusterset_dns_skipped_objects_total{kind=\"ServiceImport\",reason=\"bad_ip\"}"
        ),
        1.0
    );

    steps.next("2. imports and slices added, updated and deleted");
    // Add, update and delete, of imports and slices.
    k.apply(&import(
        "v1alpha1",
        "shop",
        "web",
        "{type: ClusterSetIP, ips: [10.0.0.2], ports: [{name: http, port: 80}]}",
    ));
    until("updated import", 10, || {
        short(s.dns, "web.shop.svc.clusterset.local") == ["10.0.0.2"]
    });
    k.apply(&slice(
        "data",
        "db-west",
        "db",
        "west",
        "[{addresses: [10.2.0.1], hostname: db-1}]",
    ));
    until("added slice", 10, || {
        short(s.dns, "db.data.svc.clusterset.local") == ["10.1.0.1", "10.2.0.1"]
    });
    k.delete("endpointslice", "data", "db-east");
    until("deleted slice", 10, || {
        status(s.dns, "db-0.east.db.data.svc.clusterset.local") == "NXDOMAIN"
    });
    assert_eq!(short(s.dns, "db.data.svc.clusterset.local"), ["10.2.0.1"]);
    k.apply(&import(
        "v1alpha1",
        "shop",
        "api",
        "{type: ClusterSetIP, ips: [10.0.0.3], ports: [{port: 80}]}",
    ));
    until("added import", 10, || {
        short(s.dns, "api.shop.svc.clusterset.local") == ["10.0.0.3"]
    });
    k.delete("serviceimport", "shop", "api");
    until("deleted import", 10, || {
        status(s.dns, "api.shop.svc.clusterset.local") == "NXDOMAIN"
    });
    steps.next("3. a fixed bad object is served");
    // A fixed bad object is served.
    k.apply(&import(
        "v1alpha1",
        "shop",
        "bad",
        "{type: ClusterSetIP, ips: [10.0.0.30], ports: [{port: 80}]}",
    ));
    until("repaired import", 10, || {
        short(s.dns, "bad.shop.svc.clusterset.local") == ["10.0.0.30"]
    });

    steps.next("4. `clusterset-dns zone` prints what the server answers");
    // `clusterset-dns zone` lists the same cluster with the same flags and prints what the
    // server answers, record for record.
    let printed =
        common::run_ok(Command::new(common::BIN).args(["zone", "--kubeconfig", &dns_kubeconfig]));
    let lines: Vec<String> = printed
        .lines()
        .filter(|l| !l.starts_with(';'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    for want in [
        "web.shop.svc.clusterset.local. 5 IN A 10.0.0.2",
        "bad.shop.svc.clusterset.local. 5 IN A 10.0.0.30",
        "db.data.svc.clusterset.local. 5 IN A 10.2.0.1",
        "db-1.west.db.data.svc.clusterset.local. 5 IN A 10.2.0.1",
        "_http._tcp.db.data.svc.clusterset.local. 5 IN SRV 0 100 80 db-1.west.db.data.svc.clusterset.local.",
    ] {
        assert!(
            lines.iter().any(|l| l == want),
            "missing {want}:\n{printed}"
        );
    }
    assert!(!printed.contains("api.shop"), "{printed}");
    assert!(!printed.contains("db-0.east"), "{printed}");
    steps.next("5. an API server that cannot be reached");
    // An API server that cannot be reached: a clear error once --timeout is over.
    let dead = k
        .kubeconfig("dns")
        .replace("dns.kubeconfig", "dead.kubeconfig");
    std::fs::write(
        &dead,
        std::fs::read_to_string(&dns_kubeconfig)
            .unwrap()
            .replace(&format!("127.0.0.1:{}", k.api_port), "127.0.0.1:9"),
    )
    .unwrap();
    let started = Instant::now();
    let out = Command::new(common::BIN)
        .args(["zone", "--kubeconfig", &dead, "--timeout", "2s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("within 2s"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));

    steps.next("6. the API server dies and comes back");
    // The API server dies: answers go on from the last known zone; it comes back: changes flow.
    k.kill_api();
    for _ in 0..20 {
        assert_eq!(short(s.dns, "web.shop.svc.clusterset.local"), ["10.0.0.2"]);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ready(&s), "still ready while serving the last known zone");
    k.start_api();
    k.apply(&import(
        "v1alpha1",
        "shop",
        "after",
        "{type: ClusterSetIP, ips: [10.0.0.4], ports: [{port: 80}]}",
    ));
    until("change after the API server restart", 60, || {
        short(s.dns, "after.shop.svc.clusterset.local") == ["10.0.0.4"]
    });
    assert!(
        metric_value(
            &s,
            "clusterset_dns_source_errors_total{kind=\"ServiceImport\"}"
        ) >= 1.0,
        "watch failures are counted"
    );
    assert_eq!(short(s.dns, "db.data.svc.clusterset.local"), ["10.2.0.1"]);
    drop(s);

    steps.next("7. v1beta1 is preferred once served");
    // The CRD now serves v1beta1 too: a new start prefers it and reads objects of both versions.
    k.apply(&crd("v1beta1"));
    k.apply(&clusterset_ip("beta", "10.0.0.5"));
    let s = spawn_binary(&["--kubeconfig", &dns_kubeconfig]);
    until("ready with v1beta1", 30, || ready(&s));
    assert!(s.logged("\"version\":\"v1beta1\""), "discovered v1beta1");
    assert_eq!(short(s.dns, "beta.shop.svc.clusterset.local"), ["10.0.0.5"]);
    assert_eq!(short(s.dns, "web.shop.svc.clusterset.local"), ["10.0.0.2"]);
    steps.next("8. the version forced");
    // And the version can be forced.
    let s1 = spawn_binary(&[
        "--kubeconfig",
        &dns_kubeconfig,
        "--serviceimport-version",
        "v1alpha1",
    ]);
    until("ready with a forced v1alpha1", 30, || ready(&s1));
    assert_eq!(
        short(s1.dns, "beta.shop.svc.clusterset.local"),
        ["10.0.0.5"]
    );
    steps.next("9. --namespace narrows what is served");
    // --namespace narrows what is served.
    let s2 = spawn_binary(&["--kubeconfig", &dns_kubeconfig, "--namespace", "data"]);
    until("ready with one namespace", 30, || ready(&s2));
    assert_eq!(short(s2.dns, "db.data.svc.clusterset.local"), ["10.2.0.1"]);
    assert_eq!(status(s2.dns, "web.shop.svc.clusterset.local"), "NXDOMAIN");
}

/// A real API server with the ServiceImport CRD serving `version` (and the EndpointSlice API),
/// the role `role` for the user the server runs as, and `namespaces`.
pub(crate) fn cluster(version: &str, role: String, namespaces: &[&str]) -> Cluster {
    let k = Cluster::start();
    k.apply(&crd(version));
    k.apply(&role);
    let namespaces: String = namespaces
        .iter()
        .map(|n| format!("---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {n}}}\n"))
        .collect();
    k.apply(&namespaces);
    k
}

/// A cluster with the MCS CRDs (v1beta1), the server's role and, in namespace `shop`, the
/// headless `keep` (one endpoint: keep-0.east, 10.7.0.1) and the ClusterSetIP `web` (10.0.0.1).
fn shop() -> Cluster {
    let k = cluster("v1beta1", rbac(), &["shop"]);
    k.apply(
        &(import(
            "v1beta1",
            "shop",
            "keep",
            "{type: Headless, ports: [{name: http, port: 80}]}",
        ) + &slice(
            "shop",
            "keep-east",
            "keep",
            "east",
            "[{addresses: [10.7.0.1], hostname: keep-0}]",
        ) + &clusterset_ip("web", "10.0.0.1")),
    );
    k
}

/// A v1beta1 ClusterSetIP ServiceImport `name` in `shop` with one IP and port 80.
pub(crate) fn clusterset_ip(name: &str, ip: &str) -> String {
    import(
        "v1beta1",
        "shop",
        name,
        &format!("{{type: ClusterSetIP, ips: [{ip}], ports: [{{port: 80}}]}}"),
    )
}

/// A TCP proxy between the server and the API server that can drop every connection, stall
/// them (stop forwarding bytes), or refuse new ones.
#[test]
fn api_faults_keep_answers_and_converge() {
    let _module = common::module(module_path!());
    let mut k = shop();
    k.apply(&clusterset_ip("gone", "10.0.0.9"));

    // The server reaches the API server only through the proxy.
    let proxy = Proxy::start(format!("127.0.0.1:{}", k.api_port).parse().unwrap());
    let kubeconfig = k.dir.path().join("proxied.kubeconfig");
    let dns_config = std::fs::read_to_string(k.kubeconfig("dns"))
        .unwrap()
        .replace(
            &format!("127.0.0.1:{}", k.api_port),
            &proxy.addr.to_string(),
        );
    std::fs::write(&kubeconfig, dns_config).unwrap();
    let s = spawn_binary(&["--kubeconfig", kubeconfig.to_str().unwrap()]);
    until("ready", 30, || ready(&s));

    // Names that exist throughout must answer throughout, whatever happens to the API.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let checker = {
        let (stop, dns) = (stop.clone(), s.dns);
        std::thread::spawn(move || {
            let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let (mut good, mut bad) = (0u64, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                for name in [
                    "keep.shop.svc.clusterset.local",
                    "keep-0.east.keep.shop.svc.clusterset.local",
                ] {
                    match query_a(dns, &sock, name) {
                        Some(ip) if ip == std::net::Ipv4Addr::new(10, 7, 0, 1) => good += 1,
                        other => bad.push(format!("{name}: {other:?}")),
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            (good, bad)
        })
    };

    // Connections dropped: the watches reconnect.
    proxy.drop_all();
    k.apply(&clusterset_ip("web", "10.0.0.2"));
    until("change after dropped connections", 30, || {
        short(s.dns, "web.shop.svc.clusterset.local") == ["10.0.0.2"]
    });

    // Connections stalled: the last answers stay; once bytes flow again the change arrives.
    proxy.stall(true);
    k.apply(&clusterset_ip("web", "10.0.0.3"));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(short(s.dns, "web.shop.svc.clusterset.local"), ["10.0.0.2"]);
    proxy.stall(false);
    until("change after a stall", 30, || {
        short(s.dns, "web.shop.svc.clusterset.local") == ["10.0.0.3"]
    });

    // Cut off while objects change, etcd compacted and the API server restarted (its watch
    // cache starts at the new revision): reconnecting from the old resourceVersion gets 410
    // Gone, and the relist must converge without dropping unchanged names.
    let restarts_before = metric_value(
        &s,
        "clusterset_dns_source_restarts_total{kind=\"ServiceImport\"}",
    );
    proxy.refuse(true);
    proxy.drop_all();
    k.apply(&clusterset_ip("web", "10.0.0.4"));
    k.apply(&clusterset_ip("new", "10.0.0.5"));
    k.delete("serviceimport", "shop", "gone");
    k.compact();
    k.kill_api();
    k.start_api();
    proxy.refuse(false);
    until("convergence after 410 Gone", 60, || {
        short(s.dns, "web.shop.svc.clusterset.local") == ["10.0.0.4"]
            && short(s.dns, "new.shop.svc.clusterset.local") == ["10.0.0.5"]
            && status(s.dns, "gone.shop.svc.clusterset.local") == "NXDOMAIN"
    });
    assert!(
        metric_value(
            &s,
            "clusterset_dns_source_restarts_total{kind=\"ServiceImport\"}"
        ) > restarts_before,
        "the watch relisted"
    );
    assert!(
        metric_value(
            &s,
            "clusterset_dns_source_errors_total{kind=\"ServiceImport\"}"
        ) >= 1.0
    );

    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (good, bad) = checker.join().unwrap();
    assert!(
        bad.is_empty(),
        "{} wrong answers for names that existed throughout (of {}): {:?}",
        bad.len(),
        good + bad.len() as u64,
        &bad[..bad.len().min(5)]
    );
    assert!(good > 100, "the checker ran ({good} answers)");
}

/// The API server answering 5xx (500 and 503, through a real `kubectl proxy`): the server keeps
/// its last answers and stays ready, counts and logs the errors, retries with backoff rather
/// than in a loop, shows the data going stale, and converges once the API server answers again.
#[test]
fn api_server_errors_keep_answers_and_converge() {
    let _module = common::module(module_path!());
    let k = shop();
    let api = ApiErrors::start(&k, "dns");
    let s = spawn_binary(&["--kubeconfig", &api.kubeconfig(&k)]);
    until("ready", 30, || ready(&s));
    assert_eq!(short(s.dns, "web.shop.svc.clusterset.local"), ["10.0.0.1"]);
    let errors = |kind: &str| {
        metric_value(
            &s,
            &format!("clusterset_dns_source_errors_total{{kind=\"{kind}\"}}"),
        )
    };
    let errors_before = errors("ServiceImport") + errors("EndpointSlice");
    let last_event = || metric_value(&s, "clusterset_dns_source_last_event_timestamp_seconds");
    let event_before = last_event();

    // 503 then 500 for every request, while objects change behind it.
    for code in [503, 500] {
        api.fail_with(code);
        if code == 503 {
            k.apply(&clusterset_ip("web", "10.0.0.2"));
            k.apply(&clusterset_ip("late", "10.0.0.5"));
        }
        // The client backs off, so the first request with this code may take a while (the
        // backoff carries over from the previous code); then count requests over 4 s.
        let served_before = api.served();
        until(format!("a request answered {code}"), 60, || {
            api.served() > served_before
        });
        let (started, window) = (Instant::now(), api.served());
        std::thread::sleep(Duration::from_secs(4));
        // The last known zone, still ready.
        assert_eq!(short(s.dns, "web.shop.svc.clusterset.local"), ["10.0.0.1"]);
        assert_eq!(
            short(s.dns, "keep-0.east.keep.shop.svc.clusterset.local"),
            ["10.7.0.1"]
        );
        assert_eq!(status(s.dns, "late.shop.svc.clusterset.local"), "NXDOMAIN");
        assert!(ready(&s), "still ready while the API server fails");
        // Retried with backoff: a handful of requests in 4 s, not a loop.
        let tries = api.served() - window;
        println!("{code}: {tries} more requests answered with it in 4 s");
        assert!(
            tries <= 40,
            "{tries} requests answered {code} in {:.1?}",
            started.elapsed()
        );
    }
    assert!(
        errors("ServiceImport") + errors("EndpointSlice") >= errors_before + 2.0,
        "watch errors counted"
    );
    // Staleness shows: no event since the failures began.
    assert_eq!(last_event(), event_before);
    let log = s.log.lock().unwrap().join("\n");
    assert!(
        log.contains("watch failed") && log.contains("503") && log.contains("500"),
        "the failures are logged with their status"
    );

    api.fail_with(0);
    until("convergence after the API server recovers", 90, || {
        short(s.dns, "web.shop.svc.clusterset.local") == ["10.0.0.2"]
            && short(s.dns, "late.shop.svc.clusterset.local") == ["10.0.0.5"]
    });
    assert!(last_event() > event_before, "events flow again");
}

/// `dig +short` lines in the order served.
fn in_order(dns: SocketAddr, name: &str) -> Vec<String> {
    dig(dns, &format!("+short {name}"))
        .lines()
        .map(str::to_string)
        .collect()
}

/// The own cluster id from the ClusterProperty in a real API server: the CRD installed after
/// the server started (it is looked for again, quietly), the value changed, the object deleted
/// (locality off again); the answers follow each, as the RBAC of deploy/base allows.
#[test]
fn the_own_cluster_follows_the_clusterproperty_in_a_real_api_server() {
    let _module = common::module(module_path!());
    let k = cluster("v1beta1", rbac(), &["loc"]);
    k.apply(
        &(import(
            "v1beta1",
            "loc",
            "db",
            "{type: Headless, trafficDistribution: PreferClose, ports: [{name: http, port: 80}]}",
        ) + &slice(
            "loc",
            "db-east",
            "db",
            "east",
            "[{addresses: [10.40.1.1], hostname: e-0}]",
        ) + &slice(
            "loc",
            "db-west",
            "db",
            "west",
            "[{addresses: [10.40.2.1], hostname: w-0}]",
        )
            // mcs-api v0.5.2's status.endpointSliceObjects, kept by the API server: an import
            // whose implementation publishes no slices, and that has none, is counted.
            + "---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\n\
               metadata: {name: absent, namespace: loc}\nspec: {type: Headless, ports: [{port: 80}]}\n\
               status: {endpointSliceObjects: Absent}\n"),
    );
    let s = spawn_binary(&["--kubeconfig", &k.kubeconfig("dns")]);
    until("ready without the ClusterProperty CRD", 30, || ready(&s));
    assert_eq!(
        metric_value(
            &s,
            "clusterset_dns_skipped_objects_total{kind=\"ServiceImport\",reason=\"no_endpoint_slices\"}"
        ),
        1.0,
        "status.endpointSliceObjects: Absent read through the API"
    );
    let name = "db.loc.svc.clusterset.local";
    assert_eq!(
        in_order(s.dns, name),
        ["10.40.1.1", "10.40.2.1"],
        "no own cluster yet"
    );
    let info = |id: &str| format!("clusterset_dns_cluster_info{{cluster_id=\"{id}\"}}");

    // The CRD and the property: found at the next look (every 10 s), then answered.
    let crd_file = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds/clusterproperty.yaml"),
    )
    .unwrap();
    k.apply(&crd_file);
    let property = |value: &str| {
        format!(
            "apiVersion: about.k8s.io/v1alpha1\nkind: ClusterProperty\nmetadata: {{name: cluster.clusterset.k8s.io}}\nspec: {{value: {value}}}\n"
        )
    };
    let installed = Instant::now();
    k.apply(&property("west"));
    until("west's endpoint only", 30, || {
        in_order(s.dns, name) == ["10.40.2.1"]
    });
    let found = installed.elapsed();
    assert_eq!(metric_value(&s, &info("west")), 1.0);
    assert!(
        s.logged("\"kind\":\"ClusterProperty\""),
        "the watch of ClusterProperties is logged"
    );

    // A change is a watch event: answered as fast as any object change.
    k.apply(&property("east"));
    // From the write's completion (kubectl apply has returned) to the answer.
    let changed = Instant::now();
    until("east's endpoint only", 10, || {
        in_order(s.dns, name) == ["10.40.1.1"]
    });
    let followed = changed.elapsed();
    assert_eq!(metric_value(&s, &info("west")), 0.0);
    assert_eq!(metric_value(&s, &info("east")), 1.0);

    // A bad value: skipped and counted, and no own cluster.
    k.apply(&property("not.a.cluster.id"));
    until("no own cluster with a bad value", 10, || {
        in_order(s.dns, name) == ["10.40.1.1", "10.40.2.1"]
    });
    assert_eq!(
        metric_value(
            &s,
            "clusterset_dns_skipped_objects_total{kind=\"ClusterProperty\",reason=\"bad_cluster\"}"
        ),
        1.0
    );
    k.apply(&property("west"));
    until("west again", 10, || in_order(s.dns, name) == ["10.40.2.1"]);

    // Deleted: locality off again.
    assert!(k.kubectl_ok(&["delete", "clusterproperty", "cluster.clusterset.k8s.io"]));
    let deleted = Instant::now();
    until("every endpoint once the property is gone", 10, || {
        in_order(s.dns, name) == ["10.40.1.1", "10.40.2.1"]
    });
    let off = deleted.elapsed();
    assert_eq!(metric_value(&s, &info("west")), 0.0);
    eprintln!(
        "ClusterProperty: CRD installed to answered {found:.2?} (the next look, every 10 s); \
         value written to answered {followed:.1?}; deleted to locality off {off:.1?} (each from \
         kubectl's return)"
    );
}

/// Submariner Lighthouse with Globalnet, through a real API server (the objects of
/// tests/fixtures/implementations.yaml, part 4, on CRDs that serve v1alpha1 as Lighthouse's
/// do): this cluster's headless Services' slices are not watched while no Lighthouse Globalnet
/// slice exists; once one does, they are (with the endpointslice controller's
/// `service.kubernetes.io/headless` label: a slice without it is not even sent), as the RBAC of
/// deploy/base allows, and in its own cluster west, west's pods are answered by the addresses
/// west's own slice gives them; with that slice gone, by Lighthouse's slice as written, and
/// back again.
#[test]
fn lighthouse_globalnet_headless_answers_from_the_own_clusters_slices_in_a_real_api_server() {
    let _module = common::module(module_path!());
    let k = cluster("v1alpha1", rbac(), &["lighthouse"]);
    let fixture = common::fixture("implementations.yaml");
    let docs: Vec<&str> = fixture
        .split("\n---\n")
        .skip_while(|doc| !doc.contains("# 4. Submariner Lighthouse with Globalnet"))
        .collect();
    assert_eq!(
        docs.len(),
        4,
        "the import, two of Lighthouse's slices, west's own"
    );
    let own_slice = docs[3].to_string();
    // West's own slice of db, and a slice of a Service that is not headless.
    k.apply(&own_slice);
    k.apply(
        &own_slice
            .replace("name: db-x2f8k", "name: web-r4t8j")
            .replace(
                "kubernetes.io/service-name: db",
                "kubernetes.io/service-name: web",
            )
            .replace("    service.kubernetes.io/headless: \"\"\n", ""),
    );
    let s = spawn_binary(&["--kubeconfig", &k.kubeconfig("dns"), "--cluster-id", "west"]);
    until("ready", 30, || ready(&s));
    let watching = || s.logged("wanted now: watching");
    assert!(
        !watching(),
        "no Lighthouse Globalnet slice yet: not watched"
    );
    k.apply(&docs[..3].join("\n---\n"));
    let name = "db.lighthouse.svc.clusterset.local";
    let sorted = |dns, name: &str| {
        let mut got = short(dns, name);
        got.sort();
        got
    };
    until("west's pod by its own address", 10, || {
        sorted(s.dns, name) == ["198.18.68.5", "198.19.201.5"]
    });
    assert!(watching());
    assert_eq!(
        short(s.dns, "db-0.west.db.lighthouse.svc.clusterset.local"),
        ["198.18.68.5"]
    );
    assert_eq!(
        metric_value(
            &s,
            "clusterset_dns_source_objects{kind=\"LocalEndpointSlice\"}"
        ),
        1.0,
        "only the headless Service's slice is watched"
    );
    assert!(k.kubectl_ok(&["delete", "endpointslice", "-n", "lighthouse", "db-x2f8k"]));
    until("Lighthouse's slice of west as written", 10, || {
        sorted(s.dns, name) == ["198.19.200.5", "198.19.201.5"]
    });
    k.apply(&own_slice);
    until("west's own slice again", 10, || {
        sorted(s.dns, name) == ["198.18.68.5", "198.19.201.5"]
    });
}
