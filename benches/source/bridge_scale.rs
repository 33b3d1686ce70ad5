//! `bridge-scale`: the linkerd-bridge (both halves) at `N=` exports (default 1,000), against the
//! floor the same API server sets for the same writes.
//!
//! The world: 2N Services, N ServiceExports of the first N, and N Services in the shapes
//! Linkerd's service mirror writes (`../shared/docs/object-shapes.md`), from two Links: N/2
//! mirrors `m<i>-east` and N/2 federated `f<i>-federated` with a member in `west`. The bridge
//! runs with `--cluster-id local`, so it writes 2N ServiceImports: N of this cluster's exports
//! and N of Linkerd's Services. A DNS server (`--source mcs`) runs beside it on the same API
//! server.
//!
//! Printed: the floor (the same number of writes the bridge needs at least, made by a plain
//! client 16 at a time, as the bridge writes: no judging, no watches); the time from the
//! bridge's start to every export labelled and Ready and every import and slice written; its
//! RSS and high-water mark then; its API writes by verb against the minimum; N/10 changes one at
//! a time (an export created → labelled and Ready; a mirror created → ServiceImport and slice,
//! and → the DNS server answering its name, each timed from the create call and from its
//! answer: the API server's create of a Service lists every allocated ClusterIP, so it grows
//! with the cluster's Services, and the bridge cannot start before it); a restart with nothing changed and a resync, with
//! the writes each made. The last line is `bridge-scale: n=… …`. `BRIDGE=path` runs that build
//! of the bridge instead of this one.
//!
//! `ENDPOINTS=<e>` (default 0) gives each of this cluster's exports `e` pods: Linkerd's
//! federated Service of its local member (`svc<i>-federated`, as the `-local-mirror` service
//! mirror writes it) and the member's EndpointSlice as the endpointslice controller writes it
//! (the Service's labels copied, Linkerd's federated label included; pods on port 8080), so
//! that its import is the federated one with a slice of those pods and that slice's twin, which
//! kube-proxy routes the federated Service by (one more write an export). Then N/10 more
//! changes: one pod added to an export's slice, timed until the bridge's slice and its twin hold
//! it. A build before the bridge published pods, or wrote twins, never converges on that world.
//!
//! `UNEXPORTED=<u>` then makes `u` slices of Services nobody exports (as a linked cluster full
//! of them has) and changes each once: the bridge's CPU per event, its memory, and its writes.
//!
//! `HOLD=<seconds>`, for profiling a bridge over a large world without making the world each
//! time (at 10,000 it takes 15-20 minutes): no floor, and once the bridge has converged the
//! bench stops it and keeps the API server for that long, printing the kubeconfig to start
//! another against it with (`benches/bridge-restart.sh`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{FutureExt as _, StreamExt};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use super::common::k8s::{
    Cluster, admin_client, free_port, linkerd_mirror, mcs_resource as mcs, rbac, writes_between,
};
use super::common::{metric_in, percentile, query_a, ready, spawn_binary, until};

/// The field manager of the floor's writes.
const FLOOR_MANAGER: &str = "bench-floor";
/// The bridge's slices' label.
const BRIDGE_SLICES: &str =
    "endpointslice.kubernetes.io/managed-by=linkerd-bridge.clusterset-dns.io";
/// The label of the twin of an import's slice that kube-proxy routes its federated Service by.
const TWIN_OF: &str = "linkerd-bridge.clusterset-dns.io/serviceimport";

fn service(ns: &str, name: &str) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80}]}
    }))
    .unwrap()
}

/// Where the endpoint changes' pods are.
const CHANGED_PODS: &str = "198.19.250.";

/// Linkerd's federated Service of this cluster's export `svc<i>`, its local member, as the
/// `-local-mirror` service mirror writes it.
fn local_federated(i: u32) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": format!("svc{i}-federated"), "namespace": "scale",
            "labels": {"mirror.linkerd.io/mirrored-service": "true"},
            "annotations": {"multicluster.linkerd.io/local-discovery": format!("svc{i}")}
        },
        "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80}]}
    }))
    .unwrap()
}

/// The EndpointSlice of export `svc<i>` with its `e` pods (and, if given, one more), as the
/// endpointslice controller writes it once the export half labelled the Service.
fn pods(i: u32, e: u32, more: Option<&str>) -> EndpointSlice {
    let mut endpoints: Vec<serde_json::Value> = (0..e)
        .map(|p| json!({"addresses": [format!("198.19.{}.{}", p % 250, i % 250 + 1)], "conditions": {"ready": true}}))
        .collect();
    endpoints.extend(more.map(|a| json!({"addresses": [a], "conditions": {"ready": true}})));
    serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("svc{i}-pods"), "namespace": "scale", "labels": {
            "kubernetes.io/service-name": format!("svc{i}"),
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            "mirror.linkerd.io/federated": "member"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        "endpoints": endpoints
    }))
    .unwrap()
}

