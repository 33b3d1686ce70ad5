//! Churn through a real kube-apiserver while the API misbehaves: ServiceImports and
//! EndpointSlices are created, changed and deleted as fast as the API server takes them, while
//! random faults hit the watch (connections dropped, stalled and refused through a proxy, the
//! API server restarted, etcd compacted so that watches get 410 Gone). A checker queries all
//! the time: names that exist throughout must always answer right; other names must answer a
//! state they had within the last seconds (or, while a fault keeps us cut off, any state they
//! had). Once the faults stop, the served zone (read by AXFR) must converge to exactly what
//! `clusterset-dns zone` lists from the API server.
//!
//! `CLUSTERSET_DNS_SOAK_SECS` sets the churn time (default 8 s).

use crate::common;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::k8s::{Cluster, Proxy, admin_client, crd, dynamic_api, rbac};
use common::{dig, http_get, spawn_binary};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

const STABLE: usize = 5;
const CHURN: usize = 48;
/// Headless imports whose EndpointSlice is churned (created, changed, deleted).
const HEADLESS: usize = 16;
/// How stale an answer may be when no fault is in the way.
const LAG: Duration = Duration::from_secs(3);

/// What a churned name holds: `None` absent (NXDOMAIN), else its addresses, sorted.
type State = Option<Vec<Ipv4Addr>>;

/// Per churned name, every state in the order the writes were sent.
#[derive(Default)]
struct History {
    states: BTreeMap<usize, Vec<(Instant, State)>>,
    /// Periods in which a fault may have kept the server from seeing writes.
    faults: Vec<(Instant, Option<Instant>)>,
}

fn churn_name(j: usize) -> String {
    format!("churn-{j}.churn.svc.clusterset.local")
}

fn headless_name(h: usize) -> String {
    format!("hl-{h}.churn.svc.clusterset.local")
}

fn stable_name(i: usize) -> String {
    format!("stable-{i}.churn.svc.clusterset.local")
}

/// An A query for `name`: the rcode and the A addresses.
fn ask(sock: &UdpSocket, dns: SocketAddr, name: &str) -> Option<(ResponseCode, Vec<Ipv4Addr>)> {
    let m = common::udp_exchange_blocking(sock, dns, &common::query(name, RecordType::A, None))?;
    Some((m.metadata.response_code, common::a_records(&m)))
}

/// The records of master-file text, sorted, duplicates (AXFR's closing SOA) dropped.
fn records(text: &str) -> Vec<String> {
    let mut v = common::master_records(text);
    v.sort();
    v.dedup();
    v
}

