//! What the cluster-set test checks in more than a few lines: west's own spec.ips, every
//! backend reached, the export's chain of timings, and the scale-out.

#[allow(unused_imports)]
use super::*;

/// West's `spec.ips` for `web`: its own, written by west's controller from the derived Service
/// it made (the test never writes spec.ips), inside west's Service CIDR.
pub(crate) fn derived_ips(west: &Member) -> String {
    // The import's address is west's own, written by west's controller from the derived
    // Service it made: the test never writes spec.ips.
    until(
        "west's controller writes spec.ips",
        Duration::from_secs(60),
        || !west.first_ip("web").is_empty(),
    );
    let ip = west.first_ip("web");
    let derived = west.node.k(&[
        "-n",
        "demo",
        "get",
        "serviceimport",
        "web",
        "-o",
        "jsonpath={.metadata.annotations.multicluster\\.kubernetes\\.io/derived-service}",
    ]);
    assert!(derived.starts_with("derived-"), "{derived:?}");
    assert_eq!(
        west.node.k(&[
            "-n",
            "demo",
            "get",
            "service",
            &derived,
            "-o",
            "jsonpath={.spec.clusterIP}"
        ]),
        ip,
        "spec.ips is the derived Service's ClusterIP"
    );
    assert!(
        WEST.service_cidr
            .parse::<ipnet::Ipv4Net>()
            .unwrap()
            .contains(&ip.parse::<std::net::Ipv4Addr>().unwrap()),
        "west's Service CIDR (198.19.128.0/17): {ip}"
    );
    ip
}

