//! `clusterset-dns linkerd-bridge` (both halves, two replicas) through the faults clusters have,
//! under churn, on a real API server: the leader SIGKILLed, the API server restarted, a watch
//! expired (410 Gone after etcd compaction); and with nothing changed, a restart and a resync
//! write nothing.
//!
//! Throughout, a recorder in the test watches every ServiceImport and EndpointSlice of the
//! namespace and asserts what a user relies on: no ServiceImport or slice of a service whose
//! source still exists is ever deleted, replaced or emptied, not even for an instant, and no
//! object the bridge did not create is touched. Afterwards the objects are exactly what the
//! sources imply.
//!
//! The churn (one change every 10 ms for 30 s, at most 3,000) makes Linkerd-shaped objects as
//! linkerd_bridge_import.rs does: mirrors of Link `east` created (`m<i>-east`) and their port
//! changed (`b<i>-east`), short-lived mirrors (`t<i>-east`) created and deleted, and Services
//! exported (`e<i>`). Only the `t` services ever lose their source.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::k8s::{
    Cluster, Proxy, admin_client, linkerd_mirror, mcs_resource as mcs, writes_between,
};
use common::until;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use crate::linkerd_bridge::Bridge;
use crate::linkerd_bridge_import::{import_cluster, link};

/// The Lease's duration the bridges run with ([`Bridge::start`]).
const LEASE: Duration = Duration::from_secs(3);
/// Services mirrored from the start whose port the churn changes.
const BASE: usize = 20;

/// Link east's mirror of `svc` in `shop`, serving `port`.
fn mirror(svc: &str, port: u16) -> Service {
    linkerd_mirror("shop", svc, "east", port)
}

fn service(name: &str) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80}]}
    }))
    .unwrap()
}

fn export(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
        "metadata": {"name": name, "namespace": "shop"}
    }))
    .unwrap()
}

/// What the recorder saw of one ServiceImport or slice.
#[derive(Debug, Clone)]
struct Sighting {
    at: Instant,
    kind: &'static str,
    name: String,
    service: String,
    uid: String,
    deleted: bool,
    /// No ports or no clusters (an import), no endpoints (a slice).
    empty: bool,
    ours: bool,
    resource_version: String,
}

/// Every event on the namespace's ServiceImports and EndpointSlices, as [`Sighting`]s.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Sighting>>>);