/// Link east's mirror of `m<i>` (an ordinary mirror of a ClusterIP Service).
fn mirror(i: u32) -> Service {
    linkerd_mirror("scale", &format!("m{i}"), "east", 80)
}

/// The federated Service of `f<i>`, whose one member is in cluster west.
fn federated(i: u32) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": format!("f{i}-federated"), "namespace": "scale",
            "labels": {"mirror.linkerd.io/mirrored-service": "true"},
            "annotations": {"multicluster.linkerd.io/remote-discovery": format!("f{i}@west")}
        },
        "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}]}
    }))
    .unwrap()
}

fn export(ns: &str, name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
        "metadata": {"name": name, "namespace": ns}
    }))
    .unwrap()
}

/// When each object first reached the state the bench waits for, by `what/name`: `ready/` (an
/// export Ready=True), `labelled/` (a Service labelled for Linkerd's federation), `import/`
/// (a ServiceImport), `slice/` (a bridge's slice, by its service's name).
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<HashMap<String, Instant>>>);

impl Seen {
    fn mark(&self, key: String) {
        self.0
            .lock()
            .unwrap()
            .entry(key)
            .or_insert_with(Instant::now);
    }
    fn at(&self, key: &str) -> Option<Instant> {
        self.0.lock().unwrap().get(key).copied()
    }
    fn count(&self, prefix: &str) -> usize {
        let seen = self.0.lock().unwrap();
        seen.keys().filter(|k| k.starts_with(prefix)).count()
    }
    fn last(&self) -> Instant {
        *self.0.lock().unwrap().values().max().unwrap()
    }

    /// Watches namespace `scale` and marks what it sees.
    fn watch(&self, rt: &tokio::runtime::Runtime, client: &kube::Client) {
        let on = |seen: Seen, events: futures::stream::BoxStream<'static, Option<String>>| {
            rt.spawn(events.for_each(move |key| {
                if let Some(key) = key {
                    seen.mark(key);
                }
                futures::future::ready(())
            }));
        };
        let cfg = watcher::Config::default;
        let exports: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            "scale",
            &mcs("ServiceExport", "serviceexports"),
        );
        on(
            self.clone(),
            watcher(exports, cfg())
                .default_backoff()
                .applied_objects()
                .map(|o| {
                    let o = o.ok()?;
                    let ready = o.data["status"]["conditions"]
                        .as_array()?
                        .iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True");
                    let name = o.metadata.name?;
                    ready.then(|| format!("ready/{name}"))
                })
                .boxed(),
        );
        let services: Api<Service> = Api::namespaced(client.clone(), "scale");
        on(
            self.clone(),
            watcher(services, cfg().labels("mirror.linkerd.io/federated=member"))
                .default_backoff()
                .applied_objects()
                .map(|s| Some(format!("labelled/{}", s.ok()?.metadata.name?)))
                .boxed(),
        );
        let imports: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            "scale",
            &mcs("ServiceImport", "serviceimports"),
        );
        on(
            self.clone(),
            watcher(imports, cfg())
                .default_backoff()
                .applied_objects()
                .map(|o| Some(format!("import/{}", o.ok()?.metadata.name?)))
                .boxed(),
        );
        let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "scale");
        on(
            self.clone(),
            watcher(slices, cfg().labels(BRIDGE_SLICES))
                .default_backoff()
                .applied_objects()
                .flat_map(|s| {
                    let mut keys = Vec::new();
                    // An MCS slice, or the twin kube-proxy routes a federated import by.
                    let of = |s: &mut EndpointSlice| {
                        let l = s.metadata.labels.as_mut()?;
                        match l.remove("multicluster.kubernetes.io/service-name") {
                            Some(svc) => Some(("", svc)),
                            None => Some(("twin", l.remove(TWIN_OF)?)),
                        }
                    };
                    if let Ok(mut s) = s
                        && let Some((twin, svc)) = of(&mut s)
                    {
                        // The pods the endpoint changes add.
                        let added = (s.endpoints.iter().flat_map(|e| &e.addresses))
                            .filter(|a| a.starts_with(CHANGED_PODS));
                        keys.extend(added.map(|a| Some(format!("{twin}pod/{svc}/{a}"))));
                        keys.push(Some(format!("{twin}slice/{svc}")));
                    }
                    futures::stream::iter(keys)
                })
                .boxed(),
        );
    }
}