#[test]
fn churn_with_random_api_faults_converges() {
    let _module = common::module(module_path!());
    let secs: u64 = std::env::var("CLUSTERSET_DNS_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let mut k = Cluster::start();
    k.apply(&crd("v1beta1"));
    k.apply(&rbac());
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: churn}\n");
    let mut stable = String::new();
    for i in 0..STABLE {
        stable += &format!(
            "---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {{name: stable-{i}, namespace: churn}}\n\
             spec: {{type: ClusterSetIP, ips: [10.1.0.{i}], ports: [{{name: http, port: 80}}]}}\n"
        );
    }
    for h in 0..HEADLESS {
        stable += &format!(
            "---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\nmetadata: {{name: hl-{h}, namespace: churn}}\n\
             spec: {{type: Headless, ports: [{{name: http, port: 80}}]}}\n"
        );
    }
    k.apply(&stable);

    let proxy = Proxy::start(format!("127.0.0.1:{}", k.api_port).parse().unwrap());
    let kubeconfig = k.dir.path().join("proxied.kubeconfig");
    std::fs::write(
        &kubeconfig,
        std::fs::read_to_string(k.kubeconfig("dns"))
            .unwrap()
            .replace(
                &format!("127.0.0.1:{}", k.api_port),
                &proxy.addr.to_string(),
            ),
    )
    .unwrap();
    let s = spawn_binary(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--allow-transfer",
        "127.0.0.1",
    ]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let ready = rt.block_on(common::eventually(30, || async {
        http_get(s.admin, "/ready").await.map(|(c, _)| c) == Some(200)
    }));
    assert!(ready, "not ready");

    let history = Arc::new(Mutex::new(History::default()));
    // Before any churned import exists: every one starts absent.
    let epoch = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));

    // The writers: as fast as the API server takes them, apply or delete a random churned
    // import or slice.
    let client = rt.block_on(admin_client(&k));
    const WRITERS: usize = 16;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (history, stop, client) = (history.clone(), stop.clone(), client.clone());
            rt.spawn(async move {
                let imports = dynamic_api(&client, "churn", "ServiceImport");
                let slices = dynamic_api(&client, "churn", "EndpointSlice");
                let mut rng = 0x2545_F491_u64 + w as u64;
                let (mut ok, mut failed) = (0u64, 0u64);
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    // Each writer owns its own names, so each name's writes stay in order.
                    let j = w + WRITERS * (rng % ((CHURN + HEADLESS) / WRITERS) as u64) as usize;
                    let delete = rng % 5 == 0;
                    n += 1;
                    // Names below CHURN are ClusterSetIP imports; the rest are the EndpointSlices
                    // (1-3 endpoints) of headless imports.
                    let (api, name, ips, object) = if j < CHURN {
                        let name = format!("churn-{j}");
                        let ip = Ipv4Addr::new(10, 2 + w as u8, (n >> 8) as u8, n as u8);
                        let object = serde_json::json!({
                            "apiVersion": "multicluster.x-k8s.io/v1beta1",
                            "kind": "ServiceImport",
                            "metadata": {"name": name, "namespace": "churn"},
                            "spec": {"type": "ClusterSetIP", "ips": [ip.to_string()], "ports": [{"name": "http", "port": 80}]},
                        });
                        (&imports, name, vec![ip], object)
                    } else {
                        let h = j - CHURN;
                        let name = format!("hl-{h}-east");
                        let ips: Vec<Ipv4Addr> = (0..1 + rng % 3)
                            .map(|e| Ipv4Addr::new(10, 3, h as u8, ((n * 3 + e as u32) % 250) as u8 + 1))
                            .collect();
                        let endpoints: Vec<serde_json::Value> =
                            ips.iter().map(|ip| serde_json::json!({"addresses": [ip.to_string()]})).collect();
                        let object = serde_json::json!({
                            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                            "metadata": {"name": name, "namespace": "churn", "labels": {
                                "multicluster.kubernetes.io/service-name": format!("hl-{h}"),
                                "multicluster.kubernetes.io/source-cluster": "east"}},
                            "addressType": "IPv4",
                            "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
                            "endpoints": endpoints,
                        });
                        (&slices, name, ips, object)
                    };
                    let state: State = (!delete).then(|| {
                        let mut sorted = ips;
                        sorted.sort();
                        sorted.dedup();
                        sorted
                    });
                    // Recorded before the write is sent: it cannot be served earlier.
                    history.lock().unwrap().states.entry(j).or_default().push((Instant::now(), state));
                    let r = if delete {
                        api.delete(&name, &Default::default()).await.map(|_| ())
                    } else {
                        let object: kube::api::DynamicObject = serde_json::from_value(object).unwrap();
                        api.patch(&name, &kube::api::PatchParams::apply("churn").force(), &kube::api::Patch::Apply(&object))
                            .await
                            .map(|_| ())
                    };
                    match r {
                        Ok(()) => ok += 1,
                        // Deleting what is not there, or the API server restarting: the state
                        // recorded may or may not have happened; both stay legal.
                        Err(_) => {
                            failed += 1;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
                (ok, failed)
            })
        })
        .collect();

    // The checker.
    let checker = {
        let (history, stop, dns) = (history.clone(), stop.clone(), s.dns);
        std::thread::spawn(move || {
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
            let (mut checked, mut wrong, mut id) = (0u64, Vec::new(), 0u16);
            while !stop.load(Ordering::Relaxed) {
                id = id.wrapping_add(1);
                let i = id as usize % (STABLE + CHURN + HEADLESS);
                let ts = Instant::now();
                let (name, churned) = if i < STABLE {
                    (stable_name(i), None)
                } else if i < STABLE + CHURN {
                    (churn_name(i - STABLE), Some(i - STABLE))
                } else {
                    (headless_name(i - STABLE - CHURN), Some(i - STABLE))
                };
                let Some((rcode, ips)) = ask(&sock, dns, &name) else {
                    wrong.push(format!("{name}: no answer"));
                    continue;
                };
                let tr = Instant::now();
                let got: Option<State> = match (rcode, ips.is_empty()) {
                    (ResponseCode::NXDomain, true) => Some(None),
                    (ResponseCode::NoError, false) => {
                        let mut ips = ips.clone();
                        ips.sort();
                        Some(Some(ips))
                    }
                    _ => None,
                };
                checked += 1;
                let Some(got) = got else {
                    wrong.push(format!("{name}: {rcode:?} {ips:?}"));
                    continue;
                };
                let Some(j) = churned else {
                    if got != Some(vec![Ipv4Addr::new(10, 1, 0, i as u8)]) {
                        wrong.push(format!("{name}: {got:?}"));
                    }
                    continue;
                };
                let h = history.lock().unwrap();
                let states: Vec<(Instant, State)> = [(epoch, None)]
                    .into_iter()
                    .chain(h.states.get(&j).cloned().unwrap_or_default())
                    .collect();
                // A fault overlapping [ts - LAG, tr] (or ended less than LAG ago) may have
                // held any earlier state in place.
                let faulted = h
                    .faults
                    .iter()
                    .any(|(from, to)| *from <= tr && to.is_none_or(|t| t + LAG > ts - LAG));
                drop(h);
                let lo = if faulted {
                    0
                } else {
                    states
                        .partition_point(|(sent, _)| *sent + LAG <= ts)
                        .saturating_sub(1)
                };
                let hi = states.partition_point(|(sent, _)| *sent <= tr).max(lo + 1);
                if !states[lo..hi].iter().any(|(_, st)| *st == got) {
                    wrong.push(format!(
                        "{name}: {got:?} not among {} legal states (faulted: {faulted})",
                        hi - lo
                    ));
                }
            }
            (checked, wrong)
        })
    };

    // Random faults for the churn time.
    let mut rng = 0x9E37_79B9_u64;
    let started = Instant::now();
    let mut faults = BTreeMap::<&str, u32>::new();
    while started.elapsed() < Duration::from_secs(secs) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let kind = ["drop", "stall", "refuse", "restart", "compact"][(rng % 5) as usize];
        history.lock().unwrap().faults.push((Instant::now(), None));
        match kind {
            "drop" => proxy.drop_all(),
            "stall" => {
                proxy.stall(true);
                std::thread::sleep(Duration::from_millis(500 + rng % 1000));
                proxy.stall(false);
            }
            "refuse" => {
                proxy.refuse(true);
                proxy.drop_all();
                std::thread::sleep(Duration::from_millis(500 + rng % 1000));
                proxy.refuse(false);
            }
            "restart" => {
                k.kill_api();
                k.start_api();
            }
            _ => {
                k.compact();
                proxy.drop_all();
            }
        }
        history.lock().unwrap().faults.last_mut().unwrap().1 = Some(Instant::now());
        *faults.entry(kind).or_default() += 1;
        std::thread::sleep(Duration::from_millis(300 + rng % 700));
    }
    stop.store(true, Ordering::Relaxed);
    let (mut ok, mut failed) = (0, 0);
    for w in writers {
        let (o, f) = rt.block_on(w).unwrap();
        ok += o;
        failed += f;
    }
    let (checked, wrong) = checker.join().unwrap();
    let elapsed = started.elapsed().as_secs_f64();

    // Faults over: the zone converges to exactly what the API server holds.
    let listed = || {
        records(&common::run_ok(
            std::process::Command::new(common::BIN).args([
                "zone",
                "--kubeconfig",
                &k.kubeconfig("dns"),
            ]),
        ))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut want, mut served) = (listed(), Vec::new());
    while Instant::now() < deadline {
        served = records(&dig(s.dns, "AXFR clusterset.local"));
        if served == want {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
        want = listed();
    }
    eprintln!(
        "kube churn: {elapsed:.1} s, {ok} writes ({:.0}/s) and {failed} failed writes; faults {faults:?}; {checked} answers checked, {} wrong; converged: {}",
        ok as f64 / elapsed,
        wrong.len(),
        served == want
    );
    assert!(
        wrong.is_empty(),
        "wrong answers: {:?}",
        &wrong[..wrong.len().min(10)]
    );
    assert!(checked > 500, "only {checked} answers checked");
    assert!(ok > 50, "only {ok} writes");
    assert_eq!(
        served, want,
        "the served zone did not converge to the API server's objects"
    );
}