impl Recorder {
    fn start(rt: &tokio::runtime::Runtime, client: &kube::Client) -> Recorder {
        let r = Recorder::default();
        let imports: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            "shop",
            &mcs("ServiceImport", "serviceimports"),
        );
        let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "shop");
        let keep = r.clone();
        rt.spawn(
            watcher(imports, watcher::Config::default())
                .default_backoff()
                .for_each(move |ev| {
                    for (o, deleted) in events(ev) {
                        let d = &o.data;
                        let empty = d["spec"]["ports"].as_array().is_none_or(Vec::is_empty)
                            || d["status"]["clusters"].as_array().is_none_or(Vec::is_empty);
                        keep.see(
                            "ServiceImport",
                            &o.metadata,
                            o.metadata.name.clone(),
                            deleted,
                            empty,
                        );
                    }
                    futures::future::ready(())
                }),
        );
        let keep = r.clone();
        rt.spawn(
            watcher(
                slices,
                watcher::Config::default().labels("multicluster.kubernetes.io/service-name"),
            )
            .default_backoff()
            .for_each(move |ev| {
                for (s, deleted) in events(ev) {
                    let service =
                        s.metadata.labels.as_ref().and_then(|l| {
                            l.get("multicluster.kubernetes.io/service-name").cloned()
                        });
                    keep.see(
                        "EndpointSlice",
                        &s.metadata,
                        service,
                        deleted,
                        s.endpoints.is_empty(),
                    );
                }
                futures::future::ready(())
            }),
        );
        r
    }

    fn see(
        &self,
        kind: &'static str,
        m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        service: Option<String>,
        deleted: bool,
        empty: bool,
    ) {
        let labels = m.labels.clone().unwrap_or_default();
        let ours = labels
            .values()
            .any(|v| v == "linkerd-bridge.clusterset-dns.io");
        self.0.lock().unwrap().push(Sighting {
            at: Instant::now(),
            kind,
            name: m.name.clone().unwrap_or_default(),
            service: service.unwrap_or_default(),
            uid: m.uid.clone().unwrap_or_default(),
            deleted,
            empty,
            ours,
            resource_version: m.resource_version.clone().unwrap_or_default(),
        });
    }

    fn since(&self, t: Instant) -> Vec<Sighting> {
        let all = self.0.lock().unwrap();
        all.iter().filter(|s| s.at >= t).cloned().collect()
    }

    /// What a user relies on, over everything seen: no import or slice of a service in
    /// `lives` deleted, replaced (a new uid under the same name) or emptied (an import is
    /// created before its status can be written: empty until it was once full); no object the
    /// bridge did not create changed after it was first seen. The wrongs, one a line.
    fn wrongs(&self, lives: impl Fn(&str) -> bool) -> Vec<String> {
        let all = self.0.lock().unwrap();
        let mut uids: BTreeMap<(&str, &str), &str> = BTreeMap::new();
        let mut full: BTreeSet<(&str, &str)> = BTreeSet::new();
        let mut foreign: BTreeMap<(&str, &str), &str> = BTreeMap::new();
        let mut wrong = Vec::new();
        for s in all.iter() {
            let key = (s.kind, s.name.as_str());
            if !s.ours {
                match foreign.get(&key) {
                    Some(rv) if *rv != s.resource_version || s.deleted => wrong.push(format!(
                        "{} {} (not the bridge's) changed: {s:?}",
                        s.kind, s.name
                    )),
                    _ => {
                        foreign.insert(key, &s.resource_version);
                    }
                }
                continue;
            }
            if !lives(&s.service) {
                continue;
            }
            if s.deleted {
                wrong.push(format!(
                    "{} {} of live service {} deleted",
                    s.kind, s.name, s.service
                ));
            }
            if !s.empty {
                full.insert(key);
            } else if full.contains(&key) {
                wrong.push(format!(
                    "{} {} of live service {} emptied",
                    s.kind, s.name, s.service
                ));
            }
            if let Some(uid) = uids.insert(key, &s.uid)
                && uid != s.uid
            {
                wrong.push(format!(
                    "{} {} of live service {} replaced",
                    s.kind, s.name, s.service
                ));
            }
        }
        wrong
    }
}

/// The objects a watch event is about, each with whether it was deleted.
fn events<K>(ev: Result<watcher::Event<K>, watcher::Error>) -> Vec<(K, bool)> {
    match ev {
        Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => vec![(o, false)],
        Ok(watcher::Event::Delete(o)) => vec![(o, true)],
        _ => Vec::new(),
    }
}

/// A service the churn never deletes the source of.
fn lives(service: &str) -> bool {
    !service.starts_with('t')
}

/// The set for one fault: a cluster (`north`) linked to `east`, two replicas of the bridge with
/// both halves, the recorder, and `BASE` mirrors, 20 exports and an import and a slice of
/// someone else's from before.
struct Set {
    k: Cluster,
    rt: tokio::runtime::Runtime,
    client: kube::Client,
    recorder: Recorder,
    bridges: Vec<Bridge>,
}

const ARGS: [&str; 6] = [
    "--cluster-id",
    "north",
    "--resync",
    "10m",
    "--log-level",
    "info",
];