/// Sorted latencies' median, p99 and max.
fn spread(mut ms: Vec<f64>) -> (f64, f64, f64, f64) {
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (
        percentile(&ms, 0.5),
        percentile(&ms, 0.9),
        percentile(&ms, 0.99),
        ms[ms.len() - 1],
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The bridge's process.
struct Bridge {
    child: std::process::Child,
    admin: std::net::SocketAddr,
}

impl Bridge {
    fn start(k: &Cluster, resync: &str) -> Bridge {
        let admin: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        // BRIDGE=path runs another build (a before-and-after).
        let bin = std::env::var("BRIDGE")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_clusterset-dns").to_string());
        let child = std::process::Command::new(bin)
            .args(["linkerd-bridge", "--halves", "export,import"])
            .args(["--kubeconfig", &k.kubeconfig("admin")])
            .args(["--admin-listen", &admin.to_string()])
            .args(["--lease-namespace", "scale", "--cluster-id", "local"])
            .args(["--resync", resync, "--log-level", "warn"])
            .spawn()
            .unwrap();
        Bridge { child, admin }
    }

    /// VmRSS and VmHWM in MB.
    fn memory_mb(&self) -> (f64, f64) {
        let (rss, hwm) = super::memory_kb_of(self.child.id());
        (rss / 1024.0, hwm / 1024.0)
    }

    /// Its reconciles so far (both halves, every result).
    fn reconciles(&self) -> f64 {
        let Some((_, body)) =
            super::common::http_get_blocking(self.admin, "/metrics", Duration::from_secs(2))
        else {
            return 0.0;
        };
        HALVES
            .iter()
            .flat_map(|h| ["success", "error"].map(move |r| (h, r)))
            .map(|(h, r)| {
                metric_in(
                    &body,
                    &format!(
                        "clusterset_dns_bridge_reconciles_total{{half=\"{h}\",result=\"{r}\"}}"
                    ),
                )
            })
            .sum()
    }

    /// Its wait and work histograms, from one scrape: for each half (export, import) and each
    /// of [`TIMINGS`], in that order, the cumulative buckets as (upper bound, count).
    fn timings(&self) -> Vec<Vec<(f64, f64)>> {
        let body = super::common::http_get_blocking(self.admin, "/metrics", Duration::from_secs(2))
            .map(|(_, body)| body)
            .unwrap_or_default();
        let buckets = |name: &str, half: &str| -> Vec<(f64, f64)> {
            let prefix = format!("{name}_bucket{{half=\"{half}\",le=\"");
            body.lines()
                .filter_map(|l| l.strip_prefix(&prefix))
                .filter_map(|rest| {
                    let (le, count) = rest.split_once("\"} ")?;
                    let le = if le == "+Inf" {
                        f64::INFINITY
                    } else {
                        le.parse().ok()?
                    };
                    Some((le, count.trim().parse().ok()?))
                })
                .collect()
        };
        HALVES
            .iter()
            .flat_map(|h| TIMINGS.map(|(m, _)| buckets(m, h)))
            .collect()
    }

    fn leading(&self) -> bool {
        super::common::http_get_blocking(self.admin, "/metrics", Duration::from_secs(2))
            .is_some_and(|(_, body)| metric_in(&body, "clusterset_dns_bridge_leader") == 1.0)
    }

    /// SIGTERM (it gives the Lease up) and wait.
    fn stop(mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the floor measured: seconds for all writes, and each write's latency (median, p99).
struct Floor {
    writes: u64,
    secs: f64,
    p50: f64,
    p99: f64,
}

/// The floor: the writes the bridge needs at least for this world, made by a plain client 16 at
/// a time in namespace `floor` (deleted after): per export a label applied on its Service and
/// its status; per import the ServiceImport applied, its status and a slice created.
fn floor(
    k: &Cluster,
    rt: &tokio::runtime::Runtime,
    client: &kube::Client,
    n: u32,
    e: u32,
) -> Floor {
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: floor}\n");
    let services: Api<Service> = Api::namespaced(client.clone(), "floor");
    let exports: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "floor",
        &mcs("ServiceExport", "serviceexports"),
    );
    let imports: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "floor",
        &mcs("ServiceImport", "serviceimports"),
    );
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "floor");
    rt.block_on(futures::stream::iter(0..n).for_each_concurrent(16, |i| {
        let (services, exports) = (services.clone(), exports.clone());
        async move {
            let name = format!("s{i}");
            services
                .create(&Default::default(), &service("floor", &name))
                .await
                .unwrap();
            exports
                .create(&Default::default(), &export("floor", &name))
                .await
                .unwrap();
        }
    }));
    let pp = PatchParams::apply(FLOOR_MANAGER).force();
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let timed = |latencies: Arc<Mutex<Vec<f64>>>| {
        move |t0: Instant| latencies.lock().unwrap().push(ms(t0.elapsed()))
    };
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let started = Instant::now();
    rt.block_on(async {
        let exported = futures::stream::iter(0..n).map(|i| {
            let (services, exports, pp, done) =
                (services.clone(), exports.clone(), pp.clone(), timed(latencies.clone()));
            let now = now.clone();
            async move {
                let name = format!("s{i}");
                let t0 = Instant::now();
                let label = json!({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"labels": {"mirror.linkerd.io/federated": "member"}}});
                services.patch(&name, &pp, &Patch::Apply(&label)).await.unwrap();
                done(t0);
                let t0 = Instant::now();
                let status = json!({"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
                    "status": {"conditions": [
                        {"type": "Valid", "status": "True", "reason": "Valid", "message": "", "lastTransitionTime": now},
                        {"type": "Ready", "status": "True", "reason": "Exported", "message": "", "lastTransitionTime": now}]}});
                exports.patch_status(&name, &pp, &Patch::Apply(&status)).await.unwrap();
                done(t0);
            }
            .boxed()
        });
        let imported = futures::stream::iter(0..2 * n).map(|i| {
            let (imports, slices, pp, done) =
                (imports.clone(), slices.clone(), pp.clone(), timed(latencies.clone()));
            async move {
                let name = format!("i{i}");
                let t0 = Instant::now();
                let import = json!({"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
                    "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": FLOOR_MANAGER}},
                    "spec": {"type": "ClusterSetIP", "ports": [{"name": "http", "protocol": "TCP", "port": 80}]}});
                imports.patch(&name, &pp, &Patch::Apply(&import)).await.unwrap();
                done(t0);
                let t0 = Instant::now();
                let status = json!({"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
                    "status": {"clusters": [{"cluster": "east"}]}});
                imports.patch_status(&name, &pp, &Patch::Apply(&status)).await.unwrap();
                done(t0);
                if i >= n + n / 2 {
                    // As a federated Service's import: no slice.
                    return;
                }
                let t0 = Instant::now();
                let slice: EndpointSlice = serde_json::from_value(json!({
                    "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"generateName": format!("{name}-"), "labels": {
                        "multicluster.kubernetes.io/service-name": name,
                        "multicluster.kubernetes.io/source-cluster": "east",
                        "endpointslice.kubernetes.io/managed-by": FLOOR_MANAGER}},
                    "addressType": "IPv4",
                    "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
                    "endpoints": [{"addresses": ["198.18.0.1"]}]
                }))
                .unwrap();
                slices.create(&Default::default(), &slice).await.unwrap();
                done(t0);
                if i < n && e > 0 {
                    // As this cluster's exports' imports, federated with pods: the slice's twin
                    // for kube-proxy.
                    let t0 = Instant::now();
                    let mut twin = slice.clone();
                    twin.metadata.labels = Some(
                        [
                            ("kubernetes.io/service-name", format!("{name}-federated")),
                            (TWIN_OF, name.clone()),
                            ("endpointslice.kubernetes.io/managed-by", FLOOR_MANAGER.into()),
                        ]
                        .map(|(k, v)| (k.to_string(), v))
                        .into(),
                    );
                    slices.create(&Default::default(), &twin).await.unwrap();
                    done(t0);
                }
            }
            .boxed()
        });
        futures::stream::select(exported, imported)
            .buffer_unordered(16)
            .for_each(|()| futures::future::ready(()))
            .await;
    });
    let secs = started.elapsed().as_secs_f64();
    let (p50, _, p99, _) = spread(latencies.lock().unwrap().clone());
    // Emptied (no namespace controller runs to delete the namespace itself).
    rt.block_on(async {
        let all = kube::api::ListParams::default();
        let dp = kube::api::DeleteParams::default();
        exports.delete_collection(&dp, &all).await.unwrap();
        imports.delete_collection(&dp, &all).await.unwrap();
        slices.delete_collection(&dp, &all).await.unwrap();
        futures::stream::iter(0..n)
            .for_each_concurrent(16, |i| {
                let (services, dp) = (services.clone(), dp.clone());
                async move {
                    services.delete(&format!("s{i}"), &dp).await.unwrap();
                }
            })
            .await;
    });
    until("namespace floor empty", 600, || {
        let out = k
            .kubectl()
            .args([
                "get",
                "-n",
                "floor",
                "services,serviceexports,serviceimports,endpointslices",
                "-o",
                "name",
            ])
            .output()
            .unwrap();
        out.status.success() && out.stdout.is_empty()
    });
    Floor {
        writes: min_writes(n, e),
        secs,
        p50,
        p99,
    }
}