/// Connects from west to `name` until each of east's `web` pods has answered (40 tries).
pub(crate) fn every_backend_reached(west: &Member, east: &Member, name: &str) {
    let east_pods: BTreeSet<String> = east
        .node
        .k(&[
            "-n",
            "demo",
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .split_whitespace()
        .map(|p| format!("{p} east"))
        .collect();
    let mut reached = BTreeSet::new();
    for _ in 0..40 {
        if let Some(who) = west.connect(name) {
            reached.insert(who);
        }
        if reached == east_pods {
            break;
        }
    }
    assert_eq!(
        reached, east_pods,
        "each of east's backends reached from west"
    );
}

/// Prints the chain from east's export to our answer in west: the syncer's writes into west (its
/// log), the controller's spec.ips (seen by a watch of west's API, `ips_lines`: the controller's
/// own log has whole seconds), and our part, from spec.ips seen to our server answering with
/// them (`history`).
pub(crate) fn export_chain(
    east: &Member,
    ips_lines: Vec<(SystemTime, String)>,
    history: &History,
    exported_at: SystemTime,
    ip: &str,
    connected: Duration,
) {
    let writes = syncer_writes(east);
    let import_written = writes
        .iter()
        .filter(|w| w["cluster"] == "west" && w["kind"] == "ServiceImport" && w["op"] == "create")
        .filter(|w| w["name"] == "web")
        .map(|w| log_time(w["time"].as_str().unwrap()))
        .min()
        .expect("the syncer made web's import in west");
    let slice_written = writes
        .iter()
        .filter(|w| w["cluster"] == "west" && w["kind"] == "EndpointSlice" && w["op"] == "create")
        .filter(|w| {
            w["name"]
                .as_str()
                .unwrap()
                .starts_with("imported-east-web-")
        })
        .map(|w| log_time(w["time"].as_str().unwrap()))
        .min()
        .expect("the syncer copied web's slice into west");
    let ips_seen = ips_lines
        .into_iter()
        .find(|(_, l)| l.starts_with("web ") && l.contains(ip))
        .map(|(t, _)| t)
        .expect("a watch of west's API saw web's spec.ips");
    let first_answer = history
        .iter()
        .find(|(_, v)| !v.is_empty())
        .map(|(t, _)| *t)
        .expect("an answer seen");
    let ip_answer = history
        .iter()
        .find(|(_, v)| *v == [ip.to_string()])
        .map(|(t, _)| *t)
        .expect("the spec.ips answer seen");
    eprintln!(
        "ClusterSetIP across clusters: export created -> first connection from west {connected:.1?}; \
         export -> the syncer's import in west {:.0} ms, its slice copy {:.0} ms; \
         export -> west's controller's spec.ips seen by a watch of west's API {:.0} ms; \
         our part, spec.ips seen -> our first answer with them {:.0} ms (first answer of any kind {:.0} ms after the export); \
         answers seen in order {:?}",
        signed_ms(exported_at, import_written),
        signed_ms(exported_at, slice_written),
        signed_ms(exported_at, ips_seen),
        signed_ms(ips_seen, ip_answer),
        signed_ms(exported_at, first_answer),
        history.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>()
    );
}

/// metrics-server v0.8.0 (its own manifests, the test overlay its e2e runs: the kubelets'
/// serving certificates are not checked), then the chart's HPA on CPU, then a bounded load
/// straight at our Service: the Deployment goes from 2 replicas to 3 and, after the load, back
/// to 2, while a client resolves through CoreDNS throughout.
pub(crate) fn scale_out(west: &Member) {
    let node = &west.node;
    let ms = setup("tests/metrics-server/setup.sh");
    let dir = node.dir.join("metrics-server");
    std::fs::create_dir_all(&dir).unwrap();
    let up = "../".repeat(dir.components().count() - 1);
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {up}{}\n\
             images:\n- {{name: gcr.io/k8s-staging-metrics-server/metrics-server, newName: registry.k8s.io/metrics-server/metrics-server, newTag: v0.8.0}}\n",
            ms.join("manifests/overlays/test").to_str().unwrap().trim_start_matches('/')
        ),
    )
    .unwrap();
    node.k(&["apply", "-k", dir.to_str().unwrap()]);
    node.rollout("kube-system", "deployment/metrics-server");
    let metrics_ready = Instant::now();
    until("pod metrics of our pods", Duration::from_secs(180), || {
        let out = node.kubectl(&[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/namespaces/clusterset-dns/pods",
        ]);
        out.status.success()
            && serde_json::from_slice::<serde_json::Value>(&out.stdout)
                .is_ok_and(|v| v["items"].as_array().is_some_and(|i| i.len() == 2))
    });
    eprintln!(
        "metrics-server: our pods' metrics served {:.1?} after its rollout",
        metrics_ready.elapsed()
    );

    let chart = repo().join("deploy/helm/clusterset-dns");
    node.helm(
        "clusterset-dns",
        &[
            "upgrade",
            "clusterset-dns",
            chart.to_str().unwrap(),
            "--namespace",
            "clusterset-dns",
            "--reuse-values",
            "--set",
            "hpa.enabled=true",
            "--set",
            "hpa.minReplicas=2",
            "--set",
            "hpa.maxReplicas=3",
            // A target this low, so that a load one client pod can make moves it.
            "--set",
            "hpa.metrics[0].type=Resource",
            "--set",
            "hpa.metrics[0].resource.name=cpu",
            "--set",
            "hpa.metrics[0].resource.target.type=AverageValue",
            "--set",
            "hpa.metrics[0].resource.target.averageValue=3m",
            "--set",
            "hpa.behavior.scaleDown.stabilizationWindowSeconds=15",
            "--wait",
            "--timeout",
            "180s",
        ],
    );
    let replicas = || -> (u64, u64) {
        let out = node.k(&[
            "-n",
            "clusterset-dns",
            "get",
            "deployment",
            "clusterset-dns",
            "-o",
            "jsonpath={.spec.replicas} {.status.readyReplicas}",
        ]);
        let mut f = out.split(' ').map(|v| v.parse().unwrap_or(0));
        (f.next().unwrap_or(0), f.next().unwrap_or(0))
    };
    until("the HPA holds 2 replicas", Duration::from_secs(120), || {
        replicas() == (2, 2)
    });
    // A pod for the load, asking our Service straight (no CoreDNS between).
    node.client_pod("load", our_ip(node.net));
    let db = "db.demo.svc.clusterset.local";
    let (stop_client, stop_load) = ("/tmp/stop-scale", "/tmp/stop-load");
    let client = node.lookup_loop(
        "client",
        stop_client,
        &["20", "600", "2", &format!("{db}=ANY")],
    );
    let started = Instant::now();
    let load = node.lookup_loop(
        "load",
        stop_load,
        &["4000", "300", "4", &format!("{db}=ANY")],
    );
    until(
        "3 replicas Ready under the load",
        Duration::from_secs(240),
        || replicas() == (3, 3),
    );
    let up = started.elapsed();
    let _ = node.exec_in("load", &["touch", stop_load]);
    let load = lookups(&load.wait_with_output().unwrap());
    let stopped = Instant::now();
    until(
        "back to 2 replicas after the load",
        Duration::from_secs(300),
        || {
            replicas() == (2, 2)
                && node
                    .k(&["-n", "clusterset-dns", "get", "pods", "-o", "name"])
                    .lines()
                    .count()
                    == 2
        },
    );
    let down = stopped.elapsed();
    std::thread::sleep(Duration::from_secs(3));
    let _ = node.exec_in("client", &["touch", stop_client]);
    let client = lookups(&client.wait_with_output().unwrap());
    eprintln!(
        "scale-out: load ({} lookups at up to 4,000/s, {} failed) -> 3 replicas Ready {up:.1?}; load stopped -> 2 replicas {down:.1?}; \
         a client through CoreDNS throughout: {} sent, {} failed, {} stalled over 1 s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        load.sent,
        load.failed,
        client.sent,
        client.failed,
        client.stalled,
        client.p50,
        client.p99,
        client.max
    );
    assert_eq!(
        client.failed, 0,
        "lookups failed while scaling: {:?}",
        client.errors
    );
    assert_eq!(
        load.failed, 0,
        "the load's lookups failed: {:?}",
        load.errors
    );
}