impl Set {
    /// `api_args` for the API server; `kubeconfig` (through a proxy, say) for the bridges.
    fn start(api_args: &[&str], proxy: bool) -> (Set, Option<Proxy>) {
        let mut k = import_cluster("198.19.224.0/19");
        if !api_args.is_empty() {
            k.api_args = api_args.iter().map(|a| a.to_string()).collect();
            k.kill_api();
            k.start_api();
        }
        k.apply(&link("east"));
        // Someone else's import and slice of `other`: never to be touched.
        k.apply(&format!(
            "{}{}",
            common::k8s::import("v1beta1", "shop", "other", "{type: ClusterSetIP, ips: [198.18.7.7], ports: [{name: http, protocol: TCP, port: 80}]}"),
            common::k8s::slice("shop", "other-x", "other", "x", "[{addresses: [198.18.7.8]}]")
        ));
        let rt = tokio::runtime::Runtime::new().unwrap();
        let client = rt.block_on(admin_client(&k));
        let services: Api<Service> = Api::namespaced(client.clone(), "shop");
        let exports: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            "shop",
            &mcs("ServiceExport", "serviceexports"),
        );
        rt.block_on(async {
            for i in 0..BASE {
                services
                    .create(&Default::default(), &mirror(&format!("b{i}"), 80))
                    .await
                    .unwrap();
                services
                    .create(&Default::default(), &service(&format!("x{i}")))
                    .await
                    .unwrap();
                exports
                    .create(&Default::default(), &export(&format!("x{i}")))
                    .await
                    .unwrap();
            }
        });
        let recorder = Recorder::start(&rt, &client);
        let proxy =
            proxy.then(|| Proxy::start(format!("127.0.0.1:{}", k.api_port).parse().unwrap()));
        let kubeconfig = match &proxy {
            Some(p) => {
                let path = k.dir.path().join("proxied.kubeconfig");
                let text = std::fs::read_to_string(k.kubeconfig("dns"))
                    .unwrap()
                    .replace(&format!("127.0.0.1:{}", k.api_port), &p.addr.to_string());
                std::fs::write(&path, text).unwrap();
                path.to_str().unwrap().to_string()
            }
            None => k.kubeconfig("dns"),
        };
        let bridges = (0..2)
            .map(|_| Bridge::start_via(&k, &kubeconfig, &ARGS))
            .collect();
        let set = Set {
            k,
            rt,
            client,
            recorder,
            bridges,
        };
        set.converges("the first sync", Duration::from_secs(60));
        (set, proxy)
    }

    fn leader(&self) -> Option<usize> {
        self.bridges.iter().position(|b| {
            common::metric_in(&b.admin("/metrics").1, "clusterset_dns_bridge_leader") == 1.0
        })
    }

    fn logs(&self) -> String {
        self.bridges
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let log = b.log();
                let lines: Vec<&str> = log.lines().collect();
                format!(
                    "bridge {i}, last lines:\n{}",
                    lines[lines.len().saturating_sub(30)..].join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// What is wrong with the objects, against what the sources imply: for each mirror of
    /// `east` an import of its port from cluster east with a slice; for each export its
    /// Service labelled and Ready=True, and an import from north with a slice; no other import
    /// or slice of the bridge's.
    fn differences(&self) -> Vec<String> {
        self.rt.block_on(async {
            let services: Api<Service> = Api::namespaced(self.client.clone(), "shop");
            let exports: Api<DynamicObject> = Api::namespaced_with(
                self.client.clone(),
                "shop",
                &mcs("ServiceExport", "serviceexports"),
            );
            let imports: Api<DynamicObject> = Api::namespaced_with(
                self.client.clone(),
                "shop",
                &mcs("ServiceImport", "serviceimports"),
            );
            let slices: Api<EndpointSlice> = Api::namespaced(self.client.clone(), "shop");
            let lp = kube::api::ListParams::default;
            let (Ok(svcs), Ok(exps), Ok(imps), Ok(sls)) = (
                services.list(&lp()).await,
                exports.list(&lp()).await,
                imports
                    .list(
                        &lp().labels(
                            "app.kubernetes.io/managed-by=linkerd-bridge.clusterset-dns.io",
                        ),
                    )
                    .await,
                slices
                    .list(&lp().labels(
                        "endpointslice.kubernetes.io/managed-by=linkerd-bridge.clusterset-dns.io",
                    ))
                    .await,
            ) else {
                return vec!["the API server did not answer".to_string()];
            };
            // service -> (port, cluster)
            let mut want: BTreeMap<String, (i64, &str)> = BTreeMap::new();
            let mut wrong = Vec::new();
            let by_name: BTreeMap<String, &Service> = svcs
                .items
                .iter()
                .map(|s| (s.metadata.name.clone().unwrap_or_default(), s))
                .collect();
            for s in &svcs.items {
                let name = s.metadata.name.clone().unwrap_or_default();
                if let Some(svc) = name.strip_suffix("-east") {
                    let port = s
                        .spec
                        .as_ref()
                        .and_then(|p| p.ports.as_ref())
                        .map_or(0, |p| p[0].port as i64);
                    want.insert(svc.to_string(), (port, "east"));
                }
            }
            for e in &exps.items {
                let name = e.metadata.name.clone().unwrap_or_default();
                let ready = e.data["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                });
                if !ready {
                    wrong.push(format!("export {name} not Ready"));
                }
                let labelled = by_name
                    .get(&name)
                    .and_then(|s| s.metadata.labels.as_ref())
                    .is_some_and(|l| {
                        l.get("mirror.linkerd.io/federated")
                            .is_some_and(|v| v == "member")
                    });
                if !labelled {
                    wrong.push(format!("Service {name} not labelled"));
                }
                want.insert(name, (80, "north"));
            }
            let mut have: BTreeMap<String, (i64, String)> = BTreeMap::new();
            for i in &imps.items {
                let name = i.metadata.name.clone().unwrap_or_default();
                let port = i.data["spec"]["ports"][0]["port"].as_i64().unwrap_or(0);
                let cluster = i.data["status"]["clusters"][0]["cluster"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                have.insert(name, (port, cluster));
            }
            let sliced: BTreeSet<String> = sls
                .items
                .iter()
                .filter(|s| !s.endpoints.is_empty())
                .filter_map(|s| {
                    s.metadata
                        .labels
                        .as_ref()?
                        .get("multicluster.kubernetes.io/service-name")
                        .cloned()
                })
                .collect();
            for (svc, (port, cluster)) in &want {
                match have.get(svc) {
                    None => wrong.push(format!("no import of {svc}")),
                    Some((p, c)) if p != port || c != cluster => wrong.push(format!(
                        "import {svc}: port {p} from {c}, not {port} from {cluster}"
                    )),
                    Some(_) => {}
                }
                if !sliced.contains(svc) {
                    wrong.push(format!("no slice of {svc}"));
                }
            }
            for svc in have.keys().filter(|s| !want.contains_key(*s)) {
                wrong.push(format!("import {svc} without a source"));
            }
            for svc in sliced.iter().filter(|s| !want.contains_key(*s)) {
                wrong.push(format!("slice of {svc} without a source"));
            }
            wrong
        })
    }

    /// Waits until [`Set::differences`] is empty; how long it took.
    fn converges(&self, what: &str, within: Duration) -> Duration {
        let start = Instant::now();
        let last = std::cell::RefCell::new(Vec::new());
        until(
            common::wait::Lazy(|| {
                format!(
                    "{what}: the objects as the sources imply\nlast: {:?}\n{}",
                    last.borrow(),
                    self.logs()
                )
            }),
            within,
            || {
                let d = self.differences();
                let done = d.is_empty();
                *last.borrow_mut() = d;
                done
            },
        );
        start.elapsed()
    }

    /// Churn for `secs` (a change every 10 ms, at most 100 a second), running `fault` on this
    /// thread `at` into it; then the objects converge, and the recorder found nothing wrong.
    /// Prints the time to converge after the churn and the bridge's changes to imports and
    /// slices.
    fn under_churn(&mut self, name: &str, at: Duration, fault: impl FnOnce(&mut Set)) {
        let stop = Arc::new(AtomicBool::new(false));
        let made = Arc::new(Mutex::new((0u32, 0u32)));
        let churn = {
            let services: Api<Service> = Api::namespaced(self.client.clone(), "shop");
            let exports: Api<DynamicObject> = Api::namespaced_with(
                self.client.clone(),
                "shop",
                &mcs("ServiceExport", "serviceexports"),
            );
            let (stop, made) = (stop.clone(), made.clone());
            self.rt.spawn(async move {
                // Each change its own task, up to 8 at once: a write takes longer than 10 ms.
                let lanes = Arc::new(tokio::sync::Semaphore::new(8));
                let started = tokio::time::Instant::now();
                let mut tick = tokio::time::interval(Duration::from_millis(10));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                for i in 0..3000u32 {
                    tick.tick().await;
                    if stop.load(Ordering::Relaxed) || started.elapsed() > Duration::from_secs(30) {
                        break;
                    }
                    let lane = lanes.clone().acquire_owned().await.unwrap();
                    let (services, exports, made) = (services.clone(), exports.clone(), made.clone());
                    tokio::spawn(async move {
                        let pp = PatchParams::default();
                        let ok = match i % 5 {
                            0 => services.create(&Default::default(), &mirror(&format!("m{i}"), 80)).await.is_ok(),
                            1 => {
                                let b = format!("b{}-east", (i / 5) as usize % BASE);
                                let port = if (i / 5 / BASE as u32) % 2 == 0 { 81 } else { 80 };
                                let patch = json!({"spec": {"ports": [{"name": "http", "protocol": "TCP", "port": port, "targetPort": 8080}]}});
                                services.patch(&b, &pp, &Patch::Merge(&patch)).await.is_ok()
                            }
                            2 => services.create(&Default::default(), &mirror(&format!("t{i}"), 80)).await.is_ok(),
                            // Its create may not have landed yet: then it lives on (refused).
                            3 => services.delete(&format!("t{}-east", i - 1), &Default::default()).await.is_ok(),
                            _ => {
                                let name = format!("e{i}");
                                services.create(&Default::default(), &service(&name)).await.is_ok()
                                    && exports.create(&Default::default(), &export(&name)).await.is_ok()
                            }
                        };
                        let mut m = made.lock().unwrap();
                        if ok { m.0 += 1 } else { m.1 += 1 }
                        drop(lane);
                    });
                }
                let _ = lanes.acquire_many(8).await;
            })
        };
        let started = Instant::now();
        std::thread::sleep(at);
        fault(self);
        let fault_over = Instant::now();
        let _ = self.rt.block_on(churn);
        let churn_over = Instant::now();
        let (ok, failed) = *made.lock().unwrap();
        let took = self.converges(&format!("after {name}"), Duration::from_secs(90));
        let bridge_changes = self
            .recorder
            .since(started)
            .iter()
            .filter(|s| s.ours)
            .count();
        println!(
            "{name}: {ok} changes made ({failed} refused or not found) over {:.1?}; the fault over {:.1?} in; converged {took:.1?} after the churn ended; {bridge_changes} changes to the bridge's imports and slices seen",
            churn_over - started,
            fault_over - started,
        );
        let wrong = self.recorder.wrongs(lives);
        assert!(wrong.is_empty(), "{name}: {wrong:#?}");
        for (i, b) in self.bridges.iter_mut().enumerate() {
            if let Some(status) = b.child.try_wait().unwrap() {
                // Only the one the test killed may be gone.
                assert!(
                    name.contains("SIGKILL"),
                    "bridge {i} exited: {status}\n{}",
                    b.log()
                );
            }
        }
    }
}

/// The leader SIGKILLed under churn: the other replica leads within the Lease's duration and
/// a second, and nothing is lost.
#[test]
fn the_leader_killed_under_churn_loses_nothing() {
    let _module = common::module(module_path!());
    let (mut set, _) = Set::start(&[], false);
    set.under_churn("leader SIGKILLed", Duration::from_secs(10), |set| {
        let leader = set.leader().expect("a leader");
        set.bridges[leader].child.kill().unwrap();
        set.bridges[leader].child.wait().unwrap();
        let killed = Instant::now();
        let other = 1 - leader;
        until(
            common::wait::Lazy(|| format!("bridge {other} to lead\n{}", set.logs())),
            LEASE + Duration::from_secs(1),
            || {
                common::metric_in(
                    &set.bridges[other].admin("/metrics").1,
                    "clusterset_dns_bridge_leader",
                ) == 1.0
            },
        );
        println!(
            "leader SIGKILLed: bridge {other} led {:.1?} after",
            killed.elapsed()
        );
    });
}

/// The API server restarted under churn (same etcd): both replicas reconnect, one leads, the
/// objects converge, neither exits.
#[test]
fn an_api_server_restart_under_churn_loses_nothing() {
    let _module = common::module(module_path!());
    let (mut set, _) = Set::start(&[], false);
    set.under_churn("API server restarted", Duration::from_secs(10), |set| {
        set.k.kill_api();
        std::thread::sleep(Duration::from_secs(2));
        set.k.start_api();
    });
    assert!(set.leader().is_some(), "{}", set.logs());
}

/// A watch expired under churn: the bridges' connections cut while the churn goes on, etcd
/// compacted, the API server serving watches from etcd itself (`--watch-cache=false`), so
/// resuming from before the compaction gets 410 Gone; both relist and converge.
#[test]
fn an_expired_watch_under_churn_loses_nothing() {
    let _module = common::module(module_path!());
    let (mut set, proxy) = Set::start(&["--watch-cache=false"], true);
    let proxy = proxy.unwrap();
    set.under_churn("watch expired (410)", Duration::from_secs(10), |set| {
        proxy.refuse(true);
        proxy.drop_all();
        std::thread::sleep(Duration::from_secs(2));
        set.k.compact();
        proxy.refuse(false);
    });
    // kube's watcher says the 410 as the error it relists on; the bridge logs it.
    let gone = set
        .bridges
        .iter()
        .map(|b| {
            b.log()
                .lines()
                .filter(|l| {
                    l.contains("watch is too old") || l.contains("too old resource version")
                })
                .count()
        })
        .sum::<usize>();
    println!("watch expired (410): {gone} watches relisted after 410 Gone");
    assert!(gone > 0, "no bridge saw 410 Gone\n{}", set.logs());
}

/// With nothing changed, a new leader (a restart) writes nothing, and neither does a resync:
/// counted by the API server, every write but the Lease's.
#[test]
fn with_nothing_changed_a_restart_and_a_resync_write_nothing() {
    let _module = common::module(module_path!());
    let (mut set, _) = Set::start(&[], false);
    std::thread::sleep(Duration::from_secs(2));
    let before = set.k.writes();
    // Both replicas stop; a new one with a 2 s resync takes over and resyncs twice.
    for b in std::mem::take(&mut set.bridges) {
        assert!(
            std::process::Command::new("kill")
                .args(["-TERM", &b.child.id().to_string()])
                .status()
                .unwrap()
                .success()
        );
        drop(b);
    }
    let mut args = ARGS.to_vec();
    args[3] = "2s";
    set.bridges.push(Bridge::start(&set.k, &args));
    let b = &set.bridges[0];
    until(common::wait::Lazy(|| set.logs()), 10, || {
        set.leader() == Some(0)
    });
    let resyncs = |b: &Bridge| {
        let m = b.admin("/metrics").1;
        ["export", "import"].map(|h| {
            common::metric_in(
                &m,
                &format!(
                    "clusterset_dns_bridge_reconciles_total{{half=\"{h}\",result=\"success\"}}"
                ),
            )
        })
    };
    // Every export and import reconciled three times: on taking the lead and two resyncs.
    let keys = [BASE as f64, 2.0 * BASE as f64];
    until(
        common::wait::Lazy(|| format!("{:?}\n{}", resyncs(b), set.logs())),
        30,
        || {
            let r = resyncs(b);
            r[0] >= 3.0 * keys[0] && r[1] >= 3.0 * keys[1]
        },
    );
    std::thread::sleep(Duration::from_secs(1));
    let (n, words) = writes_between(&before, &set.k.writes(), &["leases"]);
    println!(
        "restart and two resyncs with nothing changed: {n} writes besides the Lease's ({words})"
    );
    assert_eq!(n, 0, "writes with nothing changed: {words}\n{}", set.logs());
    assert!(set.differences().is_empty());
}