/// The writes the bridge needs at least: per export a label and a status; per import the
/// object and its status, and a slice but for the N/2 of federated Services (Linkerd gives no
/// addresses of their members here: the federated Service's ClusterIP is the import's); with
/// `e` pods an export, the twin of each of this cluster's exports' slices, for kube-proxy.
fn min_writes(n: u32, e: u32) -> u64 {
    let n = n as u64;
    2 * n + 3 * (n + n / 2) + 2 * (n / 2) + if e > 0 { n } else { 0 }
}

/// `u` slices of Services nobody exports (`other<i>`, `e` pods each, labelled as the
/// endpointslice controller labels them, without Linkerd's export label) made, then each
/// changed once (a pod added), 16 at a time: the bridge's CPU and memory over it, and its
/// writes (none). Its watches of slices select by Linkerd's export labels, as they do through a
/// Link's credentials, so the API server never sends it these.
fn unexported_slices(
    rt: &tokio::runtime::Runtime,
    slices: &Api<EndpointSlice>,
    bridge: &Bridge,
    k: &Cluster,
    u: u32,
    e: u32,
) {
    let pid = bridge.child.id();
    let (rss0, _) = bridge.memory_mb();
    let cpu0 = super::cpu_seconds_of(pid);
    let writes0 = k.writes();
    let t0 = Instant::now();
    let slice = |i: u32, more: Option<&str>| {
        let mut s = pods(i, e, more);
        let labels = s.metadata.labels.get_or_insert_default();
        labels.remove("mirror.linkerd.io/federated");
        labels.insert("kubernetes.io/service-name".into(), format!("other{i}"));
        s.metadata.name = Some(format!("other{i}-pods"));
        s
    };
    rt.block_on(futures::stream::iter(0..u).for_each_concurrent(16, |i| {
        let s = slice(i, None);
        async move {
            slices.create(&Default::default(), &s).await.unwrap();
        }
    }));
    let made = t0.elapsed();
    rt.block_on(futures::stream::iter(0..u).for_each_concurrent(16, |i| {
        let s = slice(i, Some("198.18.255.1"));
        let patch = json!({"endpoints": s.endpoints});
        async move {
            let pp = PatchParams::default();
            let name = format!("other{i}-pods");
            slices
                .patch(&name, &pp, &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    }));
    let secs = t0.elapsed();
    std::thread::sleep(Duration::from_secs(3));
    let cpu = super::cpu_seconds_of(pid) - cpu0;
    let (rss1, hwm1) = bridge.memory_mb();
    let (wrote, words) = writes_between(
        &writes0,
        &k.writes(),
        &["leases", "events", "endpointslices"],
    );
    let all_slices = writes_between(&writes0, &k.writes(), &["leases", "events"]).0 - wrote;
    println!(
        "unexported: {u} slices of {e} pods of Services nobody exports made in {made:.1?} and each changed once, {secs:.1?} in all ({} events): the bridge used {cpu:.2} s of CPU ({:.1} µs an event); RSS {rss0:.1} → {rss1:.1} MB, high-water {hwm1:.1} MB; writes meanwhile but slices {wrote} ({words}), slice writes {all_slices} (the bench's own: {})",
        2 * u,
        cpu * 1e6 / (2 * u) as f64,
        2 * u,
    );
}

pub fn run() {
    let n: u32 = std::env::var("N")
        .ok()
        .map(|v| v.parse().expect("N= a number of exports"))
        .unwrap_or(1000);
    assert!(n >= 20 && n % 2 == 0, "N= an even number, 20 or more");
    let e: u32 = std::env::var("ENDPOINTS")
        .ok()
        .map(|v| v.parse().expect("ENDPOINTS= a number of pods per export"))
        .unwrap_or(0);
    assert!(e <= 1000, "ENDPOINTS= at most 1,000: one slice each");
    let unexported: Option<u32> = std::env::var("UNEXPORTED")
        .ok()
        .map(|v| v.parse().expect("UNEXPORTED= a number of slices"));
    // Room for 4N + N/10 Services' ClusterIPs and the floor's N (a /16: 65,534).
    let k = Cluster::start_with("198.18.0.0/16");
    for crd in [
        "deploy/crds/multicluster.x-k8s.io_serviceexports.yaml",
        "deploy/crds/multicluster.x-k8s.io_serviceimports.yaml",
        "tests/k8s/crds/linkerd-links.yaml",
    ] {
        k.apply(&std::fs::read_to_string(format!("{}/{crd}", env!("CARGO_MANIFEST_DIR"))).unwrap());
    }
    k.apply(&rbac());
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: scale}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: linkerd-multicluster}\n");
    until("the CRDs served", 60, || {
        k.kubectl_ok(&["get", "serviceimports,serviceexports,links", "-A"])
    });
    for link in ["east", "west"] {
        k.apply(&format!("apiVersion: multicluster.linkerd.io/v1alpha3\nkind: Link\nmetadata: {{name: {link}, namespace: linkerd-multicluster}}\nspec: {{targetClusterName: {link}}}\n"));
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(admin_client(&k));

    let hold: Option<u64> = std::env::var("HOLD")
        .ok()
        .map(|v| v.parse().expect("HOLD= seconds"));
    // Held, the world is made for the bridge over it only: no floor.
    let f = hold.is_none().then(|| {
        let f = floor(&k, &rt, &client, n, e);
        println!(
            "floor: {} writes (per export a label and a status; per import the object, its status and a slice) by a plain client 16 at a time: {:.1} s, {:.0} writes/s; per write median {:.2} ms, p99 {:.2} ms",
            f.writes,
            f.secs,
            f.writes as f64 / f.secs,
            f.p50,
            f.p99
        );
        f
    });

    let services: Api<Service> = Api::namespaced(client.clone(), "scale");
    let exports: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "scale",
        &mcs("ServiceExport", "serviceexports"),
    );
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "scale");
    let made = Instant::now();
    rt.block_on(
        futures::stream::iter(0..2 * n).for_each_concurrent(16, |i| {
            let (services, exports, slices) = (services.clone(), exports.clone(), slices.clone());
            async move {
                if i < n && e > 0 {
                    let federated = local_federated(i);
                    services
                        .create(&Default::default(), &federated)
                        .await
                        .unwrap();
                    let pods = pods(i, e, None);
                    slices.create(&Default::default(), &pods).await.unwrap();
                }
                let name = format!("svc{i}");
                services
                    .create(&Default::default(), &service("scale", &name))
                    .await
                    .unwrap();
                if i < n {
                    exports
                        .create(&Default::default(), &export("scale", &name))
                        .await
                        .unwrap();
                }
                if i < n / 2 {
                    services
                        .create(&Default::default(), &mirror(i))
                        .await
                        .unwrap();
                    services
                        .create(&Default::default(), &federated(i))
                        .await
                        .unwrap();
                }
            }
        }),
    );
    println!(
        "world: {} Services, {n} ServiceExports, {} mirrors and {} federated Services made in {:.1?}",
        2 * n,
        n / 2,
        n / 2,
        made.elapsed()
    );
    if e > 0 {
        println!(
            "and {n} local federated Services, and {n} EndpointSlices of {e} pods each, one per export"
        );
    }

    let dns = spawn_binary(&["--kubeconfig", &k.kubeconfig("dns"), "--source", "mcs"]);
    let seen = Seen::default();
    seen.watch(&rt, &client);
    let before = k.writes();
    let bridge = Bridge::start(&k, "10m");
    let started = Instant::now();
    let want = [
        ("ready/", n),
        ("labelled/", n),
        ("import/", 2 * n),
        ("slice/", n + n / 2),
        ("twinslice/", if e > 0 { n } else { 0 }),
    ];
    until(
        "every export Ready and labelled, every import and slice",
        1800,
        || want.iter().all(|(p, w)| seen.count(p) >= *w as usize),
    );
    let converge = seen.last().duration_since(started).as_secs_f64();
    std::thread::sleep(Duration::from_secs(3));
    let (rss, hwm) = bridge.memory_mb();
    let converged = k.writes();
    let (wrote, words) = writes_between(&before, &converged, &["leases", "events"]);
    let (events, _) = writes_between(
        &before,
        &converged,
        &[
            "leases",
            "serviceimports",
            "endpointslices",
            "services",
            "serviceexports",
        ],
    );
    let against = f.as_ref().map_or_else(
        || "no floor measured: HOLD".to_string(),
        |f| format!("{:.2}× the floor", converge / f.secs),
    );
    println!(
        "converged: {n} exports labelled and Ready, {} imports and {} slices and {} twins, {converge:.1} s after start ({against}); RSS {rss:.1} MB, high-water {hwm:.1} MB",
        2 * n,
        n + n / 2,
        if e > 0 { n } else { 0 },
    );
    println!(
        "API writes to converge: {wrote} ({words}), and {events} Events; the minimum {} (2 an export, 3 an import, 2 a federated one, 1 a twin)",
        min_writes(n, e)
    );

    if let Some(secs) = hold {
        bridge.stop();
        println!(
            "held for {secs} s: benches/bridge-restart.sh {} {n} [binary]",
            k.kubeconfig("admin")
        );
        std::thread::sleep(Duration::from_secs(secs));
        return;
    }
    let f = f.expect("the floor is measured unless HOLD");

    // N/10 changes, one at a time: an export, then a mirror.
    until("the DNS server ready", 300, || ready(&dns));
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let (mut exported, mut imported, mut answered) = (Vec::new(), Vec::new(), Vec::new());
    // How long the API server took to create each mirror (a Service: a ClusterIP allocated), of
    // the time to its import, which the bridge cannot start before; and the import and the
    // answer timed from the create's answer (the mirror exists: the bridge's and the DNS
    // server's part, and the watches').
    let (mut created, mut imported_made, mut answered_made) = (Vec::new(), Vec::new(), Vec::new());
    let timings_before = bridge.timings();
    for j in 0..n / 10 {
        let name = format!("svc{}", n + j);
        let t0 = Instant::now();
        rt.block_on(exports.create(&Default::default(), &export("scale", &name)))
            .unwrap();
        until(format!("{name} labelled and Ready"), 30, || {
            seen.at(&format!("ready/{name}")).is_some()
                && seen.at(&format!("labelled/{name}")).is_some()
        });
        let at = seen
            .at(&format!("ready/{name}"))
            .unwrap()
            .max(seen.at(&format!("labelled/{name}")).unwrap());
        exported.push(ms(at - t0));

        let i = n / 2 + j;
        let t0 = Instant::now();
        rt.block_on(services.create(&Default::default(), &mirror(i)))
            .unwrap();
        let made = Instant::now();
        created.push(ms(made - t0));
        let qname = format!("m{i}.scale.svc.clusterset.local");
        let deadline = t0 + Duration::from_secs(30);
        while query_a(dns.dns, &sock, &qname).is_none() {
            assert!(Instant::now() < deadline, "{qname} not answered in 30 s");
            std::thread::sleep(Duration::from_micros(500));
        }
        let now = Instant::now();
        answered.push(ms(now - t0));
        answered_made.push(ms(now - made));
        let m = format!("m{i}");
        until(format!("{m} imported"), 30, || {
            seen.at(&format!("import/{m}")).is_some() && seen.at(&format!("slice/{m}")).is_some()
        });
        let at = seen
            .at(&format!("import/{m}"))
            .unwrap()
            .max(seen.at(&format!("slice/{m}")).unwrap());
        imported.push(ms(at - t0));
        imported_made.push(ms(at.saturating_duration_since(made)));
    }
    // N/10 endpoint changes, one at a time: a pod added to an export's slice.
    let (mut endpoint_ms, mut twin_ms) = (Vec::new(), Vec::new());
    for j in (0..n / 10).filter(|_| e > 0) {
        let (name, pod) = (format!("svc{j}"), format!("{CHANGED_PODS}{}", j % 250 + 1));
        let slice = pods(j, e, Some(&pod));
        let t0 = Instant::now();
        let pp = PatchParams::default();
        let patch = json!({"endpoints": slice.endpoints});
        rt.block_on(slices.patch(&format!("{name}-pods"), &pp, &Patch::Merge(&patch)))
            .unwrap();
        let keys = [format!("pod/{name}/{pod}"), format!("twinpod/{name}/{pod}")];
        until(format!("{pod} in {name}'s slice and its twin"), 30, || {
            keys.iter().all(|k| seen.at(k).is_some())
        });
        let at = keys.map(|k| ms(seen.at(&k).unwrap().saturating_duration_since(t0)));
        endpoint_ms.push(at[0]);
        twin_ms.push(at[1]);
    }
    let endpoint = (!endpoint_ms.is_empty()).then(|| spread(endpoint_ms));
    if let Some((p50, p90, p99, max)) = endpoint {
        let (t50, t90, t99, tmax) = spread(twin_ms);
        println!(
            "{} endpoint changes, one at a time, median / p90 / p99 / max ms: a pod added to an export's slice → in the bridge's slice {p50:.1} / {p90:.1} / {p99:.1} / {max:.1}; → in its twin, for kube-proxy {t50:.1} / {t90:.1} / {t99:.1} / {tmax:.1}",
            n / 10
        );
    }
    if let Some(u) = unexported {
        unexported_slices(&rt, &slices, &bridge, &k, u, e.max(10));
    }
    let (p50, p99) = endpoint.map_or((0.0, 0.0), |(a, _, c, _)| (a, c));
    let endpoint_words = format!("endpoints={e} endpoint_p50_ms={p50:.1} endpoint_p99_ms={p99:.1}");
    let (e50, e90, e99, emax) = spread(exported);
    let (i50, i90, i99, imax) = spread(imported);
    let (a50, a90, a99, amax) = spread(answered);
    let (c50, c90, c99, cmax) = spread(created);
    let (im50, im90, im99, immax) = spread(imported_made);
    let (am50, am90, am99, ammax) = spread(answered_made);
    println!(
        "{} changes, one at a time, median / p90 / p99 / max ms: export → labelled and Ready {e50:.1} / {e90:.1} / {e99:.1} / {emax:.1}; mirror → ServiceImport and slice {i50:.1} / {i90:.1} / {i99:.1} / {imax:.1}; mirror → DNS answer {a50:.1} / {a90:.1} / {a99:.1} / {amax:.1}",
        n / 10
    );
    println!(
        "of which the API server's create of the mirror Service (until it answered), median / p90 / p99 / max ms: {c50:.1} / {c90:.1} / {c99:.1} / {cmax:.1}"
    );
    println!(
        "from the create's answer (the mirror exists), median / p90 / p99 / max ms: → ServiceImport and slice {im50:.1} / {im90:.1} / {im99:.1} / {immax:.1}; → DNS answer {am50:.1} / {am90:.1} / {am99:.1} / {ammax:.1}"
    );

    // The bridge's own account of those changes' reconciles (every one: a change's own writes
    // come back through the watches and are judged again, writing nothing), from its
    // histograms, interpolated within buckets as PromQL's histogram_quantile does.
    let names = HALVES
        .iter()
        .flat_map(|h| TIMINGS.map(|(_, what)| format!("{h} {what}")));
    let words: Vec<String> = names
        .zip(bridge.timings().iter().zip(&timings_before))
        .map(|(name, (after, before))| {
            let delta: Vec<(f64, f64)> = after
                .iter()
                .zip(before)
                .map(|(a, b)| (a.0, a.1 - b.1))
                .collect();
            let total = delta.last().map_or(0.0, |b| b.1);
            format!(
                "{name} p50 {:.1} / p99 {:.1} ms ({total} runs)",
                quantile(&delta, 0.5) * 1000.0,
                quantile(&delta, 0.99) * 1000.0
            )
        })
        .collect();
    println!(
        "the bridge's reconciles meanwhile, by its histograms: {}",
        words.join("; ")
    );

    // A restart with nothing changed, then two resyncs: no writes.
    std::thread::sleep(Duration::from_secs(3));
    let before = k.writes();
    let t0 = Instant::now();
    bridge.stop();
    let bridge = Bridge::start(&k, "20s");
    // Exports: n + n/10; imports: as many of this cluster's, and n + n/10 of Linkerd's.
    let keys = 3.0 * (n + n / 10) as f64;
    until(
        "the new bridge leading, every export and import reconciled",
        600,
        || bridge.leading() && bridge.reconciles() >= keys,
    );
    let restart_took = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(3));
    let (restart, words) = writes_between(&before, &k.writes(), &["leases"]);
    println!(
        "restart with nothing changed: every key reconciled {restart_took:.1} s after; writes {restart} ({words}) besides the Lease"
    );
    let before = k.writes();
    let r0 = bridge.reconciles();
    until("two resyncs", 120, || {
        bridge.reconciles() >= r0 + 2.0 * keys
    });
    std::thread::sleep(Duration::from_secs(3));
    let (resync, words) = writes_between(&before, &k.writes(), &["leases"]);
    println!("two resyncs with nothing changed: writes {resync} ({words}) besides the Lease");
    let (rss2, hwm2) = bridge.memory_mb();
    println!("restarted bridge: RSS {rss2:.1} MB, high-water {hwm2:.1} MB");
    drop(bridge);
    println!(
        "bridge-scale: n={n} converge_s={converge:.1} floor_s={:.1} rss_mb={rss:.1} hwm_mb={hwm:.1} writes={wrote} min_writes={} restart_writes={restart} resync_writes={resync} export_p50_ms={e50:.1} export_p99_ms={e99:.1} import_p50_ms={i50:.1} import_p99_ms={i99:.1} answer_p50_ms={a50:.1} answer_p99_ms={a99:.1} create_p99_ms={c99:.1} import_made_p99_ms={im99:.1} answer_made_p99_ms={am99:.1} {endpoint_words}",
        f.secs,
        min_writes(n, e)
    );
}

/// The bridge's halves, as its metrics label them.
const HALVES: [&str; 2] = ["export", "import"];

/// The bridge's wait and work histograms, and what the bench calls each.
const TIMINGS: [(&str, &str); 2] = [
    ("clusterset_dns_bridge_queue_duration_seconds", "waited"),
    ("clusterset_dns_bridge_reconcile_duration_seconds", "worked"),
];

/// The `q` quantile of cumulative buckets `(upper bound, count)`, interpolated linearly within
/// its bucket as PromQL's `histogram_quantile` does (the last finite bound when it falls in
/// `+Inf`); 0 with no observation.
fn quantile(buckets: &[(f64, f64)], q: f64) -> f64 {
    let total = buckets.last().map_or(0.0, |b| b.1);
    if total <= 0.0 {
        return 0.0;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return lower;
            }
            return lower + (le - lower) * (rank - below) / (count - below).max(f64::MIN_POSITIVE);
        }
        (lower, below) = (le, count);
    }
    lower
}
