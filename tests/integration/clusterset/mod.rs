//! A real cluster set: two clusters, `east` and `west`, each a node of real components
//! ([`common::node`]) in a network namespace of its own, joined by a link with routes to each
//! other's pod CIDR (as sigs.k8s.io/mcs-api's e2e joins its two kind clusters). In each: the
//! MCS CRDs of sigs.k8s.io/mcs-api v0.5.2, the ClusterProperty naming the cluster, the MCS API's
//! own controller (sigs.k8s.io/mcs-api/controllers: the derived Service of each ClusterSetIP
//! import, its ClusterIP written into spec.ips, the imported slices relabelled for kube-proxy),
//! clusterset-dns from the Helm chart (its cluster id from the ClusterProperty, no flag) behind
//! CoreDNS, and a client pod. The export side is the test's syncer (tests/mcs/infra/syncer): no
//! implementation that exports across clusters can be built here. Nothing is written by hand
//! but the workloads and their ServiceExports; every connection is a real TCP connection from a
//! pod of one cluster to a pod of the other, through our answers. Needs root.

use crate::common;

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use common::Steps;
use common::docker::IMAGE;
use common::node::{Net, Node, join, lookups, repo, setup};
use common::percentile;
use common::until;

pub(crate) mod checks;
pub(crate) mod members;

use checks::*;
use members::*;

#[test]
fn a_real_cluster_set_of_two_clusters_with_the_mcs_controller() {
    let _module = common::module(module_path!());
    let mut steps = Steps::default();

    steps.next("0. two clusters from real components, joined");
    let mcs = setup("tests/mcs/setup.sh");
    let (mut east, mut west) = start_pair();

    steps.next("1. in each: the MCS CRDs, the ClusterProperty, the MCS controller, clusterset-dns behind CoreDNS");
    member_setup(&mut east, &mcs);
    member_setup(&mut west, &mcs);
    for m in [&east, &west] {
        until(
            format!("{}'s server knows its own cluster", m.name()),
            Duration::from_secs(30),
            || {
                let out = m
                    .node
                    .in_ns("curl")
                    .args(["-s", &format!("http://{}:9153/metrics", our_ip(m.node.net))])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout).contains(&format!(
                    "clusterset_dns_cluster_info{{cluster_id=\"{}\"}} 1",
                    m.name()
                ))
            },
        );
    }

    steps.next("2. the export syncer, the workloads, a client pod in each");
    let clusters = [
        ("east", east.node.path("admin.kubeconfig")),
        ("west", west.node.path("admin.kubeconfig")),
    ];
    start_syncer(&mut east, &clusters);
    workloads(&east, true);
    workloads(&west, false);
    for m in [&east, &west] {
        m.node.rollout("demo", "statefulset/db");
        m.node.wait_ready("client");
    }
    east.node.rollout("demo", "deployment/web");
    let east_web = east.pod_ips("app=web");
    assert_eq!(east_web.len(), 2, "{east_web:?}");

    steps.next("3a. ClusterSetIP across clusters: east exports web, west connects to it by name");
    let name = "web.demo.svc.clusterset.local";
    let watch = Watch::start(&west, vec![name.to_string()]);
    let imports = ApiWatch::start(
        &west,
        &[
            "-n",
            "demo",
            "get",
            "serviceimports",
            "--watch",
            "-o",
            "jsonpath={.metadata.name} {.spec.ips}{\"\\n\"}",
        ],
    );
    let exported = Instant::now();
    let exported_at = SystemTime::now();
    export(&east, "web");
    let mut first = None;
    until(
        "a connection from west to web",
        Duration::from_secs(120),
        || {
            first = west.connect(name);
            first.is_some()
        },
    );
    let connected = exported.elapsed();

    steps.next("3b. west's spec.ips is the ClusterIP of the Service west's controller derived");
    let ip = derived_ips(&west);
    until(
        "west's pod resolves web to west's spec.ips",
        Duration::from_secs(30),
        || west.resolve(name) == [ip.clone()],
    );

    steps.next("3c. each of east's backends is reached from west");
    every_backend_reached(&west, &east, name);
    let history = watch.finish().remove(0);
    export_chain(
        &east,
        imports.finish(),
        &history,
        exported_at,
        &ip,
        connected,
    );

    steps.next("3d. east's linkerd-bridge: web's ServiceExport gives Linkerd's label and says so");
    let label = || {
        east.node.k(&[
            "-n",
            "demo",
            "get",
            "service",
            "web",
            "-o",
            "jsonpath={.metadata.labels.mirror\\.linkerd\\.io/federated}",
        ])
    };
    let conditions = || {
        east.node.k(&[
            "-n",
            "demo",
            "get",
            "serviceexport",
            "web",
            "-o",
            "jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{\"\\n\"}{end}",
        ])
    };
    until(
        "east's web labelled and its export Ready",
        Duration::from_secs(60),
        || label() == "member" && conditions().contains("Ready=True Exported"),
    );
    let said = conditions();
    eprintln!("east's ServiceExport web, as kubectl shows it:\n{said}");
    assert!(said.contains("Valid=True"), "{said}");
    // No Linkerd mirror of another cluster's web is visible in east: a conflict cannot be
    // judged, and the condition says that rather than False.
    assert!(said.contains("Conflict=Unknown"), "{said}");
    // And an Event on the export says it was exported, as kubectl describe shows it.
    let events = || {
        east.node.k(&[
            "-n",
            "demo",
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=ServiceExport,involvedObject.name=web",
            "-o",
            "jsonpath={range .items[*]}{.type} {.reason}: {.message}{\"\\n\"}{end}",
        ])
    };
    until(
        "the Exported Event on east's web",
        Duration::from_secs(20),
        || events().contains("Normal Exported: labelled mirror.linkerd.io/federated=member"),
    );
    eprintln!("east's Events on ServiceExport web:\n{}", events());

    if hold_if_asked(&east, &west, "web.demo.svc.clusterset.local") {
        return;
    }

    steps.next("4. headless across clusters: the union, and db-0.east from west");
    export(&east, "db");
    export(&west, "db");
    let db = "db.demo.svc.clusterset.local";
    let east_db = east.pod_ips("app=db");
    let west_db = west.pod_ips("app=db");
    let mut union: Vec<String> = east_db.iter().chain(&west_db).cloned().collect();
    union.sort();
    until(
        "west resolves db to both clusters' pods",
        Duration::from_secs(60),
        || west.resolve(db) == union,
    );
    until(
        "east resolves the same union",
        Duration::from_secs(30),
        || east.resolve(db) == union,
    );
    let host = "db-0.east.db.demo.svc.clusterset.local";
    assert_eq!(west.resolve(host), east_db);
    assert_eq!(west.connect(host).as_deref(), Some("db-0 east"));
    assert_eq!(
        west.connect("db-0.west.db.demo.svc.clusterset.local")
            .as_deref(),
        Some("db-0 west")
    );

    steps.next("5. locality for real: PreferClose answers west's own, east's when west has none");
    let stop = "/tmp/stop-locality";
    let loop_ = west
        .node
        .lookup_loop("client", stop, &["20", "300", "2", &format!("{db}=ANY")]);
    let ours = Watch::start(&west, vec![db.to_string()]);
    let patched = Instant::now();
    let patched_at = SystemTime::now();
    for m in [&east, &west] {
        m.node.k(&[
            "-n",
            "demo",
            "patch",
            "service",
            "db",
            "--type=merge",
            "-p",
            "{\"spec\":{\"trafficDistribution\":\"PreferClose\"}}",
        ]);
    }
    until(
        "west answers west's db only",
        Duration::from_secs(60),
        || west.resolve(db) == west_db,
    );
    let own = patched.elapsed();
    until("east answers east's own", Duration::from_secs(30), || {
        east.resolve(db) == east_db
    });
    let scaled = Instant::now();
    let scaled_at = SystemTime::now();
    west.node
        .k(&["-n", "demo", "scale", "statefulset", "db", "--replicas=0"]);
    until(
        "west answers east's db when it has none",
        Duration::from_secs(90),
        || west.resolve(db) == east_db,
    );
    let to_east = scaled.elapsed();
    let back = Instant::now();
    let back_at = SystemTime::now();
    west.node
        .k(&["-n", "demo", "scale", "statefulset", "db", "--replicas=1"]);
    west.node.rollout("demo", "statefulset/db");
    let west_db_before = west_db;
    let west_db = west.pod_ips("app=db");
    until(
        "west answers its own db again",
        Duration::from_secs(90),
        || west.resolve(db) == west_db,
    );
    let to_west = back.elapsed();
    let _ = west.node.exec_in("client", &["touch", stop]);
    let l = lookups(&loop_.wait_with_output().unwrap());
    // Our part of each switch: from the syncer's write in west that made it (the import's
    // trafficDistribution, then west's slice copy) to our server's answer changing.
    let history = ours.finish().remove(0);
    let writes = syncer_writes(&east);
    let west_write = |kind: &str, name: &str, after: SystemTime| -> SystemTime {
        writes
            .iter()
            .filter(|w| w["cluster"] == "west" && w["kind"] == kind && w["op"] == "update")
            .filter(|w| w["name"].as_str().unwrap().starts_with(name))
            .map(|w| log_time(w["time"].as_str().unwrap()))
            .filter(|t| *t >= after)
            .min()
            .unwrap_or_else(|| panic!("the syncer updated {kind} {name}* in west: {writes:?}"))
    };
    let answered = |want: &[String], after: SystemTime| -> SystemTime {
        history
            .iter()
            .find(|(t, v)| *t >= after && v == want)
            .map(|(t, _)| *t)
            .unwrap_or_else(|| panic!("our answer {want:?} after the change: {history:?}"))
    };
    let import_updated = west_write("ServiceImport", "db", patched_at);
    let emptied = west_write("EndpointSlice", "imported-west-db-", scaled_at);
    let refilled = west_write("EndpointSlice", "imported-west-db-", back_at);
    eprintln!(
        "locality through a pod's getaddrinfo (CoreDNS caches for our TTL, 5 s): PreferClose patched -> west's own {own:.1?}; \
         west scaled to 0 -> east's {to_east:.1?}; back to 1 -> west's own {to_west:.1?} (includes the pod's start). \
         Our part, the syncer's write in west -> our answer changed: import's trafficDistribution {:.0} ms, \
         west's slice emptied {:.0} ms, refilled {:.0} ms. Lookups of {db} throughout: {} sent, {} failed, p50 {:.2} ms, p99 {:.2} ms",
        signed_ms(import_updated, answered(&west_db_before, import_updated)),
        signed_ms(emptied, answered(&east_db, emptied)),
        signed_ms(refilled, answered(&west_db, refilled)),
        l.sent,
        l.failed,
        l.p50,
        l.p99
    );
    assert_eq!(
        l.failed, 0,
        "lookups failed during the switches: {:?}",
        l.errors
    );
    assert!(l.sent > 0);

    steps.next("6. the same answers as CoreDNS's multicluster plugin on west's real objects");
    for i in 0..EXTRA {
        export(&east, &format!("s{i}"));
    }
    let extra: Vec<String> = (0..EXTRA)
        .map(|i| format!("s{i}.demo.svc.clusterset.local"))
        .collect();
    until(
        "west answers every extra service",
        Duration::from_secs(120),
        || {
            west.dig_all(&extra)
                .is_some_and(|a| a.iter().all(|v| *v == east_web))
        },
    );
    // CoreDNS v1.15.0 as mcs-api's e2e runs it (`multicluster clusterset.local`, reading the
    // v1alpha1 ServiceImports of the same API server), beside ours, in west's namespace.
    let corefile = west.node.path("Corefile.multicluster");
    std::fs::write(
        &corefile,
        format!(
            "clusterset.local:1053 {{\n    bind 127.0.0.1\n    kubernetes clusterset.local {{\n        kubeconfig {} test\n        multicluster clusterset.local\n    }}\n}}\n",
            west.node.path("admin.kubeconfig")
        ),
    )
    .unwrap();
    west.node.spawn(
        "coredns-multicluster",
        &common::coredns::binary(),
        &["-conf".into(), corefile],
    );
    let ask = |server: &str, port: &str, name: &str, qtype: &str| -> (String, BTreeSet<String>) {
        let out = west
            .node
            .in_ns("dig")
            .args([
                &format!("@{server}"),
                "-p",
                port,
                "+norec",
                "+time=1",
                "+tries=1",
                name,
                qtype,
            ])
            .output()
            .unwrap();
        let body = String::from_utf8_lossy(&out.stdout).to_string();
        let status = body
            .split("status: ")
            .nth(1)
            .and_then(|s| s.split(',').next())
            .unwrap_or("no answer")
            .to_string();
        let section: BTreeSet<String> = body
            .split(";; ANSWER SECTION:\n")
            .nth(1)
            .map(|a| a.split("\n\n").next().unwrap_or(""))
            .unwrap_or("")
            .lines()
            .map(|l| {
                // Owner, type and data; not the TTL, nor an SRV's priority and weight.
                let f: Vec<&str> = l.split_whitespace().collect();
                let data = if f[3] == "SRV" {
                    f[6..].join(" ")
                } else {
                    f[4..].join(" ")
                };
                format!("{} {} {data}", f[0].to_ascii_lowercase(), f[3])
            })
            .collect();
        (status, section)
    };
    let theirs = |name: &str, qtype: &str| ask("127.0.0.1", "1053", name, qtype);
    let ours = |name: &str, qtype: &str| ask(our_ip(&WEST), "53", name, qtype);
    until("CoreDNS answers web", Duration::from_secs(60), || {
        theirs(name, "A").1.len() == 1
    });
    let same = [
        (name, "A"),
        ("_http._tcp.web.demo.svc.clusterset.local", "SRV"),
        ("s0.demo.svc.clusterset.local", "A"),
        ("db-0.east.db.demo.svc.clusterset.local", "A"),
        ("db-0.west.db.demo.svc.clusterset.local", "A"),
        ("nothing.demo.svc.clusterset.local", "A"),
    ];
    for (n, t) in same {
        assert_eq!(ours(n, t), theirs(n, t), "{n} {t}: ours, then CoreDNS's");
    }
    // docs/differences.md row 11 (beyond): with PreferClose, ours is west's own pods only;
    // CoreDNS has no locality and answers both clusters'.
    let (ours_status, ours_db) = ours(db, "A");
    let (their_status, their_db) = theirs(db, "A");
    assert_eq!(
        (ours_status.as_str(), their_status.as_str()),
        ("NOERROR", "NOERROR")
    );
    let addresses = |set: &BTreeSet<String>| -> Vec<String> {
        set.iter()
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
            .collect()
    };
    assert_eq!(addresses(&ours_db), west_db, "ours: west's own");
    let mut both: Vec<String> = east_db.iter().chain(&west_db).cloned().collect();
    both.sort();
    assert_eq!(addresses(&their_db), both, "CoreDNS: both clusters'");

    steps.next("7. an export changed keeps west's spec.ips; an export withdrawn goes");
    // A port added to web's Service in east: the syncer updates every cluster's import, and
    // west's keeps the spec.ips its controller wrote.
    east.node.k(&[
        "-n",
        "demo",
        "patch",
        "service",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/ports/-","value":{"name":"admin","port":8080,"protocol":"TCP","targetPort":80}}]"#,
    ]);
    let admin = "_admin._tcp.web.demo.svc.clusterset.local";
    until("our SRV of the new port", Duration::from_secs(30), || {
        ours(admin, "SRV").1.iter().any(|l| l.contains("8080"))
    });
    assert_eq!(
        west.first_ip("web"),
        ip,
        "west's spec.ips kept through the syncer's update"
    );
    assert_eq!(ours(name, "A").1.len(), 1);
    // The export of the last extra service withdrawn in east: its import goes from every cluster.
    let last = format!("s{}", EXTRA - 1);
    east.node
        .k(&["-n", "demo", "delete", "serviceexport", &last]);
    until(
        "the withdrawn export's name gone from west",
        Duration::from_secs(30),
        || ours(&format!("{last}.demo.svc.clusterset.local"), "A").0 == "NXDOMAIN",
    );
    until("its import gone from west", Duration::from_secs(30), || {
        !west
            .node
            .kubectl(&["-n", "demo", "get", "serviceimport", &last])
            .status
            .success()
    });

    west.node.kill("coredns-multicluster");

    steps.next("8. a cluster leaves: west drops east's addresses");
    let mut names = extra;
    names.pop();
    let watch = Watch::start(&west, names.clone());
    east.node.kill("syncer");
    // The syncer again, without east (its log starts anew): what came from east goes from west.
    start_syncer(&mut east, &clusters[1..]);
    until(
        "west's answers without east",
        Duration::from_secs(60),
        || {
            west.dig_all(&names)
                .is_some_and(|a| a.iter().all(|v| v.is_empty()))
        },
    );
    std::thread::sleep(Duration::from_millis(500));
    let history = watch.finish();
    let writes = syncer_writes(&east);
    let mut took = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let svc = name.split('.').next().unwrap();
        let deleted = writes
            .iter()
            .filter(|w| {
                w["cluster"] == "west" && w["kind"] == "EndpointSlice" && w["op"] == "delete"
            })
            .filter(|w| {
                w["name"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("imported-east-{svc}-"))
            })
            .map(|w| log_time(w["time"].as_str().unwrap()))
            .min()
            .unwrap_or_else(|| panic!("the syncer deleted {svc}'s slice from west: {writes:?}"));
        let changed = history[i]
            .iter()
            .find(|(_, v)| {
                v.iter()
                    .all(|a| !east_web.contains(a) && !east_db.contains(a))
            })
            .map(|(t, _)| *t)
            .unwrap_or_else(|| panic!("{name}'s answer dropped east's: {:?}", history[i]));
        took.push(signed_ms(deleted, changed));
        // Never an answer with east's addresses after the change.
        let after = history[i].iter().skip_while(|(t, _)| *t < changed);
        for (_, v) in after {
            assert!(
                v.iter()
                    .all(|a| !east_web.contains(a) && !east_db.contains(a)),
                "{name} answered east's address after it left: {v:?}"
            );
        }
    }
    took.sort_by(|a, b| a.partial_cmp(b).unwrap());
    eprintln!(
        "a cluster leaves: slice deleted from west (the syncer's log line, when the API call returned) -> west's answer without east, \
         {} services: p50 {:.0} ms, p99 {:.0} ms, min {:.0} ms, max {:.0} ms (dig polling back to back)",
        took.len(),
        percentile(&took, 0.5),
        percentile(&took, 0.99),
        took[0],
        took[took.len() - 1]
    );
    // web came only from east: its import, and so its name, are gone from west.
    until("web gone from west", Duration::from_secs(60), || {
        west.dig_all(&[name.to_string()])
            .is_some_and(|a| a[0].is_empty())
    });

    steps.next("9. scale-out: metrics-server and the chart's HPA take west's server from 2 replicas to 3 and back, losing no lookup");
    scale_out(&west);
}
